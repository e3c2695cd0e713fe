//! Concurrent claimers: `claim_next` hands N callers N distinct todos, and two
//! racing claims of one todo have exactly one winner.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use switchboard::domain::todo::TodoState;
use switchboard::store::*;
use switchboard::testkit::StorePeek;
use tokio::sync::Barrier;

use crate::common::*;
use crate::exercise_on_every_path;
use crate::support::{TestStore, fixture};

const WORKERS: usize = 16;
const TODOS: usize = 100;
const RACES: usize = 20;

/// One worker: claim_next + complete until nothing is left; returns what it claimed.
async fn drain(store: Arc<SqlStore>, caller: Caller, start: Arc<Barrier>) -> Vec<String> {
    start.wait().await;
    let mut claimed = Vec::new();
    while let Some(c) = store
        .claim_next(&caller, None, ClaimOptions::default())
        .await
        .expect("claim_next")
    {
        store
            .complete(&caller, &c.todo.id, Finish::default())
            .await
            .expect("the claimer holds the lease it was just given");
        claimed.push(c.todo.id);
    }
    claimed
}

async fn concurrent_claim_next_callers_never_share_a_todo(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let mut created = HashSet::new();
    for n in 0..TODOS {
        created.insert(add_todo(store, &f, &format!("todo {n}")).await.id);
    }

    let claims = drain_concurrently(ts, &f.caller).await;
    let distinct: HashSet<String> = claims.iter().cloned().collect();
    assert_eq!(claims.len(), TODOS, "every todo claimed exactly once");
    assert_eq!(distinct, created, "none twice, none lost");
    for id in &created {
        let todo = get(store, &f.caller, id).await;
        assert_eq!(todo.state, TodoState::Done);
        assert_eq!(todo.attempts_total, 1, "claimed once: {id}");
    }
}

/// Runs `WORKERS` concurrent [`drain`]s and returns every claim they made.
async fn drain_concurrently(ts: &TestStore, caller: &Caller) -> Vec<String> {
    let start = Arc::new(Barrier::new(WORKERS));
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| tokio::spawn(drain(ts.store.clone(), caller.clone(), start.clone())))
        .collect();
    let mut claims = Vec::new();
    for worker in workers {
        claims.extend(worker.await.expect("worker panicked"));
    }
    claims
}

async fn concurrent_takeovers_never_share_a_todo(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let mut created = HashSet::new();
    for n in 0..TODOS / 2 {
        let todo = add_todo(store, &f, &format!("todo {n}")).await;
        claim_with_ttl(store, &f.caller, &todo.id, 60).await;
        created.insert(todo.id);
    }
    // Every holder vanished: all the work is reachable only by takeover.
    advance_secs(ts, 61);

    let claims = drain_concurrently(ts, &f.caller).await;
    let distinct: HashSet<String> = claims.iter().cloned().collect();
    assert_eq!(
        claims.len(),
        created.len(),
        "every todo taken over exactly once"
    );
    assert_eq!(distinct, created);
    for id in &created {
        let todo = get(store, &f.caller, id).await;
        assert_eq!(todo.state, TodoState::Done);
        assert_eq!(todo.attempts_total, 2, "one claim, one takeover: {id}");
        assert_eq!(count_attempt_rows(&ts.store, id).await, 2);
    }
}

async fn racing_creates_with_one_key_make_one_todo(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let start = Arc::new(Barrier::new(WORKERS));
    let creators: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (store, new, start) = (
                ts.store.clone(),
                keyed_todo(&f, "one delivery", "delivery-1"),
                start.clone(),
            );
            tokio::spawn(async move {
                start.wait().await;
                store.create_todo(new).await.expect("create_todo")
            })
        })
        .collect();
    let mut results = Vec::new();
    for creator in creators {
        results.push(creator.await.expect("creator panicked"));
    }

    let created = results.iter().filter(|r| r.created).count();
    assert_eq!(created, 1, "exactly one create makes the todo");
    let ids: HashSet<&str> = results.iter().map(|r| r.todo.id.as_str()).collect();
    assert_eq!(ids.len(), 1, "every dedup hit returns that todo: {ids:?}");
    assert_eq!(count_todos(&ts.store).await, 1);
}

async fn racing_claims_of_one_todo_have_one_winner(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    for _ in 0..RACES {
        let todo = add_todo(store, &f, "contended").await;
        let start = Arc::new(Barrier::new(2));
        let racers: Vec<_> = (0..2)
            .map(|_| {
                let (store, caller, id, start) = (
                    ts.store.clone(),
                    f.caller.clone(),
                    todo.id.clone(),
                    start.clone(),
                );
                tokio::spawn(async move {
                    start.wait().await;
                    store.claim(&caller, &id, ClaimOptions::default()).await
                })
            })
            .collect();
        let mut results = Vec::new();
        for racer in racers {
            results.push(racer.await.expect("racer panicked"));
        }

        let winners = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(winners, 1, "exactly one claim wins: {results:?}");
        let loser = results.into_iter().find(Result::is_err).expect("a loser");
        assert_conflict(loser);
        let after = get(store, &f.caller, &todo.id).await;
        assert_eq!((after.attempt, after.attempts_total), (1, 1));
        assert_eq!(count_attempt_rows(&ts.store, &todo.id).await, 1);
    }
}

exercise_on_every_path!(
    concurrent_claim_next_callers_never_share_a_todo,
    concurrent_takeovers_never_share_a_todo,
    racing_creates_with_one_key_make_one_todo,
    racing_claims_of_one_todo_have_one_winner,
);

/// PostgreSQL: the queue's hot path hands its connections from caller to
/// caller (`src/store/sql/hot.rs`). With a single one (a store of 3
/// connections), sixteen claim → complete loops and the ring sweep's read,
/// which shares that connection, all get their turn within the acquire
/// timeout: nobody is starved into `unavailable` by a caller that keeps
/// taking back the connection it just parked, and the sweep never waits in
/// the pool for a connection parked outside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_sixteen_callers_share_one_hot_connection_in_turn() {
    let Some(ts) = crate::support::postgres_store("one_hot_connection").await else {
        return;
    };
    let url = ts.postgres_url().expect("a PostgreSQL store");
    let f = fixture(&*ts.store, "ada").await;
    let mut created = HashSet::new();
    for n in 0..TODOS {
        created.insert(add_todo(&*ts.store, &f, &format!("todo {n}")).await.id);
    }
    let options = StoreOptions {
        max_connections: 3,
        ..StoreOptions::default()
    };
    let store = Arc::new(
        SqlStore::connect(&DatabaseLocation::Postgres(url), ts.clock.clone(), &options)
            .await
            .expect("a store of three connections"),
    );
    // Asking for more than the hot pool holds opens what it holds, no more
    // (waiting for a sixteenth would time out).
    store
        .open_hot_connections(WORKERS)
        .await
        .expect("the hot pool's one connection opened ahead");

    let start = Arc::new(Barrier::new(WORKERS + 1));
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| tokio::spawn(drain(store.clone(), f.caller.clone(), start.clone())))
        .collect();
    let sweeper = {
        let (store, hosted, start) = (store.clone(), vec![f.endpoint.id.clone()], start.clone());
        tokio::spawn(async move {
            start.wait().await;
            for _ in 0..TODOS {
                store
                    .unscoped_endpoints_with_due_rings(&hosted, &[Duration::from_secs(300)], 10)
                    .await
                    .expect("the sweep's read gets its turn on the hot connection");
            }
        })
    };
    let mut claims = Vec::new();
    for worker in workers {
        claims.extend(worker.await.expect("worker panicked"));
    }
    sweeper.await.expect("sweeper panicked");
    store.close().await;

    let distinct: HashSet<String> = claims.iter().cloned().collect();
    assert_eq!(claims.len(), TODOS, "every todo claimed exactly once");
    assert_eq!(distinct, created, "none twice, none lost");
}
