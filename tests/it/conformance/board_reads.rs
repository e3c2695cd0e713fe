//! What the board reads and writes besides the queue's transitions (issue
//! 44): a todo deleted for good, the count a bulk action confirms with, the
//! work counts with retrying todos and the oldest pending age, the newest
//! finished attempt of each dead letter, and a form's one-time nonce.

use switchboard::domain::todo::{MAX_BULK, TodoState};
use switchboard::store::*;

use crate::common::*;
use crate::exercise_on_both_backends;
use crate::support::{TestStore, fixture};

fn operator_todo(f: &crate::support::Fixture, title: &str) -> NewTodo {
    NewTodo {
        intake: Some(NewIntakeEvent {
            trust_mode: TrustMode::Operator,
            actor: "human:test".into(),
            webhook_id: None,
            headers: serde_json::json!({}),
            content_type: None,
            body: b"{}".to_vec(),
        }),
        ..inbox_todo(f, title)
    }
}

async fn a_deleted_todo_is_gone_with_its_attempts_and_event(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = create(store, operator_todo(&f, "twice failed")).await;
    claim_and_fail(store, &f.caller, &todo.id).await;
    assert_eq!(count_attempt_rows(&ts.store, &todo.id).await, 1);
    let events = count_intake_events(&ts.store).await;
    let deleted = store
        .human_delete_todo(&f.human.id, &todo.id)
        .await
        .unwrap();
    assert_eq!(deleted.id, todo.id);
    assert_eq!(deleted.state, TodoState::Failed, "returned as it was");
    assert!(matches!(
        store.human_get_todo(&f.human.id, &todo.id).await,
        Err(StoreError::NotFound)
    ));
    assert_eq!(count_attempt_rows(&ts.store, &todo.id).await, 0);
    assert_eq!(count_intake_events(&ts.store).await, events - 1);
    assert!(matches!(
        store.human_delete_todo(&f.human.id, &todo.id).await,
        Err(StoreError::NotFound)
    ));
}

async fn a_claimed_todo_is_not_deleted_and_a_foreign_one_reads_as_missing(
    store: &dyn Store,
    _ts: &TestStore,
) {
    let f = fixture(store, "ada").await;
    let other = fixture(store, "bob").await;
    let held = add_todo(store, &f, "held").await;
    claim(store, &f.caller, &held.id).await;
    let refused = store.human_delete_todo(&f.human.id, &held.id).await;
    match refused {
        Err(StoreError::Conflict(message)) => assert!(message.contains("claimed"), "{message}"),
        other => panic!("a claimed todo: {other:?}"),
    }
    assert_eq!(
        get(store, &f.caller, &held.id).await.state,
        TodoState::Claimed
    );
    let pending = add_todo(store, &f, "mine").await;
    assert_same_as_missing(
        store.human_delete_todo(&other.human.id, &pending.id).await,
        store
            .human_delete_todo(&other.human.id, &missing_id())
            .await,
    );
    assert_eq!(
        get(store, &f.caller, &pending.id).await.state,
        TodoState::Pending
    );
    // Finished todos go too: done, cancelled, dead.
    store.human_cancel(&f.human.id, &pending.id).await.unwrap();
    store
        .human_delete_todo(&f.human.id, &pending.id)
        .await
        .unwrap();
}

async fn the_bulk_count_is_what_the_action_then_touches(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    for n in 0..3 {
        add_todo(store, &f, &format!("p{n}")).await;
    }
    let held = add_todo(store, &f, "held").await;
    claim(store, &f.caller, &held.id).await;
    let done = add_todo(store, &f, "done").await;
    claim(store, &f.caller, &done.id).await;
    store
        .complete(&f.caller, &done.id, Finish::default())
        .await
        .unwrap();
    let all = BulkTarget::Filter(TodoFilter {
        endpoint_id: Some(f.endpoint.id.clone()),
        ..TodoFilter::default()
    });
    // Cancel touches the pending and the claimed ones, not the done one.
    let count = store
        .human_bulk_count(&f.human.id, &all, false)
        .await
        .unwrap();
    assert_eq!(
        count,
        BulkCount {
            count: 4,
            more: false
        }
    );
    // Retry without a state means the failed ones: none yet.
    let count = store
        .human_bulk_count(&f.human.id, &all, true)
        .await
        .unwrap();
    assert_eq!(count.count, 0);
    let other = fixture(store, "bob").await;
    let theirs = store
        .human_bulk_count(&other.human.id, &all, false)
        .await
        .unwrap();
    assert_eq!(theirs.count, 0, "another human's todos are not counted");
    let cancelled = store.human_bulk_cancel(&f.human.id, &all).await.unwrap();
    assert_eq!(cancelled.ids.len(), 4, "the count it confirmed");
    // A state the action never applies to is refused alike.
    let done_only = BulkTarget::Filter(TodoFilter {
        state: Some(TodoState::Done),
        ..TodoFilter::default()
    });
    assert_invalid(
        store.human_bulk_count(&f.human.id, &done_only, false).await,
        "state",
    );
}

async fn the_bulk_count_stops_past_one_call(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    for n in 0..=MAX_BULK {
        add_todo(store, &f, &format!("t{n}")).await;
    }
    let count = store
        .human_bulk_count(
            &f.human.id,
            &BulkTarget::Filter(TodoFilter {
                state: Some(TodoState::Pending),
                ..TodoFilter::default()
            }),
            false,
        )
        .await
        .unwrap();
    assert_eq!(
        count,
        BulkCount {
            count: MAX_BULK as i64,
            more: true
        }
    );
}

async fn activity_counts_retrying_todos_and_the_oldest_pending(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let oldest = add_todo(store, &f, "oldest").await;
    advance_secs(ts, 5);
    add_todo(store, &f, "newer").await;
    let flaky = add_todo(store, &f, "flaky").await;
    claim_and_fail(store, &f.caller, &flaky.id).await;
    let doomed = create(store, capped_todo(&f, "doomed", 1)).await;
    claim_and_fail(store, &f.caller, &doomed.id).await;
    let mut later = inbox_todo(&f, "later");
    later.run_at = Some(ts.store.clock().now().add_secs(3600));
    let later = create(store, later).await;
    assert_eq!(later.state, TodoState::Delayed);
    let activity = store
        .endpoint_activity(std::slice::from_ref(&f.endpoint.id))
        .await
        .unwrap();
    let a = &activity[&f.endpoint.id];
    assert_eq!(
        (a.pending, a.delayed, a.retrying, a.claimed, a.dead_letters),
        (2, 1, 1, 0, 1)
    );
    assert_eq!(a.oldest_pending_at, Some(oldest.created_at));
    let other = fixture(store, "bob").await;
    let idle = store
        .endpoint_activity(std::slice::from_ref(&other.endpoint.id))
        .await
        .unwrap();
    assert_eq!(idle[&other.endpoint.id].oldest_pending_at, None);
}

async fn the_last_attempts_are_the_newest_finished_ones_of_the_humans_todos(
    store: &dyn Store,
    ts: &TestStore,
) {
    let f = fixture(store, "ada").await;
    let twice = create(store, capped_todo(&f, "twice", 2)).await;
    claim_and_fail(store, &f.caller, &twice.id).await;
    advance_secs(ts, 3600);
    store
        .unscoped_schedule_due_retries(100)
        .await
        .expect("the retry is due");
    claim_and_fail(store, &f.caller, &twice.id).await;
    let never = add_todo(store, &f, "never claimed").await;
    let ids = vec![twice.id.clone(), never.id.clone()];
    let last = store.human_last_attempts(&f.human.id, &ids).await.unwrap();
    assert_eq!(last.len(), 1);
    assert_eq!(last[&twice.id].attempt, 2);
    let other = fixture(store, "bob").await;
    assert!(
        store
            .human_last_attempts(&other.human.id, &ids)
            .await
            .unwrap()
            .is_empty(),
        "another human's todos say nothing"
    );
}

async fn a_form_nonce_is_claimed_once(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let first = store
        .claim_form_nonce(&f.human.id, "vend", "nonce-1")
        .await
        .unwrap();
    assert_eq!(first, None);
    let again = store
        .claim_form_nonce(&f.human.id, "vend", "nonce-1")
        .await
        .unwrap();
    assert_eq!(
        again,
        Some(PriorSubmission {
            form: "vend".into(),
            result: None
        })
    );
    store
        .settle_form_nonce(&f.human.id, "nonce-1", "alpha-x1y2")
        .await
        .unwrap();
    let settled = store
        .claim_form_nonce(&f.human.id, "vend", "nonce-1")
        .await
        .unwrap();
    assert_eq!(settled.unwrap().result.as_deref(), Some("alpha-x1y2"));
    // Another human replaying it learns nothing of what it made.
    let other = fixture(store, "bob").await;
    let foreign = store
        .claim_form_nonce(&other.human.id, "vend", "nonce-1")
        .await
        .unwrap();
    assert_eq!(foreign.unwrap().result, None);
}

exercise_on_both_backends!(
    a_deleted_todo_is_gone_with_its_attempts_and_event,
    a_claimed_todo_is_not_deleted_and_a_foreign_one_reads_as_missing,
    the_bulk_count_is_what_the_action_then_touches,
    the_bulk_count_stops_past_one_call,
    activity_counts_retrying_todos_and_the_oldest_pending,
    the_last_attempts_are_the_newest_finished_ones_of_the_humans_todos,
    a_form_nonce_is_claimed_once,
);
