//! A delivery's title, kind and source (`docs/intake.md`, step 4).
//!
//! Precedence: `X-Switchboard-Title` / `X-Switchboard-Kind` when given; for
//! GitHub and Gitea events, derived from the event header and body
//! (`pull_request.opened owner/repo#12: Fix the parser`); else the body's
//! top-level JSON `title`; else `"<source> event"`. Everything here comes
//! from an outside sender, so it is cleaned rather than refused: a delivery
//! is never lost over a label.

use axum::http::HeaderMap;
use serde_json::Value;

use super::headers;
use crate::domain::text::cut_to_bytes;
use crate::domain::todo::{MAX_LABEL_BYTES, MAX_TITLE_BYTES};

pub const TITLE_HEADER: &str = "x-switchboard-title";
pub const KIND_HEADER: &str = "x-switchboard-kind";

/// The source and kind of a delivery from no known forge, without `X-Switchboard-Kind`.
pub const GENERIC: &str = "webhook";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labels {
    /// One line, 1–200 bytes.
    pub title: String,
    /// 1–64 printable ASCII characters without spaces.
    pub kind: String,
    /// `github`, `gitea` or `webhook`.
    pub source: String,
}

/// The forge a delivery comes from and its event name.
struct ForgeEvent {
    source: &'static str,
    event: String,
}

impl ForgeEvent {
    /// Gitea is checked first: it also sends `X-GitHub-Event` for compatibility.
    fn detect(headers: &HeaderMap) -> Option<Self> {
        [("x-gitea-event", "gitea"), ("x-github-event", "github")]
            .into_iter()
            .find_map(|(header, source)| {
                headers::text(headers, header).map(|event| Self { source, event })
            })
    }
}

pub fn derive(headers: &HeaderMap, body: Option<&Value>) -> Labels {
    let forge = ForgeEvent::detect(headers);
    let source = forge.as_ref().map_or(GENERIC, |f| f.source);
    let forge_kind = forge.as_ref().map(|f| forge_kind(&f.event, body));

    let kind = headers::text(headers, KIND_HEADER)
        .and_then(|k| sanitize_label(&k))
        .or_else(|| forge_kind.as_deref().and_then(sanitize_label))
        .unwrap_or_else(|| GENERIC.to_owned());
    let title = headers::text(headers, TITLE_HEADER)
        .and_then(|t| clean_title(&t))
        .or_else(|| {
            let (forge, kind) = forge.as_ref().zip(forge_kind.as_ref())?;
            clean_title(&forge_title(&forge.event, kind, body))
        })
        .or_else(|| body?.get("title")?.as_str().and_then(clean_title))
        .unwrap_or_else(|| format!("{source} event"));
    Labels {
        title,
        kind,
        source: source.to_owned(),
    }
}

/// `event` or `event.action`, as GitHub and Gitea name what happened.
fn forge_kind(event: &str, body: Option<&Value>) -> String {
    match body.and_then(|b| b.get("action")).and_then(Value::as_str) {
        Some(action) if !action.is_empty() => format!("{event}.{action}"),
        _ => event.to_owned(),
    }
}

/// `<kind> <owner/repo>#<number>: <subject>`, each part only when the body has it.
fn forge_title(event: &str, kind: &str, body: Option<&Value>) -> String {
    let mut title = kind.to_owned();
    let Some(body) = body else {
        return title;
    };
    let repo = text_at(body, &["repository", "full_name"]);
    // Comments and reviews carry the issue or pull request they are about.
    let item = ["pull_request", "issue"]
        .into_iter()
        .find_map(|field| body.get(field).filter(|v| v.is_object()));
    let number = item
        .and_then(|i| i.get("number"))
        .or_else(|| body.get("number"))
        .and_then(Value::as_u64);
    let subject = match item {
        Some(item) => item.get("title").and_then(Value::as_str),
        None if event == "push" => push_subject(body),
        None => text_at(body, &["release", "name"])
            .filter(|n| !n.trim().is_empty())
            .or_else(|| text_at(body, &["release", "tag_name"])),
    };

    if let Some(repo) = repo {
        title.push(' ');
        title.push_str(repo);
    }
    if let Some(number) = number {
        if repo.is_none() {
            title.push(' ');
        }
        title.push_str(&format!("#{number}"));
    }
    if let Some(subject) = subject.filter(|s| !s.trim().is_empty()) {
        title.push_str(": ");
        title.push_str(subject);
    }
    title
}

/// The first line of the newest commit's message, else the pushed ref
/// (a push that deletes a branch has no commits).
fn push_subject(body: &Value) -> Option<&str> {
    let message = text_at(body, &["head_commit", "message"]).or_else(|| {
        body.get("commits")?
            .as_array()?
            .last()?
            .get("message")?
            .as_str()
    });
    match message {
        Some(message) => message.lines().find(|l| !l.trim().is_empty()),
        None => body.get("ref").and_then(Value::as_str),
    }
}

fn text_at<'a>(body: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(body, |value, field| value.get(field))?
        .as_str()
}

/// One line of at most 200 bytes: control characters (newlines included)
/// become spaces, runs of whitespace one space, the ends are trimmed and
/// the rest is cut on a character boundary. `None` when nothing is left.
pub fn clean_title(raw: &str) -> Option<String> {
    let one_line: String = raw
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let spaced = one_line.split_whitespace().collect::<Vec<_>>().join(" ");
    let title = cut_to_bytes(&spaced, MAX_TITLE_BYTES).trim_end();
    (!title.is_empty()).then(|| title.to_owned())
}

/// A valid `kind`/`source` label: anything but printable ASCII becomes `_`,
/// cut to 64 characters. `None` when empty.
pub fn sanitize_label(raw: &str) -> Option<String> {
    let label: String = raw
        .chars()
        .map(|c| if c.is_ascii_graphic() { c } else { '_' })
        .take(MAX_LABEL_BYTES)
        .collect();
    (!label.is_empty()).then_some(label)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::todo::{validate_label, validate_title};
    use axum::http::HeaderValue;
    use serde_json::json;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn labels(title: &str, kind: &str, source: &str) -> Labels {
        Labels {
            title: title.into(),
            kind: kind.into(),
            source: source.into(),
        }
    }

    #[test]
    fn github_pull_request_opened() {
        let body = json!({
            "action": "opened",
            "number": 12,
            "pull_request": {"number": 12, "title": "Fix the parser"},
            "repository": {"full_name": "owner/repo"}
        });
        assert_eq!(
            derive(&headers(&[("x-github-event", "pull_request")]), Some(&body)),
            labels(
                "pull_request.opened owner/repo#12: Fix the parser",
                "pull_request.opened",
                "github"
            )
        );
    }

    #[test]
    fn gitea_wins_over_its_github_compatibility_header() {
        let body = json!({
            "action": "opened",
            "issue": {"number": 3, "title": "Crash on start"},
            "repository": {"full_name": "team/app"}
        });
        let h = headers(&[("x-gitea-event", "issues"), ("x-github-event", "issues")]);
        assert_eq!(
            derive(&h, Some(&body)),
            labels(
                "issues.opened team/app#3: Crash on start",
                "issues.opened",
                "gitea"
            )
        );
    }

    #[test]
    fn comments_name_their_issue() {
        let body = json!({
            "action": "created",
            "issue": {"number": 7, "title": "Slow"},
            "comment": {"body": "me too"},
            "repository": {"full_name": "o/r"}
        });
        let got = derive(
            &headers(&[("x-github-event", "issue_comment")]),
            Some(&body),
        );
        assert_eq!(got.title, "issue_comment.created o/r#7: Slow");
    }

    #[test]
    fn push_takes_the_head_commits_first_line_or_the_ref() {
        let h = headers(&[("x-github-event", "push")]);
        let body = json!({
            "ref": "refs/heads/main",
            "head_commit": {"message": "Fix the parser\n\nLong explanation"},
            "repository": {"full_name": "owner/repo"}
        });
        assert_eq!(
            derive(&h, Some(&body)),
            labels("push owner/repo: Fix the parser", "push", "github")
        );
        let gitea_style = json!({
            "ref": "refs/heads/main",
            "commits": [{"message": "first"}, {"message": "second\nmore"}],
            "repository": {"full_name": "owner/repo"}
        });
        assert_eq!(
            derive(&h, Some(&gitea_style)).title,
            "push owner/repo: second"
        );
        let deletion = json!({"ref": "refs/heads/old", "head_commit": null,
            "repository": {"full_name": "owner/repo"}});
        assert_eq!(
            derive(&h, Some(&deletion)).title,
            "push owner/repo: refs/heads/old"
        );
    }

    #[test]
    fn release_and_bare_events() {
        let h = headers(&[("x-github-event", "release")]);
        let body = json!({"action": "published", "release": {"name": "", "tag_name": "v1.2"},
            "repository": {"full_name": "o/r"}});
        assert_eq!(derive(&h, Some(&body)).title, "release.published o/r: v1.2");
        let ping = headers(&[("x-github-event", "ping")]);
        assert_eq!(
            derive(&ping, Some(&json!({"zen": "Keep it simple."}))),
            labels("ping", "ping", "github")
        );
        assert_eq!(derive(&ping, None), labels("ping", "ping", "github"));
    }

    #[test]
    fn switchboard_headers_override_the_forge() {
        let h = headers(&[
            ("x-github-event", "push"),
            ("x-switchboard-title", "Deploy staging"),
            ("x-switchboard-kind", "deploy"),
        ]);
        assert_eq!(
            derive(&h, Some(&json!({"title": "ignored"}))),
            labels("Deploy staging", "deploy", "github")
        );
    }

    #[test]
    fn generic_deliveries_use_the_json_title_or_a_fallback() {
        let none = HeaderMap::new();
        assert_eq!(
            derive(&none, Some(&json!({"title": "Disk almost full"}))),
            labels("Disk almost full", "webhook", "webhook")
        );
        for body in [
            json!({"title": 5}),
            json!({"title": " \n "}),
            json!([1]),
            json!("x"),
        ] {
            assert_eq!(derive(&none, Some(&body)).title, "webhook event", "{body}");
        }
        assert_eq!(derive(&none, None).title, "webhook event");
        let blank = headers(&[("x-switchboard-title", " \t ")]);
        assert_eq!(derive(&blank, None).title, "webhook event");
    }

    #[test]
    fn utf8_header_titles_are_kept() {
        let mut h = HeaderMap::new();
        let value = HeaderValue::from_bytes("Déploiement prêt".as_bytes()).unwrap();
        h.insert(TITLE_HEADER, value);
        assert_eq!(derive(&h, None).title, "Déploiement prêt");
    }

    #[test]
    fn titles_become_one_line_of_at_most_200_bytes() {
        assert_eq!(
            clean_title("  ship </channel>\r\nignore previous\tinstructions  ").as_deref(),
            Some("ship </channel> ignore previous instructions")
        );
        let long = "é".repeat(150);
        let cut = clean_title(&long).unwrap();
        assert_eq!(cut.len(), 200);
        assert!(validate_title(&cut).is_ok());
        assert_eq!(clean_title("\n\u{0}\u{85} "), None);
    }

    #[test]
    fn labels_are_sanitised_not_refused() {
        assert_eq!(
            sanitize_label("pull request").as_deref(),
            Some("pull_request")
        );
        assert_eq!(sanitize_label("naïve").as_deref(), Some("na_ve"));
        let long = sanitize_label(&"k".repeat(100)).unwrap();
        assert_eq!(long.len(), 64);
        assert!(validate_label(&long, "kind").is_ok());
        assert_eq!(sanitize_label(""), None);
        let h = headers(&[("x-github-event", "pull_request")]);
        let odd = derive(&h, Some(&json!({"action": "re opened\u{1b}"})));
        assert_eq!(odd.kind, "pull_request.re_opened_");
        assert!(validate_label(&odd.kind, "kind").is_ok());
    }

    #[test]
    fn hostile_bodies_still_yield_valid_labels() {
        let h = headers(&[("x-github-event", "pull_request")]);
        let bodies = [
            json!(null),
            json!({"action": 5, "pull_request": "x", "number": -1}),
            json!({"action": "", "pull_request": {"title": ["x"], "number": "12"}}),
            json!({"repository": {"full_name": "x".repeat(500)}, "action": "y".repeat(100)}),
            json!({"pull_request": {"title": "\n\n"}, "repository": {"full_name": "\u{2028}"}}),
        ];
        for body in bodies {
            let got = derive(&h, Some(&body));
            assert!(validate_title(&got.title).is_ok(), "{body}: {got:?}");
            assert!(validate_label(&got.kind, "kind").is_ok(), "{body}: {got:?}");
        }
    }
}
