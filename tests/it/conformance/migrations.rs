//! Migrations: one step at a time ends where all at once does, re-running is
//! a no-op, and readiness tells whether the schema is the expected one.

use sqlx::Row;
use switchboard::domain::todo::{Outcome, TodoState};
use switchboard::store::dialect::Dialect;
use switchboard::store::migrate::{latest_version, migrations};
use switchboard::store::*;
use switchboard::testkit::StorePeek;

use crate::common::*;
use crate::exercise_on_both_backends;
use crate::support::{TestStore, fixture, second_handle, unmigrated_store_like};

/// Catalog queries whose rows, rendered as text, describe the schema. Every
/// column is cast to text so the `Any` driver can decode it.
fn catalog_queries(backend: Dialect) -> &'static [&'static str] {
    match backend {
        Dialect::Sqlite => &["SELECT type, name, tbl_name, COALESCE(sql, '') \
             FROM sqlite_master ORDER BY name"],
        Dialect::Postgres => &[
            "SELECT table_name::text, column_name::text, data_type::text, \
               is_nullable::text, COALESCE(column_default::text, '') \
             FROM information_schema.columns WHERE table_schema = 'public' \
             ORDER BY table_name, column_name",
            "SELECT indexname::text, indexdef::text FROM pg_indexes \
             WHERE schemaname = 'public' ORDER BY indexname",
            "SELECT conrelid::regclass::text, conname::text, pg_get_constraintdef(oid) \
             FROM pg_constraint WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2",
            // Per-table settings such as the todo table's autovacuum tuning.
            "SELECT relname::text, COALESCE(array_to_string(reloptions, ','), '') \
             FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'r' \
             ORDER BY relname",
        ],
    }
}

async fn schema(store: &SqlStore) -> Vec<String> {
    let mut lines = Vec::new();
    for sql in catalog_queries(store.dialect()) {
        let rows = sqlx::query(*sql)
            .fetch_all(store.pool())
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        for row in rows {
            let cells: Vec<String> = (0..row.len()).map(|i| row.get::<String, _>(i)).collect();
            lines.push(cells.join(" | "));
        }
    }
    lines
}

async fn migrating_step_by_step_matches_migrating_at_once(_store: &dyn Store, ts: &TestStore) {
    let latest = latest_version(ts.store.dialect());
    assert!(latest >= 2, "the queue needs at least two migrations");
    // The versions as listed: numbers reserved by work in flight may be missing.
    let versions: Vec<i64> = match ts.store.dialect() {
        Dialect::Sqlite => switchboard::store::migrate::SQLITE_MIGRATIONS,
        Dialect::Postgres => switchboard::store::migrate::POSTGRES_MIGRATIONS,
    }
    .iter()
    .map(|m| m.version)
    .collect();
    assert_eq!(versions.last(), Some(&latest));

    // The versions need not be contiguous (branches number theirs apart).
    let versions: Vec<i64> = migrations(ts.store.dialect())
        .iter()
        .map(|m| m.version)
        .collect();
    assert_eq!(versions.last(), Some(&latest));

    let at_once = unmigrated_store_like(ts, "migrations_at_once").await;
    let applied = at_once.store.migrate(None).await.unwrap();
    assert_eq!(applied, versions);

    let stepwise = unmigrated_store_like(ts, "migrations_stepwise").await;
    for version in versions.iter().copied() {
        let applied = stepwise.store.migrate(Some(version)).await.unwrap();
        assert_eq!(applied, vec![version]);
        assert_eq!(
            stepwise.store.schema_version().await.unwrap(),
            Some(version)
        );
    }

    let expected = schema(&at_once.store).await;
    assert!(
        expected.iter().any(|line| line.contains("todo_attempts")),
        "the catalog queries see the schema: {expected:?}"
    );
    assert_eq!(schema(&stepwise.store).await, expected);
    assert_eq!(schema(&ts.store).await, expected, "the suite's own stores");
    at_once.finish().await;
    stepwise.finish().await;
}

async fn migrating_twice_is_a_no_op(_store: &dyn Store, ts: &TestStore) {
    let store = &*ts.store;
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "survives").await;
    let before = (schema(store).await, store.schema_version().await.unwrap());

    let applied = store.migrate(None).await.unwrap();
    assert!(applied.is_empty(), "nothing left to apply: {applied:?}");
    let after = (schema(store).await, store.schema_version().await.unwrap());
    assert_eq!(after, before);
    assert_eq!(get(store, &f.caller, &todo.id).await, todo);
    store.readiness().await.expect("still ready");
}

async fn readiness_follows_the_schema_version(_store: &dyn Store, ts: &TestStore) {
    let fresh = unmigrated_store_like(ts, "readiness").await;
    let store = &*fresh.store;
    assert_eq!(store.schema_version().await.unwrap(), None);
    assert!(
        matches!(
            store.readiness().await,
            Err(StoreError::SchemaMismatch { found: 0, .. })
        ),
        "no schema yet"
    );

    store.migrate(Some(1)).await.unwrap();
    let partial = store.readiness().await;
    assert!(
        matches!(
            partial,
            Err(StoreError::SchemaMismatch { found: 1, expected }) if expected > 1
        ),
        "an older schema is not ready: {partial:?}"
    );

    store.migrate(None).await.unwrap();
    store.readiness().await.expect("ready once migrated");
    ts.store
        .readiness()
        .await
        .expect("the suite's store is ready");
    fresh.finish().await;
}

/// A closed pool, or (PostgreSQL) a connection the server terminated under
/// the store, is `Unavailable`: never `Internal`, never a schema mismatch.
async fn a_lost_database_is_unavailable(store: &dyn Store, ts: &TestStore) {
    let closed = second_handle(ts).await;
    closed.readiness().await.expect("ready while open");
    closed.close().await;
    let err = closed
        .readiness()
        .await
        .expect_err("a closed pool is not ready");
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");

    if ts.dialect() == Dialect::Postgres {
        let cut = second_handle(ts).await;
        cut.readiness().await.expect("ready while connected");
        // Terminate every other session on this database: `cut`'s idle one
        // dies. With a timeout the call waits until each backend has exited;
        // without, it returns once signalled, and under load `cut`'s next
        // query could still reach its backend (seen once in a full run).
        sqlx::query(
            "SELECT pg_terminate_backend(pid, 10000)::text FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        .fetch_all(ts.store.pool())
        .await
        .expect("terminate sessions");
        let err = cut
            .count_humans()
            .await
            .expect_err("the connection was terminated");
        assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
        cut.close().await;
    }
    // The suite's own store still answers (its pool replaces dead connections).
    let _ = store.readiness().await;
}

/// 0006 rebuilds `todos` and `todo_attempts` on SQLite (a CHECK constraint
/// cannot be altered there), and 0008 rebuilds `todo_attempts` again
/// without a rowid: rows written at version 5, attempt history included,
/// must come through both, and work as before.
async fn todos_and_their_history_survive_the_cancelled_migration(
    _store: &dyn Store,
    ts: &TestStore,
) {
    let old = unmigrated_store_like(ts, "migration_0006_data").await;
    let store = &*old.store;
    store.migrate(Some(5)).await.unwrap();
    for sql in [
        "INSERT INTO humans (id, name, created_at) VALUES ('hu_1', 'ada', 1)",
        "INSERT INTO agents (id, human_id, name, kind, created_at, updated_at) \
         VALUES ('ag_1', 'hu_1', 'worker', 'task', 1, 1)",
        "INSERT INTO endpoints (id, agent_id, human_id, slug, credential_hash, \
           credential_prefix, scope_queues, scope_verbs, created_at) \
         VALUES ('ep_1', 'ag_1', 'hu_1', 'worker-abc', 'hash', 'sbk_abcdefgh', \
           '[\"inbox\"]', '[]', 1)",
        "INSERT INTO todos (id, endpoint_id, queue, title, state, owner, lease_expires_at, \
           attempt, attempts_total, created_at, updated_at, claimed_at, ready_rung_attempt) \
         VALUES ('td_held', 'ep_1', 'inbox', 'held', 'claimed', 'agent:ag_1', 9000000000000, \
           2, 2, 1, 2, 2, 0)",
        "INSERT INTO todo_attempts (todo_id, seq, attempt, claimed_at, ended_at, outcome, \
           disposition, summary) VALUES ('td_held', 1, 1, 1, 2, 'failed', 'retry_scheduled', \
           'first try')",
        "INSERT INTO todo_attempts (todo_id, seq, attempt, claimed_at) \
         VALUES ('td_held', 2, 2, 2)",
    ] {
        sqlx::query(sql)
            .execute(store.pool())
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let applied = store.migrate(None).await.unwrap();
    assert_eq!(applied.first(), Some(&6), "0006 applies first: {applied:?}");

    let todo = store.human_get_todo("hu_1", "td_held").await.unwrap();
    assert_eq!((todo.state, todo.attempt), (TodoState::Claimed, 2));
    let history = store
        .human_list_attempts("hu_1", "td_held", 50)
        .await
        .unwrap();
    assert_eq!(history.len(), 2, "the attempt history came through");
    assert_eq!(history[1].summary.as_deref(), Some("first try"));
    assert_eq!(count_open_attempts(store, "td_held").await, 1);
    // "One open attempt per todo" is kept by the writers on both backends
    // (SQLite's 0009, PostgreSQL's 0009: each todo's writers are serialised,
    // by the single writer or by the todo's row lock); the rest of the suite
    // checks the open-attempt count after every transition.
    let one_open_indexes: i64 = sqlx::query(match store.dialect() {
        Dialect::Postgres => {
            "SELECT COUNT(*) FROM pg_indexes WHERE indexname = 'todo_attempts_one_open'"
        }
        Dialect::Sqlite => {
            "SELECT COUNT(*) FROM sqlite_master WHERE name = 'todo_attempts_one_open'"
        }
    })
    .fetch_one(store.pool())
    .await
    .unwrap()
    .get(0);
    assert_eq!(one_open_indexes, 0, "0009 drops the one-open index");
    let cancelled = store.human_cancel("hu_1", "td_held").await.unwrap();
    assert_eq!(cancelled.state, TodoState::Cancelled);
    let history = store
        .human_list_attempts("hu_1", "td_held", 50)
        .await
        .unwrap();
    assert_eq!(history[0].outcome, Some(Outcome::Cancelled));
    // Deleting the todo still cascades to its history.
    sqlx::query("DELETE FROM todos WHERE id = 'td_held'")
        .execute(store.pool())
        .await
        .unwrap();
    assert_eq!(count_attempt_rows(store, "td_held").await, 0);
    assert_eq!(
        schema(store).await,
        schema(&ts.store).await,
        "the same schema as migrated from scratch"
    );
    old.finish().await;
}

/// The database itself refuses a state, an attempt limit, an outcome or a
/// disposition outside the domain's values (PostgreSQL keeps them as domains
/// since its 0010, SQLite as CHECK constraints), and changes nothing.
async fn the_database_refuses_values_outside_their_domain(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "guarded").await;
    claim(store, &f.caller, &todo.id).await;
    let done = store
        .complete(&f.caller, &todo.id, Finish::default())
        .await
        .unwrap();
    let refused = [
        "UPDATE todos SET state = 'lost' WHERE id = $1",
        "UPDATE todos SET max_attempts = 0 WHERE id = $1",
        "UPDATE todo_attempts SET outcome = 'vanished' WHERE todo_id = $1",
        "UPDATE todo_attempts SET disposition = 'elsewhere' WHERE todo_id = $1",
    ];
    for sql in refused {
        let err = sqlx::query(sql)
            .bind(&todo.id)
            .execute(ts.store.pool())
            .await
            .expect_err(sql);
        let kind = err.as_database_error().map(|e| e.kind());
        assert!(
            matches!(kind, Some(sqlx::error::ErrorKind::CheckViolation)),
            "{sql}: {err}"
        );
    }
    assert_eq!(get(store, &f.caller, &todo.id).await, done);
    let history = store
        .human_list_attempts(&f.human.id, &todo.id, 50)
        .await
        .unwrap();
    assert_eq!(history[0].outcome, Some(Outcome::Completed));
}

/// Foreign keys and the indexes of their referencing tables, as
/// `(table, name, columns, partial-index predicate)` rows, one per column in
/// key order (`name` is the key's or the index's; `predicate` is empty for a
/// key and for a whole-table index).
fn keys_and_indexes_queries(backend: Dialect) -> [&'static str; 2] {
    match backend {
        Dialect::Sqlite => [
            "SELECT m.name, CAST(f.id AS TEXT), f.\"from\", '' \
             FROM sqlite_master m JOIN pragma_foreign_key_list(m.name) f \
             WHERE m.type = 'table' ORDER BY m.name, f.id, f.seq",
            "SELECT m.name, i.name, COALESCE(c.name, ''), \
               COALESCE((SELECT s.sql FROM sqlite_master s WHERE s.name = i.name \
                 AND i.partial = 1), '') \
             FROM sqlite_master m JOIN pragma_index_list(m.name) i \
               JOIN pragma_index_info(i.name) c \
             WHERE m.type = 'table' ORDER BY m.name, i.name, c.seqno",
        ],
        Dialect::Postgres => [
            "SELECT c.conrelid::regclass::text, c.conname::text, a.attname::text, '' \
             FROM pg_constraint c CROSS JOIN LATERAL unnest(c.conkey) WITH ORDINALITY k(attnum, n) \
               JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum \
             WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace \
             ORDER BY 1, 2, k.n",
            "SELECT i.indrelid::regclass::text, i.indexrelid::regclass::text, \
               COALESCE(a.attname::text, ''), COALESCE(pg_get_expr(i.indpred, i.indrelid), '') \
             FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid \
               CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, n) \
               LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum \
             WHERE t.relnamespace = 'public'::regnamespace AND k.n <= i.indnkeyatts \
             ORDER BY 1, 2, k.n",
        ],
    }
}

/// A key or an index: its table, name, columns in order, and (an index)
/// the predicate of a partial one.
#[derive(Debug)]
struct Columns {
    table: String,
    name: String,
    columns: Vec<String>,
    predicate: String,
}

async fn columns_of(store: &SqlStore, sql: &'static str) -> Vec<Columns> {
    let rows = sqlx::query(sql)
        .fetch_all(store.pool())
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let mut out: Vec<Columns> = Vec::new();
    for row in rows {
        let (table, name, column, predicate): (String, String, String, String) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        match out.last_mut() {
            Some(last) if last.table == table && last.name == name => last.columns.push(column),
            _ => out.push(Columns {
                table,
                name,
                columns: vec![column],
                predicate,
            }),
        }
    }
    out
}

/// Whether a partial index's predicate (PostgreSQL's deparsed expression or
/// SQLite's `CREATE INDEX` text) is `column IS NOT NULL`, which every lookup
/// `column = $1` implies: such an index serves the key too.
fn only_excludes_nulls(predicate: &str, column: &str) -> bool {
    let condition = predicate
        .rsplit_once(" WHERE ")
        .map_or(predicate, |(_, after)| after);
    condition.trim_matches(|c: char| c == '(' || c == ')' || c.is_whitespace())
        == format!("{column} IS NOT NULL")
}

/// Deleting a referenced row makes the database look up the rows that refer
/// to it (to cascade, set null, or refuse). Without an index leading with
/// the key's columns each lookup scans the whole referencing table: retention
/// deleting intake events once scanned every todo for each event.
async fn every_foreign_key_leads_an_index(_store: &dyn Store, ts: &TestStore) {
    let [keys_sql, indexes_sql] = keys_and_indexes_queries(ts.store.dialect());
    let keys = columns_of(&ts.store, keys_sql).await;
    let indexes = columns_of(&ts.store, indexes_sql).await;
    assert!(
        keys.iter().any(|k| k.table == "todos"),
        "the catalog queries see the keys: {keys:?}"
    );
    let unserved: Vec<String> = keys
        .iter()
        .filter(|key| {
            !indexes.iter().any(|index| {
                index.table == key.table
                    && index.columns.starts_with(&key.columns)
                    && (index.predicate.is_empty()
                        || (key.columns.len() == 1
                            && only_excludes_nulls(&index.predicate, &key.columns[0])))
            })
        })
        .map(|key| format!("{}({})", key.table, key.columns.join(", ")))
        .collect();
    assert!(
        unserved.is_empty(),
        "foreign keys without an index leading with their columns: {unserved:?}"
    );
}

exercise_on_both_backends!(
    every_foreign_key_leads_an_index,
    the_database_refuses_values_outside_their_domain,
    todos_and_their_history_survive_the_cancelled_migration,
    migrating_step_by_step_matches_migrating_at_once,
    migrating_twice_is_a_no_op,
    readiness_follows_the_schema_version,
    a_lost_database_is_unavailable,
);
