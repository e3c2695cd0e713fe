//! Delivery history, trusted senders, quarantine and replay (`08-intake.md`,
//! amended) through the real binary.

use reqwest::Method;
use serde_json::{Value, json};
use switchboard::intake::signature;

use crate::intake::{Hook, Server};

fn issue_opened(sender: &str, number: u64) -> String {
    json!({
        "action": "opened",
        "sender": {"login": sender},
        "issue": {"number": number, "title": "Please run this", "user": {"login": sender},
                  "labels": [{"name": "bug"}]},
        "repository": {"full_name": "octo/repo"},
    })
    .to_string()
}

async fn github(
    server: &Server,
    hook: &Hook,
    body: &str,
    delivery: &str,
) -> crate::intake::Delivered {
    let sig = signature::sign(hook.secret.as_deref().unwrap(), body.as_bytes());
    server
        .deliver(
            &hook.url,
            &[
                ("content-type", "application/json"),
                ("x-github-event", "issues"),
                ("x-github-delivery", delivery),
                ("x-hub-signature-256", &sig),
            ],
            body.to_owned(),
        )
        .await
}

async fn deliveries(server: &Server, hook: &Hook, query: &str) -> Vec<Value> {
    let list = server
        .get(&format!("/api/v1/webhooks/{}/deliveries{query}", hook.id))
        .await;
    list["deliveries"].as_array().unwrap().clone()
}

async fn status_of(server: &Server, method: Method, path: &str) -> u16 {
    server
        .http
        .request(method, server.url(path))
        .bearer_auth(&server.admin_token)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn every_decision_is_recorded_and_untrusted_senders_wait_in_quarantine() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let hook = server.endpoint_with_webhook("triage", true).await;

    // Everyone is trusted by default.
    let first = github(&server, &hook, &issue_opened("alice", 1), "d-1").await;
    assert_eq!(first.body["delivery"]["decision"], "accepted", "{first:?}");
    let todo = first.todo_id();

    // Only alice from now on.
    let webhook = server
        .api(
            Method::PUT,
            &format!("/api/v1/webhooks/{}/senders", hook.id),
            Some(json!({"trust": ["Alice"], "match": "sender"})),
        )
        .await;
    assert_eq!(
        webhook["senders"],
        json!({"trust": ["alice"], "match": "sender"})
    );

    // A redelivery is a duplicate naming the same todo.
    let again = github(&server, &hook, &issue_opened("alice", 1), "d-1").await;
    assert_eq!(again.body["delivery"]["decision"], "duplicate");
    assert_eq!(again.todo_id(), todo);

    // A stranger is quarantined: no todo.
    let stranger = github(&server, &hook, &issue_opened("mallory", 2), "d-2").await;
    assert_eq!(stranger.status, 202, "{stranger:?}");
    assert_eq!(stranger.body["delivery"]["decision"], "quarantined");
    assert!(stranger.body["todo"].is_null());
    assert_eq!(server.todos(&hook).await.len(), 1);
    let quarantined = stranger.body["delivery"]["id"].as_str().unwrap().to_owned();
    assert!(quarantined.starts_with("dl_"));

    // A bad signature: refused, recorded without its body.
    let forged = server
        .deliver(
            &hook.url,
            &[
                ("x-github-event", "issues"),
                ("x-hub-signature-256", "sha256=00"),
            ],
            issue_opened("mallory", 3),
        )
        .await;
    assert_eq!(forged.status, 401);

    let all = deliveries(&server, &hook, "").await;
    let decisions: Vec<&str> = all
        .iter()
        .map(|d| d["decision"].as_str().unwrap())
        .collect();
    assert_eq!(
        decisions,
        ["refused", "quarantined", "duplicate", "accepted"]
    );
    let refused = server
        .get(&format!(
            "/api/v1/deliveries/{}",
            all[0]["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(refused["reason"], "bad_signature");
    assert_eq!(refused["envelope"]["verified"], false);
    assert_eq!(
        refused["envelope"]["size"],
        issue_opened("mallory", 3).len()
    );
    assert!(refused.get("body").is_none() && refused.get("body_base64").is_none());
    assert!(refused["envelope"]["sender"].is_null());

    // The envelope of a verified one, and the filters.
    let shown = server
        .get(&format!("/api/v1/deliveries/{quarantined}"))
        .await;
    let env = &shown["envelope"];
    assert_eq!(env["source"], "github");
    assert_eq!(env["event"], "issues");
    assert_eq!(env["action"], "opened");
    assert_eq!(env["sender"], "mallory");
    assert_eq!(env["author"], "mallory");
    assert_eq!(env["repository"], "octo/repo");
    assert_eq!(env["labels"], json!(["bug"]));
    assert_eq!(env["trust_mode"], "signed");
    assert_eq!(env["verified"], true);
    assert!(shown["body"].as_str().unwrap().contains("Please run this"));
    assert!(shown["headers"].get("x-hub-signature-256").is_none());
    assert_eq!(
        deliveries(&server, &hook, "?sender=MALLORY&decision=quarantined")
            .await
            .len(),
        1
    );
    assert_eq!(deliveries(&server, &hook, "?event=push").await.len(), 0);

    // Released: the todo exists now.
    let released = server
        .post(
            &format!("/api/v1/deliveries/{quarantined}/release"),
            json!({}),
        )
        .await;
    assert_eq!(released["delivery"]["decision"], "released");
    assert_eq!(released["todo"]["created"], true);
    assert_eq!(server.todos(&hook).await.len(), 2);
    assert_eq!(
        status_of(
            &server,
            Method::POST,
            &format!("/api/v1/deliveries/{quarantined}/release")
        )
        .await,
        409,
        "a released delivery is not released twice"
    );

    // Another stranger, discarded; replayed after trusting everyone.
    let other = github(&server, &hook, &issue_opened("eve", 4), "d-4").await;
    let other_id = other.body["delivery"]["id"].as_str().unwrap().to_owned();
    let discarded = server
        .post(&format!("/api/v1/deliveries/{other_id}/discard"), json!({}))
        .await;
    assert_eq!(discarded["decision"], "discarded");
    assert_eq!(server.todos(&hook).await.len(), 2);
    server
        .api(
            Method::PUT,
            &format!("/api/v1/webhooks/{}/senders", hook.id),
            Some(json!({"trust": "everyone"})),
        )
        .await;
    let replayed = server
        .post(&format!("/api/v1/deliveries/{other_id}/replay"), json!({}))
        .await;
    assert_eq!(replayed["delivery"]["decision"], "accepted");
    assert_eq!(replayed["delivery"]["replay_of"], other_id.as_str());
    assert_eq!(server.todos(&hook).await.len(), 3);
    // The same key again: a duplicate; a new key makes another todo.
    let dup = server
        .post(&format!("/api/v1/deliveries/{other_id}/replay"), json!({}))
        .await;
    assert_eq!(dup["delivery"]["decision"], "duplicate");
    let fresh = server
        .post(
            &format!("/api/v1/deliveries/{other_id}/replay"),
            json!({"new_key": true}),
        )
        .await;
    assert_eq!(fresh["delivery"]["decision"], "accepted");
    assert_eq!(server.todos(&hook).await.len(), 4);

    // A refused delivery has nothing to replay; a missing one is 404.
    let refused_id = all[0]["id"].as_str().unwrap();
    assert_eq!(
        status_of(
            &server,
            Method::POST,
            &format!("/api/v1/deliveries/{refused_id}/replay")
        )
        .await,
        409
    );
    assert_eq!(
        status_of(&server, Method::GET, "/api/v1/deliveries/dl_missing").await,
        404
    );

    let quarantined = crate::support::metric(
        &server.http,
        &server.url("/metrics"),
        r#"switchboard_intake_deliveries_total{decision="quarantined"}"#,
    )
    .await;
    assert_eq!(quarantined, 2.0);
}

#[tokio::test]
async fn a_gitea_delivery_names_its_forge() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let hook = server.endpoint_with_webhook("gitea", false).await;
    let body = json!({
        "action": "opened",
        "sender": {"login": "bob"},
        "pull_request": {"number": 7, "title": "Fix", "user": {"login": "bob"}, "labels": []},
        "repository": {"full_name": "team/app"},
    })
    .to_string();
    let sent = server
        .deliver(
            &hook.url,
            &[
                ("content-type", "application/json"),
                ("x-gitea-event", "pull_request"),
                ("x-github-event", "pull_request"),
                ("x-gitea-delivery", "g-1"),
            ],
            body,
        )
        .await;
    assert_eq!(sent.body["delivery"]["decision"], "accepted", "{sent:?}");
    let list = deliveries(&server, &hook, "?decision=accepted").await;
    assert_eq!(list[0]["envelope"]["source"], "gitea");
    assert_eq!(list[0]["envelope"]["kind"], "pull_request.opened");
    assert_eq!(list[0]["envelope"]["trust_mode"], "token");
    assert_eq!(list[0]["todo_id"], sent.todo_id().as_str());
}

/// The board's endpoint page lists the quarantine with the sender and the
/// title; Release makes the todo, Discard keeps the delivery in the history.
#[tokio::test]
async fn the_board_lists_the_quarantine_and_releases_or_discards() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let hook = server.endpoint_with_webhook("guarded", true).await;
    server
        .api(
            Method::PUT,
            &format!("/api/v1/webhooks/{}/senders", hook.id),
            Some(json!({"trust": ["alice"]})),
        )
        .await;
    let first = github(&server, &hook, &issue_opened("mallory", 7), "q-1").await;
    let second = github(&server, &hook, &issue_opened("eve", 8), "q-2").await;
    let (released, discarded) = (
        first.body["delivery"]["id"].as_str().unwrap().to_owned(),
        second.body["delivery"]["id"].as_str().unwrap().to_owned(),
    );

    let mut board = crate::board::Board::new(&server.addr);
    board.sign_in(&server.admin_token).await;
    let path = format!("/board/endpoints/{}", hook.endpoint_slug);
    let page = board.get(&path).await;
    for (id, sender) in [(&released, "mallory"), (&discarded, "eve")] {
        let at = page
            .body
            .find(&format!(r#"data-delivery="{id}""#))
            .unwrap_or_else(|| panic!("{id} listed: {}", page.body));
        let row = &page.body[at..at + page.body[at..].find("</tr>").unwrap()];
        assert!(
            row.contains(sender) && row.contains("Please run this"),
            "{row}"
        );
    }
    assert!(server.todos(&hook).await.is_empty());

    // Without the form's token, or for a delivery that is not there: nothing.
    let forged = board
        .post(&format!("/board/deliveries/{released}/release"), &[])
        .await;
    assert_eq!(forged.status, 403, "{}", forged.body);
    let csrf = board.csrf().await;
    let missing = board
        .post("/board/deliveries/dl_missing/discard", &[("csrf", &csrf)])
        .await;
    assert_eq!(missing.status, 404, "{}", missing.body);
    assert!(server.todos(&hook).await.is_empty());

    let answer = board
        .post(
            &format!("/board/deliveries/{released}/release"),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(answer.status, 303, "{}", answer.body);
    let answer = board
        .post(
            &format!("/board/deliveries/{discarded}/discard"),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(answer.status, 303, "{}", answer.body);

    assert_eq!(server.todos(&hook).await.len(), 1, "the released one");
    let page = board.get(&path).await;
    assert!(!page.body.contains("data-delivery="), "{}", page.body);
    let all = deliveries(&server, &hook, "").await;
    let decisions: Vec<&str> = all
        .iter()
        .map(|d| d["decision"].as_str().unwrap())
        .collect();
    assert_eq!(decisions, ["discarded", "released"]);
}

#[tokio::test]
async fn the_board_shows_a_webhooks_history_filtered_by_decision_and_sender() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let hook = server.endpoint_with_webhook("historied", true).await;
    server
        .api(
            Method::PUT,
            &format!("/api/v1/webhooks/{}/senders", hook.id),
            Some(json!({"trust": ["alice"]})),
        )
        .await;
    let accepted = github(&server, &hook, &issue_opened("alice", 1), "h-1").await;
    let held = github(&server, &hook, &issue_opened("mallory", 2), "h-2").await;
    let accepted = accepted.body["delivery"]["id"].as_str().unwrap().to_owned();
    let held = held.body["delivery"]["id"].as_str().unwrap().to_owned();

    let mut board = crate::board::Board::new(&server.addr);
    board.sign_in(&server.admin_token).await;
    let endpoint = board
        .get(&format!("/board/endpoints/{}", hook.endpoint_slug))
        .await;
    let link = format!(r#"href="/board/webhooks/{}""#, hook.id);
    assert!(endpoint.body.contains(&link), "{}", endpoint.body);

    let path = format!("/board/webhooks/{}", hook.id);
    let all = board.get(&path).await;
    assert_eq!(all.status, 200, "{}", all.body);
    let row = |body: &str, id: &str| {
        let at = body
            .find(&format!(r#"data-delivery="{id}""#))
            .unwrap_or_else(|| panic!("{id} listed: {body}"));
        body[at..at + body[at..].find("</tr>").unwrap()].to_owned()
    };
    let accepted_row = row(&all.body, &accepted);
    assert!(
        accepted_row.contains(r#"data-decision="accepted""#)
            && accepted_row.contains("alice")
            && accepted_row.contains("issues · opened")
            && accepted_row.contains("/board/todos/td_"),
        "{accepted_row}"
    );
    let held_row = row(&all.body, &held);
    assert!(
        held_row.contains("quarantined") && held_row.contains("mallory"),
        "{held_row}"
    );

    let quarantined = board.get(&format!("{path}?decision=quarantined")).await;
    assert!(quarantined.body.contains(&held));
    assert!(!quarantined.body.contains(&accepted));
    let by_sender = board.get(&format!("{path}?sender=alice")).await;
    assert!(by_sender.body.contains(&accepted));
    assert!(!by_sender.body.contains(&held));
    let bad = board.get(&format!("{path}?decision=maybe")).await;
    assert_eq!(bad.status, 200);
    assert!(
        bad.body.contains("decision: must be one of"),
        "{}",
        bad.body
    );

    let missing = board.get("/board/webhooks/wh_missing").await;
    assert_eq!(missing.status, 404);
}
