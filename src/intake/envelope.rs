//! The envelope of a verified delivery (`docs/intake.md`, "Delivery
//! history"): the top-level fields the server reads from the forge's
//! headers and body, so a sender cannot set them with a header of its own.

use axum::http::HeaderMap;
use serde_json::Value;

use super::headers;
use crate::domain::intake::Envelope;

/// Reads the envelope. `kind` is the todo kind the delivery derived.
pub fn read(
    headers_in: &HeaderMap,
    body: Option<&Value>,
    trust_mode: &str,
    verified: bool,
    content_type: Option<String>,
    size: usize,
) -> Envelope {
    let (source, event) = forge(headers_in);
    let text = |path: &[&str]| -> Option<String> {
        let mut v = body?;
        for p in path {
            v = v.get(p)?;
        }
        v.as_str().filter(|s| !s.is_empty()).map(str::to_owned)
    };
    let action = text(&["action"]);
    let kind = event.as_ref().map(|e| match &action {
        Some(a) => format!("{e}.{a}"),
        None => e.clone(),
    });
    // Who wrote what the event is about: a comment or review first, then
    // the pull request or issue.
    let author = ["comment", "review", "pull_request", "issue"]
        .into_iter()
        .find_map(|field| text(&[field, "user", "login"]));
    let labels = ["pull_request", "issue"]
        .into_iter()
        .find_map(|field| body?.get(field)?.get("labels")?.as_array())
        .map(|labels| {
            labels
                .iter()
                .filter_map(|l| l.get("name").and_then(Value::as_str).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    Envelope {
        source: source.to_owned(),
        event,
        action,
        kind,
        sender: text(&["sender", "login"]),
        author,
        repository: text(&["repository", "full_name"]),
        labels,
        trust_mode: trust_mode.to_owned(),
        verified,
        content_type,
        size: size as i64,
    }
}

/// The forge and its event name; Gitea first (it also sends `X-GitHub-Event`).
fn forge(h: &HeaderMap) -> (&'static str, Option<String>) {
    if let Some(event) = headers::text(h, "x-gitea-event") {
        return ("gitea", Some(event));
    }
    if let Some(event) = headers::text(h, "x-github-event") {
        return ("github", Some(event));
    }
    (super::derive::GENERIC, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use serde_json::json;

    #[test]
    fn a_github_comment_names_sender_author_repository_and_labels() {
        let mut h = HeaderMap::new();
        h.insert("x-github-event", HeaderValue::from_static("issue_comment"));
        let body = json!({
            "action": "created",
            "sender": {"login": "mallory"},
            "comment": {"user": {"login": "mallory"}},
            "issue": {"user": {"login": "alice"}, "labels": [{"name": "bug"}]},
            "repository": {"full_name": "o/r"},
        });
        let e = read(&h, Some(&body), "signed", true, None, 10);
        assert_eq!(e.source, "github");
        assert_eq!(e.kind.as_deref(), Some("issue_comment.created"));
        assert_eq!(e.sender.as_deref(), Some("mallory"));
        assert_eq!(e.author.as_deref(), Some("mallory"));
        assert_eq!(e.repository.as_deref(), Some("o/r"));
        assert_eq!(e.labels, ["bug"]);
    }
}
