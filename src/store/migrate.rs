//! Forward-only numbered migrations, embedded in the binary, one list per dialect.
//!
//! Each migration runs in its own transaction together with the row that
//! records it, so a crash leaves the schema either before or after a step.
//! Concurrent starters are serialised (PostgreSQL advisory lock; SQLite
//! `BEGIN IMMEDIATE`) and re-check the version inside the lock.

use sqlx::AnyPool;
use sqlx::Row;

use super::StoreError;
use super::dialect::Dialect;

#[derive(Debug)]
pub struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

pub static SQLITE_MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "registry",
        sql: include_str!("migrations/sqlite/0001_registry.sql"),
    },
    Migration {
        version: 2,
        name: "queue",
        sql: include_str!("migrations/sqlite/0002_queue.sql"),
    },
    Migration {
        version: 3,
        name: "presence_recheck",
        sql: include_str!("migrations/sqlite/0003_presence_recheck.sql"),
    },
    Migration {
        version: 4,
        name: "ready_ring_claim",
        sql: include_str!("migrations/sqlite/0004_ready_ring_claim.sql"),
    },
    Migration {
        version: 5,
        name: "server_name",
        sql: include_str!("migrations/sqlite/0005_server_name.sql"),
    },
    Migration {
        version: 6,
        name: "cancelled",
        sql: include_str!("migrations/sqlite/0006_cancelled.sql"),
    },
    Migration {
        version: 7,
        name: "queue_hot_path",
        sql: include_str!("migrations/sqlite/0007_queue_hot_path.sql"),
    },
    Migration {
        version: 8,
        name: "attempts_without_rowid",
        sql: include_str!("migrations/sqlite/0008_attempts_without_rowid.sql"),
    },
    Migration {
        version: 9,
        name: "attempts_one_open_by_writer",
        sql: include_str!("migrations/sqlite/0009_attempts_one_open_by_writer.sql"),
    },
    Migration {
        version: 10,
        name: "ring_clock",
        sql: include_str!("migrations/sqlite/0010_ring_clock.sql"),
    },
    Migration {
        version: 11,
        name: "retention_by_listing",
        sql: include_str!("migrations/sqlite/0011_retention_by_listing.sql"),
    },
    Migration {
        version: 12,
        name: "foreign_keys_indexed",
        sql: include_str!("migrations/sqlite/0012_foreign_keys_indexed.sql"),
    },
    Migration {
        version: 13,
        name: "dead_letters_by_endpoint",
        sql: include_str!("migrations/sqlite/0013_dead_letters_by_endpoint.sql"),
    },
    Migration {
        version: 14,
        name: "hooks",
        sql: include_str!("migrations/sqlite/0014_hooks.sql"),
    },
    Migration {
        version: 15,
        name: "schedules",
        sql: include_str!("migrations/sqlite/0015_schedules.sql"),
    },
    Migration {
        version: 16,
        name: "deliveries",
        sql: include_str!("migrations/sqlite/0016_deliveries.sql"),
    },
    Migration {
        version: 17,
        name: "admission_and_priority",
        sql: include_str!("migrations/sqlite/0017_admission_and_priority.sql"),
    },
    Migration {
        version: 18,
        name: "delayed",
        sql: include_str!("migrations/sqlite/0018_delayed.sql"),
    },
    Migration {
        version: 19,
        name: "form_submissions",
        sql: include_str!("migrations/sqlite/0019_form_submissions.sql"),
    },
    Migration {
        version: 20,
        name: "routing_rules",
        sql: include_str!("migrations/sqlite/0020_routing_rules.sql"),
    },
    Migration {
        version: 21,
        name: "delivery_filters",
        sql: include_str!("migrations/sqlite/0021_delivery_filters.sql"),
    },
    Migration {
        version: 22,
        name: "queue_activity",
        sql: include_str!("migrations/sqlite/0022_queue_activity.sql"),
    },
    Migration {
        version: 23,
        name: "board_sessions_bound",
        sql: include_str!("migrations/sqlite/0023_board_sessions_bound.sql"),
    },
    Migration {
        version: 24,
        name: "ring_undo",
        sql: include_str!("migrations/sqlite/0024_ring_undo.sql"),
    },
    Migration {
        version: 25,
        name: "window_shards",
        sql: include_str!("migrations/sqlite/0025_window_shards.sql"),
    },
    Migration {
        version: 26,
        name: "oauth_clients",
        sql: include_str!("migrations/sqlite/0026_oauth_clients.sql"),
    },
    Migration {
        version: 27,
        name: "oauth_grants",
        sql: include_str!("migrations/sqlite/0027_oauth_grants.sql"),
    },
    Migration {
        version: 28,
        name: "checks_without_in_lists",
        sql: include_str!("migrations/sqlite/0028_checks_without_in_lists.sql"),
    },
    Migration {
        version: 29,
        name: "claimed_with_queue",
        sql: include_str!("migrations/sqlite/0029_claimed_with_queue.sql"),
    },
];

pub static POSTGRES_MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "registry",
        sql: include_str!("migrations/postgres/0001_registry.sql"),
    },
    Migration {
        version: 2,
        name: "queue",
        sql: include_str!("migrations/postgres/0002_queue.sql"),
    },
    Migration {
        version: 3,
        name: "presence_recheck",
        sql: include_str!("migrations/postgres/0003_presence_recheck.sql"),
    },
    Migration {
        version: 4,
        name: "ready_ring_claim",
        sql: include_str!("migrations/postgres/0004_ready_ring_claim.sql"),
    },
    Migration {
        version: 5,
        name: "server_name",
        sql: include_str!("migrations/postgres/0005_server_name.sql"),
    },
    Migration {
        version: 6,
        name: "cancelled",
        sql: include_str!("migrations/postgres/0006_cancelled.sql"),
    },
    Migration {
        version: 7,
        name: "queue_hot_path",
        sql: include_str!("migrations/postgres/0007_queue_hot_path.sql"),
    },
    Migration {
        version: 8,
        name: "ring_clock",
        sql: include_str!("migrations/postgres/0008_ring_clock.sql"),
    },
    Migration {
        version: 9,
        name: "attempts_kept_by_their_writers",
        sql: include_str!("migrations/postgres/0009_attempts_kept_by_their_writers.sql"),
    },
    Migration {
        version: 10,
        name: "checks_as_domains",
        sql: include_str!("migrations/postgres/0010_checks_as_domains.sql"),
    },
    Migration {
        version: 11,
        name: "retention_by_listing",
        sql: include_str!("migrations/postgres/0011_retention_by_listing.sql"),
    },
    Migration {
        version: 12,
        name: "foreign_keys_indexed",
        sql: include_str!("migrations/postgres/0012_foreign_keys_indexed.sql"),
    },
    Migration {
        version: 13,
        name: "dead_letters_by_endpoint",
        sql: include_str!("migrations/postgres/0013_dead_letters_by_endpoint.sql"),
    },
    Migration {
        version: 14,
        name: "hooks",
        sql: include_str!("migrations/postgres/0014_hooks.sql"),
    },
    Migration {
        version: 15,
        name: "schedules",
        sql: include_str!("migrations/postgres/0015_schedules.sql"),
    },
    Migration {
        version: 16,
        name: "deliveries",
        sql: include_str!("migrations/postgres/0016_deliveries.sql"),
    },
    Migration {
        version: 17,
        name: "admission_and_priority",
        sql: include_str!("migrations/postgres/0017_admission_and_priority.sql"),
    },
    Migration {
        version: 18,
        name: "delayed",
        sql: include_str!("migrations/postgres/0018_delayed.sql"),
    },
    Migration {
        version: 19,
        name: "form_submissions",
        sql: include_str!("migrations/postgres/0019_form_submissions.sql"),
    },
    Migration {
        version: 20,
        name: "routing_rules",
        sql: include_str!("migrations/postgres/0020_routing_rules.sql"),
    },
    Migration {
        version: 21,
        name: "delivery_filters",
        sql: include_str!("migrations/postgres/0021_delivery_filters.sql"),
    },
    Migration {
        version: 22,
        name: "queue_activity",
        sql: include_str!("migrations/postgres/0022_queue_activity.sql"),
    },
    Migration {
        version: 23,
        name: "board_sessions_bound",
        sql: include_str!("migrations/postgres/0023_board_sessions_bound.sql"),
    },
    Migration {
        version: 24,
        name: "ring_undo",
        sql: include_str!("migrations/postgres/0024_ring_undo.sql"),
    },
    Migration {
        version: 25,
        name: "window_shards",
        sql: include_str!("migrations/postgres/0025_window_shards.sql"),
    },
    Migration {
        version: 26,
        name: "oauth_clients",
        sql: include_str!("migrations/postgres/0026_oauth_clients.sql"),
    },
    Migration {
        version: 27,
        name: "oauth_grants",
        sql: include_str!("migrations/postgres/0027_oauth_grants.sql"),
    },
    Migration {
        version: 28,
        name: "checks_without_in_lists",
        sql: include_str!("migrations/postgres/0028_checks_without_in_lists.sql"),
    },
];

/// The migrations of one dialect, oldest first.
pub fn migrations(dialect: Dialect) -> &'static [Migration] {
    match dialect {
        Dialect::Sqlite => SQLITE_MIGRATIONS,
        Dialect::Postgres => POSTGRES_MIGRATIONS,
    }
}

/// The schema version this binary expects.
pub fn latest_version(dialect: Dialect) -> i64 {
    migrations(dialect).last().map_or(0, |m| m.version)
}

const LEDGER: &str = "CREATE TABLE IF NOT EXISTS schema_migrations (
    version     BIGINT PRIMARY KEY,
    name        TEXT NOT NULL,
    applied_at  BIGINT NOT NULL
)";

/// An arbitrary constant naming Switchboard's migration lock.
const PG_MIGRATION_LOCK: i64 = 0x5357_4254_4348;

/// The highest applied version, or `None` on a database never migrated.
pub async fn current_version(pool: &AnyPool) -> Result<Option<i64>, StoreError> {
    let exists = sqlx::query("SELECT version FROM schema_migrations ORDER BY version DESC LIMIT 1")
        .fetch_optional(pool)
        .await;
    match exists {
        Ok(row) => Ok(row.map(|r| r.get::<i64, _>(0))),
        // A lost connection (a server shutting down answers with a
        // database error too) is an outage, not a schema to migrate.
        Err(e) if super::error::is_unavailable(&e) => Err(e.into()),
        // A missing ledger table means "never migrated", not an outage.
        Err(sqlx::Error::Database(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Applies every migration above the current version up to `target`
/// (default: all). Returns the versions it applied.
pub async fn migrate(
    pool: &AnyPool,
    dialect: Dialect,
    applied_at_millis: i64,
    target: Option<i64>,
) -> Result<Vec<i64>, StoreError> {
    let latest = latest_version(dialect);
    let target = target.unwrap_or(latest);
    if let Some(current) = current_version(pool).await?
        && current > latest
    {
        return Err(StoreError::internal(format!(
            "the database schema is at version {current}, newer than this binary's {latest}; \
             run a newer switchboard"
        )));
    }
    sqlx::query(LEDGER).execute(pool).await?;
    let mut applied = Vec::new();
    for migration in migrations(dialect) {
        if migration.version > target {
            break;
        }
        let mut tx = pool.begin_with(dialect.begin_write()).await?;
        if dialect == Dialect::Postgres {
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(PG_MIGRATION_LOCK)
                .execute(&mut *tx)
                .await?;
        }
        let done: Option<i64> =
            sqlx::query("SELECT version FROM schema_migrations WHERE version = $1")
                .bind(migration.version)
                .fetch_optional(&mut *tx)
                .await?
                .map(|r| r.get(0));
        if done.is_some() {
            tx.rollback().await?;
            continue;
        }
        sqlx::raw_sql(migration.sql)
            .execute(&mut *tx)
            .await
            .map_err(|e| {
                StoreError::with_context(
                    format!(
                        "migration {:04}_{} failed",
                        migration.version, migration.name
                    ),
                    e,
                )
            })?;
        sqlx::query(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
        )
        .bind(migration.version)
        .bind(migration.name)
        .bind(applied_at_millis)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        applied.push(migration.version);
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SQLite evaluates a CHECK constraint's or a partial index's `IN` list
    /// of three or more values by building a temporary b-tree for every row
    /// written (`OpenEphemeral`); the tables the agent's loop writes on every
    /// claim, complete and request keep their checks as comparisons
    /// (migration 0028, `docs/storage.md`).
    #[test]
    fn sqlite_writes_to_the_hot_tables_build_no_temporary_b_tree() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        for migration in SQLITE_MIGRATIONS {
            conn.execute_batch(migration.sql)
                .unwrap_or_else(|e| panic!("migration {}: {e}", migration.version));
        }
        for table in [
            "todos",
            "todo_attempts",
            "endpoints",
            "admission",
            "admission_windows",
        ] {
            let columns: Vec<(String, bool)> = conn
                .prepare(&format!("PRAGMA table_info({table})"))
                .unwrap()
                .query_map([], |row| Ok((row.get(1)?, row.get::<_, i64>(5)? > 0)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            let (key, rest): (Vec<_>, Vec<_>) = columns.iter().partition(|(_, key)| *key);
            let names = |cols: &[&(String, bool)], joiner: &str| {
                cols.iter()
                    .map(|(name, _)| format!("{name} = ?"))
                    .collect::<Vec<_>>()
                    .join(joiner)
            };
            let update = format!(
                "UPDATE {table} SET {} WHERE {}",
                names(&rest, ", "),
                names(&key, " AND ")
            );
            let insert = format!(
                "INSERT INTO {table} ({}) VALUES ({})",
                columns
                    .iter()
                    .map(|(name, _)| name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                vec!["?"; columns.len()].join(", ")
            );
            for sql in [update, insert] {
                let mut explain = conn.prepare(&format!("EXPLAIN {sql}")).unwrap();
                // Unbound parameters are NULL; EXPLAIN only compiles.
                let mut ops = explain.raw_query();
                let mut temporary_b_trees = 0;
                while let Some(op) = ops.next().unwrap() {
                    if op.get::<_, String>(1).unwrap() == "OpenEphemeral" {
                        temporary_b_trees += 1;
                    }
                }
                assert_eq!(temporary_b_trees, 0, "{sql}");
            }
        }
    }
}
