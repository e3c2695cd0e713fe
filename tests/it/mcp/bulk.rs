//! `queue_summary` and `complete_many` over HTTP (`03-mcp.md`, "Queue
//! summary and bulk completion"): what they answer, in how few bytes, what
//! they change and count, their scope and their refusals.

use crate::support::mcp;

use mcp::Server;
use serde_json::{Value, json};

/// `switchboard_attempts_finished_total{outcome="completed"}` on `/metrics`.
async fn completed_attempts(server: &Server) -> f64 {
    crate::support::metric_or_zero(
        &server.http,
        &server.url("/metrics"),
        r#"switchboard_attempts_finished_total{outcome="completed"}"#,
    )
    .await
}

#[tokio::test]
async fn queue_summary_counts_without_titles_or_payloads_in_a_few_hundred_bytes() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let mut ids = Vec::new();
    for i in 0..6 {
        ids.push(server.push(&ep.slug, &format!("secret title {i}")).await);
    }
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;
    mcp.call_ok(&session, "claim", json!({"id": ids[0]})).await;

    let result = mcp.call(&session, "queue_summary", json!({})).await;
    let summary = result["structuredContent"].clone();
    let text = result["content"][0]["text"].as_str().unwrap();
    assert_eq!(serde_json::from_str::<Value>(text).unwrap(), summary);
    assert!(text.len() < 600, "{} bytes: {text}", text.len());
    assert!(!text.contains("secret"), "no titles or payloads: {text}");
    assert_eq!(summary["pending"], 5, "{summary}");
    assert_eq!(summary["claimed"], 1);
    assert_eq!(summary["held"], 0);
    assert_eq!(
        summary["queues"],
        json!([{"queue": "inbox", "pending": 5, "claimed": 1, "held": 0,
                "oldest_pending_age_seconds": summary["oldest_pending_age_seconds"]}])
    );
    assert!(summary["oldest_pending_age_seconds"].is_u64(), "{summary}");
    // Pushed over the API: one kind (`operator`); the sender is the human.
    assert_eq!(
        summary["pending_by_kind"],
        json!({"top": [{"value": "operator", "pending": 5}], "other": 0})
    );
    let sender = &summary["pending_by_sender"]["top"][0];
    assert!(
        sender["value"].as_str().unwrap().starts_with("human:"),
        "{summary}"
    );
    assert_eq!(sender["pending"], 5);

    let inbox = mcp
        .call_ok(&session, "queue_summary", json!({"queue": "inbox"}))
        .await;
    assert_eq!(inbox, summary);
    let (code, message) = mcp
        .call_err(&session, "queue_summary", json!({"queue": "elsewhere"}))
        .await;
    assert_eq!(code, "forbidden");
    assert_eq!(
        message,
        "queue \"elsewhere\" is not in this endpoint's scope"
    );
    let (code, message) = mcp
        .call_err(&session, "queue_summary", json!({"queue": 3}))
        .await;
    assert_eq!(
        (code.as_str(), message.as_str()),
        ("invalid_argument", "queue: must be a string")
    );
}

#[tokio::test]
async fn complete_many_completes_the_held_ids_and_answers_each() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let other = server.vend(json!({"agent": "b"})).await;
    let mut ids = Vec::new();
    for i in 0..4 {
        ids.push(server.push(&ep.slug, &format!("noise {i}")).await);
    }
    let foreign = server.push(&other.slug, "theirs").await;
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;
    for id in &ids[..3] {
        mcp.call_ok(&session, "claim", json!({"id": id})).await;
    }
    mcp.call_ok(&session, "complete", json!({"id": ids[2]}))
        .await;
    let before = completed_attempts(&server).await;

    let result = mcp
        .call(
            &session,
            "complete_many",
            json!({"ids": [ids[0], ids[3], ids[2], foreign, "td_missing", ids[1]],
                   "result": {"triage": "noise"}, "summary": "noise"}),
        )
        .await;
    assert_ne!(result["isError"], true, "{result}");
    let answer = &result["structuredContent"];
    assert_eq!(
        *answer,
        json!({"completed": 2, "results": [
            {"id": ids[0], "status": "ok"},
            {"id": ids[3], "status": "conflict"},
            {"id": ids[2], "status": "conflict"},
            {"id": foreign, "status": "not_found"},
            {"id": "td_missing", "status": "not_found"},
            {"id": ids[1], "status": "ok"},
        ]})
    );
    assert!(!result.to_string().contains("noise 0"), "no rows echoed");
    assert_eq!(completed_attempts(&server).await - before, 2.0);
    for id in [&ids[0], &ids[1]] {
        let view = server.todo(id).await;
        assert_eq!(view["state"], "done", "{view}");
        assert_eq!(view["result"], json!({"triage": "noise"}));
        let detail = mcp.call_ok(&session, "get_todo", json!({"id": id})).await;
        assert_eq!(detail["attempts"][0]["outcome"], "completed", "{detail}");
        assert_eq!(detail["attempts"][0]["summary"], "noise");
    }
    assert_eq!(server.todo(&ids[3]).await["state"], "pending");
    assert_eq!(server.todo(&foreign).await["state"], "pending");
}

#[tokio::test]
async fn complete_many_refuses_bad_ids_by_name_and_changes_nothing() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let todo = server.push(&ep.slug, "held").await;
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;
    mcp.call_ok(&session, "claim", json!({"id": todo})).await;
    let many: Vec<String> = (0..101).map(|i| format!("td_{i}")).collect();
    for args in [
        json!({}),
        json!({"ids": null}),
        json!({"ids": []}),
        json!({"ids": many}),
        json!({"ids": [todo, todo]}),
        json!({"ids": [todo, 7]}),
        json!({"ids": [todo, ""]}),
        json!({"ids": todo}),
    ] {
        let (code, message) = mcp.call_err(&session, "complete_many", args.clone()).await;
        assert_eq!(code, "invalid_argument", "{args}");
        assert!(message.starts_with("ids: "), "{args}: {message}");
    }
    let (code, message) = mcp
        .call_err(
            &session,
            "complete_many",
            json!({"ids": [todo], "lease_token": "x"}),
        )
        .await;
    assert_eq!(code, "invalid_argument");
    assert!(message.starts_with("lease_token: "), "{message}");
    assert_eq!(server.todo(&todo).await["state"], "claimed");
}

#[tokio::test]
async fn the_bulk_tools_come_with_list_todos_and_complete() {
    let server = Server::start(&[]);
    for (i, (verbs, summary, many)) in [
        (json!(["list_todos"]), true, false),
        (json!(["claim", "complete"]), false, true),
        (json!(["claim", "fail"]), false, false),
    ]
    .into_iter()
    .enumerate()
    {
        let ep = server
            .vend(json!({"agent": format!("a{i}"), "verbs": verbs}))
            .await;
        let mcp = server.mcp(&ep);
        let session = mcp.initialize().await;
        let a = mcp.rpc(&session, 1, "tools/list", json!({})).await;
        a.expect(200);
        let names: Vec<String> = a.json()["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            names.iter().any(|n| n == "queue_summary"),
            summary,
            "{verbs}"
        );
        assert_eq!(names.iter().any(|n| n == "complete_many"), many, "{verbs}");
        if !summary {
            let (code, _) = mcp.call_err(&session, "queue_summary", json!({})).await;
            assert_eq!(code, "forbidden");
        }
        if !many {
            let (code, _) = mcp
                .call_err(&session, "complete_many", json!({"ids": ["td_1"]}))
                .await;
            assert_eq!(code, "forbidden");
        }
    }
}

#[tokio::test]
async fn the_triage_and_work_prompts_are_offered_when_their_tools_are() {
    let server = Server::start(&[]);
    let ep = server.vend(json!({"agent": "a"})).await;
    let mcp = server.mcp(&ep);
    let session = mcp.initialize().await;
    let listed = mcp.rpc(&session, 2, "prompts/list", json!({})).await.json();
    let names: Vec<&str> = listed["result"]["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["work_next", "triage_queue"], "{listed}");

    let got = mcp
        .rpc(
            &session,
            3,
            "prompts/get",
            json!({"name": "triage_queue", "arguments": {"queue": "inbox"}}),
        )
        .await
        .json();
    let text = got["result"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{got}"));
    assert!(
        text.contains("queue_summary")
            && text.contains("complete_many")
            && text.contains("`inbox`"),
        "{text}"
    );
    let unknown = mcp
        .rpc(&session, 4, "prompts/get", json!({"name": "rm_rf"}))
        .await
        .json();
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");

    // An endpoint that may only claim and complete is offered neither: each
    // prompt needs tools it lacks (fail; queue_summary).
    let narrow = server
        .vend(json!({"agent": "b", "verbs": ["claim_next", "complete"]}))
        .await;
    let mcp = server.mcp(&narrow);
    let session = mcp.initialize().await;
    let listed = mcp.rpc(&session, 2, "prompts/list", json!({})).await.json();
    assert_eq!(listed["result"]["prompts"], json!([]), "{listed}");
}
