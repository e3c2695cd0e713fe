//! The todo model's vocabulary and input rules (`docs/queue.md`).

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use super::Invalid;
use super::text::{strip_controls_and_cut, truncate_reporting};

pub const MAX_TITLE_BYTES: usize = 200;
pub const MAX_PAYLOAD_BYTES: usize = 256 * 1024;
pub const MAX_KEY_BYTES: usize = 256;
pub const MAX_LABEL_BYTES: usize = 64;
pub const MAX_SUMMARY_BYTES: usize = 2048;
pub const MAX_CLAIMANT_BYTES: usize = 128;
pub const MAX_NOTE_BYTES: usize = 512;
pub const DEFAULT_MAX_ATTEMPTS: i64 = 5;
pub const MAX_MAX_ATTEMPTS: i64 = 100;
/// The most todos one bulk operator action (retry, cancel) changes, and the
/// most explicit ids it accepts.
pub const MAX_BULK: usize = 1000;
/// The longest title search (`q`); a title is at most 200 bytes anyway.
pub const MAX_SEARCH_BYTES: usize = MAX_TITLE_BYTES;
/// Closed attempt records kept per todo; older ones are pruned and counted.
pub const KEPT_ATTEMPTS: i64 = 50;
/// Closed attempts a claim returns as `prior_attempts`.
pub const PRIOR_ATTEMPTS_ON_CLAIM: i64 = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoState {
    Pending,
    Claimed,
    Done,
    Failed,
    /// Terminal, by a human (`docs/api.md`): never claimed or rung again.
    Cancelled,
}

impl TodoState {
    pub const ALL: [TodoState; 5] = [
        Self::Pending,
        Self::Claimed,
        Self::Done,
        Self::Failed,
        Self::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Claimed => "claimed",
            Self::Done => "done",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// Parses a state name, naming `field` when it is not one.
    pub fn parse_field(s: &str, field: &'static str) -> Result<Self, Invalid> {
        Self::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| {
                Invalid::new(
                    field,
                    format!(
                        "unknown state {s:?}; expected pending, claimed, done, failed or cancelled"
                    ),
                )
            })
    }
}

impl FromStr for TodoState {
    type Err = Invalid;
    fn from_str(s: &str) -> Result<Self, Invalid> {
        Self::parse_field(s, "state")
    }
}

impl fmt::Display for TodoState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Completed,
    Failed,
    Released,
    LeaseExpired,
    Reaped,
    Revoked,
    /// A human cancelled the todo while it was claimed.
    Cancelled,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Released => "released",
            Self::LeaseExpired => "lease_expired",
            Self::Reaped => "reaped",
            Self::Revoked => "revoked",
            Self::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Completed,
            Self::Failed,
            Self::Released,
            Self::LeaseExpired,
            Self::Reaped,
            Self::Revoked,
            Self::Cancelled,
        ]
        .into_iter()
        .find(|o| o.as_str() == s)
    }

    /// `died = outcome ∈ {lease_expired, reaped}`: the holder vanished.
    pub fn died(self) -> bool {
        matches!(self, Self::LeaseExpired | Self::Reaped)
    }
}

/// What became of the todo when an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Disposition {
    Done,
    RetryScheduled,
    Requeued,
    DeadLettered,
    /// The todo became `cancelled`.
    Cancelled,
}

impl Disposition {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Done => "done",
            Self::RetryScheduled => "retry_scheduled",
            Self::Requeued => "requeued",
            Self::DeadLettered => "dead_lettered",
            Self::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Done,
            Self::RetryScheduled,
            Self::Requeued,
            Self::DeadLettered,
            Self::Cancelled,
        ]
        .into_iter()
        .find(|d| d.as_str() == s)
    }
}

/// Queue names: `[a-z0-9][a-z0-9._-]{0,63}`.
pub fn validate_queue_name(name: &str, field: &'static str) -> Result<(), Invalid> {
    let bytes = name.as_bytes();
    let first_ok = bytes
        .first()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let rest_ok = bytes
        .iter()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'));
    if first_ok && rest_ok && bytes.len() <= 64 {
        Ok(())
    } else {
        Err(Invalid::new(
            field,
            format!(
                "{name:?} is not a queue name: 1-64 characters of a-z, 0-9, '.', '_' or '-', starting with a letter or digit"
            ),
        ))
    }
}

/// A title is one non-empty line of at most 200 bytes.
pub fn validate_title(title: &str) -> Result<(), Invalid> {
    if title.trim().is_empty() {
        return Err(Invalid::new("title", "must not be empty"));
    }
    if title.len() > MAX_TITLE_BYTES {
        return Err(Invalid::new(
            "title",
            format!("is {} bytes; the limit is {MAX_TITLE_BYTES}", title.len()),
        ));
    }
    if title.chars().any(char::is_control) {
        return Err(Invalid::new(
            "title",
            "must be one line without control characters",
        ));
    }
    Ok(())
}

/// Optional labels such as `kind` and `source`: 1-64 printable ASCII
/// characters without spaces.
pub fn validate_label(value: &str, field: &'static str) -> Result<(), Invalid> {
    let ok = !value.is_empty()
        && value.len() <= MAX_LABEL_BYTES
        && value.bytes().all(|b| b.is_ascii_graphic());
    if ok {
        Ok(())
    } else {
        Err(Invalid::new(
            field,
            format!("must be 1-{MAX_LABEL_BYTES} printable ASCII characters without spaces"),
        ))
    }
}

pub fn validate_idempotency_key(key: &str) -> Result<(), Invalid> {
    if key.is_empty() {
        return Err(Invalid::new("key", "must not be empty when given"));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(Invalid::new(
            "key",
            format!("is {} bytes; the limit is {MAX_KEY_BYTES}", key.len()),
        ));
    }
    Ok(())
}

/// Serialises a payload, refusing one over the cap.
pub fn encode_payload(payload: &serde_json::Value) -> Result<String, Invalid> {
    let text = payload.to_string();
    if text.len() > MAX_PAYLOAD_BYTES {
        return Err(Invalid::new(
            "payload",
            format!(
                "is {} bytes of JSON; the limit is {MAX_PAYLOAD_BYTES}",
                text.len()
            ),
        ));
    }
    Ok(text)
}

pub fn validate_max_attempts(n: i64) -> Result<(), Invalid> {
    if (1..=MAX_MAX_ATTEMPTS).contains(&n) {
        Ok(())
    } else {
        Err(Invalid::new(
            "max_attempts",
            format!("must be between 1 and {MAX_MAX_ATTEMPTS} (got {n})"),
        ))
    }
}

/// The largest priority either way: room for any scheme of levels, and far
/// from the integer's edges.
pub const MAX_PRIORITY: i64 = 1_000_000;

/// A priority is an integer within ±[`MAX_PRIORITY`]; higher is claimed first.
pub fn validate_priority(p: i64) -> Result<(), Invalid> {
    if (-MAX_PRIORITY..=MAX_PRIORITY).contains(&p) {
        Ok(())
    } else {
        Err(Invalid::new(
            "priority",
            format!("must be between -{MAX_PRIORITY} and {MAX_PRIORITY} (got {p})"),
        ))
    }
}

/// A title search is a non-empty literal substring of at most 200 bytes.
pub fn validate_search(q: &str, field: &'static str) -> Result<(), Invalid> {
    if q.is_empty() {
        return Err(Invalid::new(field, "must not be empty when given"));
    }
    if q.len() > MAX_SEARCH_BYTES {
        return Err(Invalid::new(
            field,
            format!("is {} bytes; the limit is {MAX_SEARCH_BYTES}", q.len()),
        ));
    }
    Ok(())
}

/// Explicit ids of a bulk action: 1 to [`MAX_BULK`] of them.
pub fn validate_bulk_ids(ids: &[String], field: &'static str) -> Result<(), Invalid> {
    if ids.is_empty() {
        return Err(Invalid::new(field, "must not be empty when given"));
    }
    if ids.len() > MAX_BULK {
        return Err(Invalid::new(
            field,
            format!("holds {} ids; the limit is {MAX_BULK} per call", ids.len()),
        ));
    }
    Ok(())
}

/// The most todos one `complete_many` call completes.
pub const MAX_COMPLETE_MANY: usize = 100;

/// The ids of a `complete_many` call: 1 to [`MAX_COMPLETE_MANY`] non-empty
/// ids, none twice.
pub fn validate_complete_many_ids(ids: &[String]) -> Result<(), Invalid> {
    if ids.is_empty() || ids.len() > MAX_COMPLETE_MANY {
        return Err(Invalid::new(
            "ids",
            format!(
                "must hold 1 to {MAX_COMPLETE_MANY} todo ids (it holds {})",
                ids.len()
            ),
        ));
    }
    for (i, id) in ids.iter().enumerate() {
        if id.is_empty() {
            return Err(Invalid::new("ids", "must not hold an empty id"));
        }
        if ids[..i].contains(id) {
            return Err(Invalid::new("ids", format!("holds {id:?} twice")));
        }
    }
    Ok(())
}

/// A summary is never refused: it is cut to 2 048 bytes on a character boundary.
pub fn clip_summary(summary: &str) -> (String, bool) {
    truncate_reporting(summary, MAX_SUMMARY_BYTES)
}

/// A claimant label loses its control characters and is cut to 128 bytes.
pub fn clean_claimant(claimant: &str) -> String {
    strip_controls_and_cut(claimant, MAX_CLAIMANT_BYTES)
}

/// A heartbeat note is free status text: control characters removed, cut to 512 bytes.
pub fn clean_note(note: &str) -> String {
    strip_controls_and_cut(note, MAX_NOTE_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names() {
        for ok in ["inbox", "lane-m", "a", "0.x_y-z", &"q".repeat(64)] {
            assert!(validate_queue_name(ok, "queue").is_ok(), "{ok}");
        }
        for bad in ["", "Inbox", "-x", ".x", "a b", "ä", &"q".repeat(65)] {
            assert_eq!(
                validate_queue_name(bad, "queue").unwrap_err().field,
                "queue"
            );
        }
    }

    #[test]
    fn titles() {
        assert!(validate_title("Fix the parser").is_ok());
        assert!(validate_title(&"x".repeat(200)).is_ok());
        for bad in ["", "   ", "two\nlines", &"x".repeat(201)] {
            assert_eq!(validate_title(bad).unwrap_err().field, "title");
        }
    }

    #[test]
    fn payload_cap() {
        let small = serde_json::json!({"a": 1});
        assert_eq!(encode_payload(&small).unwrap(), r#"{"a":1}"#);
        let big = serde_json::Value::String("x".repeat(MAX_PAYLOAD_BYTES));
        assert_eq!(encode_payload(&big).unwrap_err().field, "payload");
    }

    #[test]
    fn keys_labels_attempts() {
        assert!(validate_idempotency_key(&"k".repeat(256)).is_ok());
        assert_eq!(
            validate_idempotency_key(&"k".repeat(257))
                .unwrap_err()
                .field,
            "key"
        );
        assert!(validate_label("pull_request.opened", "kind").is_ok());
        assert!(validate_label("has space", "kind").is_err());
        assert!(validate_max_attempts(0).is_err());
        assert!(validate_max_attempts(5).is_ok());
    }

    #[test]
    fn states_parse_and_name_the_field() {
        assert_eq!("claimed".parse::<TodoState>().unwrap(), TodoState::Claimed);
        assert_eq!(
            TodoState::parse_field("dead", "state").unwrap_err().field,
            "state"
        );
    }

    #[test]
    fn summaries_and_claimants() {
        let (s, cut) = clip_summary(&"é".repeat(2000));
        assert!(cut && s.len() <= 2048 && s.len() == 2048);
        assert_eq!(clean_claimant("w\u{1b}[31m1"), "w[31m1");
    }
}
