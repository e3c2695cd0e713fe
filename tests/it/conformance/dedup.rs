//! Dedup: `(endpoint_id, idempotency_key)` is unique among live todos only.

use switchboard::domain::todo::TodoState;
use switchboard::store::*;

use crate::common::*;
use crate::exercise_on_both_backends;
use crate::support::{Fixture, TestStore, fixture};

/// Creates the same key again and checks it hits `live`: the very same todo
/// comes back with `created: false`, and neither it nor anything else changed.
async fn assert_dedup_hit(ts: &TestStore, f: &Fixture, live: &Todo) {
    let store = &*ts.store;
    let key = live.idempotency_key.as_deref().expect("a keyed todo");
    // A later delivery: the clock moved, so any write would show in updated_at.
    advance_secs(ts, 1);
    let before = snapshot(store, &f.caller, &live.id).await;
    let count_before = count_todos(&ts.store).await;

    let again = store
        .create_todo(keyed_todo(f, "a different title", key))
        .await
        .unwrap();
    assert!(!again.created);
    assert_eq!(again.todo, before.0, "the live todo, unchanged");
    assert_eq!(snapshot(store, &f.caller, &live.id).await, before);
    assert_eq!(count_todos(&ts.store).await, count_before);
}

async fn dedup_hits_a_pending_todo(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let live = create(store, keyed_todo(&f, "t", "delivery-1")).await;
    assert_dedup_hit(ts, &f, &live).await;
}

async fn dedup_hits_a_claimed_todo(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let live = create(store, keyed_todo(&f, "t", "delivery-1")).await;
    claim(store, &f.caller, &live.id).await;
    assert_dedup_hit(ts, &f, &live).await;
}

async fn dedup_hits_a_failed_todo_waiting_for_its_retry(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let live = create(store, keyed_todo(&f, "t", "delivery-1")).await;
    claim(store, &f.caller, &live.id).await;
    let failed = store
        .fail(&f.caller, &live.id, Finish::default())
        .await
        .unwrap();
    assert!(failed.next_retry_at.is_some());
    assert_dedup_hit(ts, &f, &live).await;
}

async fn a_done_todo_frees_its_key(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let first = create(store, keyed_todo(&f, "t", "delivery-1")).await;
    claim(store, &f.caller, &first.id).await;
    store
        .complete(&f.caller, &first.id, Finish::default())
        .await
        .unwrap();

    let second = create(store, keyed_todo(&f, "t", "delivery-1")).await;
    assert_ne!(second.id, first.id);
    assert_eq!(second.state, TodoState::Pending);
    assert_eq!(
        get(store, &f.caller, &first.id).await.state,
        TodoState::Done
    );
}

async fn a_dead_letter_frees_its_key(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let first = create(
        store,
        NewTodo {
            max_attempts: Some(1),
            ..keyed_todo(&f, "t", "delivery-1")
        },
    )
    .await;
    claim(store, &f.caller, &first.id).await;
    let dead = store
        .fail(&f.caller, &first.id, Finish::default())
        .await
        .unwrap();
    assert!(dead.dead_letter);

    let second = create(store, keyed_todo(&f, "t", "delivery-1")).await;
    assert_ne!(second.id, first.id);
}

async fn todos_without_a_key_are_never_deduplicated(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let a = add_todo(store, &f, "same title").await;
    let b = add_todo(store, &f, "same title").await;
    assert_ne!(a.id, b.id);
    assert_eq!(count_todos(&ts.store).await, 2);
}

async fn the_same_key_on_two_endpoints_makes_two_todos(store: &dyn Store, ts: &TestStore) {
    let ada = fixture(store, "ada").await;
    let bob = fixture(store, "bob").await;
    let for_ada = create(store, keyed_todo(&ada, "t", "delivery-1")).await;
    let for_bob = create(store, keyed_todo(&bob, "t", "delivery-1")).await;
    assert_ne!(for_ada.id, for_bob.id);
    assert_eq!(for_bob.endpoint_id, bob.endpoint.id);

    // Each is still deduplicated in its own endpoint.
    assert_dedup_hit(ts, &ada, &for_ada).await;
    assert_dedup_hit(ts, &bob, &for_bob).await;
}

async fn retrying_a_dead_letter_whose_key_is_taken_conflicts(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let dead = create(
        store,
        NewTodo {
            max_attempts: Some(1),
            ..keyed_todo(&f, "t", "delivery-1")
        },
    )
    .await;
    claim_and_fail(store, &f.caller, &dead.id).await;
    let newer = create(store, keyed_todo(&f, "t", "delivery-1")).await;
    let before = (
        snapshot(store, &f.caller, &dead.id).await,
        snapshot(store, &f.caller, &newer.id).await,
    );

    assert!(matches!(
        store.human_retry(&f.human.id, &dead.id).await,
        Err(StoreError::Taken(Taken::IdempotencyKey))
    ));
    let after = (
        snapshot(store, &f.caller, &dead.id).await,
        snapshot(store, &f.caller, &newer.id).await,
    );
    assert_eq!(after, before);

    // Once the newer todo is done the key is free and the retry goes through.
    claim(store, &f.caller, &newer.id).await;
    store
        .complete(&f.caller, &newer.id, Finish::default())
        .await
        .unwrap();
    let retried = store.human_retry(&f.human.id, &dead.id).await.unwrap();
    assert_eq!(retried.state, TodoState::Pending);
}

async fn a_dedup_hit_records_no_intake_event(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let with_event = |title: &str| NewTodo {
        priority: 0,
        intake: Some(NewIntakeEvent {
            trust_mode: TrustMode::Operator,
            actor: format!("human:{}", f.human.id),
            webhook_id: None,
            headers: serde_json::json!({}),
            content_type: Some("application/json".into()),
            body: br#"{"n":1}"#.to_vec(),
        }),
        ..keyed_todo(&f, title, "delivery-1")
    };
    let first = create(store, with_event("t")).await;
    assert!(first.event_id.is_some());
    assert_eq!(count_intake_events(&ts.store).await, 1);

    let again = store.create_todo(with_event("t")).await.unwrap();
    assert!(!again.created);
    assert_eq!(again.todo, first);
    assert_eq!(
        count_intake_events(&ts.store).await,
        1,
        "the duplicate delivery's event is not kept"
    );
}

exercise_on_both_backends!(
    dedup_hits_a_pending_todo,
    dedup_hits_a_claimed_todo,
    dedup_hits_a_failed_todo_waiting_for_its_retry,
    a_done_todo_frees_its_key,
    a_dead_letter_frees_its_key,
    todos_without_a_key_are_never_deduplicated,
    the_same_key_on_two_endpoints_makes_two_todos,
    retrying_a_dead_letter_whose_key_is_taken_conflicts,
    a_dedup_hit_records_no_intake_event,
);
