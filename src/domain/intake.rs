//! A webhook delivery's verified envelope, its decision, and the trusted
//! senders of a webhook (`docs/intake.md`, "Delivery history", "Trusted
//! senders and quarantine").
//!
//! The decision pipeline is: verify (signature, size) → envelope → sender
//! check → (routing rules, later) → todo. Each step only narrows what the
//! next one sees; the first that decides records the delivery.

use serde::{Deserialize, Serialize};

use super::Invalid;

/// The most logins one webhook trusts.
pub const MAX_TRUSTED: usize = 256;

/// The request header a sender delays its todo with (an RFC 3339 time);
/// kept with the delivery, so a replay honours it too.
pub const RUN_AT_HEADER: &str = "x-switchboard-run-at";

/// The delay a delivery's kept headers ask for ([`RUN_AT_HEADER`]), if any
/// and readable.
pub fn run_at_of(kept_headers: &serde_json::Value) -> Option<super::Timestamp> {
    kept_headers
        .get(RUN_AT_HEADER)
        .and_then(serde_json::Value::as_str)
        .and_then(|text| super::Timestamp::parse_rfc3339(text.trim()))
}
/// The longest login kept (GitHub's are 39 bytes; Gitea's 40).
pub const MAX_LOGIN_BYTES: usize = 100;

/// What the server read of a delivery it verified. The top-level fields
/// come from the delivery's forge headers and body as the server parsed
/// them, never from a sender-chosen `X-Switchboard-*` header.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    /// `github`, `gitea` or `webhook`.
    pub source: String,
    /// `X-GitHub-Event` / `X-Gitea-Event`.
    pub event: Option<String>,
    /// The body's `action`.
    pub action: Option<String>,
    /// The todo kind the delivery derives (`pull_request.opened`).
    pub kind: Option<String>,
    /// `sender.login`: who caused the event.
    pub sender: Option<String>,
    /// The `user.login` of the comment, issue or pull request: who wrote it.
    pub author: Option<String>,
    /// `repository.full_name`.
    pub repository: Option<String>,
    /// The issue's or pull request's label names.
    pub labels: Vec<String>,
    /// `token` or `signed`.
    pub trust_mode: String,
    /// Whether the body was verified (a signed webhook's signature held, or
    /// a token webhook's URL matched); `false` only on a refused delivery.
    pub verified: bool,
    pub content_type: Option<String>,
    /// The body's size in bytes.
    pub size: i64,
}

/// What became of a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    /// A todo was created.
    Accepted,
    /// Its idempotency key matched a live todo: nothing new.
    Duplicate,
    /// A routing rule dropped it (reserved for rules).
    Dropped,
    /// Its sender is not trusted: recorded, no todo, waiting for a human.
    Quarantined,
    /// Refused before it was verified or while the webhook could not take it.
    Refused,
    /// A quarantined delivery a human released: its todo exists now.
    Released,
    /// A quarantined delivery a human discarded.
    Discarded,
}

impl Decision {
    pub const ALL: [Self; 7] = [
        Self::Accepted,
        Self::Duplicate,
        Self::Dropped,
        Self::Quarantined,
        Self::Refused,
        Self::Released,
        Self::Discarded,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::Duplicate => "duplicate",
            Self::Dropped => "dropped",
            Self::Quarantined => "quarantined",
            Self::Refused => "refused",
            Self::Released => "released",
            Self::Discarded => "discarded",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.as_str() == text)
    }

    /// [`Self::parse`], as a bad `field` when it is none.
    pub fn parse_field(text: &str, field: &'static str) -> Result<Self, Invalid> {
        Self::parse(text).ok_or_else(|| {
            Invalid::new(
                field,
                format!("must be one of {}", Self::ALL.map(Self::as_str).join(", ")),
            )
        })
    }
}

/// Which identity of a delivery must be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SenderMatch {
    /// `sender.login` (who caused the event).
    #[default]
    Sender,
    /// The comment's, issue's or pull request's author.
    Author,
    /// Both must be trusted.
    Both,
}

impl SenderMatch {
    pub fn parse_field(text: &str, field: &'static str) -> Result<Self, Invalid> {
        match text {
            "sender" => Ok(Self::Sender),
            "author" => Ok(Self::Author),
            "both" => Ok(Self::Both),
            _ => Err(Invalid::new(field, "must be sender, author or both")),
        }
    }
}

/// Whom a webhook trusts. Stored as JSON on the webhook.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "trust", rename_all = "lowercase")]
pub enum Senders {
    /// Every verified delivery (the default, as before senders existed).
    #[default]
    Everyone,
    /// Only these logins (compared ASCII case-insensitively, as forges do).
    Logins {
        logins: Vec<String>,
        #[serde(rename = "match")]
        by: SenderMatch,
    },
}

impl Senders {
    /// A list of logins, checked: 1–256 of them, each 1–100 bytes of
    /// printable ASCII without spaces; kept lowercased and deduplicated.
    pub fn logins(logins: Vec<String>, by: SenderMatch) -> Result<Self, Invalid> {
        if logins.is_empty() {
            return Err(Invalid::new(
                "trust",
                "must be \"everyone\" or a non-empty list of logins",
            ));
        }
        if logins.len() > MAX_TRUSTED {
            return Err(Invalid::new(
                "trust",
                format!("at most {MAX_TRUSTED} logins"),
            ));
        }
        let mut kept: Vec<String> = Vec::with_capacity(logins.len());
        for login in logins {
            let ok = !login.is_empty()
                && login.len() <= MAX_LOGIN_BYTES
                && login.bytes().all(|b| b.is_ascii_graphic());
            if !ok {
                return Err(Invalid::new(
                    "trust",
                    format!(
                        "{login:?} is not a login (1–{MAX_LOGIN_BYTES} printable ASCII characters)"
                    ),
                ));
            }
            let login = login.to_ascii_lowercase();
            if !kept.contains(&login) {
                kept.push(login);
            }
        }
        Ok(Self::Logins { logins: kept, by })
    }

    /// Whether a delivery with this envelope is trusted. A login the
    /// envelope lacks is not trusted.
    pub fn admits(&self, envelope: &Envelope) -> bool {
        let Self::Logins { logins, by } = self else {
            return true;
        };
        let trusted = |who: &Option<String>| {
            who.as_deref()
                .is_some_and(|w| logins.iter().any(|l| l.eq_ignore_ascii_case(w)))
        };
        match by {
            SenderMatch::Sender => trusted(&envelope.sender),
            SenderMatch::Author => trusted(&envelope.author),
            SenderMatch::Both => trusted(&envelope.sender) && trusted(&envelope.author),
        }
    }
}

/// What a todo made of this body carries: the JSON body itself; a non-JSON
/// body as `{"raw": "<base64>"}`; and when that would exceed the todo
/// payload cap (256 KiB), a marker naming the body's size and hash, so the
/// agent can tell it is looking at a stand-in and a human can fetch the
/// original from the intake event or the delivery.
pub fn todo_payload(body: &[u8], json: Option<serde_json::Value>) -> serde_json::Value {
    use base64::Engine;
    let payload = json.unwrap_or_else(
        || serde_json::json!({ "raw": base64::engine::general_purpose::STANDARD.encode(body) }),
    );
    // Measured as the store measures it: the serialised JSON, not the raw body.
    if payload.to_string().len() <= super::todo::MAX_PAYLOAD_BYTES {
        payload
    } else {
        truncated_marker(body)
    }
}

pub fn truncated_marker(body: &[u8]) -> serde_json::Value {
    use sha2::{Digest, Sha256};
    let sha = super::ids::lower_hex(&Sha256::digest(body));
    serde_json::json!({ "truncated": true, "bytes": body.len(), "sha256": sha })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(sender: Option<&str>, author: Option<&str>) -> Envelope {
        Envelope {
            sender: sender.map(str::to_owned),
            author: author.map(str::to_owned),
            ..Envelope::default()
        }
    }

    #[test]
    fn everyone_admits_everything() {
        assert!(Senders::Everyone.admits(&env(None, None)));
    }

    #[test]
    fn logins_match_by_sender_author_or_both() {
        let s = Senders::logins(vec!["Alice".into()], SenderMatch::Sender).unwrap();
        assert!(s.admits(&env(Some("alice"), Some("mallory"))));
        assert!(!s.admits(&env(Some("mallory"), Some("alice"))));
        assert!(!s.admits(&env(None, None)));
        let a = Senders::logins(vec!["alice".into()], SenderMatch::Author).unwrap();
        assert!(a.admits(&env(Some("mallory"), Some("ALICE"))));
        let b = Senders::logins(vec!["alice".into(), "bob".into()], SenderMatch::Both).unwrap();
        assert!(b.admits(&env(Some("bob"), Some("alice"))));
        assert!(!b.admits(&env(Some("bob"), Some("mallory"))));
    }

    #[test]
    fn bad_lists_are_refused() {
        assert!(Senders::logins(vec![], SenderMatch::Sender).is_err());
        assert!(Senders::logins(vec!["a b".into()], SenderMatch::Sender).is_err());
        assert!(Senders::logins(vec!["x".repeat(101)], SenderMatch::Sender).is_err());
    }

    #[test]
    fn senders_round_trip_as_json() {
        let s = Senders::logins(vec!["a".into()], SenderMatch::Both).unwrap();
        let text = serde_json::to_string(&s).unwrap();
        assert_eq!(text, r#"{"trust":"logins","logins":["a"],"match":"both"}"#);
        assert_eq!(serde_json::from_str::<Senders>(&text).unwrap(), s);
        assert_eq!(
            serde_json::to_string(&Senders::Everyone).unwrap(),
            r#"{"trust":"everyone"}"#
        );
    }
}
