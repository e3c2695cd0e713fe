//! Throwaway PostgreSQL databases: made on a server the caller names (the
//! shared test server, or a [`PgCluster`](super::PgCluster)), dropped
//! afterwards, and the migrated template the tests copy instead of migrating.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use sqlx::postgres::PgConnection;
use sqlx::{AssertSqlSafe, Connection};

use crate::clock::ManualClock;
use crate::mint::random_token;
use crate::store::dialect::Dialect;
use crate::store::{DatabaseLocation, SqlStore, StoreOptions};

/// `postgres://u@h:5432/old?x` → `postgres://u@h:5432/new?x`.
pub fn replace_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let path_start = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    let mut out = format!("{}/{}", &base[..path_start], database);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

/// A fresh database on the server of `admin_url`, named `{prefix}_{random}`,
/// that [`ThrowawayDatabase::drop_database`] drops (`WITH (FORCE)`, whoever
/// is still connected). Not dropped on `Drop`: that needs a runtime.
#[derive(Debug)]
pub struct ThrowawayDatabase {
    /// The URL it was made through (any database of the same server).
    pub admin_url: String,
    /// Its name.
    pub name: String,
    /// `admin_url` with the database replaced by this one.
    pub url: String,
}

impl ThrowawayDatabase {
    /// An empty database (a copy of `template1`).
    pub async fn create(admin_url: &str, prefix: &str) -> Result<Self> {
        Self::create_from(admin_url, prefix, None).await
    }

    /// A copy of `template` (`CREATE DATABASE … TEMPLATE`), or an empty
    /// database without one. Retries while PostgreSQL still counts a session
    /// that just closed as connected to the source database.
    pub async fn create_from(
        admin_url: &str,
        prefix: &str,
        template: Option<&str>,
    ) -> Result<Self> {
        let name = format!(
            "{prefix}_{}",
            random_token(9).to_lowercase().replace(['-', '_'], "x")
        );
        let mut admin = admin_connection(admin_url).await?;
        let create = match template {
            Some(template) => format!("CREATE DATABASE {name} TEMPLATE {template}"),
            None => format!("CREATE DATABASE {name}"),
        };
        execute_retrying_busy_source(&mut admin, &create).await?;
        let _ = admin.close().await;
        Ok(Self {
            admin_url: admin_url.to_owned(),
            url: replace_database(admin_url, &name),
            name,
        })
    }

    /// Drops it. Callers that clean up after themselves may ignore a
    /// failure: it leaves a database behind, nothing else.
    pub async fn drop_database(self) -> Result<()> {
        let mut admin = admin_connection(&self.admin_url).await?;
        sqlx::raw_sql(AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        )))
        .execute(&mut admin)
        .await
        .with_context(|| format!("drop database {}", self.name))?;
        let _ = admin.close().await;
        Ok(())
    }
}

async fn admin_connection(admin_url: &str) -> Result<PgConnection> {
    PgConnection::connect(admin_url).await.with_context(|| {
        format!(
            "cannot reach PostgreSQL at {}",
            DatabaseLocation::Postgres(admin_url.to_owned()).redacted()
        )
    })
}

/// Runs `sql` on `admin`, retrying while PostgreSQL still counts a just-closed
/// session as connected to the source database ("being accessed by other users").
async fn execute_retrying_busy_source(admin: &mut PgConnection, sql: &str) -> Result<()> {
    for attempt in 0.. {
        match sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
            .execute(&mut *admin)
            .await
        {
            Ok(_) => return Ok(()),
            // 55006 object_in_use: a session on the source has not ended yet.
            Err(sqlx::Error::Database(e))
                if e.code().as_deref() == Some("55006") && attempt < 100 =>
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => bail!("{sql}: {e}"),
        }
    }
    unreachable!("the loop returns")
}

/// The name of a database migrated to this binary's schema on the server of
/// `admin_url`, created once per schema: the name carries a hash of the
/// migrations, so a template is never stale, and it is built under another
/// name and renamed when complete, under an advisory lock, so concurrent
/// processes neither race nor see a half migrated template. Tests copy it
/// ([`ThrowawayDatabase::create_from`]) instead of migrating; it is left in
/// place for the next run. One per process: the first `admin_url` wins.
pub async fn migrated_template(admin_url: &str) -> Result<String> {
    static TEMPLATE: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
    TEMPLATE
        .get_or_try_init(|| build_template(admin_url.to_owned()))
        .await
        .cloned()
}

async fn build_template(admin_url: String) -> Result<String> {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for m in crate::store::migrate::migrations(Dialect::Postgres) {
        (m.version, m.name, m.sql).hash(&mut hasher);
    }
    let template = format!("sb_tpl_{:016x}", hasher.finish());
    let mut admin = admin_connection(&admin_url).await?;
    // One builder at a time across processes (the key is arbitrary but fixed).
    sqlx::query("SELECT pg_advisory_lock(7347201)")
        .execute(&mut admin)
        .await
        .context("take the template lock")?;
    let exists = sqlx::query("SELECT 1 FROM pg_database WHERE datname = $1")
        .bind(&template)
        .fetch_optional(&mut admin)
        .await
        .context("look for the template")?
        .is_some();
    if !exists {
        let building = format!("{template}_building");
        execute_retrying_busy_source(
            &mut admin,
            &format!("DROP DATABASE IF EXISTS {building} WITH (FORCE)"),
        )
        .await?;
        execute_retrying_busy_source(&mut admin, &format!("CREATE DATABASE {building}")).await?;
        let store = SqlStore::connect(
            &DatabaseLocation::Postgres(replace_database(&admin_url, &building)),
            ManualClock::at_fixed_start(),
            &StoreOptions::default(),
        )
        .await
        .context("open the template")?;
        store.migrate(None).await.context("migrate the template")?;
        // CREATE DATABASE … TEMPLATE needs no other session on the template.
        store.close().await;
        execute_retrying_busy_source(
            &mut admin,
            &format!("ALTER DATABASE {building} RENAME TO {template}"),
        )
        .await?;
    }
    sqlx::query("SELECT pg_advisory_unlock(7347201)")
        .execute(&mut admin)
        .await
        .context("release the template lock")?;
    let _ = admin.close().await;
    Ok(template)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_database_in_a_url() {
        assert_eq!(
            replace_database("postgres://root@127.0.0.1:5432/test", "x"),
            "postgres://root@127.0.0.1:5432/x"
        );
        assert_eq!(
            replace_database("postgres://root@127.0.0.1:5432/test?sslmode=disable", "x"),
            "postgres://root@127.0.0.1:5432/x?sslmode=disable"
        );
        assert_eq!(
            replace_database("postgres://root@h", "x"),
            "postgres://root@h/x"
        );
    }
}
