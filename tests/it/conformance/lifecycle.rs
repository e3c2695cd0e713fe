//! Every allowed transition of the lifecycle table in `02-queue.md`, with the
//! effect the table promises.

use serde_json::json;
use switchboard::clock::Clock;
use switchboard::domain::todo::{Disposition, Outcome, TodoState};
use switchboard::store::*;

use crate::common::*;
use crate::exercise_on_every_path;
use crate::support::{TestStore, fixture};

async fn create_makes_a_pending_todo(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "Review PR 12").await;
    assert!(todo.id.starts_with("td_"), "{}", todo.id);
    assert_eq!(todo.endpoint_id, f.endpoint.id);
    assert_eq!(todo.queue, "inbox");
    assert_eq!(todo.state, TodoState::Pending);
    assert!(!todo.dead_letter);
    assert_eq!((todo.attempt, todo.attempts_total), (0, 0));
    assert_eq!(todo.max_attempts, 5, "the default cap");
    assert_eq!(todo.owner, None);
    assert_eq!(todo.lease_expires_at, None);
    assert_eq!(todo.created_at, ts.clock.now());
    assert_eq!(get(store, &f.caller, &todo.id).await, todo);
}

async fn claim_sets_owner_lease_and_attempt(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    advance_secs(ts, 5);

    let claimed = claim(store, &f.caller, &todo.id).await;
    let now = ts.clock.now();
    assert_eq!(claimed.todo.state, TodoState::Claimed);
    assert_eq!(claimed.todo.owner, Some(f.caller.owner()));
    assert_eq!(claimed.todo.lease_expires_at, Some(now.add_secs(300)));
    assert_eq!(claimed.todo.claimed_at, Some(now));
    assert_eq!((claimed.todo.attempt, claimed.todo.attempts_total), (1, 1));
    assert_eq!(claimed.attempt_seq, 1);
    assert!(claimed.prior_attempts.is_empty());
    assert_eq!(claimed.lease_token, None, "unfenced claims get no token");
    assert!(!claimed.todo.fenced);
    assert_eq!(get(store, &f.caller, &todo.id).await, claimed.todo);
}

async fn claim_next_is_fifo_within_the_granted_queues(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let mut expected = Vec::new();
    for (queue, title) in [
        ("inbox", "first"),
        ("reviews", "second"),
        ("inbox", "third"),
    ] {
        let todo = create(store, NewTodo::new(&f.endpoint.id, queue, title)).await;
        expected.push(todo.id);
        // Distinct created_at values make the FIFO order unambiguous.
        ts.clock.advance(std::time::Duration::from_millis(1));
    }

    let only_reviews = store
        .claim_next(&f.caller, Some("reviews"), ClaimOptions::default())
        .await
        .unwrap()
        .expect("a reviews todo");
    assert_eq!(only_reviews.todo.id, expected[1], "the named queue only");

    for want in [&expected[0], &expected[2]] {
        let next = store
            .claim_next(&f.caller, None, ClaimOptions::default())
            .await
            .unwrap()
            .expect("a todo");
        assert_eq!(&next.todo.id, want, "oldest first");
    }
    let none = store
        .claim_next(&f.caller, None, ClaimOptions::default())
        .await
        .unwrap();
    assert!(none.is_none(), "everything is claimed: {none:?}");
}

async fn heartbeat_extends_the_lease_without_consuming_an_attempt(
    store: &dyn Store,
    ts: &TestStore,
) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    claim(store, &f.caller, &todo.id).await;
    advance_secs(ts, 200);

    let beat = store
        .heartbeat(&f.caller, &todo.id, HeartbeatOptions::default())
        .await
        .unwrap();
    let now = ts.clock.now();
    assert_eq!(beat.state, TodoState::Claimed);
    assert_eq!(beat.lease_expires_at, Some(now.add_secs(300)));
    assert_eq!((beat.attempt, beat.attempts_total), (1, 1));
    assert_eq!(beat.owner, Some(f.caller.owner()));

    let open = last_attempt(store, &f.caller, &todo.id).await;
    assert_eq!(open.last_heartbeat_at, Some(now));
    assert_eq!(open.ended_at, None, "a heartbeat keeps the attempt open");
    assert_eq!(count_attempt_rows(&ts.store, &todo.id).await, 1);
}

async fn complete_stores_the_result_and_ends_the_lease(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    claim(store, &f.caller, &todo.id).await;
    advance_secs(ts, 10);

    let done = store
        .complete(
            &f.caller,
            &todo.id,
            Finish {
                result: Some(json!({"merged": true})),
                ..Finish::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(done.state, TodoState::Done);
    assert_eq!(done.result, Some(json!({"merged": true})));
    assert_eq!(done.completed_at, Some(ts.clock.now()));
    assert_eq!(done.lease_expires_at, None);
    assert!(!done.dead_letter);
    assert_eq!(get(store, &f.caller, &todo.id).await, done);
}

async fn fail_below_the_cap_schedules_a_retry(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    claim(store, &f.caller, &todo.id).await;
    advance_secs(ts, 10);

    let failed = store
        .fail(
            &f.caller,
            &todo.id,
            Finish {
                result: Some(json!({"error": "flaky"})),
                ..Finish::default()
            },
        )
        .await
        .unwrap();
    let now = ts.clock.now();
    assert_eq!(failed.state, TodoState::Failed);
    assert!(!failed.dead_letter);
    assert_eq!(failed.next_retry_at, Some(now.add_secs(30)), "backoff(1)");
    assert_eq!(failed.owner, Some(f.caller.owner()), "owner is kept");
    assert_eq!(failed.lease_expires_at, None, "lease is cleared");
    assert_eq!(failed.result, Some(json!({"error": "flaky"})));
    assert_eq!(failed.completed_at, None, "a retry is not terminal");
    assert_eq!(get(store, &f.caller, &todo.id).await, failed);
}

async fn fail_at_the_cap_dead_letters(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = create(store, capped_todo(&f, "t", 1)).await;
    claim(store, &f.caller, &todo.id).await;

    let failed = store
        .fail(&f.caller, &todo.id, Finish::default())
        .await
        .unwrap();
    assert_eq!(failed.state, TodoState::Failed);
    assert!(failed.dead_letter);
    assert_eq!(failed.next_retry_at, None);
    assert_eq!(failed.lease_expires_at, None);
    assert_eq!(failed.completed_at, Some(ts.clock.now()));
    assert_eq!(get(store, &f.caller, &todo.id).await, failed);
}

async fn release_requeues_without_backoff(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    claim(store, &f.caller, &todo.id).await;

    let released = store
        .release(&f.caller, &todo.id, ReleaseOptions::default())
        .await
        .unwrap();
    assert_eq!(released.state, TodoState::Pending);
    assert_eq!(released.owner, None);
    assert_eq!(released.lease_expires_at, None);
    assert_eq!(released.next_retry_at, None, "no backoff");
    assert_eq!(released.attempt, 1, "attempt unchanged");

    // Claimable again at once.
    let again = claim(store, &f.caller, &todo.id).await;
    assert_eq!(again.todo.attempt, 2);
}

async fn reaper_requeues_a_lapsed_lease_below_the_cap(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    claim_with_ttl(store, &f.caller, &todo.id, 60).await;

    advance_secs(ts, 59);
    let early = store.unscoped_reap_lapsed_leases(100).await.unwrap();
    assert!(early.requeued.is_empty() && early.dead_lettered.is_empty());
    assert_eq!(
        get(store, &f.caller, &todo.id).await.state,
        TodoState::Claimed
    );

    advance_secs(ts, 2);
    let report = store.unscoped_reap_lapsed_leases(100).await.unwrap();
    assert_eq!(report.requeued.len(), 1);
    assert_eq!(report.requeued[0].id, todo.id);
    assert!(report.dead_lettered.is_empty());

    let reaped = get(store, &f.caller, &todo.id).await;
    assert_eq!(reaped.state, TodoState::Pending);
    assert_eq!(reaped.owner, None);
    assert_eq!(reaped.lease_expires_at, None);
    assert_eq!(reaped.attempt, 1);
    let closed = last_attempt(store, &f.caller, &todo.id).await;
    assert_closed_as(&closed, Outcome::Reaped, Disposition::Requeued);
}

async fn reaper_dead_letters_a_lapsed_lease_at_the_cap(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = create(store, capped_todo(&f, "t", 1)).await;
    claim_with_ttl(store, &f.caller, &todo.id, 60).await;
    advance_secs(ts, 61);

    let report = store.unscoped_reap_lapsed_leases(100).await.unwrap();
    assert!(report.requeued.is_empty());
    assert_eq!(report.dead_lettered.len(), 1);
    assert_eq!(report.dead_lettered[0].id, todo.id);

    let dead = get(store, &f.caller, &todo.id).await;
    assert_eq!(dead.state, TodoState::Failed);
    assert!(dead.dead_letter);
    assert_eq!(dead.next_retry_at, None);
    assert_eq!(dead.completed_at, Some(ts.clock.now()));
    let closed = last_attempt(store, &f.caller, &todo.id).await;
    assert_closed_as(&closed, Outcome::Reaped, Disposition::DeadLettered);
}

async fn retry_scheduler_requeues_an_elapsed_window(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    claim_and_fail(store, &f.caller, &todo.id).await;

    advance_secs(ts, 29);
    let early = store.unscoped_schedule_due_retries(100).await.unwrap();
    assert!(early.is_empty(), "the window is still open: {early:?}");
    assert_eq!(
        get(store, &f.caller, &todo.id).await.state,
        TodoState::Failed
    );

    advance_secs(ts, 1);
    let due = store.unscoped_schedule_due_retries(100).await.unwrap();
    assert_eq!(
        due,
        vec![TodoRef {
            id: todo.id.clone(),
            endpoint_id: f.endpoint.id.clone(),
            queue: "inbox".into(),
        }]
    );
    let requeued = get(store, &f.caller, &todo.id).await;
    assert_eq!(requeued.state, TodoState::Pending);
    assert_eq!(requeued.owner, None);
    assert_eq!(requeued.lease_expires_at, None);
    assert_eq!(requeued.next_retry_at, None);
    assert_eq!(requeued.attempt, 1, "the scheduler does not reset attempts");
}

async fn human_retry_resets_a_failed_todo(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    claim(store, &f.caller, &todo.id).await;
    let failed = store
        .fail(
            &f.caller,
            &todo.id,
            Finish {
                result: Some(json!({"error": "x"})),
                ..Finish::default()
            },
        )
        .await
        .unwrap();
    assert!(failed.next_retry_at.is_some());

    let retried = store.human_retry(&f.human.id, &todo.id).await.unwrap();
    assert_eq!(retried.state, TodoState::Pending);
    assert_eq!(retried.attempt, 0);
    assert_eq!(retried.attempts_total, 1, "lifetime claims are never reset");
    assert_eq!(retried.result, None);
    assert_eq!(retried.next_retry_at, None);
    assert_eq!(get(store, &f.caller, &todo.id).await, retried);
}

async fn human_retry_revives_a_dead_letter(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = create(store, capped_todo(&f, "t", 1)).await;
    claim(store, &f.caller, &todo.id).await;
    let dead = store
        .fail(
            &f.caller,
            &todo.id,
            Finish {
                result: Some(json!({"error": "x"})),
                ..Finish::default()
            },
        )
        .await
        .unwrap();
    assert!(dead.dead_letter);

    let retried = store.human_retry(&f.human.id, &todo.id).await.unwrap();
    assert_eq!(retried.state, TodoState::Pending);
    assert!(!retried.dead_letter);
    assert_eq!(retried.attempt, 0);
    assert_eq!(retried.result, None);
    assert_eq!(retried.next_retry_at, None);
    assert_eq!(retried.completed_at, None);

    // attempt = 0 gives the todo a full set of attempts again.
    let again = claim(store, &f.caller, &todo.id).await;
    assert_eq!((again.todo.attempt, again.todo.attempts_total), (1, 2));
}

async fn human_release_requeues_a_claimed_todo(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    claim(store, &f.caller, &todo.id).await;

    let released = store.human_release(&f.human.id, &todo.id).await.unwrap();
    assert_eq!(released.state, TodoState::Pending);
    assert_eq!(released.owner, None);
    assert_eq!(released.lease_expires_at, None);
    assert_eq!(released.attempt, 1);
    let closed = last_attempt(store, &f.caller, &todo.id).await;
    assert_closed_as(&closed, Outcome::Released, Disposition::Requeued);
}

async fn human_verbs_on_a_foreign_todo_are_not_found(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let stranger = store.create_human("eve").await.unwrap();
    let failed = create(store, capped_todo(&f, "failed", 1)).await;
    claim_and_fail(store, &f.caller, &failed.id).await;
    let claimed = add_todo(store, &f, "claimed").await;
    claim(store, &f.caller, &claimed.id).await;
    let before = (
        snapshot(store, &f.caller, &failed.id).await,
        snapshot(store, &f.caller, &claimed.id).await,
    );

    assert_same_as_missing(
        store.human_retry(&stranger.id, &failed.id).await,
        store.human_retry(&stranger.id, &missing_id()).await,
    );
    assert_same_as_missing(
        store.human_release(&stranger.id, &claimed.id).await,
        store.human_release(&stranger.id, &missing_id()).await,
    );
    // The owner's own missing ids answer the same.
    assert_same_as_missing(
        store.human_retry(&stranger.id, &failed.id).await,
        store.human_retry(&f.human.id, &missing_id()).await,
    );
    let after = (
        snapshot(store, &f.caller, &failed.id).await,
        snapshot(store, &f.caller, &claimed.id).await,
    );
    assert_eq!(after, before);
}

/// An agent's listing by state and queue, newest first: each live state
/// reads its own index on SQLite, so every combination is checked.
async fn an_agents_listing_filters_by_state_and_queue(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let mut made = Vec::new();
    for queue in ["inbox", "reviews", "inbox", "reviews"] {
        made.push(
            create(store, NewTodo::new(&f.endpoint.id, queue, queue))
                .await
                .id,
        );
        advance_secs(ts, 1);
    }
    let [done, reviews_pending, inbox_pending, claimed] = made.clone().try_into().unwrap();
    claim(store, &f.caller, &done).await;
    store
        .complete(&f.caller, &done, Finish::default())
        .await
        .unwrap();
    claim(store, &f.caller, &claimed).await;

    let caller = &f.caller;
    let listed = |queue: Option<&'static str>, state: Option<TodoState>| async move {
        store
            .list_todos(caller, queue, state, 50)
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.id)
            .collect::<Vec<_>>()
    };
    let pending = Some(TodoState::Pending);
    let held = Some(TodoState::Claimed);
    let (inbox_pending, reviews_pending) = (inbox_pending.as_str(), reviews_pending.as_str());
    let (claimed, done) = (claimed.as_str(), done.as_str());
    assert_eq!(
        listed(None, pending).await,
        [inbox_pending, reviews_pending]
    );
    assert_eq!(listed(Some("inbox"), pending).await, [inbox_pending]);
    assert_eq!(listed(Some("reviews"), pending).await, [reviews_pending]);
    assert_eq!(listed(None, held).await, [claimed]);
    assert_eq!(listed(Some("reviews"), held).await, [claimed]);
    assert!(listed(Some("inbox"), held).await.is_empty());
    assert_eq!(listed(None, Some(TodoState::Done)).await, [done]);
    made.reverse();
    assert_eq!(listed(None, None).await, made);
}

exercise_on_every_path!(
    create_makes_a_pending_todo,
    an_agents_listing_filters_by_state_and_queue,
    claim_sets_owner_lease_and_attempt,
    claim_next_is_fifo_within_the_granted_queues,
    heartbeat_extends_the_lease_without_consuming_an_attempt,
    complete_stores_the_result_and_ends_the_lease,
    fail_below_the_cap_schedules_a_retry,
    fail_at_the_cap_dead_letters,
    release_requeues_without_backoff,
    reaper_requeues_a_lapsed_lease_below_the_cap,
    reaper_dead_letters_a_lapsed_lease_at_the_cap,
    retry_scheduler_requeues_an_elapsed_window,
    human_retry_resets_a_failed_todo,
    human_retry_revives_a_dead_letter,
    human_release_requeues_a_claimed_todo,
    human_verbs_on_a_foreign_todo_are_not_found,
);
