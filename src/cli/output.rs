//! How the CLI shows API bodies to a person: aligned tables, `key: value`
//! summaries, and times relative to now. `--json` bypasses all of this.

use std::io::IsTerminal;

use serde_json::Value;

use super::client::ApiResponse;
use crate::clock::{Clock, SystemClock};
use crate::domain::Timestamp;

/// Prints `--json` output (the body verbatim) or the readable form.
pub(super) fn emit(
    json: bool,
    response: &ApiResponse,
    readable: impl FnOnce(&Value) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    if json {
        println!("{}", response.verbatim());
        Ok(())
    } else {
        readable(&response.json()?)
    }
}

/// The value at a dotted path (`liveness.condition`), as display text:
/// strings bare, `null` and absent as `-`, anything else as JSON.
pub(super) fn text(value: &Value, path: &str) -> String {
    match lookup(value, path) {
        None | Some(Value::Null) => "-".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(true)) => "yes".to_owned(),
        Some(Value::Bool(false)) => "no".to_owned(),
        Some(other) => other.to_string(),
    }
}

pub(super) fn lookup<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(value, |v, key| v.get(key))
}

pub(super) fn flag(value: &Value, path: &str) -> bool {
    lookup(value, path)
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// A list of strings as `a, b`.
pub(super) fn joined(value: &Value, path: &str) -> String {
    match lookup(value, path).and_then(Value::as_array) {
        Some(items) if !items.is_empty() => items
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .collect::<Vec<_>>()
            .join(", "),
        _ => "-".to_owned(),
    }
}

/// An RFC 3339 time at `path` as "5m ago" / "in 2h", or `absent` when null.
pub(super) fn when(value: &Value, path: &str, absent: &str) -> String {
    match lookup(value, path).and_then(Value::as_str) {
        Some(t) => relative(t),
        None => absent.to_owned(),
    }
}

/// Like [`when`], followed by the exact time for a detail view.
pub(super) fn when_exact(value: &Value, path: &str, absent: &str) -> String {
    match lookup(value, path).and_then(Value::as_str) {
        Some(t) => format!("{} ({t})", relative(t)),
        None => absent.to_owned(),
    }
}

fn relative(rfc3339: &str) -> String {
    let Some(then) = Timestamp::parse_rfc3339(rfc3339) else {
        return rfc3339.to_owned();
    };
    let delta_ms = SystemClock.now().as_millis() - then.as_millis();
    let span = human_span(delta_ms.unsigned_abs() / 1000);
    if delta_ms >= 0 {
        format!("{span} ago")
    } else {
        format!("in {span}")
    }
}

/// Seconds as the largest sensible unit: `42s`, `5m`, `3h`, `2d`.
pub(super) fn human_span(secs: u64) -> String {
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86400 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86400),
    }
}

/// One line, cut to `max` characters with an ellipsis.
pub(super) fn clip(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.chars().count() <= max && !text.contains('\n') {
        line.to_owned()
    } else {
        let kept: String = line.chars().take(max.saturating_sub(1)).collect();
        format!("{kept}…")
    }
}

/// Prints `key: value` lines with the values aligned.
pub(super) fn print_pairs(pairs: &[(&str, String)]) {
    let width = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 1;
    for (key, value) in pairs {
        println!("{:<width$} {value}", format!("{key}:"));
    }
}

/// Prints a JSON value indented, under a heading.
pub(super) fn print_block(heading: &str, value: &Value) {
    println!("{heading}:");
    let pretty = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    for line in pretty.lines() {
        println!("  {line}");
    }
}

/// A plain-text table with a header row and left-aligned columns.
#[derive(Debug)]
pub(super) struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(super) fn new(headers: &[&str]) -> Self {
        Self {
            headers: headers.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    pub(super) fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.headers.len());
        self.rows.push(cells);
    }

    /// Aligned columns for a person at a terminal; tab-separated cells
    /// without padding for a pipe (`cut -f`, `awk -F'\t'`).
    pub(super) fn render(&self) -> String {
        if std::io::stdout().is_terminal() {
            self.render_aligned()
        } else {
            self.render_tab_separated()
        }
    }

    /// One line per row, cells joined by a tab; a tab or newline inside a
    /// cell becomes a space so that the columns stay countable.
    pub(super) fn render_tab_separated(&self) -> String {
        let line = |cells: &[String]| {
            cells
                .iter()
                .map(|c| c.replace(['\t', '\n', '\r'], " "))
                .collect::<Vec<_>>()
                .join("\t")
        };
        std::iter::once(line(&self.headers))
            .chain(self.rows.iter().map(|r| line(r)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub(super) fn render_aligned(&self) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut out = String::new();
            for (i, (cell, width)) in cells.iter().zip(&widths).enumerate() {
                if i + 1 == cells.len() {
                    out.push_str(cell);
                } else {
                    let pad = width - cell.chars().count();
                    out.push_str(cell);
                    out.push_str(&" ".repeat(pad + 2));
                }
            }
            out.trim_end().to_owned()
        };
        let mut out = line(&self.headers);
        for row in &self.rows {
            out.push('\n');
            out.push_str(&line(row));
        }
        out
    }

    /// Prints the table, or `empty` when it has no rows.
    pub(super) fn print_or(&self, empty: &str) {
        if self.rows.is_empty() {
            println!("{empty}");
        } else {
            println!("{}", self.render());
        }
    }
}

/// Tells the reader how to get the next page of a list, when there is one.
pub(super) fn print_next_page(list: &Value) {
    if let Some(cursor) = list.get("next_cursor").and_then(Value::as_str) {
        println!("(more: add --cursor {cursor})");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tables_align_columns_and_trim_trailing_space() {
        let mut t = Table::new(&["ID", "STATE", "TITLE"]);
        t.row(vec!["td_1".into(), "pending".into(), "a".into()]);
        t.row(vec!["td_22".into(), "-".into(), "bb".into()]);
        assert_eq!(
            t.render_aligned(),
            "ID     STATE    TITLE\ntd_1   pending  a\ntd_22  -        bb"
        );
    }

    #[test]
    fn piped_tables_are_tab_separated_without_padding() {
        let mut t = Table::new(&["ID", "STATE", "TITLE"]);
        t.row(vec!["td_1".into(), "pending".into(), "a\tb".into()]);
        t.row(vec!["td_22".into(), "-".into(), "".into()]);
        assert_eq!(
            t.render_tab_separated(),
            "ID\tSTATE\tTITLE\ntd_1\tpending\ta b\ntd_22\t-\t"
        );
    }

    #[test]
    fn text_reads_dotted_paths_and_shows_null_as_a_dash() {
        let v = json!({"a": {"b": "x", "n": 3, "z": null}, "t": true});
        assert_eq!(text(&v, "a.b"), "x");
        assert_eq!(text(&v, "a.n"), "3");
        assert_eq!(text(&v, "a.z"), "-");
        assert_eq!(text(&v, "a.missing"), "-");
        assert_eq!(text(&v, "t"), "yes");
    }

    #[test]
    fn spans_and_clipping() {
        assert_eq!(human_span(59), "59s");
        assert_eq!(human_span(3600 * 5), "5h");
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("one\ntwo", 10), "one…");
    }
}
