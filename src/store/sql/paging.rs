//! Keyset pagination, newest first, by `(created_at, id)`.
//!
//! The cursor is opaque to clients: base64url of `<created_at ms>:<id>`.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::domain::{Invalid, Timestamp};
use crate::store::StoreResult;
use crate::store::model::{Page, PageRequest};

pub(super) const DEFAULT_LIMIT: i64 = 50;
pub(super) const MAX_LIMIT: i64 = 200;

/// Where a page starts: strictly older than this key.
pub(super) struct Cursor {
    pub created_at: i64,
    pub id: String,
}

impl Cursor {
    pub(super) fn new(created_at: Timestamp, id: &str) -> Self {
        Self {
            created_at: created_at.as_millis(),
            id: id.to_owned(),
        }
    }

    /// Before every row: the first page.
    fn start() -> Self {
        Self {
            created_at: i64::MAX,
            id: String::new(),
        }
    }

    fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(format!("{}:{}", self.created_at, self.id))
    }

    fn decode(text: &str) -> Option<Self> {
        let raw = URL_SAFE_NO_PAD.decode(text).ok()?;
        let raw = String::from_utf8(raw).ok()?;
        let (at, id) = raw.split_once(':')?;
        Some(Self {
            created_at: at.parse().ok()?,
            id: id.to_owned(),
        })
    }
}

/// The clamped limit and the decoded cursor of a page request (the first
/// page starts at `i64::MAX`, after every real row).
pub(super) fn decode(page: &PageRequest) -> StoreResult<(i64, Cursor)> {
    let limit = if page.limit <= 0 {
        DEFAULT_LIMIT
    } else {
        page.limit.min(MAX_LIMIT)
    };
    let cursor = match &page.after {
        None => Cursor::start(),
        Some(text) => Cursor::decode(text)
            .ok_or_else(|| Invalid::new("cursor", "is not a cursor this server issued"))?,
    };
    Ok((limit, cursor))
}

/// Builds a page from up to `limit + 1` fetched rows.
pub(super) fn page<T>(mut items: Vec<T>, limit: i64, key: impl Fn(&T) -> Cursor) -> Page<T> {
    let more = items.len() as i64 > limit;
    items.truncate(limit as usize);
    let next_cursor = if more {
        items.last().map(|last| key(last).encode())
    } else {
        None
    };
    Page { items, next_cursor }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trip_and_refusal() {
        let c = Cursor::new(Timestamp::from_millis(42), "td_x");
        let back = Cursor::decode(&c.encode()).unwrap();
        assert_eq!((back.created_at, back.id.as_str()), (42, "td_x"));
        let bad = PageRequest {
            limit: 10,
            after: Some("!!".into()),
        };
        assert!(decode(&bad).is_err());
    }

    #[test]
    fn limits_are_clamped() {
        let (l, _) = decode(&PageRequest::default()).unwrap();
        assert_eq!(l, 50);
        let (l, _) = decode(&PageRequest {
            limit: 1000,
            after: None,
        })
        .unwrap();
        assert_eq!(l, 200);
    }

    #[test]
    fn page_has_a_cursor_only_when_more_rows_exist() {
        let p = page(vec![3, 2, 1], 2, |n| {
            Cursor::new(Timestamp::from_millis(*n), "x")
        });
        assert_eq!(p.items, vec![3, 2]);
        assert!(p.next_cursor.is_some());
        let p = page(vec![3, 2], 2, |n| {
            Cursor::new(Timestamp::from_millis(*n), "x")
        });
        assert!(p.next_cursor.is_none());
    }
}
