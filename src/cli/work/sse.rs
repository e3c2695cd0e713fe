//! A small Server-Sent Events parser (the WHATWG event-stream format) for the
//! runner's GET stream: bytes in, events out. Lines end in LF, CRLF or CR (a
//! CR at the very end of a chunk waits for the next chunk, which may bring
//! its LF); `:` lines are comments (the server's keep-alives); `data:` lines
//! of one event are joined with LF; an empty line dispatches the event.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SseEvent {
    /// `event:`; `message` when the event named none.
    pub(super) event: String,
    pub(super) data: String,
}

#[derive(Debug, Default)]
pub(super) struct SseParser {
    /// Bytes of a line not yet ended.
    line: Vec<u8>,
    /// The previous chunk ended in CR: an LF at the start of this one
    /// belongs to it.
    after_cr: bool,
    event: Option<String>,
    data: Option<String>,
}

impl SseParser {
    pub(super) fn new() -> Self {
        Self::default()
    }

    /// Feeds one chunk of the stream; returns the events it completed.
    pub(super) fn feed(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        for &byte in chunk {
            if self.after_cr {
                self.after_cr = false;
                if byte == b'\n' {
                    continue;
                }
            }
            match byte {
                b'\n' => self.end_line(&mut events),
                b'\r' => {
                    self.after_cr = true;
                    self.end_line(&mut events);
                }
                _ => self.line.push(byte),
            }
        }
        events
    }

    fn end_line(&mut self, events: &mut Vec<SseEvent>) {
        let line = String::from_utf8_lossy(&std::mem::take(&mut self.line)).into_owned();
        if line.is_empty() {
            if let Some(data) = self.data.take() {
                events.push(SseEvent {
                    event: self
                        .event
                        .take()
                        .filter(|e| !e.is_empty())
                        .unwrap_or_else(|| "message".to_owned()),
                    data,
                });
            }
            self.event = None;
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_str(), ""),
        };
        match field {
            "event" => self.event = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            // `id` and `retry` mean nothing to the runner; unknown fields are ignored.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        chunks.iter().flat_map(|c| parser.feed(c)).collect()
    }

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
        }
    }

    #[test]
    fn one_message_event() {
        assert_eq!(
            all(&[b"event: message\ndata: {\"a\":1}\n\n"]),
            [ev("message", "{\"a\":1}")]
        );
    }

    #[test]
    fn an_event_without_a_name_is_a_message() {
        assert_eq!(all(&[b"data: x\n\n"]), [ev("message", "x")]);
    }

    #[test]
    fn comments_and_keepalives_dispatch_nothing() {
        assert_eq!(all(&[b": keep-alive\n\n:\n\n"]), []);
    }

    #[test]
    fn data_lines_join_with_newlines_and_space_is_optional() {
        assert_eq!(all(&[b"data:a\ndata: b\n\n"]), [ev("message", "a\nb")]);
    }

    #[test]
    fn chunks_split_anywhere_and_every_line_ending_works() {
        let whole: &[u8] = b"event: message\r\ndata: one\r\n\r\ndata: two\r\rdata: three\n\n";
        let expected = [
            ev("message", "one"),
            ev("message", "two"),
            ev("message", "three"),
        ];
        for split in 0..whole.len() {
            let (a, b) = whole.split_at(split);
            assert_eq!(all(&[a, b]), expected, "split at {split}");
        }
        let bytes: Vec<&[u8]> = whole.chunks(1).collect();
        assert_eq!(all(&bytes), expected);
    }

    #[test]
    fn an_unfinished_event_waits_for_its_blank_line() {
        let mut parser = SseParser::new();
        assert_eq!(parser.feed(b"event: other\ndata: x\n"), []);
        assert_eq!(parser.feed(b"\n"), [ev("other", "x")]);
        // The name does not leak into the next event.
        assert_eq!(parser.feed(b"data: y\n\n"), [ev("message", "y")]);
    }

    #[test]
    fn id_retry_and_unknown_fields_are_ignored() {
        assert_eq!(
            all(&[b"id: 7\nretry: 100\nfoo: bar\ndata: z\n\n"]),
            [ev("message", "z")]
        );
    }
}
