//! Admission and priority, decided inside the claim statements: paused
//! endpoints and queues, in-flight limits, window budgets (also under
//! concurrent claims), and the claim order (priority, then age). Every case
//! runs on the fast paths and the generic transaction path of both backends.

use std::sync::Arc;
use std::time::Duration;

use switchboard::domain::admission::{HeldReason, Limits, held};
use switchboard::store::*;
use tokio::sync::Barrier;

use crate::common::*;
use crate::exercise_on_every_path;
use crate::support::{Fixture, TestStore, fixture};
use switchboard::clock::Clock;

fn paused() -> Limits {
    Limits {
        paused: true,
        ..Limits::default()
    }
}

fn in_flight(max: i64) -> Limits {
    Limits {
        max_in_flight: Some(max),
        ..Limits::default()
    }
}

fn per_hour(max: i64) -> Limits {
    Limits {
        window: Some(Duration::from_secs(3600)),
        max_claims_per_window: Some(max),
        ..Limits::default()
    }
}

async fn set(store: &dyn Store, f: &Fixture, queue: Option<&str>, limits: Limits) {
    store
        .set_admission(&f.human.id, &f.endpoint.id, queue, &limits)
        .await
        .expect("set_admission");
}

async fn next(store: &dyn Store, caller: &Caller, queue: Option<&str>) -> Option<Claimed> {
    store
        .claim_next(caller, queue, ClaimOptions::default())
        .await
        .expect("claim_next")
}

async fn with_priority(store: &dyn Store, f: &Fixture, queue: &str, title: &str, p: i64) -> Todo {
    let mut new = NewTodo::new(&f.endpoint.id, queue, title);
    new.priority = p;
    create(store, new).await
}

async fn the_highest_priority_is_claimed_first_then_the_oldest(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let low = with_priority(store, &f, "inbox", "low", -1).await;
    advance_secs(ts, 1);
    let old = with_priority(store, &f, "inbox", "normal, older", 0).await;
    advance_secs(ts, 1);
    let new = with_priority(store, &f, "reviews", "normal, newer", 0).await;
    advance_secs(ts, 1);
    let urgent = with_priority(store, &f, "reviews", "urgent", 10).await;

    let order: Vec<String> = claim_until_empty(store, &f.caller, None)
        .await
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(order, [urgent.id, old.id, new.id, low.id]);
}

async fn a_named_queue_is_claimed_in_priority_order_too(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let first = with_priority(store, &f, "inbox", "first", 0).await;
    let later = with_priority(store, &f, "inbox", "later but higher", 5).await;
    let taken = next(store, &f.caller, Some("inbox")).await.unwrap();
    assert_eq!(taken.todo.id, later.id);
    assert_eq!(taken.todo.priority, 5);
    assert_eq!(
        next(store, &f.caller, Some("inbox")).await.unwrap().todo.id,
        first.id
    );
}

async fn a_paused_endpoint_hands_out_nothing_until_resumed(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "waits").await;
    set(store, &f, None, paused()).await;

    assert!(next(store, &f.caller, None).await.is_none());
    assert!(next(store, &f.caller, Some("inbox")).await.is_none());
    assert_conflict(
        store
            .claim(&f.caller, &todo.id, ClaimOptions::default())
            .await,
    );

    set(store, &f, None, Limits::default()).await;
    assert!(
        store
            .unscoped_admission(&f.endpoint.id)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(next(store, &f.caller, None).await.unwrap().todo.id, todo.id);
}

async fn a_paused_queue_is_skipped_and_the_others_flow(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let held_back = add_todo(store, &f, "inbox, oldest").await;
    let reviews = create(store, NewTodo::new(&f.endpoint.id, "reviews", "reviews")).await;
    set(store, &f, Some("inbox"), paused()).await;

    assert_eq!(
        next(store, &f.caller, None).await.unwrap().todo.id,
        reviews.id
    );
    assert!(next(store, &f.caller, None).await.is_none());
    assert!(next(store, &f.caller, Some("inbox")).await.is_none());
    assert_conflict(
        store
            .claim(&f.caller, &held_back.id, ClaimOptions::default())
            .await,
    );
    set(store, &f, Some("inbox"), Limits::default()).await;
    assert_eq!(
        next(store, &f.caller, None).await.unwrap().todo.id,
        held_back.id
    );
}

async fn the_in_flight_limit_holds_until_a_claim_ends(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    for n in 0..4 {
        add_todo(store, &f, &format!("todo {n}")).await;
    }
    set(store, &f, None, in_flight(2)).await;
    let first = next(store, &f.caller, None).await.unwrap();
    next(store, &f.caller, None).await.unwrap();
    assert!(
        next(store, &f.caller, None).await.is_none(),
        "two in flight"
    );

    let rows = store.unscoped_admission(&f.endpoint.id).await.unwrap();
    assert_eq!(rows[0].usage.in_flight, 2);
    let verdict = held(&rows[0].limits, &rows[0].usage, ts.clock.now()).unwrap();
    assert_eq!(verdict.reason, HeldReason::InFlightLimit);

    store
        .complete(&f.caller, &first.todo.id, Finish::default())
        .await
        .unwrap();
    assert!(
        next(store, &f.caller, None).await.is_some(),
        "one ended, one more"
    );
    assert!(next(store, &f.caller, None).await.is_none());
}

/// Three todos in `inbox` and three in `reviews`.
async fn three_in_each_of_two_queues(store: &dyn Store, f: &Fixture) {
    for n in 0..3 {
        add_todo(store, f, &format!("inbox {n}")).await;
        create(store, NewTodo::new(&f.endpoint.id, "reviews", "review")).await;
    }
}

/// Claims until admission (or the queue) says no; the claimed todos' queues, sorted.
async fn queues_claimed_until_held(store: &dyn Store, f: &Fixture) -> Vec<String> {
    let mut queues = Vec::new();
    while let Some(c) = next(store, &f.caller, None).await {
        queues.push(c.todo.queue);
    }
    queues.sort();
    queues
}

async fn a_queue_limit_and_the_endpoints_both_apply(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    three_in_each_of_two_queues(store, &f).await;
    set(store, &f, Some("inbox"), in_flight(1)).await;
    set(store, &f, None, in_flight(3)).await;
    assert_eq!(
        queues_claimed_until_held(store, &f).await,
        ["inbox", "reviews", "reviews"],
        "inbox at most 1, all at most 3"
    );
}

async fn a_lapsed_lease_is_taken_over_at_the_limit(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    claim_with_ttl(store, &f.caller, &todo.id, 60).await;
    set(store, &f, None, in_flight(1)).await;
    advance_secs(ts, 61);
    let taken = next(store, &f.caller, None).await.expect("taken over");
    assert_eq!(taken.todo.id, todo.id);
}

async fn a_window_budget_counts_claims_not_completions(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    for n in 0..5 {
        add_todo(store, &f, &format!("todo {n}")).await;
    }
    set(store, &f, None, per_hour(2)).await;
    for _ in 0..2 {
        let c = next(store, &f.caller, None).await.unwrap();
        store
            .complete(&f.caller, &c.todo.id, Finish::default())
            .await
            .unwrap();
    }
    assert!(
        next(store, &f.caller, None).await.is_none(),
        "the window is spent"
    );
    let rows = store.unscoped_admission(&f.endpoint.id).await.unwrap();
    let verdict = held(&rows[0].limits, &rows[0].usage, ts.clock.now()).unwrap();
    assert_eq!(verdict.reason, HeldReason::WindowBudget);
    assert_eq!(
        verdict.until,
        Some(rows[0].usage.window_started_at.unwrap().add_secs(3600))
    );

    advance_secs(ts, 3600);
    assert!(next(store, &f.caller, None).await.is_some(), "a new window");
    assert!(next(store, &f.caller, None).await.is_some());
    assert!(next(store, &f.caller, None).await.is_none());
}

/// A queue's window charges that queue's claims only, beside the
/// endpoint's: a claim of another queue charges the endpoint alone, and a
/// queue with no window of its own is held only by the endpoint's.
async fn a_queue_window_and_the_endpoints_both_charge(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    three_in_each_of_two_queues(store, &f).await;
    set(store, &f, Some("inbox"), per_hour(1)).await;
    set(store, &f, None, per_hour(3)).await;
    assert_eq!(
        queues_claimed_until_held(store, &f).await,
        ["inbox", "reviews", "reviews"],
        "inbox at most 1 an hour, all at most 3"
    );
    let rows = store.unscoped_admission(&f.endpoint.id).await.unwrap();
    let spent = |queue: Option<&str>| {
        let row = rows.iter().find(|r| r.queue.as_deref() == queue);
        row.unwrap_or_else(|| panic!("a row for {queue:?}"))
            .usage
            .window_claims
    };
    assert_eq!(spent(None), 3, "the endpoint's window counts every claim");
    assert_eq!(spent(Some("inbox")), 1, "the queue's counts its own");
}

async fn a_limit_of_zero_pauses(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    add_todo(store, &f, "t").await;
    set(store, &f, None, in_flight(0)).await;
    assert!(next(store, &f.caller, None).await.is_none());
    set(store, &f, None, per_hour(0)).await;
    assert!(next(store, &f.caller, None).await.is_none());
}

const RACERS: usize = 16;

/// `RACERS` concurrent `claim_next` calls, none completing; returns how many
/// got a todo.
async fn race_claims(ts: &TestStore, caller: &Caller) -> usize {
    let start = Arc::new(Barrier::new(RACERS));
    let racers: Vec<_> = (0..RACERS)
        .map(|_| {
            let (store, caller, start) = (ts.store.clone(), caller.clone(), start.clone());
            tokio::spawn(async move {
                start.wait().await;
                store
                    .claim_next(&caller, None, ClaimOptions::default())
                    .await
                    .expect("claim_next")
                    .is_some()
            })
        })
        .collect();
    let mut won = 0;
    for racer in racers {
        won += usize::from(racer.await.expect("racer panicked"));
    }
    won
}

async fn concurrent_claims_never_exceed_the_in_flight_limit(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    for n in 0..RACERS {
        add_todo(store, &f, &format!("todo {n}")).await;
    }
    set(store, &f, None, in_flight(3)).await;
    assert_eq!(race_claims(ts, &f.caller).await, 3);
    assert!(next(store, &f.caller, None).await.is_none());
}

/// A limit wider than the few slots a claim tries from the one its todo's
/// id picks (`statements::spread_free_slot`): once most slots are taken,
/// claims whose tries are all taken must find the lowest free one, so every
/// slot of the limit is used and none twice.
async fn concurrent_claims_fill_a_wide_in_flight_limit_exactly(store: &dyn Store, ts: &TestStore) {
    const LIMIT: usize = 12;
    let f = fixture(store, "ada").await;
    for n in 0..RACERS {
        add_todo(store, &f, &format!("todo {n}")).await;
    }
    set(store, &f, None, in_flight(LIMIT as i64)).await;
    assert_eq!(race_claims(ts, &f.caller).await, LIMIT);
    assert!(next(store, &f.caller, None).await.is_none());
}

async fn concurrent_claims_never_exceed_the_window_budget(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    for n in 0..RACERS {
        add_todo(store, &f, &format!("todo {n}")).await;
    }
    set(store, &f, None, per_hour(5)).await;
    assert_eq!(race_claims(ts, &f.caller).await, 5);
    let rows = store.unscoped_admission(&f.endpoint.id).await.unwrap();
    assert_eq!(rows[0].usage.window_claims, 5, "no charge left behind");
}

/// A budget smaller than PostgreSQL's shard count leaves most shards no
/// share, and a budget of a few per shard fills them unevenly: claims whose
/// own shard is spent must find another, and the total must come out exact,
/// window after window (a new window recounts every shard).
async fn concurrent_claims_spend_a_budget_spread_over_shards_exactly(
    store: &dyn Store,
    ts: &TestStore,
) {
    let f = fixture(store, "ada").await;
    for n in 0..(2 * RACERS) {
        add_todo(store, &f, &format!("todo {n}")).await;
    }
    set(store, &f, None, per_hour(12)).await;
    assert_eq!(race_claims(ts, &f.caller).await, 12);
    assert!(next(store, &f.caller, None).await.is_none());

    advance_secs(ts, 3600);
    assert_eq!(race_claims(ts, &f.caller).await, 12, "a new window");
    let rows = store.unscoped_admission(&f.endpoint.id).await.unwrap();
    assert_eq!(rows[0].usage.window_claims, 12);
    assert_eq!(
        rows[0].usage.window_started_at,
        Some(ts.clock.now()),
        "the window began at its first claim"
    );
}

/// A limit change keeps what the running window has spent (a new limit is
/// no fresh budget), lowered or raised; a new window length starts afresh.
async fn a_limit_change_keeps_the_windows_count(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    for n in 0..20 {
        add_todo(store, &f, &format!("todo {n}")).await;
    }
    let caller = &f.caller;
    // Claims up to `most` todos; how many it got.
    let take = |most: usize| async move {
        let mut got = 0;
        while got < most && next(store, caller, None).await.is_some() {
            got += 1;
        }
        got
    };
    set(store, &f, None, per_hour(10)).await;
    assert_eq!(take(7).await, 7);
    set(store, &f, None, per_hour(8)).await;
    assert_eq!(take(5).await, 1, "lowered to 8: one left");
    let rows = store.unscoped_admission(&f.endpoint.id).await.unwrap();
    assert_eq!(rows[0].usage.window_claims, 8);
    set(store, &f, None, per_hour(11)).await;
    assert_eq!(take(5).await, 3, "raised to 11: three more");
    let two_hours = Limits {
        window: Some(Duration::from_secs(7200)),
        ..per_hour(4)
    };
    set(store, &f, None, two_hours).await;
    assert_eq!(take(5).await, 4, "a new length: a fresh window of 4");
}

async fn limits_are_validated_and_scoped(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let other = fixture(store, "bob").await;
    assert_invalid(
        store
            .set_admission(&f.human.id, &f.endpoint.id, Some("elsewhere"), &paused())
            .await,
        "queue",
    );
    let half = Limits {
        max_claims_per_window: Some(3),
        ..Limits::default()
    };
    assert_invalid(
        store
            .set_admission(&f.human.id, &f.endpoint.id, None, &half)
            .await,
        "window",
    );
    assert_same_as_missing(
        store
            .set_admission(&other.human.id, &f.endpoint.id, None, &paused())
            .await,
        store
            .set_admission(&f.human.id, &missing_id(), None, &paused())
            .await,
    );
    assert!(
        store
            .unscoped_admission(&f.endpoint.id)
            .await
            .unwrap()
            .is_empty()
    );
}

exercise_on_every_path!(
    the_highest_priority_is_claimed_first_then_the_oldest,
    a_named_queue_is_claimed_in_priority_order_too,
    a_paused_endpoint_hands_out_nothing_until_resumed,
    a_paused_queue_is_skipped_and_the_others_flow,
    the_in_flight_limit_holds_until_a_claim_ends,
    a_queue_limit_and_the_endpoints_both_apply,
    a_lapsed_lease_is_taken_over_at_the_limit,
    a_window_budget_counts_claims_not_completions,
    a_queue_window_and_the_endpoints_both_charge,
    a_limit_of_zero_pauses,
    concurrent_claims_never_exceed_the_in_flight_limit,
    concurrent_claims_fill_a_wide_in_flight_limit_exactly,
    concurrent_claims_never_exceed_the_window_budget,
    concurrent_claims_spend_a_budget_spread_over_shards_exactly,
    a_limit_change_keeps_the_windows_count,
    limits_are_validated_and_scoped,
);

/// SQLite keeps `todos` in rowid order: each priority's todos lie side by
/// side there, in arrival order, whatever arrived between them (so claims
/// in priority order read and write neighbouring rows), the edge priorities
/// included; and the claim order is unchanged by where the rows lie.
#[tokio::test]
async fn on_sqlite_each_priority_is_stored_side_by_side() {
    use switchboard::domain::todo::MAX_PRIORITY;
    use switchboard::testkit::StorePeek;
    let ts = crate::support::sqlite_store().await;
    let store = &*ts.store;
    let f = fixture(store, "ada").await;
    let mut pushed = Vec::new();
    for (n, p) in [0, 5, 0, -3, 5, MAX_PRIORITY, 0, -MAX_PRIORITY, 5]
        .into_iter()
        .enumerate()
    {
        advance_secs(&ts, 1);
        pushed.push(with_priority(store, &f, "inbox", &format!("todo {n}"), p).await);
    }
    let stored: Vec<(String, i64)> =
        sqlx::query_as("SELECT id, priority FROM todos ORDER BY rowid")
            .fetch_all(store.pool())
            .await
            .expect("read the table in rowid order");
    let mut by_priority: Vec<(String, i64)> =
        pushed.iter().map(|t| (t.id.clone(), t.priority)).collect();
    by_priority.sort_by_key(|(_, p)| *p); // stable: arrival order within a priority
    assert_eq!(stored, by_priority);

    let claimed: Vec<String> = claim_until_empty(store, &f.caller, None)
        .await
        .into_iter()
        .map(|t| t.id)
        .collect();
    let mut claim_order = by_priority;
    claim_order.sort_by_key(|(_, p)| -p); // stable: the oldest first within a priority
    let claim_order: Vec<String> = claim_order.into_iter().map(|(id, _)| id).collect();
    assert_eq!(claimed, claim_order);
}
