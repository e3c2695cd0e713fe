//! PostgreSQL only: the plans of the statements that run all the time.
//!
//! The agent loop's statements keep their key lookups however small a table
//! was when their connection first planned them.
//!
//! A prepared statement's generic plan is fixed at its sixth run on a
//! connection. On a young database, just analyzed while `todo_attempts` was
//! empty, `complete`'s update of the open attempt was planned as a
//! sequential scan, and every later `complete` on that connection scanned
//! the whole, growing history until autovacuum's next ANALYZE (B2: 1.78 ms
//! per call instead of 0.35; issue 14). The hot path's connections run with
//! sequential scans disabled (`src/store/sql/hot.rs`).
//!
//! The re-ring sweep's due read meets the old row version a ring left behind
//! once, not on every tick until the next vacuum (B5: with 5 000 todos just
//! rung among 1 000 000 finished ones, a tick with nothing due took ~6 ms
//! instead of ~3). It runs as plain index range scans, which mark the index
//! entries of dead versions as they meet them; a bitmap scan never does.

use std::time::{Duration, Instant};

use sqlx::Connection;
use sqlx::postgres::PgConnection;
use switchboard::store::*;

use super::rings::{rung_todo, steps};
use crate::common::*;
use crate::support::{self, Fixture, fixture, second_handle};

/// Loops run after the ANALYZE: enough for every hot statement to have its
/// generic plan (built at the sixth run) on the connection it ran on.
const LOOPS: usize = 24;

/// One turn of the agent loop: claim the endpoint's oldest pending todo and
/// complete it.
async fn claim_next_and_complete(store: &dyn Store, f: &Fixture) -> String {
    let claimed = store
        .claim_next(&f.caller, None, ClaimOptions::default())
        .await
        .unwrap()
        .expect("a todo is pending");
    store
        .complete(&f.caller, &claimed.todo.id, Finish::default())
        .await
        .unwrap();
    claimed.todo.id
}

/// `(seq_scan, idx_scan)` of `table` as PostgreSQL's statistics have them.
async fn scans(db: &mut PgConnection, table: &str) -> (i64, i64) {
    sqlx::query_as(
        "SELECT seq_scan, COALESCE(idx_scan, 0) FROM pg_stat_user_tables WHERE relname = $1",
    )
    .bind(table)
    .fetch_one(db)
    .await
    .expect("read table statistics")
}

/// Waits until no other backend is connected to this database: a backend
/// reports its statistics when it exits.
async fn until_the_store_has_disconnected(db: &mut PgConnection) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (others,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        .fetch_one(&mut *db)
        .await
        .expect("read pg_stat_activity");
        if others == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the store's {others} connections did not close within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_the_agent_loop_never_scans_the_attempt_history() {
    let Some(ts) = support::postgres_store("hot_path_plans").await else {
        return;
    };
    let url = ts.postgres_url().expect("a PostgreSQL store");
    let store = &*ts.store;
    let f = fixture(store, "ada").await;
    let mut db = PgConnection::connect(&url).await.expect("connect");
    // What autovacuum does to a young database: the attempt history is
    // known to be empty.
    sqlx::raw_sql("ANALYZE todo_attempts")
        .execute(&mut db)
        .await
        .unwrap();

    for n in 0..LOOPS {
        add_todo(store, &f, &format!("todo {n}")).await;
        claim_next_and_complete(store, &f).await;
    }
    store.close().await;
    until_the_store_has_disconnected(&mut db).await;

    let (seq_scans, index_scans) = scans(&mut db, "todo_attempts").await;
    assert!(
        index_scans >= LOOPS as i64,
        "every complete finds its open attempt by index ({index_scans} index scans counted)"
    );
    assert_eq!(
        seq_scans, 0,
        "the agent loop scanned the attempt history {seq_scans} times"
    );
    drop(db);
    ts.finish().await;
}

/// `(idx_scan, idx_tup_read)` of `index` as PostgreSQL's statistics have them.
async fn index_use(db: &mut PgConnection, index: &str) -> (i64, i64) {
    sqlx::query_as(
        "SELECT idx_scan, idx_tup_read FROM pg_stat_user_indexes WHERE indexrelname = $1",
    )
    .bind(index)
    .fetch_one(db)
    .await
    .expect("read index statistics")
}

/// Another endpoint's todos, a fifth of them claimed, when the statistics
/// are taken.
const OTHERS: usize = 200;

/// `complete` finds its todo by its key on every run, whatever the
/// statistics say of the endpoint. A plan made for the bound values
/// (PostgreSQL's custom plan: the first five runs of a prepared statement
/// on a connection, and every run once one is estimated cheaper than the
/// generic plan) reads the claimed leases of an endpoint the statistics
/// have not seen yet instead. Under load that was three runs in four
/// planned again (B1 c = 16: 13 % of PostgreSQL's CPU in the planner). The
/// hot path's sessions plan generically (`src/store/sql/hot.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_complete_is_a_key_lookup_whatever_the_statistics() {
    let Some(ts) = support::postgres_store("complete_plans").await else {
        return;
    };
    let url = ts.postgres_url().expect("a PostgreSQL store");
    let store = &*ts.store;
    let others = fixture(store, "bob").await;
    for n in 0..OTHERS {
        add_todo(store, &others, &format!("other {n}")).await;
    }
    for _ in 0..OTHERS / 5 {
        store
            .claim_next(&others.caller, None, ClaimOptions::default())
            .await
            .unwrap()
            .expect("a todo is pending");
    }
    let mut db = PgConnection::connect(&url).await.expect("connect");
    sqlx::raw_sql("ANALYZE todos")
        .execute(&mut db)
        .await
        .unwrap();
    let f = fixture(store, "ada").await;
    for n in 0..LOOPS {
        add_todo(store, &f, &format!("todo {n}")).await;
    }
    store.close().await;
    until_the_store_has_disconnected(&mut db).await;
    let leases_before = index_use(&mut db, "todos_claimed_by_endpoint").await;

    let store = second_handle(&ts).await;
    for _ in 0..LOOPS {
        claim_next_and_complete(&store, &f).await;
    }
    store.close().await;
    until_the_store_has_disconnected(&mut db).await;

    let leases_after = index_use(&mut db, "todos_claimed_by_endpoint").await;
    assert_eq!(
        leases_after, leases_before,
        "(scans, entries read) of the claimed-lease index: the loop read the endpoint's \
         leases instead of looking its todo up by key"
    );
    drop(db);
    ts.finish().await;
}

/// A lone claim of an endpoint without admission limits (most endpoints)
/// runs the claim without admission checks, slots or window charge
/// (`statements::claim_pending_unlimited`): it reads the endpoint's
/// admission rows once, to find it has none. The full claim reads them in
/// five places (its two held checks, two slots and the window's levels),
/// and PostgreSQL starts every part of its plan on every run (a lone
/// claim's CPU a third more).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_lone_claim_without_limits_reads_admission_once() {
    let Some(ts) = support::postgres_store("unlimited_claims").await else {
        return;
    };
    let url = ts.postgres_url().expect("a PostgreSQL store");
    let store = &*ts.store;
    let f = fixture(store, "ada").await;
    for n in 0..LOOPS {
        add_todo(store, &f, &format!("todo {n}")).await;
    }
    let mut db = PgConnection::connect(&url).await.expect("connect");
    store.close().await;
    until_the_store_has_disconnected(&mut db).await;
    let before = scans(&mut db, "admission").await;

    let store = second_handle(&ts).await;
    for _ in 0..LOOPS {
        claim_next_and_complete(&store, &f).await;
    }
    store.close().await;
    until_the_store_has_disconnected(&mut db).await;
    let after = scans(&mut db, "admission").await;
    let (seq, idx) = (after.0 - before.0, after.1 - before.1);
    assert_eq!(seq, 0, "sequential scans of admission");
    assert!(
        idx <= LOOPS as i64,
        "{idx} index scans of admission for {LOOPS} lone claims: more than one a claim"
    );
    drop(db);
    ts.finish().await;
}

/// Todos rung at once before the due reads: enough, once analyzed, for
/// PostgreSQL to prefer a bitmap scan where it may.
const RUNG: usize = 100;
/// Due reads, each on a fresh connection, before the old versions must have
/// been skipped. An index scan marks an entry dead only once its row version
/// is dead to every snapshot, which other databases' busy backends on the
/// same server (the other tests) can delay by a read or two.
const DUE_READS: usize = 20;

/// How many entries scans of `index` have returned, as PostgreSQL's
/// statistics have them.
async fn entries_read(db: &mut PgConnection, index: &str) -> i64 {
    index_use(db, index).await.1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_the_due_read_skips_what_a_ring_left_behind() {
    let Some(ts) = support::postgres_store("due_read_plans").await else {
        return;
    };
    let url = ts.postgres_url().expect("a PostgreSQL store");
    let store = &*ts.store;
    let f = fixture(store, "ada").await;
    let hosted = vec![f.endpoint.id.clone()];
    for n in 0..RUNG {
        create(store, rung_todo(&f.endpoint.id, &format!("todo {n}"))).await;
    }
    // Statistics that know of the due todos, as a busy queue's would.
    let mut db = PgConnection::connect(&url).await.expect("connect");
    sqlx::raw_sql("ANALYZE todos")
        .execute(&mut db)
        .await
        .unwrap();
    advance_secs(&ts, 5 * 60);
    let rung = store
        .unscoped_claim_due_rings(&hosted, &steps(), 100)
        .await
        .unwrap();
    assert_eq!(rung.len(), RUNG, "every todo's first ring was due");
    // Each ring moved its todo's key in `todos_ring_clock`, leaving an
    // entry that points at the old version.
    store.close().await;
    until_the_store_has_disconnected(&mut db).await;

    let mut per_read = Vec::new();
    let mut before = entries_read(&mut db, "todos_ring_clock").await;
    while per_read.len() < DUE_READS && per_read.last() != Some(&0) {
        // A sweeper of its own per read: its statistics arrive when it
        // disconnects.
        let sweeper = second_handle(&ts).await;
        let due = sweeper
            .unscoped_endpoints_with_due_rings(&hosted, &steps(), 100)
            .await
            .unwrap();
        assert!(due.is_empty(), "every todo was just rung: {due:?}");
        sweeper.close().await;
        until_the_store_has_disconnected(&mut db).await;
        let after = entries_read(&mut db, "todos_ring_clock").await;
        per_read.push(after - before);
        before = after;
    }
    assert_eq!(
        per_read.last(),
        Some(&0),
        "entries of the ring clock returned by each due read: {per_read:?}; the old \
         versions of the {RUNG} rung todos are to be skipped once met"
    );
    drop(db);
    ts.finish().await;
}

/// Inserts `count` done todos of `endpoint_id` (ids and titles `label` + n),
/// created and finished at `first` + n milliseconds.
async fn insert_done(
    db: &mut PgConnection,
    endpoint_id: &str,
    label: &str,
    count: i64,
    first: i64,
) {
    sqlx::query(
        "INSERT INTO todos (id, endpoint_id, queue, title, state, created_at, updated_at, \
           completed_at) \
         SELECT $1 || $2 || n, $1, 'inbox', $2, 'done', $3 + n, $3 + n, $3 + n \
         FROM generate_series(1, $4) n",
    )
    .bind(endpoint_id)
    .bind(label)
    .bind(first)
    .bind(count)
    .execute(db)
    .await
    .expect("insert done todos");
}

/// `(sequential scans of todos, entries read from the listings' index)` as
/// PostgreSQL's statistics have them.
async fn listing_reads(db: &mut PgConnection) -> (i64, i64) {
    let (seq_scans, _) = scans(db, "todos").await;
    let (_, entries) = index_use(db, "todos_by_endpoint_created").await;
    (seq_scans, entries)
}

/// Finished todos inserted for each endpoint: `count` of them labelled
/// `label`, created `first` + n milliseconds.
struct Batch {
    label: &'static str,
    count: i64,
    first: i64,
}

/// A human with two endpoints and their finished history, analyzed, with the
/// test's own connection to read what later statements cost.
struct TwoEndpoints {
    fixture: Fixture,
    db: PgConnection,
    /// `listing_reads` once the history was loaded and its loader gone.
    before: (i64, i64),
}

impl TwoEndpoints {
    /// Loads `history` for both endpoints, analyzes `todos` and closes the
    /// test store, so that the statistics from here on are the next store's.
    async fn with_history(ts: &support::TestStore, history: &[Batch]) -> Self {
        let url = ts.postgres_url().expect("a PostgreSQL store");
        let store = &*ts.store;
        let fixture = fixture(store, "ada").await;
        let human = store.get_human(&fixture.human.id).await.unwrap();
        let second = support::endpoint_for(store, human, "second", &["inbox"]).await;
        let mut db = PgConnection::connect(&url).await.expect("connect");
        for endpoint in [&fixture, &second] {
            for batch in history {
                let id = &endpoint.endpoint.id;
                insert_done(&mut db, id, batch.label, batch.count, batch.first).await;
            }
        }
        sqlx::raw_sql("ANALYZE todos")
            .execute(&mut db)
            .await
            .unwrap();
        store.close().await;
        until_the_store_has_disconnected(&mut db).await;
        let before = listing_reads(&mut db).await;
        Self {
            fixture,
            db,
            before,
        }
    }

    /// Closes `store` and returns `(sequential scans of todos, entries read
    /// from the listings' index)` since the history was loaded: a backend
    /// reports its statistics when it exits.
    async fn reads_once_closed(&mut self, store: SqlStore) -> (i64, i64) {
        store.close().await;
        until_the_store_has_disconnected(&mut self.db).await;
        let (seq_scans, entries) = listing_reads(&mut self.db).await;
        (seq_scans - self.before.0, entries - self.before.1)
    }
}

/// Finished todos of each of the human's endpoints before the listing.
const HISTORY: i64 = 2_000;
/// The listing's page.
const PAGE: i64 = 10;

/// A human's listing across their endpoints reads a page's worth from each
/// endpoint's end of the listings' index, not the endpoints' whole history:
/// no index is ordered across endpoints, and the one pass over every todo of
/// the human and a sort for each page (65 ms over 300 000 todos) ran every
/// two seconds per open board page, whose live view reads the newest todo.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_humans_listing_reads_a_page_per_endpoint_not_the_history() {
    let Some(ts) = support::postgres_store("listing_plans").await else {
        return;
    };
    let history = [Batch {
        label: "history",
        count: HISTORY,
        first: 0,
    }];
    let mut two = TwoEndpoints::with_history(&ts, &history).await;

    let store = second_handle(&ts).await;
    let mut page = PageRequest {
        limit: PAGE,
        after: None,
    };
    for _ in 0..2 {
        let got = store
            .human_list_todos(&two.fixture.human.id, &TodoFilter::default(), &page)
            .await
            .unwrap();
        assert_eq!(got.items.len() as i64, PAGE);
        page.after = got.next_cursor;
    }
    let (seq_scans, entries) = two.reads_once_closed(store).await;

    assert_eq!(seq_scans, 0, "the listing scanned the todos table");
    let bound = 2 * 2 * (PAGE + 1);
    assert!(
        entries <= bound,
        "two pages read {entries} entries of the listings' index; a page's worth per \
         endpoint is at most {bound}"
    );
    drop(two);
    ts.finish().await;
}

/// Finished todos per endpoint past retention, and the batch that prunes them.
const DUE: i64 = 50;
const BATCH: i64 = 40;

/// A retention pass reads each endpoint's todos created before the cutoff,
/// never the history created since, and never scans the table: as one range
/// over the listings' index from the cursor to its end, PostgreSQL's custom
/// plans took a sequential scan and a sort of all of `todos` (B5: 189 ms a
/// batch over 1 000 000 todos), and the pass's last batch read the whole
/// index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_retention_reads_what_is_old_not_the_history() {
    let Some(ts) = support::postgres_store("retention_plans").await else {
        return;
    };
    let now = ts.clock_now().as_millis();
    let day: i64 = 86_400_000;
    let history = [
        Batch {
            label: "recent",
            count: HISTORY,
            first: now - day,
        },
        Batch {
            label: "old",
            count: DUE,
            first: now - 40 * day,
        },
    ];
    let mut two = TwoEndpoints::with_history(&ts, &history).await;

    let store = second_handle(&ts).await;
    let (mut deleted, mut batches) = (0, 0);
    let mut cursor = RetentionCursor::start();
    loop {
        let pruned = store
            .unscoped_prune_terminal_todos(Duration::from_secs(30 * 86_400), BATCH, &cursor)
            .await
            .unwrap();
        deleted += pruned.deleted as i64;
        batches += 1;
        match pruned.resume_after {
            Some(next) => cursor = next,
            None => break,
        }
    }
    let (seq_scans, entries) = two.reads_once_closed(store).await;

    assert_eq!(deleted, 2 * DUE, "every old todo, and nothing else");
    assert_eq!(seq_scans, 0, "retention scanned the todos table");
    // Each batch reads the old todos it deletes and, per endpoint it visits,
    // the first entry past the cutoff.
    let bound = 2 * DUE + batches * 2 * 2;
    assert!(
        entries <= bound,
        "{batches} batches read {entries} entries of the listings' index for {} old todos \
         (at most {bound}); the history is {} todos",
        2 * DUE,
        2 * HISTORY
    );
    drop(two);
    ts.finish().await;
}

/// Pending todos behind the claims, when the statistics are taken.
const BACKLOG: usize = 2_000;

/// With admission limits set (one endpoint row: the shape that made
/// PostgreSQL plan an anti join over every pending todo and a sort, 430–580
/// ms a claim in B10), a claim still reads the head of the pending index:
/// a few entries per claim, not the backlog.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_claim_under_admission_limits_reads_the_head_of_the_pending_index() {
    let Some(ts) = support::postgres_store("admission_plans").await else {
        return;
    };
    let url = ts.postgres_url().expect("a PostgreSQL store");
    let store = &*ts.store;
    let f = fixture(store, "ada").await;
    for n in 0..BACKLOG {
        let mut new = NewTodo::new(&f.endpoint.id, "inbox", format!("todo {n}"));
        new.priority = (n % 7) as i64;
        create(store, new).await;
    }
    let limits = switchboard::domain::admission::Limits {
        max_in_flight: Some(1_000),
        ..Default::default()
    };
    store
        .set_admission(&f.human.id, &f.endpoint.id, None, &limits)
        .await
        .unwrap();
    let mut db = PgConnection::connect(&url).await.expect("connect");
    sqlx::raw_sql("ANALYZE todos; ANALYZE admission")
        .execute(&mut db)
        .await
        .unwrap();
    store.close().await;
    until_the_store_has_disconnected(&mut db).await;
    let before = index_use(&mut db, "todos_pending_by_endpoint").await;

    let store = second_handle(&ts).await;
    for _ in 0..LOOPS {
        claim_next_and_complete(&store, &f).await;
    }
    store.close().await;
    until_the_store_has_disconnected(&mut db).await;
    let after = index_use(&mut db, "todos_pending_by_endpoint").await;
    let (scans, read) = (after.0 - before.0, after.1 - before.1);
    assert!(
        scans >= LOOPS as i64,
        "each claim read the pending index ({scans} scans)"
    );
    assert!(
        read < (LOOPS * 20) as i64,
        "{read} pending-index entries read for {LOOPS} claims: the claims walked the backlog"
    );
    drop(db);
    ts.finish().await;
}

/// A lone claim under in-flight limits looks each slot it tries up by key
/// in the slot's unique index, whatever the statistics say. Written as an
/// anti join, PostgreSQL's generic plan, made from statistics that knew of
/// no live claim (as after a preload), read and kept every live claim's
/// slot of the endpoint on every claim (B10: a join and a materialization to
/// set up each time, and a scan of them all per slot tried;
/// `statements::spread_free_slot`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_lone_claim_looks_its_slot_up_by_key() {
    let Some(ts) = support::postgres_store("slot_plans").await else {
        return;
    };
    let url = ts.postgres_url().expect("a PostgreSQL store");
    let store = &*ts.store;
    let f = fixture(store, "ada").await;
    for n in 0..BACKLOG {
        create(
            store,
            NewTodo::new(&f.endpoint.id, "inbox", format!("todo {n}")),
        )
        .await;
    }
    let limits = switchboard::domain::admission::Limits {
        max_in_flight: Some(1_000),
        ..Default::default()
    };
    for queue in [None, Some("inbox")] {
        store
            .set_admission(&f.human.id, &f.endpoint.id, queue, &limits)
            .await
            .unwrap();
    }
    let mut db = PgConnection::connect(&url).await.expect("connect");
    let claim = switchboard::store::sql::statements::claim_pending_with_attempt(
        switchboard::store::sql::statements::ClaimScope::AnyQueue,
    );
    let script = format!(
        "ANALYZE todos; ANALYZE admission; SET enable_seqscan = off; \
         SET enable_bitmapscan = off; SET plan_cache_mode = force_generic_plan; \
         PREPARE claim(bigint, text, bigint, text, text, text) AS {claim}"
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(script))
        .execute(&mut db)
        .await
        .expect("prepare the claim");
    let explain = format!(
        "EXPLAIN (COSTS OFF) EXECUTE claim(1, 'o', 2, NULL, '{}', NULL)",
        f.endpoint.id
    );
    let plan: Vec<(String,)> = sqlx::query_as(sqlx::AssertSqlSafe(explain))
        .fetch_all(&mut db)
        .await
        .expect("explain the claim");
    let plan: Vec<String> = plan.into_iter().map(|(line,)| line).collect();
    for (slot_index, slot) in [
        ("todos_endpoint_slot", "endpoint_slot = "),
        ("todos_queue_slot", "queue_slot = "),
    ] {
        let scans: Vec<usize> = (0..plan.len())
            .filter(|&n| plan[n].contains(&format!("using {slot_index}")))
            .collect();
        assert!(
            !scans.is_empty(),
            "the claim reads {slot_index}:\n{}",
            plan.join("\n")
        );
        for n in scans {
            let cond = plan.get(n + 1).map_or("", String::as_str);
            assert!(
                cond.contains("Index Cond") && cond.contains(slot),
                "a read of {slot_index} not by the slot's key:\n{}",
                plan.join("\n")
            );
        }
    }
    drop(db);
    ts.finish().await;
}

/// The number of manual VACUUMs PostgreSQL's statistics count for `todos`
/// (the store's background vacuum is one; autovacuum counts apart).
async fn vacuums_of_todos(db: &mut PgConnection) -> i64 {
    let (n,): (i64,) =
        sqlx::query_as("SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'todos'")
            .fetch_one(db)
            .await
            .expect("read table statistics");
    n
}

/// The store vacuums the queue table itself as its claims go by (issue 47,
/// `src/store/sql/postgres/vacuum.rs`): each claim leaves a dead entry at
/// the head of the pending index that every later claim steps over until a
/// vacuum removes it, and autovacuum comes at most once a minute. Here a
/// vacuum is due every 3 claims: one runs, in the background, and the
/// queue goes on in order; with the vacuum off, none runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_the_store_vacuums_the_queue_table_as_claims_go_by() {
    let Some(ts) = support::postgres_store("queue_vacuum").await else {
        return;
    };
    let url = ts.postgres_url().expect("a PostgreSQL store");
    let mut db = PgConnection::connect(&url).await.expect("connect");
    let open = |claims: Option<u64>| {
        let (url, clock) = (url.clone(), ts.clock.clone());
        async move {
            SqlStore::connect(
                &DatabaseLocation::Postgres(url),
                clock,
                &StoreOptions {
                    queue_vacuum_claims: claims,
                    ..StoreOptions::default()
                },
            )
            .await
            .expect("open a store")
        }
    };

    let off = open(None).await;
    let f = fixture(&off, "ada").await;
    let mut created = Vec::new();
    for n in 0..9 {
        created.push(add_todo(&off, &f, &format!("todo {n}")).await.id);
    }
    for _ in 0..3 {
        claim_next_and_complete(&off, &f).await;
    }
    assert_eq!(off.queue_vacuums(), 0, "the vacuum is off");
    off.close().await;

    let before = vacuums_of_todos(&mut db).await;
    let store = open(Some(3)).await;
    let mut claimed = Vec::new();
    for _ in 0..3 {
        claimed.push(claim_next_and_complete(&store, &f).await);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while store.queue_vacuums() == 0 || vacuums_of_todos(&mut db).await == before {
        assert!(
            Instant::now() < deadline,
            "no vacuum of todos within 20 s of the third claim"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(store.queue_vacuums(), 1);
    for _ in 0..3 {
        let c = store
            .claim_next(&f.caller, None, ClaimOptions::default())
            .await
            .unwrap()
            .expect("a todo is pending");
        claimed.push(c.todo.id);
    }
    assert_eq!(claimed, created[3..], "claimed oldest first, each once");
    store.close().await;
}

/// What the server logs, captured (`tracing`'s default for this thread).
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A vacuum skipped because another session holds the table (autovacuum,
/// another instance's vacuum) is nothing an operator can act on: the
/// store's vacuum says nothing of it, where sqlx logged PostgreSQL's
/// `WARNING: skipping vacuum of "todos" --- lock not available` at `WARN`
/// every second or so under load. A current-thread runtime, so that the
/// background vacuum logs to this thread's subscriber.
#[tokio::test]
async fn on_postgres_a_skipped_vacuum_of_the_queue_table_logs_nothing() {
    let Some(ts) = support::postgres_store("quiet_vacuum").await else {
        return;
    };
    let url = ts.postgres_url().expect("a PostgreSQL store");
    let logged = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer({
            let logged = logged.clone();
            move || logged.clone()
        })
        .finish();
    let _capture = tracing::subscriber::set_default(subscriber);

    let store = SqlStore::connect(
        &DatabaseLocation::Postgres(url.clone()),
        ts.clock.clone(),
        &StoreOptions {
            queue_vacuum_claims: Some(1),
            ..StoreOptions::default()
        },
    )
    .await
    .expect("open a store");
    let f = fixture(&store, "ada").await;
    add_todo(&store, &f, "one").await;
    // The lock a vacuum takes, held by another session as autovacuum would.
    let mut holder = PgConnection::connect(&url).await.expect("connect");
    sqlx::raw_sql("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::raw_sql("LOCK TABLE todos IN SHARE UPDATE EXCLUSIVE MODE")
        .execute(&mut holder)
        .await
        .unwrap();
    let before = vacuums_of_todos(&mut db_of(&url).await).await;

    claim_next_and_complete(&store, &f).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while store.queue_vacuums() == 0 {
        assert!(
            Instant::now() < deadline,
            "no vacuum ended within 20 s of the claim"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut holder)
        .await
        .unwrap();
    assert_eq!(
        vacuums_of_todos(&mut db_of(&url).await).await,
        before,
        "the vacuum was skipped: another session held the table"
    );
    let logged = String::from_utf8(logged.0.lock().unwrap().clone()).unwrap();
    assert!(
        !logged.contains("skipping vacuum"),
        "a skipped vacuum is not logged: {logged}"
    );
    store.close().await;
}

async fn db_of(url: &str) -> PgConnection {
    PgConnection::connect(url).await.expect("connect")
}
