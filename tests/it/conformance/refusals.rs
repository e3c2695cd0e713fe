//! "Anything else is refused": a transition the lifecycle table does not
//! allow answers `conflict` in the caller's own scope and `not_found` outside
//! it (indistinguishable from a missing id), and changes nothing.

use switchboard::store::*;

use crate::common::*;
use crate::exercise_on_every_path;
use crate::support::{Fixture, TestStore, endpoint_for, fixture, vend};

async fn holder_verbs_on_a_pending_todo_conflict(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    assert_holder_verbs_conflict(store, &f.caller, &todo.id, None).await;
}

async fn holder_verbs_on_a_done_todo_conflict(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    claim(store, &f.caller, &todo.id).await;
    store
        .complete(&f.caller, &todo.id, Finish::default())
        .await
        .unwrap();
    assert_holder_verbs_conflict(store, &f.caller, &todo.id, None).await;
}

async fn holder_verbs_on_a_failed_todo_conflict(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let waiting = add_todo(store, &f, "retry window open").await;
    let dead = create(store, capped_todo(&f, "dead letter", 1)).await;
    for id in [&waiting.id, &dead.id] {
        claim(store, &f.caller, id).await;
        store.fail(&f.caller, id, Finish::default()).await.unwrap();
        assert_holder_verbs_conflict(store, &f.caller, id, None).await;
    }
}

/// Everyone who is not the todo's endpoint: another human's endpoint, another
/// endpoint of the same human, and another endpoint of the same agent (which
/// even shares the lease owner `agent:<id>`).
async fn foreign_callers(store: &dyn Store, f: &Fixture) -> Vec<Caller> {
    let other_human = fixture(store, "eve").await.caller;
    let same_human = endpoint_for(store, f.human.clone(), "helper", &["inbox"])
        .await
        .caller;
    let same_agent = vend(store, &f.agent, &["inbox", "reviews"]).await.caller();
    assert_eq!(same_agent.owner(), f.caller.owner());
    vec![other_human, same_human, same_agent]
}

async fn every_verb_on_a_foreign_todo_is_not_found(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let pending = add_todo(store, &f, "pending").await;
    let held = add_todo(store, &f, "held").await;
    claim(store, &f.caller, &held.id).await;
    let before = (
        snapshot(store, &f.caller, &pending.id).await,
        snapshot(store, &f.caller, &held.id).await,
    );

    for foreigner in foreign_callers(store, &f).await {
        let missing = missing_id();
        for verb in HolderVerb::ALL {
            assert_same_as_missing(
                verb.call(store, &foreigner, &held.id, None).await,
                verb.call(store, &foreigner, &missing, None).await,
            );
        }
        assert_same_as_missing(
            store
                .claim(&foreigner, &pending.id, ClaimOptions::default())
                .await,
            store
                .claim(&foreigner, &missing, ClaimOptions::default())
                .await,
        );
        assert_same_as_missing(
            store.get_todo(&foreigner, &held.id).await,
            store.get_todo(&foreigner, &missing).await,
        );
        assert_same_as_missing(
            store.list_attempts(&foreigner, &held.id, 10).await,
            store.list_attempts(&foreigner, &missing, 10).await,
        );
        let none = store
            .claim_next(&foreigner, None, ClaimOptions::default())
            .await
            .unwrap();
        assert!(none.is_none(), "claim_next never crosses endpoints");
    }

    let after = (
        snapshot(store, &f.caller, &pending.id).await,
        snapshot(store, &f.caller, &held.id).await,
    );
    assert_eq!(after, before, "foreign calls changed a todo");
}

async fn claim_of_a_live_lease_conflicts(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    claim_with_ttl(store, &f.caller, &todo.id, 60).await;
    // One millisecond before the lease lapses it is still live.
    ts.clock
        .advance(secs(60) - std::time::Duration::from_millis(1));
    let before = snapshot(store, &f.caller, &todo.id).await;

    assert_conflict(
        store
            .claim(&f.caller, &todo.id, ClaimOptions::default())
            .await,
    );
    let next = store
        .claim_next(&f.caller, None, ClaimOptions::default())
        .await
        .unwrap();
    assert!(next.is_none(), "a live lease is not claimable: {next:?}");
    assert_eq!(snapshot(store, &f.caller, &todo.id).await, before);
}

async fn claim_within_the_retry_window_conflicts(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    claim_and_fail(store, &f.caller, &todo.id).await;
    advance_secs(ts, 29);
    let before = snapshot(store, &f.caller, &todo.id).await;

    assert_conflict(
        store
            .claim(&f.caller, &todo.id, ClaimOptions::default())
            .await,
    );
    let next = store
        .claim_next(&f.caller, None, ClaimOptions::default())
        .await
        .unwrap();
    assert!(next.is_none(), "an open retry window hides the todo");
    assert_eq!(snapshot(store, &f.caller, &todo.id).await, before);
}

async fn claim_of_a_dead_letter_conflicts(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = create(store, capped_todo(&f, "t", 1)).await;
    claim_and_fail(store, &f.caller, &todo.id).await;
    advance_secs(ts, 86_400);
    let before = snapshot(store, &f.caller, &todo.id).await;

    assert_conflict(
        store
            .claim(&f.caller, &todo.id, ClaimOptions::default())
            .await,
    );
    let next = store
        .claim_next(&f.caller, None, ClaimOptions::default())
        .await
        .unwrap();
    assert!(next.is_none(), "a dead letter is never claimable");
    assert_eq!(snapshot(store, &f.caller, &todo.id).await, before);
}

async fn claim_of_a_done_todo_conflicts(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    claim(store, &f.caller, &todo.id).await;
    store
        .complete(&f.caller, &todo.id, Finish::default())
        .await
        .unwrap();
    let before = snapshot(store, &f.caller, &todo.id).await;

    assert_conflict(
        store
            .claim(&f.caller, &todo.id, ClaimOptions::default())
            .await,
    );
    assert_eq!(snapshot(store, &f.caller, &todo.id).await, before);
}

async fn human_verbs_in_the_wrong_state_conflict(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let pending = add_todo(store, &f, "pending").await;
    let claimed = add_todo(store, &f, "claimed").await;
    claim(store, &f.caller, &claimed.id).await;
    let done = add_todo(store, &f, "done").await;
    claim(store, &f.caller, &done.id).await;
    store
        .complete(&f.caller, &done.id, Finish::default())
        .await
        .unwrap();

    for todo in [&pending, &claimed, &done] {
        let before = snapshot(store, &f.caller, &todo.id).await;
        assert_conflict(store.human_retry(&f.human.id, &todo.id).await);
        assert_eq!(snapshot(store, &f.caller, &todo.id).await, before);
    }
    for todo in [&pending, &done] {
        let before = snapshot(store, &f.caller, &todo.id).await;
        assert_conflict(store.human_release(&f.human.id, &todo.id).await);
        assert_eq!(snapshot(store, &f.caller, &todo.id).await, before);
    }
}

/// A vend the store refuses creates nothing: not the endpoint, and not the
/// agent it would have created on the way.
async fn a_refused_vend_creates_no_agent(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let template = crate::support::new_endpoint(&f.agent, &["inbox"]);
    let bad: Vec<(&str, NewEndpoint)> = vec![
        (
            "queues",
            NewEndpoint {
                queues: vec![],
                ..template.clone()
            },
        ),
        (
            "queues",
            NewEndpoint {
                queues: (0..5000).map(|i| format!("q{i}")).collect(),
                ..template.clone()
            },
        ),
        (
            "verbs",
            NewEndpoint {
                verbs: vec!["rm".into()],
                ..template.clone()
            },
        ),
        (
            "default_lease_ttl_seconds",
            NewEndpoint {
                default_lease_ttl_seconds: Some(59),
                ..template.clone()
            },
        ),
        (
            "expires_at",
            NewEndpoint {
                expires_at: Some(store.clock().now()),
                ..template.clone()
            },
        ),
    ];
    for (i, (field, new)) in bad.into_iter().enumerate() {
        let name = format!("fresh{i}");
        match store
            .vend_endpoint(&f.human.id, &name, AgentKind::Session, new)
            .await
        {
            Err(StoreError::InvalidArgument(invalid)) => assert_eq!(invalid.field, field),
            other => panic!("{field}: {other:?}"),
        }
        assert!(
            matches!(
                store.get_agent(&f.human.id, &name).await,
                Err(StoreError::NotFound)
            ),
            "{field}: the refused vend created the agent {name}"
        );
    }
}

exercise_on_every_path!(
    a_refused_vend_creates_no_agent,
    holder_verbs_on_a_pending_todo_conflict,
    holder_verbs_on_a_done_todo_conflict,
    holder_verbs_on_a_failed_todo_conflict,
    every_verb_on_a_foreign_todo_is_not_found,
    claim_of_a_live_lease_conflicts,
    claim_within_the_retry_window_conflicts,
    claim_of_a_dead_letter_conflicts,
    claim_of_a_done_todo_conflicts,
    human_verbs_in_the_wrong_state_conflict,
);
