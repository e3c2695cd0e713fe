//! Helpers shared by the conformance modules: short ways to make, claim and
//! inspect todos, and assertions on the errors store calls give.
#![allow(dead_code)]

use std::fmt::Debug;
use std::time::Duration;

use sqlx::Row;
use switchboard::domain::todo::{Disposition, Outcome};
use switchboard::mint::new_todo_id;
use switchboard::store::*;
use switchboard::testkit::StorePeek;

use crate::support::{Fixture, TestStore};

pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Moves the test's manual clock forward by `n` seconds.
pub fn advance_secs(ts: &TestStore, n: u64) {
    ts.clock.advance(secs(n));
}

/// A pull-only todo in the fixture's `inbox`.
pub fn inbox_todo(f: &Fixture, title: &str) -> NewTodo {
    NewTodo::new(&f.endpoint.id, "inbox", title)
}

pub fn keyed_todo(f: &Fixture, title: &str, key: &str) -> NewTodo {
    NewTodo {
        idempotency_key: Some(key.to_owned()),
        ..inbox_todo(f, title)
    }
}

pub fn capped_todo(f: &Fixture, title: &str, max_attempts: i64) -> NewTodo {
    NewTodo {
        max_attempts: Some(max_attempts),
        ..inbox_todo(f, title)
    }
}

/// Creates a todo that must be new (no dedup hit).
pub async fn create(store: &dyn Store, new: NewTodo) -> Todo {
    let created = store.create_todo(new).await.expect("create_todo");
    assert!(created.created, "expected a new todo, got a dedup hit");
    created.todo
}

pub async fn add_todo(store: &dyn Store, f: &Fixture, title: &str) -> Todo {
    create(store, inbox_todo(f, title)).await
}

/// Claims `id` with default options (unfenced, default lease).
pub async fn claim(store: &dyn Store, caller: &Caller, id: &str) -> Claimed {
    store
        .claim(caller, id, ClaimOptions::default())
        .await
        .expect("claim")
}

/// Claims `id` and fails it (default options): below the attempt cap it
/// waits out a retry window.
pub async fn claim_and_fail(store: &dyn Store, caller: &Caller, id: &str) -> Todo {
    claim(store, caller, id).await;
    store
        .fail(caller, id, Finish::default())
        .await
        .expect("fail")
}

/// One retention batch from the start of a pass: how many todos it deleted.
pub async fn prune_from_start(store: &dyn Store, older_than: Duration, limit: i64) -> u64 {
    store
        .unscoped_prune_terminal_todos(older_than, limit, &RetentionCursor::start())
        .await
        .expect("prune")
        .deleted
}

pub async fn claim_with_ttl(store: &dyn Store, caller: &Caller, id: &str, ttl: i64) -> Claimed {
    store
        .claim(
            caller,
            id,
            ClaimOptions {
                lease_ttl_seconds: Some(ttl),
                ..ClaimOptions::default()
            },
        )
        .await
        .expect("claim with ttl")
}

pub async fn fenced_claim(store: &dyn Store, caller: &Caller, id: &str) -> (Claimed, String) {
    let claimed = store
        .claim(
            caller,
            id,
            ClaimOptions {
                require_fence: true,
                ..ClaimOptions::default()
            },
        )
        .await
        .expect("fenced claim");
    let token = claimed
        .lease_token
        .clone()
        .expect("a fenced claim has a token");
    (claimed, token)
}

pub async fn get(store: &dyn Store, caller: &Caller, id: &str) -> Todo {
    store.get_todo(caller, id).await.expect("get_todo")
}

/// Every kept attempt record of a todo, newest first.
pub async fn attempts(store: &dyn Store, caller: &Caller, id: &str) -> Vec<Attempt> {
    store
        .list_attempts(caller, id, 50)
        .await
        .expect("list_attempts")
}

pub async fn last_attempt(store: &dyn Store, caller: &Caller, id: &str) -> Attempt {
    attempts(store, caller, id)
        .await
        .into_iter()
        .next()
        .expect("at least one attempt record")
}

/// The todo and its history: what a refused call must leave untouched.
pub async fn snapshot(store: &dyn Store, caller: &Caller, id: &str) -> (Todo, Vec<Attempt>) {
    (
        get(store, caller, id).await,
        attempts(store, caller, id).await,
    )
}

pub fn assert_closed_as(attempt: &Attempt, outcome: Outcome, disposition: Disposition) {
    assert_eq!(attempt.outcome, Some(outcome), "{attempt:?}");
    assert_eq!(attempt.disposition, Some(disposition), "{attempt:?}");
    assert!(attempt.ended_at.is_some(), "closed attempts have ended_at");
    assert_eq!(
        attempt.died,
        matches!(outcome, Outcome::LeaseExpired | Outcome::Reaped),
        "died is true exactly for lease_expired and reaped: {attempt:?}"
    );
}

/// A conflict on the wire: `Conflict`, `EndpointRevoked` or `Taken`.
pub fn assert_conflict<T: Debug>(result: StoreResult<T>) {
    match result {
        Err(err) if err.code() == "conflict" => {}
        other => panic!("expected a conflict, got {other:?}"),
    }
}

pub fn assert_invalid<T: Debug>(result: StoreResult<T>, field: &str) {
    match result {
        Err(StoreError::InvalidArgument(invalid)) => {
            assert_eq!(invalid.field, field, "wrong field in {invalid}")
        }
        other => panic!("expected InvalidArgument({field}), got {other:?}"),
    }
}

/// A foreign id must be indistinguishable from a missing one: same variant,
/// same text, same code.
pub fn assert_same_as_missing<T: Debug>(foreign: StoreResult<T>, missing: StoreResult<T>) {
    let foreign = foreign.expect_err("a foreign id must be refused");
    let missing = missing.expect_err("a missing id must be refused");
    assert!(matches!(foreign, StoreError::NotFound), "{foreign:?}");
    assert!(matches!(missing, StoreError::NotFound), "{missing:?}");
    assert_eq!(foreign.to_string(), missing.to_string());
    assert_eq!(foreign.code(), missing.code());
}

/// A well-formed todo id that names nothing.
pub fn missing_id() -> String {
    new_todo_id()
}

pub async fn count_todos(store: &SqlStore) -> i64 {
    sqlx::query("SELECT COUNT(*) FROM todos")
        .fetch_one(store.pool())
        .await
        .expect("count todos")
        .get(0)
}

pub async fn count_intake_events(store: &SqlStore) -> i64 {
    sqlx::query("SELECT COUNT(*) FROM intake_events")
        .fetch_one(store.pool())
        .await
        .expect("count intake events")
        .get(0)
}

/// Attempt rows of a todo as stored, open or closed (`list_attempts` caps at 50).
pub async fn count_attempt_rows(store: &SqlStore, todo_id: &str) -> i64 {
    sqlx::query("SELECT COUNT(*) FROM todo_attempts WHERE todo_id = $1")
        .bind(todo_id)
        .fetch_one(store.pool())
        .await
        .expect("count attempts")
        .get(0)
}

pub async fn count_open_attempts(store: &SqlStore, todo_id: &str) -> i64 {
    sqlx::query("SELECT COUNT(*) FROM todo_attempts WHERE todo_id = $1 AND ended_at IS NULL")
        .bind(todo_id)
        .fetch_one(store.pool())
        .await
        .expect("count open attempts")
        .get(0)
}

/// The four verbs only the lease holder may call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HolderVerb {
    Heartbeat,
    Complete,
    Fail,
    Release,
}

impl HolderVerb {
    pub const ALL: [HolderVerb; 4] = [Self::Heartbeat, Self::Complete, Self::Fail, Self::Release];

    pub async fn call(
        self,
        store: &dyn Store,
        caller: &Caller,
        id: &str,
        lease_token: Option<&str>,
    ) -> StoreResult<Todo> {
        let lease_token = lease_token.map(str::to_owned);
        match self {
            Self::Heartbeat => {
                let opts = HeartbeatOptions {
                    lease_token,
                    ..HeartbeatOptions::default()
                };
                store.heartbeat(caller, id, opts).await
            }
            Self::Complete => store.complete(caller, id, finish(lease_token)).await,
            Self::Fail => store.fail(caller, id, finish(lease_token)).await,
            Self::Release => {
                let opts = ReleaseOptions {
                    lease_token,
                    ..ReleaseOptions::default()
                };
                store.release(caller, id, opts).await
            }
        }
    }
}

fn finish(lease_token: Option<String>) -> Finish {
    Finish {
        lease_token,
        ..Finish::default()
    }
}

/// Calls every holder verb on `id` and checks each is a `Conflict` that
/// leaves the todo and its history exactly as they were.
pub async fn assert_holder_verbs_conflict(
    store: &dyn Store,
    caller: &Caller,
    id: &str,
    lease_token: Option<&str>,
) {
    let before = snapshot(store, caller, id).await;
    for verb in HolderVerb::ALL {
        let result = verb.call(store, caller, id, lease_token).await;
        assert!(
            matches!(
                result,
                Err(StoreError::Conflict(_) | StoreError::EndpointRevoked)
            ),
            "{verb:?} should conflict, got {result:?}"
        );
        assert_eq!(
            snapshot(store, caller, id).await,
            before,
            "a refused {verb:?} changed the todo"
        );
    }
}

/// What `claim_next` hands out, in order, until it answers empty.
pub async fn claim_until_empty(
    store: &dyn Store,
    caller: &Caller,
    queue: Option<&str>,
) -> Vec<Todo> {
    let mut taken = Vec::new();
    while let Some(claimed) = store
        .claim_next(caller, queue, ClaimOptions::default())
        .await
        .unwrap()
    {
        taken.push(claimed.todo);
    }
    taken
}
