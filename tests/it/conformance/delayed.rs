//! Delayed todos (`02-queue.md`, "Priority, delay, schedules and
//! admission"): a todo with a `run_at` to come is `delayed` — not claimable,
//! its key live, cancellable — until one guarded statement makes it pending
//! at `run_at`, once however many callers race for it.

use std::collections::HashSet;
use std::sync::Arc;

use switchboard::clock::Clock;
use switchboard::domain::Timestamp;
use switchboard::domain::todo::TodoState;
use switchboard::store::*;
use tokio::sync::Barrier;

use crate::common::*;
use crate::exercise_on_both_backends;
use crate::support::{Fixture, TestStore, fixture};

async fn delayed(store: &dyn Store, f: &Fixture, title: &str, run_at: Timestamp) -> Todo {
    let mut new = NewTodo::new(&f.endpoint.id, "inbox", title);
    new.run_at = Some(run_at);
    create(store, new).await
}

async fn a_delayed_todo_waits_then_becomes_pending_once(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let now = ts.clock.now();
    let later = delayed(store, &f, "later", now.add_secs(60)).await;
    assert_eq!(later.state, TodoState::Delayed);
    assert_eq!(later.run_at, Some(now.add_secs(60)));
    let past = delayed(store, &f, "already due", now.add_secs(-5)).await;
    assert_eq!(
        past.state,
        TodoState::Pending,
        "a run_at already past is now"
    );

    assert_eq!(
        claim_until_empty(store, &f.caller, None).await.len(),
        1,
        "only the due one"
    );
    assert_conflict(
        store
            .claim(&f.caller, &later.id, ClaimOptions::default())
            .await,
    );
    assert!(
        store
            .unscoped_promote_due_delayed(10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.unscoped_next_delayed_at().await.unwrap(),
        Some(now.add_secs(60))
    );

    advance_secs(ts, 60);
    let moved = store.unscoped_promote_due_delayed(10).await.unwrap();
    assert_eq!(
        moved.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        [later.id.as_str()]
    );
    assert!(
        store
            .unscoped_promote_due_delayed(10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.unscoped_next_delayed_at().await.unwrap(), None);
    let claimed = store
        .claim_next(&f.caller, None, ClaimOptions::default())
        .await
        .unwrap()
        .expect("pending now");
    assert_eq!(claimed.todo.id, later.id);
    assert_eq!(
        claimed.todo.run_at,
        Some(now.add_secs(60)),
        "kept for the record"
    );
}

async fn racing_promoters_move_each_todo_once(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let now = ts.clock.now();
    let mut ids = HashSet::new();
    for n in 0..20 {
        ids.insert(
            delayed(store, &f, &format!("t{n}"), now.add_secs(30))
                .await
                .id,
        );
    }
    advance_secs(ts, 30);
    let start = Arc::new(Barrier::new(8));
    let racers: Vec<_> = (0..8)
        .map(|_| {
            let (store, start) = (ts.store.clone(), start.clone());
            tokio::spawn(async move {
                start.wait().await;
                store.unscoped_promote_due_delayed(5).await.unwrap()
            })
        })
        .collect();
    let mut moved = Vec::new();
    for racer in racers {
        moved.extend(racer.await.unwrap().into_iter().map(|t| t.id));
    }
    while moved.len() < ids.len() {
        let more = store.unscoped_promote_due_delayed(5).await.unwrap();
        assert!(!more.is_empty(), "left behind: {moved:?}");
        moved.extend(more.into_iter().map(|t| t.id));
    }
    let distinct: HashSet<String> = moved.iter().cloned().collect();
    assert_eq!(moved.len(), ids.len(), "none moved twice");
    assert_eq!(distinct, ids);
}

async fn a_delayed_todo_holds_its_key_and_can_be_cancelled(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let mut keyed = keyed_todo(&f, "once", "k-1");
    keyed.run_at = Some(ts.clock.now().add_secs(600));
    let first = store.create_todo(keyed.clone()).await.unwrap();
    assert!(first.created);
    let again = store.create_todo(keyed).await.unwrap();
    assert!(!again.created, "the key is live while delayed");
    assert_eq!(again.todo.id, first.todo.id);

    let cancelled = store
        .human_cancel(&f.human.id, &first.todo.id)
        .await
        .unwrap();
    assert_eq!(cancelled.state, TodoState::Cancelled);
    advance_secs(ts, 600);
    assert!(
        store
            .unscoped_promote_due_delayed(10)
            .await
            .unwrap()
            .is_empty()
    );
}

exercise_on_both_backends!(
    a_delayed_todo_waits_then_becomes_pending_once,
    racing_promoters_move_each_todo_once,
    a_delayed_todo_holds_its_key_and_can_be_cancelled,
);
