//! Crash recovery without the reaper: a claim takes over a lapsed lease
//! directly, below the attempt cap; at the cap only the reaper acts.

use switchboard::clock::Clock;
use switchboard::domain::todo::{Disposition, Outcome, TodoState};
use switchboard::store::*;

use crate::common::*;
use crate::exercise_on_every_path;
use crate::support::{TestStore, fixture};

/// Checks the state right after a takeover: a fresh lease for `caller`, one
/// more attempt, and the vanished holder's attempt closed as `lease_expired`.
async fn assert_taken_over(ts: &TestStore, caller: &Caller, claimed: &Claimed, attempt: i64) {
    let store = &*ts.store;
    let now = ts.clock.now();
    assert_eq!(claimed.todo.state, TodoState::Claimed);
    assert_eq!(claimed.todo.owner, Some(caller.owner()));
    assert_eq!(claimed.todo.lease_expires_at, Some(now.add_secs(300)));
    assert_eq!(claimed.todo.attempt, attempt);
    assert_eq!(claimed.todo.attempts_total, attempt);

    let history = attempts(store, caller, &claimed.todo.id).await;
    assert_eq!(history.len(), 2);
    assert_eq!(history[0].seq, claimed.attempt_seq);
    assert_eq!(history[0].ended_at, None, "the new attempt is open");
    assert_closed_as(&history[1], Outcome::LeaseExpired, Disposition::Requeued);
    assert_eq!(history[1].ended_at, Some(now));
    assert_eq!(
        claimed.prior_attempts,
        vec![history[1].clone()],
        "the new holder sees how the last attempt ended"
    );
    assert_eq!(count_open_attempts(&ts.store, &claimed.todo.id).await, 1);
}

async fn claim_next_takes_over_a_lapsed_lease(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    claim_with_ttl(store, &f.caller, &todo.id, 60).await;
    advance_secs(ts, 60);

    let claimed = store
        .claim_next(&f.caller, None, ClaimOptions::default())
        .await
        .unwrap()
        .expect("the lapsed todo is claimable");
    assert_eq!(claimed.todo.id, todo.id);
    assert_taken_over(ts, &f.caller, &claimed, 2).await;
}

async fn claim_by_id_takes_over_a_lapsed_lease(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    claim_with_ttl(store, &f.caller, &todo.id, 60).await;
    advance_secs(ts, 61);

    let claimed = claim(store, &f.caller, &todo.id).await;
    assert_taken_over(ts, &f.caller, &claimed, 2).await;
}

async fn another_session_of_the_endpoint_takes_over(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    claim_with_ttl(store, &f.caller, &todo.id, 60).await;
    advance_secs(ts, 120);

    // A second session builds its caller from the stored endpoint, as a
    // restarted server would.
    let session = store
        .unscoped_get_endpoint(&f.endpoint.id)
        .await
        .unwrap()
        .caller();
    let claimed = store
        .claim_next(&session, Some("inbox"), ClaimOptions::default())
        .await
        .unwrap()
        .expect("the lapsed todo is claimable");
    assert_eq!(claimed.todo.id, todo.id);
    assert_taken_over(ts, &session, &claimed, 2).await;
}

async fn a_live_lease_is_not_taken_over(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    claim_with_ttl(store, &f.caller, &todo.id, 60).await;
    advance_secs(ts, 59);
    let before = snapshot(store, &f.caller, &todo.id).await;

    let next = store
        .claim_next(&f.caller, None, ClaimOptions::default())
        .await
        .unwrap();
    assert!(next.is_none(), "{next:?}");
    assert_eq!(snapshot(store, &f.caller, &todo.id).await, before);
}

async fn a_lapsed_lease_at_the_cap_is_left_to_the_reaper(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = create(store, capped_todo(&f, "t", 1)).await;
    claim_with_ttl(store, &f.caller, &todo.id, 60).await;
    advance_secs(ts, 61);
    let before = snapshot(store, &f.caller, &todo.id).await;

    let next = store
        .claim_next(&f.caller, None, ClaimOptions::default())
        .await
        .unwrap();
    assert!(next.is_none(), "no takeover at the cap: {next:?}");
    assert_conflict(
        store
            .claim(&f.caller, &todo.id, ClaimOptions::default())
            .await,
    );
    assert_eq!(snapshot(store, &f.caller, &todo.id).await, before);

    let report = store.unscoped_reap_lapsed_leases(10).await.unwrap();
    assert_eq!(report.dead_lettered.len(), 1);
    assert!(get(store, &f.caller, &todo.id).await.dead_letter);
}

async fn a_failed_todo_is_claimable_once_its_window_elapses(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    claim_and_fail(store, &f.caller, &todo.id).await;
    advance_secs(ts, 30);

    let claimed = store
        .claim_next(&f.caller, None, ClaimOptions::default())
        .await
        .unwrap()
        .expect("the window elapsed");
    assert_eq!(claimed.todo.id, todo.id);
    assert_eq!(claimed.todo.state, TodoState::Claimed);
    assert_eq!(claimed.todo.attempt, 2);
    assert_eq!(claimed.todo.next_retry_at, None);
    let history = attempts(store, &f.caller, &todo.id).await;
    assert_eq!(history.len(), 2);
    assert_closed_as(&history[1], Outcome::Failed, Disposition::RetryScheduled);
}

/// A takeover takes the oldest candidate, whichever kind: lapsed leases and
/// elapsed retry windows are looked up apart (SQLite reads each from its
/// own index) and merged by age; then the queue is empty.
async fn a_takeover_takes_the_oldest_lapsed_lease_or_elapsed_retry(
    store: &dyn Store,
    ts: &TestStore,
) {
    let f = fixture(store, "ada").await;
    let oldest = add_todo(store, &f, "lapsed first").await;
    advance_secs(ts, 1);
    let middle = add_todo(store, &f, "retry second").await;
    advance_secs(ts, 1);
    let newest = add_todo(store, &f, "lapsed third").await;
    claim_with_ttl(store, &f.caller, &oldest.id, 60).await;
    claim_and_fail(store, &f.caller, &middle.id).await;
    claim_with_ttl(store, &f.caller, &newest.id, 60).await;
    advance_secs(ts, 61);

    let taken = claim_until_empty(store, &f.caller, None).await;
    let ids: Vec<_> = taken.iter().map(|t| t.id.clone()).collect();
    assert_eq!(ids, [oldest.id, middle.id, newest.id]);
    assert!(taken.iter().all(|t| t.attempt == 2), "{taken:#?}");
}

/// A claim on a named queue takes over only that queue's candidates, of
/// either kind.
async fn a_takeover_on_a_named_queue_stays_in_it(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let elsewhere = add_todo(store, &f, "inbox, lapsed").await;
    let lapsed = create(
        store,
        NewTodo::new(&f.endpoint.id, "reviews", "reviews, lapsed"),
    )
    .await;
    advance_secs(ts, 1);
    let retry = create(
        store,
        NewTodo::new(&f.endpoint.id, "reviews", "reviews, retry"),
    )
    .await;
    claim_with_ttl(store, &f.caller, &elsewhere.id, 60).await;
    claim_with_ttl(store, &f.caller, &lapsed.id, 60).await;
    claim_and_fail(store, &f.caller, &retry.id).await;
    advance_secs(ts, 61);

    let taken = claim_until_empty(store, &f.caller, Some("reviews")).await;
    let ids: Vec<_> = taken.iter().map(|t| t.id.clone()).collect();
    assert_eq!(ids, [lapsed.id, retry.id]);
    assert_eq!(get(store, &f.caller, &elsewhere.id).await.attempt, 1);
}

exercise_on_every_path!(
    claim_next_takes_over_a_lapsed_lease,
    claim_by_id_takes_over_a_lapsed_lease,
    another_session_of_the_endpoint_takes_over,
    a_live_lease_is_not_taken_over,
    a_lapsed_lease_at_the_cap_is_left_to_the_reaper,
    a_failed_todo_is_claimable_once_its_window_elapses,
    a_takeover_takes_the_oldest_lapsed_lease_or_elapsed_retry,
    a_takeover_on_a_named_queue_stays_in_it,
);
