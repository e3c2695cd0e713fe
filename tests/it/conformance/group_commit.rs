//! PostgreSQL: `complete`s and claims that wait run as one statement
//! (group commit, issue 47, `src/store/sql/postgres/batch.rs`). SQLite: the
//! agent loop's verbs are jobs of the writer thread, which commits every
//! call queued behind the previous one together (`src/store/sql/sqlite/`).
//!
//! The first call is held up by another connection's lock (a row lock on
//! the todo a `complete` writes; a `SHARE` lock on `todo_attempts`, where a
//! claim inserts its attempt record), so the calls that follow queue behind
//! it; the lock released, the first runs alone and the queued ones as one
//! batch.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::postgres::PgConnection;
use sqlx::{Connection, PgPool, Row};
use switchboard::clock::Clock;
use switchboard::domain::admission::Limits;
use switchboard::domain::todo::{Disposition, Outcome, TodoState};
use switchboard::store::*;
use switchboard::testkit::StorePeek;

use crate::common::*;
use crate::support::{self, Fixture, fixture, second_handle};

/// A claim of `f`'s whole scope by claimant `who`, fenced or not.
fn claim_by(
    store: &Arc<SqlStore>,
    f: &Fixture,
    who: &str,
    fenced: bool,
) -> tokio::task::JoinHandle<StoreResult<Option<Claimed>>> {
    let (store, caller) = (store.clone(), f.caller.clone());
    let opts = ClaimOptions {
        claimant: Some(who.to_owned()),
        require_fence: fenced,
        ..ClaimOptions::default()
    };
    tokio::spawn(async move { store.claim_next(&caller, None, opts).await })
}

/// A connection holding up every insert into `todo_attempts` until
/// [`release`].
async fn hold_attempt_inserts(url: &str) -> PgConnection {
    let mut conn = PgConnection::connect(url).await.expect("connect");
    for sql in ["BEGIN", "LOCK TABLE todo_attempts IN SHARE MODE"] {
        sqlx::query(sql).execute(&mut conn).await.expect(sql);
    }
    conn
}

async fn release(mut held: PgConnection) {
    sqlx::query("ROLLBACK")
        .execute(&mut held)
        .await
        .expect("release the lock");
}

/// A connection holding a row lock on todo `id` until [`release`].
async fn hold_row_lock(url: &str, id: &str) -> PgConnection {
    let mut conn = PgConnection::connect(url).await.expect("connect");
    sqlx::query("BEGIN")
        .execute(&mut conn)
        .await
        .expect("begin");
    sqlx::query("SELECT 1 FROM todos WHERE id = $1 FOR UPDATE")
        .bind(id)
        .execute(&mut conn)
        .await
        .expect("lock the todo");
    conn
}

/// Each todo's state and its attempt's outcome, disposition and summary.
type Closed = (String, Option<String>, Option<String>, Option<String>);

/// [`Closed`] for every attempt of `ids`, in the todos' creation order.
async fn closed_attempts(watch: &mut PgConnection, ids: &[String]) -> Vec<Closed> {
    sqlx::query_as(
        "SELECT t.state::text, a.outcome::text, a.disposition::text, a.summary \
         FROM todos t JOIN todo_attempts a ON a.todo_id = t.id \
         WHERE t.id = ANY($1) ORDER BY t.created_at, t.id",
    )
    .bind(ids)
    .fetch_all(watch)
    .await
    .expect("read the attempts")
}

/// Waits until some backend of this database waits on a lock.
async fn until_a_statement_waits(watch: &mut PgConnection, deadline: Instant) {
    loop {
        let (waiting,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(&mut *watch)
        .await
        .expect("read pg_stat_activity");
        if waiting > 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the first statement never waited"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn until_queued(store: &SqlStore, count: usize, deadline: Instant) {
    while store.claims_waiting() < count {
        assert!(Instant::now() < deadline, "the claims never queued");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until `count` endings (`what`: "completes", …) wait behind the one
/// running.
async fn until_finishes_queued(store: &SqlStore, count: usize, deadline: Instant, what: &str) {
    while store.finishes_waiting() < count {
        assert!(Instant::now() < deadline, "the {what} never queued");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

type ClaimTask = tokio::task::JoinHandle<StoreResult<Option<Claimed>>>;

/// Five plain claimants.
const FOLLOWERS: [&str; 5] = [
    "follower-1",
    "follower-2",
    "follower-3",
    "follower-4",
    "follower-5",
];

/// A claim by `leader`, held up on its attempt record by another
/// connection's lock, and claims by `names` (fenced when the name starts
/// with "fenced") queued behind it; then the lock released: (the leader's
/// claim, the followers' in order).
async fn claims_queued_behind_one(
    store: &Arc<SqlStore>,
    f: &Fixture,
    url: &str,
    names: &[&str],
) -> (ClaimTask, Vec<ClaimTask>) {
    let held = hold_attempt_inserts(url).await;
    let leader = claim_by(store, f, "leader", false);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut watch = PgConnection::connect(url).await.expect("connect");
    until_a_statement_waits(&mut watch, deadline).await;
    let followers: Vec<_> = names
        .iter()
        .map(|who| claim_by(store, f, who, who.starts_with("fenced")))
        .collect();
    until_queued(store, followers.len(), deadline).await;
    release(held).await;
    (leader, followers)
}

/// How many of the claims took a todo.
async fn claims_taken(leader: ClaimTask, followers: Vec<ClaimTask>) -> usize {
    let mut taken = 0;
    for claim in std::iter::once(leader).chain(followers) {
        taken += usize::from(claim.await.unwrap().expect("claim").is_some());
    }
    taken
}

/// Each todo's (state, owner's claimant on its open attempt, open attempts).
async fn attempts_of(pool: &PgPool, id: &str) -> (String, Option<String>, i64) {
    sqlx::query_as(
        "SELECT t.state::text, \
           (SELECT a.claimant FROM todo_attempts a WHERE a.todo_id = t.id AND a.ended_at IS NULL), \
           (SELECT count(*) FROM todo_attempts a WHERE a.todo_id = t.id AND a.ended_at IS NULL) \
         FROM todos t WHERE t.id = $1",
    )
    .bind(id)
    .fetch_one(pool)
    .await
    .expect("read the todo")
}

/// Five claims queue behind a first one with five todos pending: the first
/// takes the oldest alone, the five run as one statement that takes the
/// next four in claim order (the highest priority first), each with its own
/// claimant, lease and fence, and the fifth — left without a todo — runs
/// alone and finds the queue empty, as it would have.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_claims_that_wait_run_as_one_statement_each_with_its_own_lease() {
    let Some(ts) = support::postgres_store("claim_batch").await else {
        return;
    };
    let url = ts.postgres_url().expect("a PostgreSQL store").to_owned();
    let store = Arc::new(second_handle(&ts).await);
    let f = fixture(&*store, "ada").await;
    let mut ids = Vec::new();
    for n in 0..5 {
        let mut new = NewTodo::new(&f.endpoint.id, "inbox", format!("todo {n}"));
        // The last one outranks the three before it.
        new.priority = if n == 4 { 5 } else { 0 };
        ids.push(create(&*store, new).await.id);
    }
    let pool = PgPool::connect(&url).await.expect("connect");

    // Which caller the batch leaves without a todo depends on the order the
    // five queued in: two are fenced, so one of them is served.
    let names = ["plain-1", "fenced-2", "plain-3", "fenced-4", "plain-5"];
    let (leader, followers) = claims_queued_behind_one(&store, &f, &url, &names).await;

    let first = leader
        .await
        .unwrap()
        .expect("the first claim")
        .expect("a todo");
    assert_eq!(first.todo.id, ids[4], "the highest priority first, alone");
    let mut claimed = Vec::new();
    let mut empty = 0;
    for (who, answer) in names.iter().zip(followers) {
        match answer.await.unwrap().expect("a claim in the batch") {
            Some(c) => claimed.push((who.to_string(), c)),
            None => empty += 1,
        }
    }
    assert_eq!(empty, 1, "four todos for five claims: one finds none");
    let mut got: Vec<String> = claimed.iter().map(|(_, c)| c.todo.id.clone()).collect();
    got.sort();
    let mut want = ids[..4].to_vec();
    want.sort();
    assert_eq!(got, want, "each remaining todo claimed once");
    let (batches, batched) = store.claim_batches();
    assert!(
        batches >= 1 && batched >= 2,
        "the waiting claims ran together ({batches} batches, {batched} claims)"
    );

    for (who, c) in &claimed {
        assert_eq!(c.todo.state, TodoState::Claimed);
        assert_eq!(c.todo.attempt, 1);
        assert!(c.todo.lease_expires_at.is_some(), "{who}: a lease");
        let (state, claimant, open) = attempts_of(&pool, &c.todo.id).await;
        assert_eq!(state, "claimed");
        assert_eq!(
            claimant.as_deref(),
            Some(who.as_str()),
            "the holder's own claimant"
        );
        assert_eq!(open, 1, "one open attempt");
        assert_eq!(c.lease_token.is_some(), who.starts_with("fenced"), "{who}");
    }
    // Each holder's lease is its own: the fenced one needs its token.
    let (_, fenced) = claimed
        .iter()
        .find(|(who, _)| who.starts_with("fenced"))
        .expect("a fenced claim was served");
    let wrong = Finish {
        lease_token: Some("not-the-token".into()),
        ..Finish::default()
    };
    assert_conflict(store.complete(&f.caller, &fenced.todo.id, wrong).await);
    let right = Finish {
        lease_token: fenced.lease_token.clone(),
        ..Finish::default()
    };
    let done = store.complete(&f.caller, &fenced.todo.id, right).await;
    assert_eq!(done.expect("its own token").state, TodoState::Done);
    store.close().await;
}

/// A batch with no room for all of its claims under an in-flight limit
/// claims nothing: its claims run alone, each under the limit, so five
/// claims behind a first one with a limit of two take two todos in all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_claims_under_a_limit_run_alone_and_hold_it() {
    let Some(ts) = support::postgres_store("claim_batch_limits").await else {
        return;
    };
    let url = ts.postgres_url().expect("a PostgreSQL store").to_owned();
    let store = Arc::new(second_handle(&ts).await);
    let f = fixture(&*store, "ada").await;
    for n in 0..6 {
        add_todo(&*store, &f, &format!("todo {n}")).await;
    }
    let limits = Limits {
        max_in_flight: Some(2),
        ..Limits::default()
    };
    store
        .set_admission(&f.human.id, &f.endpoint.id, None, &limits)
        .await
        .expect("set_admission");

    let (leader, followers) = claims_queued_behind_one(&store, &f, &url, &FOLLOWERS).await;

    let taken = claims_taken(leader, followers).await;
    assert_eq!(taken, 2, "the in-flight limit held");
    assert_eq!(
        store.claim_batches(),
        (0, 0),
        "a batch with no room for all of its claims served none"
    );
    let pool = PgPool::connect(&url).await.expect("connect");
    let (claimed,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM todos WHERE endpoint_id = $1 AND state = 'claimed'")
            .bind(&f.endpoint.id)
            .fetch_one(&pool)
            .await
            .expect("count claims");
    assert_eq!(claimed, 2);
    store.close().await;
}

/// A batch reads the todos it claims by key, not by walking the primary
/// key from its start: merge-joined with the whole key, its update read
/// every todo created before the ones it claimed, and B1's loop decayed
/// from 1 467 to 293 loops/s within 30 s (c = 4). Its generic plan, as the
/// hot path's sessions run it, with 1 000 todos (a hash join read all of
/// them by key) of which 50 are done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_claim_batch_reads_only_the_todos_it_claims() {
    let Some(ts) = support::postgres_store("claim_batch_plan").await else {
        return;
    };
    let url = ts.postgres_url().expect("a PostgreSQL store").to_owned();
    let store = second_handle(&ts).await;
    let f = fixture(&store, "ada").await;
    for n in 0..1000 {
        add_todo(&store, &f, &format!("todo {n}")).await;
    }
    for _ in 0..50 {
        let c = store
            .claim_next(&f.caller, None, ClaimOptions::default())
            .await
            .expect("claim")
            .expect("pending");
        store
            .complete(&f.caller, &c.todo.id, Finish::default())
            .await
            .expect("complete");
    }
    let holders = r#"[{"n":1,"now":5,"owner":"o","expires":9,"fence":null,"claimant":"a"},
                      {"n":2,"now":5,"owner":"o","expires":9,"fence":null,"claimant":"b"}]"#;
    let scope = switchboard::store::sql::statements::ClaimScope::AnyQueue;
    let batch = switchboard::store::sql::statements::claim_pending_batch(scope);
    let plain = format!("EXECUTE batch('{holders}', '{}', 2)", f.endpoint.id);
    assert_reads_only_two_todos_by_key(
        &url,
        &format!("batch(json, text, bigint) AS {batch}"),
        &plain,
    )
    .await;

    // Under limits that never bind (B10's), the batch that admits them.
    let limits = Limits {
        max_in_flight: Some(1000),
        window: Some(Duration::from_secs(3600)),
        max_claims_per_window: Some(10_000_000),
        ..Limits::default()
    };
    for queue in [None, Some("inbox")] {
        store
            .set_admission(&f.human.id, &f.endpoint.id, queue, &limits)
            .await
            .expect("set_admission");
    }
    let admitted = switchboard::store::sql::statements::claim_admitted_batch(scope);
    let execute = format!("EXECUTE batch(6, '{holders}', 2, 8, '{}')", f.endpoint.id);
    assert_reads_only_two_todos_by_key(
        &url,
        &format!("batch(bigint, json, bigint, bigint, text) AS {admitted}"),
        &execute,
    )
    .await;
    store.close().await;
}

/// `statement` (`name(types) AS text`), prepared as the hot path's sessions
/// run it (a generic plan, no sequential or bitmap scans) and run by
/// `execute` in a transaction rolled back: every read of `todos` by key
/// reads at most the two rows a batch of two claims.
async fn assert_reads_only_two_todos_by_key(url: &str, statement: &str, execute: &str) {
    let mut db = PgConnection::connect(url).await.expect("connect");
    let script = format!(
        "ANALYZE todos; SET enable_seqscan = off; SET enable_bitmapscan = off; \
         SET plan_cache_mode = force_generic_plan; PREPARE {statement}; BEGIN;"
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(script))
        .execute(&mut db)
        .await
        .expect("prepare the batch");
    let explain = format!("EXPLAIN (ANALYZE, COSTS OFF) {execute}");
    let plan: Vec<(String,)> = sqlx::query_as(sqlx::AssertSqlSafe(explain))
        .fetch_all(&mut db)
        .await
        .expect("explain the batch");
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut db)
        .await
        .expect("rollback");
    let plan: Vec<String> = plan.into_iter().map(|(line,)| line).collect();
    let key_reads: Vec<&String> = plan.iter().filter(|l| l.contains("todos_pkey")).collect();
    assert!(
        !key_reads.is_empty(),
        "the update reads todos by key:\n{}",
        plan.join("\n")
    );
    for line in key_reads {
        let rows: u64 = line
            .split("rows=")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no row count in {line}"));
        assert!(
            rows <= 2,
            "read {rows} todos by key for 2 claims:\n{}",
            plan.join("\n")
        );
    }
}

/// Completes that arrive while another `complete` runs wait, then run as ONE
/// statement (group commit, issue 47, `src/store/sql/postgres/batch.rs`),
/// each held to its own guard and answered with its own result: here the
/// first `complete` waits on a row lock held by another connection while
/// six others queue behind it — two valid ones, a fenced one with the right
/// token, one with a wrong token, one from another endpoint, and a second
/// `complete` of a todo already in the batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_completes_that_wait_run_as_one_statement_each_with_its_own_guard() {
    let Some(ts) = support::postgres_store("complete_batch").await else {
        return;
    };
    let url = ts.postgres_url().expect("a PostgreSQL store");
    let store = Arc::new(second_handle(&ts).await);
    let f = fixture(&*store, "ada").await;
    let stranger = fixture(&*store, "bob").await;
    let mut ids = Vec::new();
    for n in 0..6 {
        ids.push(add_todo(&*store, &f, &format!("todo {n}")).await.id);
    }
    let mut tokens = Vec::new();
    for id in &ids {
        let (_, token) = fenced_claim(&*store, &f.caller, id).await;
        tokens.push(token);
    }
    let finish = |token: Option<&String>| Finish {
        lease_token: token.cloned(),
        summary: Some("done in a batch".into()),
        ..Finish::default()
    };

    let lock = hold_row_lock(&url, &ids[0]).await;
    let leader = {
        let (store, caller, id, finish) = (
            store.clone(),
            f.caller.clone(),
            ids[0].clone(),
            finish(Some(&tokens[0])),
        );
        tokio::spawn(async move { store.complete(&caller, &id, finish).await })
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut watch = PgConnection::connect(&url).await.expect("connect");
    until_a_statement_waits(&mut watch, deadline).await;

    let wrong = "not-the-token".to_owned();
    let followers = [
        (f.caller.clone(), ids[1].clone(), finish(Some(&tokens[1]))),
        (f.caller.clone(), ids[2].clone(), finish(Some(&tokens[2]))),
        (f.caller.clone(), ids[3].clone(), finish(Some(&wrong))),
        (stranger.caller.clone(), ids[4].clone(), finish(None)),
        (f.caller.clone(), ids[5].clone(), finish(Some(&tokens[5]))),
        (f.caller.clone(), ids[5].clone(), finish(Some(&tokens[5]))),
    ];
    let mut answers = Vec::new();
    for (caller, id, finish) in followers {
        let store = store.clone();
        answers.push(tokio::spawn(async move {
            store.complete(&caller, &id, finish).await
        }));
    }
    until_finishes_queued(&store, answers.len(), deadline, "completes").await;
    release(lock).await;

    let first = leader.await.unwrap().expect("the first complete");
    assert_eq!(first.state, TodoState::Done);
    let mut results = Vec::new();
    for answer in answers {
        results.push(answer.await.unwrap());
    }
    let twice = results.split_off(4);
    let mut results = results.into_iter();
    for _ in 0..2 {
        let done = results
            .next()
            .unwrap()
            .expect("a valid complete in the batch");
        assert_eq!(done.state, TodoState::Done);
    }
    assert_conflict(results.next().unwrap());
    let stranger = results.next().unwrap();
    assert!(
        matches!(stranger, Err(StoreError::NotFound)),
        "another endpoint's todo: {stranger:?}"
    );
    assert_eq!(
        twice.iter().filter(|r| r.is_ok()).count(),
        1,
        "one of two completes of one todo wins: {twice:?}"
    );
    let (batches, batched) = store.finish_batches();
    assert!(
        batches >= 1 && batched >= 2,
        "the waiting completes ran together ({batches} batches, {batched} completes)"
    );

    let states: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT t.id, t.state::text, (SELECT count(*) FROM todo_attempts a \
           WHERE a.todo_id = t.id AND a.ended_at IS NULL) FROM todos t \
         WHERE t.id = ANY($1) ORDER BY t.created_at, t.id",
    )
    .bind(&ids)
    .fetch_all(&mut watch)
    .await
    .expect("read the todos");
    let expected = ["done", "done", "done", "claimed", "claimed", "done"];
    for ((id, state, open), want) in states.iter().zip(expected) {
        assert_eq!(state, want, "{id}");
        let open_wanted = i64::from(want == "claimed");
        assert_eq!(*open, open_wanted, "open attempts of {id}");
    }
    let summaries: (i64,) = sqlx::query_as(
        "SELECT count(*) FROM todo_attempts WHERE todo_id = ANY($1) \
         AND outcome = 'completed' AND summary = 'done in a batch'",
    )
    .bind(&ids)
    .fetch_one(&mut watch)
    .await
    .expect("read the attempts");
    assert_eq!(
        summaries.0, 4,
        "each completed attempt closed once, with its summary"
    );
    store.close().await;
}

/// `fail`s that arrive while another `fail` runs wait, then run as ONE
/// statement that decides each row's retry from that row: a todo with
/// attempts left is scheduled after its backoff, one at its cap is
/// dead-lettered, a wrong token changes nothing — each attempt closed with
/// its own disposition and summary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_fails_that_wait_run_as_one_statement_each_deciding_its_retry() {
    let Some(ts) = support::postgres_store("fail_batch").await else {
        return;
    };
    let url = ts.postgres_url().expect("a PostgreSQL store");
    let store = Arc::new(second_handle(&ts).await);
    let f = fixture(&*store, "ada").await;
    // The leader, two with attempts left, one at its cap, one with a wrong token.
    let caps = [3, 3, 3, 1, 3];
    let mut ids = Vec::new();
    let mut tokens = Vec::new();
    for (n, cap) in caps.iter().enumerate() {
        let todo = create(&*store, capped_todo(&f, &format!("todo {n}"), *cap)).await;
        let (_, token) = fenced_claim(&*store, &f.caller, &todo.id).await;
        ids.push(todo.id);
        tokens.push(token);
    }
    let finish = |token: &String| Finish {
        lease_token: Some(token.clone()),
        summary: Some("failed in a batch".into()),
        ..Finish::default()
    };
    let fail = |id: &String, finish: Finish| {
        let (store, caller, id) = (store.clone(), f.caller.clone(), id.clone());
        tokio::spawn(async move { store.fail(&caller, &id, finish).await })
    };

    let lock = hold_row_lock(&url, &ids[0]).await;
    let leader = fail(&ids[0], finish(&tokens[0]));
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut watch = PgConnection::connect(&url).await.expect("connect");
    until_a_statement_waits(&mut watch, deadline).await;
    let wrong = "not-the-token".to_owned();
    let followers = [
        fail(&ids[1], finish(&tokens[1])),
        fail(&ids[2], finish(&tokens[2])),
        fail(&ids[3], finish(&tokens[3])),
        fail(&ids[4], finish(&wrong)),
    ];
    until_finishes_queued(&store, followers.len(), deadline, "fails").await;
    release(lock).await;

    let now = ts.clock.now();
    let first = leader.await.unwrap().expect("the first fail");
    assert_eq!(
        first.next_retry_at,
        Some(now.add_secs(30)),
        "alone: backoff(1)"
    );
    let mut results = Vec::new();
    for answer in followers {
        results.push(answer.await.unwrap());
    }
    let (batches, batched) = store.finish_batches();
    assert!(
        batches >= 1 && batched >= 2,
        "the waiting fails ran together ({batches} batches, {batched} fails)"
    );
    for retried in &results[..2] {
        let retried = retried.as_ref().expect("a fail with attempts left");
        assert_eq!(retried.state, TodoState::Failed);
        assert_eq!(retried.next_retry_at, Some(now.add_secs(30)), "backoff(1)");
        assert_eq!(retried.completed_at, None);
    }
    let dead = results[2].as_ref().expect("a fail at its cap");
    assert_eq!(dead.state, TodoState::Failed);
    assert_eq!(dead.next_retry_at, None, "dead-lettered: no retry");
    assert_eq!(dead.completed_at, Some(now));
    assert_conflict(results.pop().unwrap());

    let attempts = closed_attempts(&mut watch, &ids).await;
    let summary = Some("failed in a batch".to_owned());
    let failed = |disposition: &str| {
        (
            "failed".to_owned(),
            Some("failed".to_owned()),
            Some(disposition.to_owned()),
            summary.clone(),
        )
    };
    assert_eq!(
        attempts,
        [
            failed("retry_scheduled"),
            failed("retry_scheduled"),
            failed("retry_scheduled"),
            failed("dead_lettered"),
            ("claimed".to_owned(), None, None, None),
        ],
        "each attempt closed once, with its own disposition"
    );
    store.close().await;
}

/// `release` is one statement on PostgreSQL too (`Ending::Release`): the
/// todo pending again and its attempt closed `released`/`requeued`, and
/// releases that wait run together, each held to its own guard (a wrong
/// token releases nothing and says `conflict`). It was a transaction of
/// its own (the row locked, then the attempt closed: four round trips).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_releases_that_wait_run_as_one_statement_each_with_its_own_guard() {
    let Some(ts) = support::postgres_store("release_batch").await else {
        return;
    };
    let url = ts.postgres_url().expect("a PostgreSQL store");
    let store = Arc::new(second_handle(&ts).await);
    let f = fixture(&*store, "ada").await;
    let mut ids = Vec::new();
    let mut tokens = Vec::new();
    for n in 0..4 {
        let todo = create(&*store, inbox_todo(&f, &format!("todo {n}"))).await;
        let (_, token) = fenced_claim(&*store, &f.caller, &todo.id).await;
        ids.push(todo.id);
        tokens.push(token);
    }
    let hand_back = |id: &String, token: &str| {
        let (store, caller, id) = (store.clone(), f.caller.clone(), id.clone());
        let opts = ReleaseOptions {
            summary: Some("handed back".into()),
            lease_token: Some(token.to_owned()),
        };
        tokio::spawn(async move { store.release(&caller, &id, opts).await })
    };

    let lock = hold_row_lock(&url, &ids[0]).await;
    let leader = hand_back(&ids[0], &tokens[0]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut watch = PgConnection::connect(&url).await.expect("connect");
    until_a_statement_waits(&mut watch, deadline).await;
    let followers = [
        hand_back(&ids[1], &tokens[1]),
        hand_back(&ids[2], &tokens[2]),
        hand_back(&ids[3], "not-the-token"),
    ];
    until_finishes_queued(&store, followers.len(), deadline, "releases").await;
    let (batches_before, _) = store.finish_batches();
    release(lock).await;

    let first = leader.await.unwrap().expect("the first release");
    assert_eq!(first.state, TodoState::Pending);
    assert_eq!(first.owner, None);
    let mut results = Vec::new();
    for answer in followers {
        results.push(answer.await.unwrap());
    }
    let (batches, batched) = store.finish_batches();
    assert!(
        batches > batches_before && batched >= 2,
        "the waiting releases ran together ({batches} batches, {batched} calls)"
    );
    for released in &results[..2] {
        let released = released.as_ref().expect("a release by its holder");
        assert_eq!(released.state, TodoState::Pending);
        assert_eq!(released.owner, None);
        assert_eq!(released.lease_expires_at, None);
    }
    assert_conflict(results.pop().unwrap());

    let attempts = closed_attempts(&mut watch, &ids).await;
    let released = (
        "pending".to_owned(),
        Some(Outcome::Released.as_str().to_owned()),
        Some(Disposition::Requeued.as_str().to_owned()),
        Some("handed back".to_owned()),
    );
    assert_eq!(
        attempts,
        [
            released.clone(),
            released.clone(),
            released,
            ("claimed".to_owned(), None, None, None),
        ],
        "each attempt closed once; the wrong token's todo still held"
    );
    store.close().await;
}

/// Claims queued behind a first one under admission limits that do not bind
/// run as ONE statement (`statements::claim_admitted_batch`): each gets an
/// in-flight slot of its own at the endpoint and at the queue, within the
/// limits, and the window is charged once per claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_claims_under_limits_that_wait_run_as_one_statement_with_a_slot_each() {
    let Some(ts) = support::postgres_store("claim_batch_admitted").await else {
        return;
    };
    let url = ts.postgres_url().expect("a PostgreSQL store").to_owned();
    let store = Arc::new(second_handle(&ts).await);
    let f = fixture(&*store, "ada").await;
    for n in 0..8 {
        add_todo(&*store, &f, &format!("todo {n}")).await;
    }
    let endpoint_limits = Limits {
        max_in_flight: Some(10),
        window: Some(Duration::from_secs(3600)),
        max_claims_per_window: Some(100),
        ..Limits::default()
    };
    let queue_limits = Limits {
        max_in_flight: Some(10),
        ..Limits::default()
    };
    for (queue, limits) in [(None, &endpoint_limits), (Some("inbox"), &queue_limits)] {
        store
            .set_admission(&f.human.id, &f.endpoint.id, queue, limits)
            .await
            .expect("set_admission");
    }

    let (leader, followers) = claims_queued_behind_one(&store, &f, &url, &FOLLOWERS).await;

    assert!(leader.await.unwrap().expect("claim").is_some());
    for answer in followers {
        assert!(
            answer.await.unwrap().expect("claim").is_some(),
            "work was pending"
        );
    }
    assert_eq!(
        store.claim_batches(),
        (1, 5),
        "the five queued claims were served by one statement"
    );
    let pool = PgPool::connect(&url).await.expect("connect");
    let slots: Vec<(Option<i64>, Option<i64>, Option<String>)> = sqlx::query_as(
        "SELECT t.endpoint_slot, t.queue_slot, a.claimant FROM todos t \
         JOIN todo_attempts a ON a.todo_id = t.id AND a.ended_at IS NULL \
         WHERE t.endpoint_id = $1 AND t.state = 'claimed'",
    )
    .bind(&f.endpoint.id)
    .fetch_all(&pool)
    .await
    .expect("read the claims");
    assert_eq!(slots.len(), 6, "six claims, one open attempt each");
    for column in [0, 1] {
        let mut taken: Vec<i64> = slots
            .iter()
            .map(|s| if column == 0 { s.0 } else { s.1 }.expect("a slot under a limit"))
            .collect();
        assert!(taken.iter().all(|s| (1..=10).contains(s)), "{taken:?}");
        taken.sort();
        taken.dedup();
        assert_eq!(taken.len(), 6, "a slot of its own at each level");
    }
    let mut claimants: Vec<String> = slots.into_iter().filter_map(|s| s.2).collect();
    claimants.sort();
    assert_eq!(claimants.len(), 6, "each its own claimant: {claimants:?}");
    let (charged,): (i64,) = sqlx::query_as(
        "SELECT CAST(COALESCE(sum(claims), 0) AS BIGINT) FROM admission_windows \
         WHERE endpoint_id = $1 AND queue = ''",
    )
    .bind(&f.endpoint.id)
    .fetch_one(&pool)
    .await
    .expect("read the window");
    assert_eq!(charged, 6, "the window charged once per claim");
    store.close().await;
}

/// A batch with no window shard that has room for all of its claims is not
/// admitted: its claims run alone and the window's budget holds (3 claims
/// an hour: 3 of 16 shards have a share of one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_claim_batch_beyond_a_window_runs_alone_and_the_budget_holds() {
    let Some(ts) = support::postgres_store("claim_batch_window").await else {
        return;
    };
    let url = ts.postgres_url().expect("a PostgreSQL store").to_owned();
    let store = Arc::new(second_handle(&ts).await);
    let f = fixture(&*store, "ada").await;
    for n in 0..8 {
        add_todo(&*store, &f, &format!("todo {n}")).await;
    }
    let limits = Limits {
        window: Some(Duration::from_secs(3600)),
        max_claims_per_window: Some(3),
        ..Limits::default()
    };
    store
        .set_admission(&f.human.id, &f.endpoint.id, None, &limits)
        .await
        .expect("set_admission");

    let (leader, followers) = claims_queued_behind_one(&store, &f, &url, &FOLLOWERS).await;

    let taken = claims_taken(leader, followers).await;
    assert_eq!(taken, 3, "the window's budget held");
    assert_eq!(store.claim_batches(), (0, 0), "no batch served a claim");
    store.close().await;
}

/// Two instances' batches and lone claims under limits at once never pass
/// a limit: 32 callers claim without completing until refused — the
/// queue's in-flight limit (30) binds first, each claim with slots of its
/// own — then claim and complete until the window (400) is spent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_batches_of_two_instances_hold_every_limit() {
    let Some(ts) = support::postgres_store("claim_batch_race").await else {
        return;
    };
    let url = ts.postgres_url().expect("a PostgreSQL store").to_owned();
    let stores = [
        Arc::new(second_handle(&ts).await),
        Arc::new(second_handle(&ts).await),
    ];
    let f = fixture(&*stores[0], "ada").await;
    for n in 0..450 {
        add_todo(&*stores[0], &f, &format!("todo {n}")).await;
    }
    let endpoint_limits = Limits {
        max_in_flight: Some(40),
        window: Some(Duration::from_secs(3600)),
        max_claims_per_window: Some(400),
        ..Limits::default()
    };
    let queue_limits = Limits {
        max_in_flight: Some(30),
        ..Limits::default()
    };
    for (queue, limits) in [(None, &endpoint_limits), (Some("inbox"), &queue_limits)] {
        stores[0]
            .set_admission(&f.human.id, &f.endpoint.id, queue, limits)
            .await
            .expect("set_admission");
    }
    // Every caller claims (and completes, when told to) until it is
    // refused three times in a row.
    let claim_until_refused = |complete: bool| {
        let callers: Vec<_> = (0..32)
            .map(|n| {
                let store = stores[n % 2].clone();
                let caller = f.caller.clone();
                tokio::spawn(async move {
                    let mut claimed = Vec::new();
                    let mut refused = 0;
                    while refused < 3 {
                        let opts = ClaimOptions {
                            claimant: Some(format!("caller-{n}")),
                            ..ClaimOptions::default()
                        };
                        match store.claim_next(&caller, None, opts).await.expect("claim") {
                            Some(c) => {
                                refused = 0;
                                if complete {
                                    store
                                        .complete(&caller, &c.todo.id, Finish::default())
                                        .await
                                        .expect("complete");
                                }
                                claimed.push(c.todo.id);
                            }
                            None => refused += 1,
                        }
                    }
                    claimed
                })
            })
            .collect();
        async move {
            let mut all = Vec::new();
            for caller in callers {
                all.extend(caller.await.unwrap());
            }
            let distinct: std::collections::HashSet<&String> = all.iter().collect();
            assert_eq!(distinct.len(), all.len(), "no todo claimed twice");
            all
        }
    };
    let held = claim_until_refused(false).await;
    assert_eq!(held.len(), 30, "the queue's in-flight limit");
    let pool = PgPool::connect(&url).await.expect("connect");
    let (live, endpoint_slots, queue_slots): (i64, i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT endpoint_slot), count(DISTINCT queue_slot) \
         FROM todos WHERE endpoint_id = $1 AND state = 'claimed'",
    )
    .bind(&f.endpoint.id)
    .fetch_one(&pool)
    .await
    .expect("read the claims");
    assert_eq!((live, endpoint_slots, queue_slots), (30, 30, 30));
    for id in &held {
        stores[0]
            .complete(&f.caller, id, Finish::default())
            .await
            .expect("complete");
    }
    let done = claim_until_refused(true).await;
    assert_eq!(done.len(), 370, "the rest of the window's 400");
    let (charged,): (i64,) = sqlx::query_as(
        "SELECT CAST(COALESCE(sum(claims), 0) AS BIGINT) FROM admission_windows \
         WHERE endpoint_id = $1 AND queue = ''",
    )
    .bind(&f.endpoint.id)
    .fetch_one(&pool)
    .await
    .expect("read the window");
    assert_eq!(charged, 400, "the window charged once per claim");
    for store in stores {
        store.close().await;
    }
}

/// The batch under limits claims nothing for a paused level (read once by
/// the batch itself, not per candidate): the statement alone, on an
/// endpoint with an in-flight limit whose queue is paused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_claim_batch_takes_nothing_from_a_paused_queue() {
    let Some(ts) = support::postgres_store("claim_batch_paused").await else {
        return;
    };
    let url = ts.postgres_url().expect("a PostgreSQL store").to_owned();
    let store = second_handle(&ts).await;
    let f = fixture(&store, "ada").await;
    for n in 0..4 {
        add_todo(&store, &f, &format!("todo {n}")).await;
    }
    let limits = [
        (
            None,
            Limits {
                max_in_flight: Some(10),
                ..Limits::default()
            },
        ),
        (
            Some("inbox"),
            Limits {
                paused: true,
                ..Limits::default()
            },
        ),
    ];
    for (queue, limits) in &limits {
        store
            .set_admission(&f.human.id, &f.endpoint.id, *queue, limits)
            .await
            .expect("set_admission");
    }
    let holders = r#"[{"n":1,"now":5,"owner":"o","expires":9,"fence":null,"claimant":"a"},
                      {"n":2,"now":5,"owner":"o","expires":9,"fence":null,"claimant":"b"}]"#;
    let batch = switchboard::store::sql::statements::claim_admitted_batch(
        switchboard::store::sql::statements::ClaimScope::AnyQueue,
    );
    let pool = PgPool::connect(&url).await.expect("connect");
    let rows = sqlx::query(sqlx::AssertSqlSafe(batch))
        .bind(6_i64)
        .bind(holders)
        .bind(2_i64)
        .bind(8_i64)
        .bind(&f.endpoint.id)
        .fetch_all(&pool)
        .await
        .expect("run the batch");
    let rows: Vec<(bool, Option<i64>)> = rows
        .iter()
        .map(|r| (r.get("admitted"), r.get("holder")))
        .collect();
    assert_eq!(rows, [(false, None)], "not admitted, nothing claimed");
    let (pending,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM todos WHERE endpoint_id = $1 AND state = 'pending'")
            .bind(&f.endpoint.id)
            .fetch_one(&pool)
            .await
            .expect("count");
    assert_eq!(pending, 4);
    store.close().await;
}

/// SQLite: each verb of the agent's loop — the pending claim, heartbeat,
/// release, fail and complete — is one job of the writer thread (one of its
/// transactions, run alone), never a second writer on the sqlx pool beside
/// it waiting on SQLite's lock.
#[tokio::test]
async fn on_sqlite_every_verb_of_the_loop_is_a_writer_thread_job() {
    let ts = support::sqlite_store().await;
    let store = &*ts.store;
    let f = fixture(store, "ada").await;
    for n in 0..2 {
        create(store, inbox_todo(&f, &format!("todo {n}"))).await;
    }
    let writer_jobs = || store.sqlite_writer_transactions().expect("a writer thread");
    let mut before = writer_jobs();
    let mut ran_one_job = |verb: &str| {
        let after = writer_jobs();
        assert_eq!(after, before + 1, "{verb}");
        before = after;
    };
    let next = || store.claim_next(&f.caller, None, ClaimOptions::default());

    let held = next().await.unwrap().expect("a pending todo");
    ran_one_job("claim_next");
    let id = held.todo.id;
    store
        .heartbeat(&f.caller, &id, HeartbeatOptions::default())
        .await
        .unwrap();
    ran_one_job("heartbeat");
    let released = store
        .release(&f.caller, &id, ReleaseOptions::default())
        .await
        .unwrap();
    assert_eq!(released.state, TodoState::Pending);
    ran_one_job("release");
    let again = next().await.unwrap().expect("the released todo");
    assert_eq!(again.todo.id, id);
    ran_one_job("claim_next");
    let failed = store.fail(&f.caller, &id, Finish::default()).await.unwrap();
    assert_eq!(failed.state, TodoState::Failed);
    ran_one_job("fail");
    let other = next().await.unwrap().expect("the second todo");
    ran_one_job("claim_next");
    store
        .complete(&f.caller, &other.todo.id, Finish::default())
        .await
        .unwrap();
    ran_one_job("complete");
    let history = attempts(store, &f.caller, &id).await;
    let outcomes: Vec<_> = history.iter().map(|a| (a.outcome, a.disposition)).collect();
    assert_eq!(
        outcomes,
        [
            (Some(Outcome::Failed), Some(Disposition::RetryScheduled)),
            (Some(Outcome::Released), Some(Disposition::Requeued)),
        ],
        "newest first"
    );
}

/// `complete` with `next` calls of one endpoint queued behind a first one
/// run as ONE statement (`statements::complete_then_claim_batch`): each
/// completion held to its own guard, each holder whose completion matched
/// given a pending todo of its own, all in one transaction; a refused
/// completion claims nothing and is answered why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_completes_with_next_that_wait_run_as_one_statement() {
    let Some(ts) = support::postgres_store("chained_batch").await else {
        return;
    };
    let url = ts.postgres_url().expect("a PostgreSQL store");
    let store = Arc::new(second_handle(&ts).await);
    let f = fixture(&*store, "ada").await;
    let (mut held, mut tokens) = (Vec::new(), Vec::new());
    for n in 0..4 {
        let todo = create(&*store, inbox_todo(&f, &format!("held {n}"))).await;
        let (_, token) = fenced_claim(&*store, &f.caller, &todo.id).await;
        held.push(todo.id);
        tokens.push(token);
    }
    let mut pending = Vec::new();
    for n in 0..3 {
        ts.clock.advance(Duration::from_millis(1));
        pending.push(
            create(&*store, inbox_todo(&f, &format!("pending {n}")))
                .await
                .id,
        );
    }
    let chain = |id: &String, token: &str| {
        let (store, caller, id) = (store.clone(), f.caller.clone(), id.clone());
        let finish = Finish {
            summary: Some("done".into()),
            lease_token: Some(token.to_owned()),
            ..Finish::default()
        };
        let opts = ClaimOptions {
            claimant: Some("chain".into()),
            ..ClaimOptions::default()
        };
        tokio::spawn(async move {
            store
                .complete_then_claim_next(&caller, &id, finish, None, opts)
                .await
        })
    };

    let lock = hold_row_lock(&url, &held[0]).await;
    let leader = chain(&held[0], &tokens[0]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut watch = PgConnection::connect(&url).await.expect("connect");
    until_a_statement_waits(&mut watch, deadline).await;
    let followers = [
        chain(&held[1], &tokens[1]),
        chain(&held[2], &tokens[2]),
        chain(&held[3], "not-the-token"),
    ];
    while store.chained_waiting() < followers.len() {
        assert!(Instant::now() < deadline, "the calls never queued");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (batches_before, _) = store.chained_batches();
    release(lock).await;

    let (done, next) = leader.await.unwrap().expect("the first call");
    assert_eq!(
        (done.id.as_str(), done.state),
        (held[0].as_str(), TodoState::Done)
    );
    assert_eq!(next.expect("the oldest pending").todo.id, pending[0]);
    let mut results = Vec::new();
    for answer in followers {
        results.push(answer.await.unwrap());
    }
    let (batches, batched) = store.chained_batches();
    assert!(
        batches > batches_before && batched >= 2,
        "the waiting calls ran together ({batches} batches, {batched} calls)"
    );
    assert_conflict(results.pop().unwrap());
    let mut claimed = Vec::new();
    for (n, answer) in results.into_iter().enumerate() {
        let (done, next) = answer.expect("a completion by its holder");
        assert_eq!(
            (done.id.as_str(), done.state),
            (held[n + 1].as_str(), TodoState::Done)
        );
        let next = next.expect("a pending todo of its own");
        assert_eq!(next.todo.owner, Some(f.caller.owner()));
        assert_eq!(next.attempt_seq, 1);
        claimed.push(next.todo.id);
    }
    claimed.sort();
    assert_eq!(claimed, [pending[1].clone(), pending[2].clone()]);

    let written_by: Vec<String> =
        sqlx::query_scalar("SELECT DISTINCT xmin::text FROM todos WHERE id = ANY($1)")
            .bind([
                held[1].clone(),
                held[2].clone(),
                pending[1].clone(),
                pending[2].clone(),
            ])
            .fetch_all(&mut watch)
            .await
            .expect("read the writers");
    assert_eq!(written_by.len(), 1, "one transaction: {written_by:?}");
    let done = (
        "done".to_owned(),
        Some(Outcome::Completed.as_str().to_owned()),
        Some(Disposition::Done.as_str().to_owned()),
        Some("done".to_owned()),
    );
    assert_eq!(
        closed_attempts(&mut watch, &held).await,
        [
            done.clone(),
            done.clone(),
            done,
            ("claimed".to_owned(), None, None, None),
        ],
        "each completion closed its attempt once; the wrong token's todo still held"
    );
    let opened: Vec<(Option<String>, Option<i64>)> =
        sqlx::query_as("SELECT claimant, ended_at FROM todo_attempts WHERE todo_id = ANY($1)")
            .bind(&pending)
            .fetch_all(&mut watch)
            .await
            .expect("read the new attempts");
    assert_eq!(opened, vec![(Some("chain".to_owned()), None); 3]);
    store.close().await;
}
