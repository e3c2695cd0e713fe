//! Raw-SQL peeks past the storage contract, for tests and benchmarks that
//! inspect or prepare the database directly: not part of the store's API.

use anyhow::Result;
use sqlx::{AnyPool, AssertSqlSafe, Connection, Row};

use crate::store::{SqlStore, StoreResult};

/// What tests and benchmarks reach inside a [`SqlStore`]
/// (`use switchboard::testkit::StorePeek;`, then `store.pool()`).
#[allow(async_fn_in_trait)]
pub trait StorePeek {
    /// The write pool, for statements the store has no method for.
    fn pool(&self) -> &AnyPool;

    /// PostgreSQL: opens up to `callers` of the hot path's connections now
    /// (no more than its share of the pool), so that as many agent loops
    /// starting at once do not each pay for a connect, e.g. inside a
    /// benchmark's clock. SQLite: nothing to open.
    async fn open_hot_connections(&self, callers: usize) -> StoreResult<()>;

    /// SQLite only: how many transactions the writer thread has run (each
    /// commits every call queued behind the previous one).
    fn sqlite_writer_transactions(&self) -> Option<u64>;
}

impl StorePeek for SqlStore {
    fn pool(&self) -> &AnyPool {
        self.testkit_pool()
    }

    async fn open_hot_connections(&self, callers: usize) -> StoreResult<()> {
        self.testkit_open_hot_connections(callers).await
    }

    fn sqlite_writer_transactions(&self) -> Option<u64> {
        self.testkit_sqlite_writer_transactions()
    }
}

/// `SHOW name` for each of `names` on the database at `url`, as
/// `name=value, …` (the PostgreSQL settings a results table records).
pub async fn pg_settings(url: &str, names: &[&str]) -> Result<String> {
    let mut conn = sqlx::PgConnection::connect(url).await?;
    let mut out = Vec::new();
    for name in names {
        let v: String = sqlx::query(AssertSqlSafe(format!("SHOW {name}")))
            .fetch_one(&mut conn)
            .await?
            .try_get(0)?;
        out.push(format!("{name}={v}"));
    }
    conn.close().await?;
    Ok(out.join(", "))
}
