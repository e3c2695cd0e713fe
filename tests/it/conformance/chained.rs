//! `complete` with `next` (`TodoStore::complete_then_claim_next`): the
//! holder's completion, then the caller's next claim as `claim_next` makes
//! it — on every path the same rows as the two calls one after the other;
//! a refused completion or a refused `next` changes nothing. On
//! PostgreSQL's fast path both are one statement, one transaction.

use std::time::Duration;

use serde_json::json;
use sqlx::Row;
use switchboard::clock::Clock;
use switchboard::domain::admission::Limits;
use switchboard::domain::todo::{Disposition, Outcome, TodoState};
use switchboard::store::*;
use switchboard::testkit::StorePeek;

use crate::common::*;
use crate::exercise_on_every_path;
use crate::support::{self, Fixture, TestStore, fixture};

async fn complete_then_next(
    store: &dyn Store,
    caller: &Caller,
    id: &str,
    finish: Finish,
    opts: ClaimOptions,
) -> StoreResult<(Todo, Option<Claimed>)> {
    store
        .complete_then_claim_next(caller, id, finish, None, opts)
        .await
}

/// [`complete_then_next`] with no result, summary or claim options; it
/// must succeed (`what` says what it was for).
async fn done_then_next(
    store: &dyn Store,
    caller: &Caller,
    id: &str,
    what: &str,
) -> (Todo, Option<Claimed>) {
    complete_then_next(
        store,
        caller,
        id,
        Finish::default(),
        ClaimOptions::default(),
    )
    .await
    .expect(what)
}

/// Two todos of `f`, the first claimed: `(first, second)`.
async fn one_held_one_pending(store: &dyn Store, ts: &TestStore, f: &Fixture) -> (Todo, Todo) {
    let first = add_todo(store, f, "first").await;
    ts.clock.advance(Duration::from_millis(1));
    let second = add_todo(store, f, "second").await;
    claim(store, &f.caller, &first.id).await;
    (first, second)
}

async fn it_completes_then_claims_the_next_in_claim_order(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let (first, second) = one_held_one_pending(store, ts, &f).await;
    advance_secs(ts, 2);
    let now = ts.clock.now();

    let finish = Finish {
        result: Some(json!({"ok": 1})),
        summary: Some("did it".to_owned()),
        lease_token: None,
    };
    let opts = ClaimOptions {
        claimant: Some("worker-1".to_owned()),
        lease_ttl_seconds: Some(120),
        ..ClaimOptions::default()
    };
    let (done, next) = complete_then_next(store, &f.caller, &first.id, finish, opts)
        .await
        .expect("complete with next");

    assert_eq!(done.id, first.id);
    assert_eq!(done.state, TodoState::Done);
    assert_eq!(done.result, Some(json!({"ok": 1})));
    assert_eq!(done.completed_at, Some(now));
    assert_eq!(done.lease_expires_at, None);
    assert_eq!(get(store, &f.caller, &first.id).await, done);
    let closed = last_attempt(store, &f.caller, &first.id).await;
    assert_closed_as(&closed, Outcome::Completed, Disposition::Done);
    assert_eq!(closed.summary.as_deref(), Some("did it"));

    let next = next.expect("the second todo");
    assert_eq!(next.todo.id, second.id);
    assert_eq!(next.todo.state, TodoState::Claimed);
    assert_eq!(next.todo.owner, Some(f.caller.owner()));
    assert_eq!(next.todo.lease_expires_at, Some(now.add_secs(120)));
    assert_eq!((next.attempt_seq, next.todo.attempt), (1, 1));
    assert!(next.prior_attempts.is_empty());
    assert_eq!(next.lease_token, None);
    assert_eq!(get(store, &f.caller, &second.id).await, next.todo);
    let opened = last_attempt(store, &f.caller, &second.id).await;
    assert_eq!(opened.claimant.as_deref(), Some("worker-1"));
    assert_eq!(opened.ended_at, None);
    assert_eq!(count_open_attempts(&ts.store, &second.id).await, 1);

    // The last one: completed, and nothing left to claim.
    let (done, next) = done_then_next(store, &f.caller, &second.id, "complete the last").await;
    assert_eq!(
        (done.id.as_str(), done.state),
        (second.id.as_str(), TodoState::Done)
    );
    assert!(next.is_none(), "{next:?}");
}

async fn a_refused_completion_claims_nothing(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let held = add_todo(store, &f, "held").await;
    let pending = add_todo(store, &f, "pending").await;
    let (_, token) = fenced_claim(store, &f.caller, &held.id).await;
    let (held_before, pending_before) = (
        snapshot(store, &f.caller, &held.id).await,
        snapshot(store, &f.caller, &pending.id).await,
    );

    for fence in [None, Some("not-the-token".to_owned())] {
        let finish = Finish {
            lease_token: fence,
            ..Finish::default()
        };
        let refused =
            complete_then_next(store, &f.caller, &held.id, finish, ClaimOptions::default()).await;
        assert_conflict(refused);
    }
    let missing = complete_then_next(
        store,
        &f.caller,
        &missing_id(),
        Finish::default(),
        ClaimOptions::default(),
    )
    .await;
    assert!(matches!(missing, Err(StoreError::NotFound)), "{missing:?}");

    assert_eq!(snapshot(store, &f.caller, &held.id).await, held_before);
    assert_eq!(
        snapshot(store, &f.caller, &pending.id).await,
        pending_before
    );
    // The holder with its token completes and claims.
    let finish = Finish {
        lease_token: Some(token),
        ..Finish::default()
    };
    let (_, next) = complete_then_next(store, &f.caller, &held.id, finish, ClaimOptions::default())
        .await
        .expect("the holder completes");
    assert_eq!(next.expect("the pending todo").todo.id, pending.id);
}

async fn a_refused_next_is_refused_before_the_completion(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let (first, second) = one_held_one_pending(store, ts, &f).await;
    let before = (
        snapshot(store, &f.caller, &first.id).await,
        snapshot(store, &f.caller, &second.id).await,
    );

    let outside = store
        .complete_then_claim_next(
            &f.caller,
            &first.id,
            Finish::default(),
            Some("elsewhere"),
            ClaimOptions::default(),
        )
        .await;
    assert!(
        matches!(outside, Err(StoreError::Forbidden(_))),
        "{outside:?}"
    );
    let bad_name = store
        .complete_then_claim_next(
            &f.caller,
            &first.id,
            Finish::default(),
            Some("no spaces"),
            ClaimOptions::default(),
        )
        .await;
    assert_invalid(bad_name, "queue");
    let bad_lease = ClaimOptions {
        lease_ttl_seconds: Some(0),
        ..ClaimOptions::default()
    };
    let refused =
        complete_then_next(store, &f.caller, &first.id, Finish::default(), bad_lease).await;
    assert_invalid(refused, "lease_ttl_seconds");

    let after = (
        snapshot(store, &f.caller, &first.id).await,
        snapshot(store, &f.caller, &second.id).await,
    );
    assert_eq!(after, before, "a refused next changes nothing");
}

async fn the_next_claim_is_admitted_as_claim_next_admits_it(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let limits = Limits {
        max_in_flight: Some(1),
        ..Limits::default()
    };
    store
        .set_admission(&f.human.id, &f.endpoint.id, None, &limits)
        .await
        .expect("set_admission");
    let (first, second) = one_held_one_pending(store, ts, &f).await;
    let third = add_todo(store, &f, "third").await;

    // The completion frees the one in-flight place the next claim takes.
    let (_, next) = done_then_next(
        store,
        &f.caller,
        &first.id,
        "complete with next under a limit",
    )
    .await;
    assert_eq!(next.expect("room for one").todo.id, second.id);
    assert_eq!(
        get(store, &f.caller, &third.id).await.state,
        TodoState::Pending
    );

    let paused = Limits {
        paused: true,
        ..Limits::default()
    };
    store
        .set_admission(&f.human.id, &f.endpoint.id, None, &paused)
        .await
        .expect("pause");
    let (done, next) = done_then_next(store, &f.caller, &second.id, "complete while paused").await;
    assert_eq!(
        done.state,
        TodoState::Done,
        "a pause holds claims, not completions"
    );
    assert!(next.is_none(), "paused: {next:?}");
    assert_eq!(
        get(store, &f.caller, &third.id).await.state,
        TodoState::Pending
    );
}

async fn next_takes_over_a_lapsed_lease_when_nothing_is_pending(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let long = add_todo(store, &f, "long").await;
    let lapsed = add_todo(store, &f, "lapsed").await;
    claim_with_ttl(store, &f.caller, &long.id, 3600).await;
    claim_with_ttl(store, &f.caller, &lapsed.id, 60).await;
    advance_secs(ts, 61);

    let (_, next) = done_then_next(store, &f.caller, &long.id, "complete with next").await;
    let next = next.expect("the lapsed lease, taken over");
    assert_eq!(next.todo.id, lapsed.id);
    assert_eq!((next.attempt_seq, next.todo.attempt), (2, 2));
    assert_eq!(next.prior_attempts.len(), 1);
    assert_closed_as(
        &next.prior_attempts[0],
        Outcome::LeaseExpired,
        Disposition::Requeued,
    );
}

async fn a_fenced_next_returns_its_token_and_a_requeued_todo_its_history(
    store: &dyn Store,
    ts: &TestStore,
) {
    let f = fixture(store, "ada").await;
    let (first, second) = one_held_one_pending(store, ts, &f).await;
    // The second has been tried once and given back.
    claim(store, &f.caller, &second.id).await;
    store
        .release(
            &f.caller,
            &second.id,
            ReleaseOptions {
                summary: Some("not now".to_owned()),
                ..ReleaseOptions::default()
            },
        )
        .await
        .expect("release");

    let fenced = ClaimOptions {
        require_fence: true,
        ..ClaimOptions::default()
    };
    let (_, next) = complete_then_next(store, &f.caller, &first.id, Finish::default(), fenced)
        .await
        .expect("complete with a fenced next");
    let next = next.expect("the second todo");
    assert_eq!(next.todo.id, second.id);
    assert!(next.todo.fenced);
    let token = next.lease_token.clone().expect("a fenced claim's token");
    assert_eq!(next.attempt_seq, 2);
    assert_eq!(next.prior_attempts.len(), 1);
    assert_eq!(next.prior_attempts[0].summary.as_deref(), Some("not now"));
    // Only its token completes it.
    assert_conflict(
        store
            .complete(&f.caller, &second.id, Finish::default())
            .await,
    );
    let finish = Finish {
        lease_token: Some(token),
        ..Finish::default()
    };
    store
        .complete(&f.caller, &second.id, finish)
        .await
        .expect("the token completes it");
}

exercise_on_every_path!(
    it_completes_then_claims_the_next_in_claim_order,
    a_refused_completion_claims_nothing,
    a_refused_next_is_refused_before_the_completion,
    the_next_claim_is_admitted_as_claim_next_admits_it,
    next_takes_over_a_lapsed_lease_when_nothing_is_pending,
    a_fenced_next_returns_its_token_and_a_requeued_todo_its_history,
);

/// The transaction that last wrote each of `ids`' rows and their attempts.
async fn writers(store: &SqlStore, ids: [&str; 2]) -> Vec<String> {
    let mut xids = Vec::new();
    for id in ids {
        for sql in [
            "SELECT xmin::text FROM todos WHERE id = $1",
            "SELECT xmin::text FROM todo_attempts WHERE todo_id = $1 ORDER BY seq DESC LIMIT 1",
        ] {
            let row = sqlx::query(sql)
                .bind(id)
                .fetch_one(store.pool())
                .await
                .expect(sql);
            xids.push(row.get::<String, _>(0));
        }
    }
    xids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_postgres_the_completion_and_the_next_claim_are_one_transaction() {
    let Some(ts) = support::postgres_store("chained_one_transaction").await else {
        return;
    };
    let store: &dyn Store = &*ts.store;
    let f = fixture(store, "ada").await;
    let (first, second) = one_held_one_pending(store, &ts, &f).await;
    let (_, next) = done_then_next(store, &f.caller, &first.id, "complete with next").await;
    assert_eq!(next.expect("the second").todo.id, second.id);
    let xids = writers(&ts.store, [&first.id, &second.id]).await;
    assert!(
        xids.iter().all(|x| *x == xids[0]),
        "the completed row, its closed attempt, the claimed row and its new attempt \
         were written by one transaction: {xids:?}"
    );

    // Under admission limits the claim is `claim_next`'s, in its own
    // transaction, and still takes the next todo.
    let third = add_todo(store, &f, "third").await;
    let limits = Limits {
        max_in_flight: Some(5),
        ..Limits::default()
    };
    store
        .set_admission(&f.human.id, &f.endpoint.id, None, &limits)
        .await
        .expect("set_admission");
    let (_, next) = done_then_next(
        store,
        &f.caller,
        &second.id,
        "complete with next under limits",
    )
    .await;
    assert_eq!(next.expect("the third").todo.id, third.id);
    let xids = writers(&ts.store, [&second.id, &third.id]).await;
    assert_ne!(xids[0], xids[2], "two transactions under limits: {xids:?}");
    ts.finish().await;
}
