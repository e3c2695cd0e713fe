//! An agent's bulk verbs: `complete_many` (one transaction, an answer per
//! id) and `queue_summary` (one aggregate read, counts only).

use serde_json::json;
use switchboard::domain::todo::{Disposition, Outcome, TodoState};
use switchboard::store::*;

use crate::common::*;
use crate::exercise_on_every_path;
use crate::support::{Fixture, TestStore, fixture};

fn sent(f: &Fixture, queue: &str, title: &str, kind: Option<&str>, actor: Option<&str>) -> NewTodo {
    NewTodo {
        kind: kind.map(str::to_owned),
        source: kind.map(|k| format!("src-{k}")),
        priority: 0,
        intake: actor.map(|actor| NewIntakeEvent {
            trust_mode: TrustMode::Operator,
            actor: actor.to_owned(),
            webhook_id: None,
            headers: json!({}),
            content_type: None,
            body: b"never read".to_vec(),
        }),
        ..NewTodo::new(&f.endpoint.id, queue, title)
    }
}

async fn complete_many_answers_per_id_and_completes_the_held_ones(
    store: &dyn Store,
    _ts: &TestStore,
) {
    let f = fixture(store, "ada").await;
    let other = fixture(store, "eve").await;
    let held_a = add_todo(store, &f, "held a").await;
    let held_b = add_todo(store, &f, "held b").await;
    let pending = add_todo(store, &f, "not held").await;
    let done = add_todo(store, &f, "already done").await;
    let foreign = add_todo(store, &other, "foreign").await;
    for id in [&held_a.id, &held_b.id, &done.id] {
        claim(store, &f.caller, id).await;
    }
    claim(store, &other.caller, &foreign.id).await;
    store
        .complete(&f.caller, &done.id, Finish::default())
        .await
        .unwrap();
    let pending_before = snapshot(store, &f.caller, &pending.id).await;
    let done_before = snapshot(store, &f.caller, &done.id).await;

    let ids = vec![
        held_a.id.clone(),
        pending.id.clone(),
        missing_id(),
        done.id.clone(),
        foreign.id.clone(),
        held_b.id.clone(),
    ];
    let answers = store
        .complete_many(
            &f.caller,
            &ids,
            Finish {
                result: Some(json!({"triage": "noise"})),
                summary: Some("noise".into()),
                lease_token: None,
            },
        )
        .await
        .expect("complete_many");
    let codes: Vec<&str> = answers
        .iter()
        .map(|a| match a {
            Ok(_) => "ok",
            Err(e) => e.code(),
        })
        .collect();
    assert_eq!(
        codes,
        ["ok", "conflict", "not_found", "conflict", "not_found", "ok"]
    );
    for id in [&held_a.id, &held_b.id] {
        let todo = get(store, &f.caller, id).await;
        assert_eq!(todo.state, TodoState::Done);
        assert_eq!(todo.result, Some(json!({"triage": "noise"})));
        let attempt = last_attempt(store, &f.caller, id).await;
        assert_closed_as(&attempt, Outcome::Completed, Disposition::Done);
        assert_eq!(attempt.summary.as_deref(), Some("noise"));
        assert_eq!(attempts(store, &f.caller, id).await.len(), 1);
    }
    // The refused ones are as they were.
    assert_eq!(
        format!("{pending_before:?}"),
        format!("{:?}", snapshot(store, &f.caller, &pending.id).await)
    );
    assert_eq!(
        format!("{done_before:?}"),
        format!("{:?}", snapshot(store, &f.caller, &done.id).await)
    );
    let theirs = get(store, &other.caller, &foreign.id).await;
    assert_eq!(theirs.state, TodoState::Claimed);
    // A repeat is refused id by id, never applied twice.
    let again = store
        .complete_many(&f.caller, &ids[..1], Finish::default())
        .await
        .unwrap();
    assert_conflict(again.into_iter().next().unwrap());
}

async fn complete_many_refuses_bad_ids_and_changes_nothing(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let held = add_todo(store, &f, "held").await;
    claim(store, &f.caller, &held.id).await;
    let before = snapshot(store, &f.caller, &held.id).await;
    let too_many: Vec<String> = (0..101).map(|i| format!("td_{i}")).collect();
    for ids in [
        vec![],
        too_many,
        vec![held.id.clone(), held.id.clone()],
        vec![held.id.clone(), String::new()],
    ] {
        assert_invalid(
            store
                .complete_many(&f.caller, &ids, Finish::default())
                .await,
            "ids",
        );
    }
    let huge = Finish {
        result: Some(json!("x".repeat(1024 * 1024))),
        ..Finish::default()
    };
    assert_invalid(
        store
            .complete_many(&f.caller, std::slice::from_ref(&held.id), huge)
            .await,
        "result",
    );
    assert_eq!(
        format!("{before:?}"),
        format!("{:?}", snapshot(store, &f.caller, &held.id).await)
    );
}

async fn complete_many_needs_the_fence_of_a_fenced_claim(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let fenced = add_todo(store, &f, "fenced").await;
    let (_, token) = fenced_claim(store, &f.caller, &fenced.id).await;
    let ids = vec![fenced.id.clone()];
    let answers = store
        .complete_many(&f.caller, &ids, Finish::default())
        .await
        .unwrap();
    assert_conflict(answers.into_iter().next().unwrap());
    assert_eq!(
        get(store, &f.caller, &fenced.id).await.state,
        TodoState::Claimed
    );
    let answers = store
        .complete_many(
            &f.caller,
            &ids,
            Finish {
                lease_token: Some(token),
                ..Finish::default()
            },
        )
        .await
        .unwrap();
    assert!(answers[0].is_ok(), "{answers:?}");
}

async fn queue_summary_counts_live_todos_by_queue_kind_source_and_sender(
    store: &dyn Store,
    ts: &TestStore,
) {
    let f = fixture(store, "ada").await;
    let other = fixture(store, "eve").await;
    create(store, sent(&other, "inbox", "not mine", Some("mail"), None)).await;
    // inbox: 3 pending mail from webhook:a, 1 pending chat without event,
    // 1 claimed, 1 held (failed, retry waiting); reviews: 1 pending.
    let first = create(
        store,
        sent(&f, "inbox", "m1", Some("mail"), Some("webhook:a")),
    )
    .await;
    advance_secs(ts, 30);
    for t in ["m2", "m3"] {
        create(store, sent(&f, "inbox", t, Some("mail"), Some("webhook:a"))).await;
    }
    create(store, sent(&f, "inbox", "c1", Some("chat"), None)).await;
    let claimed = add_todo(store, &f, "claimed").await;
    claim(store, &f.caller, &claimed.id).await;
    let failed = add_todo(store, &f, "held").await;
    claim_and_fail(store, &f.caller, &failed.id).await;
    let finished = add_todo(store, &f, "finished").await;
    claim(store, &f.caller, &finished.id).await;
    store
        .complete(&f.caller, &finished.id, Finish::default())
        .await
        .unwrap();
    create(store, sent(&f, "reviews", "r1", None, Some("human:h"))).await;
    advance_secs(ts, 10);

    let summary = store
        .queue_summary(&f.caller, None, SUMMARY_TOP)
        .await
        .unwrap();
    assert_eq!(summary.queues.len(), 2, "{summary:?}");
    let inbox = &summary.queues[0];
    assert_eq!(
        (
            inbox.queue.as_str(),
            inbox.pending,
            inbox.claimed,
            inbox.held
        ),
        ("inbox", 4, 1, 1),
        "{summary:?}"
    );
    assert_eq!(inbox.oldest_pending_at, Some(first.created_at));
    let reviews = &summary.queues[1];
    assert_eq!((reviews.pending, reviews.claimed, reviews.held), (1, 0, 0));
    let sorted = |g: &SummaryGroups| {
        let mut v = g.top.clone();
        v.sort();
        v
    };
    assert_eq!(
        sorted(&summary.pending_by_kind),
        [
            (None, 1),
            (Some("chat".into()), 1),
            (Some("mail".into()), 3)
        ]
    );
    assert_eq!(summary.pending_by_kind.top[0], (Some("mail".into()), 3));
    assert_eq!(
        sorted(&summary.pending_by_source),
        [
            (None, 1),
            (Some("src-chat".into()), 1),
            (Some("src-mail".into()), 3)
        ]
    );
    assert_eq!(
        sorted(&summary.pending_by_sender),
        [
            (None, 1),
            (Some("human:h".into()), 1),
            (Some("webhook:a".into()), 3)
        ]
    );
    for g in [
        &summary.pending_by_kind,
        &summary.pending_by_source,
        &summary.pending_by_sender,
    ] {
        assert_eq!(g.other, 0);
    }

    // One queue; at most `top` groups, the rest as other.
    let reviews_only = store
        .queue_summary(&f.caller, Some("reviews"), 1)
        .await
        .unwrap();
    assert_eq!(reviews_only.queues.len(), 1);
    assert_eq!(reviews_only.queues[0].queue, "reviews");
    let all = store.queue_summary(&f.caller, None, 1).await.unwrap();
    assert_eq!(all.pending_by_kind.top, [(Some("mail".into()), 3)]);
    assert_eq!(all.pending_by_kind.other, 2);
    assert_eq!(all.pending_by_sender.top, [(Some("webhook:a".into()), 3)]);
    assert_eq!(all.pending_by_sender.other, 2);

    // A queue outside the scope is refused; an empty endpoint is all zeros.
    assert!(matches!(
        store.queue_summary(&f.caller, Some("elsewhere"), 10).await,
        Err(StoreError::Forbidden(_))
    ));
    let empty = fixture(store, "bob").await;
    let nothing = store.queue_summary(&empty.caller, None, 10).await.unwrap();
    assert_eq!(nothing, QueueSummary::default());
}

/// Two calls over the same held todos, in opposite orders, at once: each
/// todo is completed exactly once, and neither call fails (no deadlock).
async fn overlapping_complete_many_calls_complete_each_todo_once(
    store: &dyn Store,
    _ts: &TestStore,
) {
    let f = fixture(store, "ada").await;
    let mut ids = Vec::new();
    for i in 0..30 {
        let todo = add_todo(store, &f, &format!("noise {i}")).await;
        claim(store, &f.caller, &todo.id).await;
        ids.push(todo.id);
    }
    let reversed: Vec<String> = ids.iter().rev().cloned().collect();
    let (a, b) = tokio::join!(
        store.complete_many(&f.caller, &ids, Finish::default()),
        store.complete_many(&f.caller, &reversed, Finish::default()),
    );
    let (a, b) = (a.expect("first call"), b.expect("second call"));
    for (i, id) in ids.iter().enumerate() {
        let first = &a[i];
        let second = &b[ids.len() - 1 - i];
        assert!(
            first.is_ok() != second.is_ok(),
            "{id}: {first:?} / {second:?}"
        );
        assert_eq!(get(store, &f.caller, id).await.state, TodoState::Done);
        assert_eq!(attempts(store, &f.caller, id).await.len(), 1);
    }
}

exercise_on_every_path!(
    overlapping_complete_many_calls_complete_each_todo_once,
    complete_many_answers_per_id_and_completes_the_held_ones,
    complete_many_refuses_bad_ids_and_changes_nothing,
    complete_many_needs_the_fence_of_a_fenced_claim,
    queue_summary_counts_live_todos_by_queue_kind_source_and_sender,
);
