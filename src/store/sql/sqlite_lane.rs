//! SQLite's hot path on a writer thread of its own (issue 14).
//!
//! sqlx runs every SQLite statement as a round trip to a per-connection
//! worker thread: a claim was BEGIN, UPDATE, INSERT, COMMIT = four hand-offs,
//! and B1 spent 64 % of its CPU in the kernel switching threads (~3 % in
//! SQLite itself; `docs/decisions.md`). The lane is one `rusqlite`
//! connection owned by one thread; a whole transition (the claim and its
//! attempt record, the completion and the closing of its attempt, …) is one
//! job on it, run as one transaction with cached prepared statements and
//! answered through a oneshot: one hand-off per call, no `Any` row
//! conversion.
//!
//! The lane takes the calls an agent makes in its loop (`claim_next`'s
//! pending path, `complete`, `heartbeat`, authenticating the credential and
//! stamping `last_seen`); everything else stays on the sqlx pools. Both
//! write the same file in WAL mode with `BEGIN IMMEDIATE`, so SQLite's own
//! write lock orders them, and a lane job that finds the lock held waits in
//! its busy handler in steps of tens of microseconds, not milliseconds.
//! What a lane job cannot decide alone (nothing matched: why?) the caller
//! asks on the transaction path, exactly as PostgreSQL's one-statement
//! transitions do (`todos/fast.rs`).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};

use crate::store::error::WithContext;
use crate::store::{StoreError, StoreResult};

/// One call's work and where its answer goes. The thread runs a batch of
/// jobs in one transaction and answers them only once it has committed.
trait Job: Send {
    /// Runs the work inside the open transaction; `Err` means its writes
    /// must be undone.
    fn run(&mut self, conn: &Connection) -> Result<(), ()>;
    /// Sends the work's outcome, or `failed` when the batch did not commit.
    fn answer(self: Box<Self>, failed: Option<StoreError>);
}

struct Call<F, R> {
    work: Option<F>,
    outcome: Option<StoreResult<R>>,
    reply: tokio::sync::oneshot::Sender<StoreResult<R>>,
}

impl<F, R> Job for Call<F, R>
where
    F: FnOnce(&Connection) -> StoreResult<R> + Send,
    R: Send,
{
    fn run(&mut self, conn: &Connection) -> Result<(), ()> {
        let Some(work) = self.work.take() else {
            return Ok(());
        };
        // A panicking job answers `internal` and its writes are undone; the
        // thread lives on for the next one.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(conn)))
            .unwrap_or_else(|_| Err(StoreError::internal("a SQLite writer job panicked")));
        let failed = outcome.is_err();
        self.outcome = Some(outcome);
        if failed { Err(()) } else { Ok(()) }
    }

    fn answer(self: Box<Self>, failed: Option<StoreError>) {
        let outcome = match (failed, self.outcome) {
            // A job that failed by itself says why, whatever became of the batch.
            (_, Some(Err(e))) => Err(e),
            (Some(e), _) => Err(e),
            (None, Some(ok)) => ok,
            (None, None) => Err(StoreError::internal("a SQLite writer job never ran")),
        };
        let _ = self.reply.send(outcome);
    }
}

/// How long a lane job waits for SQLite's write lock before answering
/// `unavailable` (the sqlx connections use sqlx's default of 5 s too).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Prepared statements kept per connection; the lane runs about a dozen.
const STATEMENT_CACHE: usize = 64;

/// The most calls committed together. Calls queue only while the thread is
/// busy, so a batch is what arrived during the previous commit.
const MAX_BATCH: usize = 64;

/// Page cache of the lane's connection, in KiB (SQLite's default is 2 MiB):
/// the queue's hot pages (the oldest pending rows and their index leaves)
/// stay in memory across calls.
const CACHE_KIB: i64 = 64 * 1024;

pub(in crate::store) struct Lane {
    /// `None` once closed: calls then answer `unavailable`.
    jobs: Mutex<Option<mpsc::Sender<Box<dyn Job>>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Transactions the thread has run (committed or not); calls / batches
    /// is how much group commit saves.
    batches: Arc<AtomicU64>,
}

impl std::fmt::Debug for Lane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lane").finish_non_exhaustive()
    }
}

impl Lane {
    /// Opens `path` (creating it if needed) and starts the thread. Opened
    /// before the sqlx pools, so that none of them loads value samples
    /// ([`forget_value_samples`]).
    pub(super) fn open(path: &Path) -> StoreResult<Self> {
        let open_err = |e: rusqlite::Error| {
            StoreError::Unavailable(Box::new(WithContext {
                context: format!("cannot open {} for the writer thread", path.display()),
                source: Box::new(e),
            }))
        };
        forget_value_samples(path).map_err(open_err)?;
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(open_err)?;
        // The same settings as the sqlx connections: WAL lets readers run
        // beside the writer; NORMAL is durable across process crashes in WAL.
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(open_err)?;
        conn.pragma_update(None, "cache_size", -CACHE_KIB)
            .map_err(open_err)?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        conn.busy_handler(Some(wait_for_the_write_lock))
            .map_err(open_err)?;

        let (jobs, inbox) = mpsc::channel::<Box<dyn Job>>();
        let batches = Arc::new(AtomicU64::new(0));
        let counted = batches.clone();
        let thread = std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || serve(&conn, &inbox, &counted))
            .map_err(|e| {
                StoreError::Unavailable(Box::new(WithContext {
                    context: "cannot start the SQLite writer thread".into(),
                    source: Box::new(e),
                }))
            })?;
        Ok(Self {
            jobs: Mutex::new(Some(jobs)),
            thread: Mutex::new(Some(thread)),
            batches,
        })
    }

    /// Runs `work` inside a write transaction on the lane's connection and
    /// returns what it returned once that transaction has committed. An
    /// `Err` from `work` undoes its writes (and only its).
    pub(super) async fn run<R: Send + 'static>(
        &self,
        work: impl FnOnce(&Connection) -> StoreResult<R> + Send + 'static,
    ) -> StoreResult<R> {
        let (reply, answered) = tokio::sync::oneshot::channel();
        let job: Box<dyn Job> = Box::new(Call {
            work: Some(work),
            outcome: None,
            reply,
        });
        let sent = match &*self.jobs.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(jobs) => jobs.send(job).is_ok(),
            None => false,
        };
        if !sent {
            return Err(StoreError::unavailable(
                "the SQLite writer thread is closed",
            ));
        }
        answered
            .await
            .map_err(|_| StoreError::internal("the SQLite writer thread dropped a call"))?
    }

    /// How many transactions the thread has run so far.
    pub(super) fn batches(&self) -> u64 {
        self.batches.load(Ordering::Relaxed)
    }

    /// Lets queued jobs finish, then stops the thread and closes its connection.
    pub(super) async fn close(&self) {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner()).take();
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(thread) = thread {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

/// Deletes `ANALYZE`'s per-value samples (`sqlite_stat4`), keeping its
/// per-index row counts (`sqlite_stat1`). The bundled SQLite is built with
/// STAT4; with samples present, every statement whose plan could depend on
/// a bound value (`endpoint_id = ?`, i.e. all of the hot path) is parsed and
/// planned again on every call: B2 measured 1 065 vs 559 µs of server CPU
/// per MCP loop with and without them. Switchboard never runs `ANALYZE`;
/// an operator's run is undone at the next start. Runs on a connection of
/// its own, before any other loads the schema (and the samples with it).
fn forget_value_samples(path: &Path) -> rusqlite::Result<()> {
    let conn = Connection::open(path)?;
    let sampled: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_stat4')",
        [],
        |row| row.get(0),
    )?;
    if sampled {
        conn.execute_batch("DELETE FROM sqlite_stat4")?;
    }
    Ok(())
}

/// Group commit: whatever queued while the last batch ran goes into one
/// transaction, each job under its own savepoint, and every answer waits
/// for the commit. One commit writes each touched page once, however many
/// claims touched it (B1: `bench/RESULTS.md`).
fn serve(conn: &Connection, inbox: &mpsc::Receiver<Box<dyn Job>>, batches: &AtomicU64) {
    while let Ok(first) = inbox.recv() {
        batches.fetch_add(1, Ordering::Relaxed);
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match inbox.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let failed = run_batch(conn, &mut batch).err();
        for job in batch {
            job.answer(failed.as_ref().map(copy_failure));
        }
    }
}

fn run_batch(conn: &Connection, batch: &mut [Box<dyn Job>]) -> StoreResult<()> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let ended = match run_jobs(conn, batch) {
        Ok(Finish::Commit) => conn.execute_batch("COMMIT"),
        Ok(Finish::Rollback) => conn.execute_batch("ROLLBACK"),
        Err(e) => Err(e),
    };
    ended.map_err(|e| {
        // Whatever is left of the transaction goes; the answers say it failed.
        let _ = conn.execute_batch("ROLLBACK");
        e.into()
    })
}

enum Finish {
    Commit,
    /// The batch's only job failed: nothing of it may stay.
    Rollback,
}

fn run_jobs(conn: &Connection, batch: &mut [Box<dyn Job>]) -> rusqlite::Result<Finish> {
    if let [job] = batch {
        return Ok(match job.run(conn) {
            Ok(()) => Finish::Commit,
            Err(()) => Finish::Rollback,
        });
    }
    for job in batch.iter_mut() {
        conn.execute_batch("SAVEPOINT job")?;
        if job.run(conn).is_err() {
            conn.execute_batch("ROLLBACK TO job")?;
        }
        conn.execute_batch("RELEASE job")?;
    }
    Ok(Finish::Commit)
}

/// A batch's failure, once per job in it (errors are not `Clone`).
fn copy_failure(err: &StoreError) -> StoreError {
    match err {
        StoreError::Unavailable(_) => {
            StoreError::unavailable(format!("the SQLite write did not commit: {err}"))
        }
        _ => StoreError::internal(format!("the SQLite write did not commit: {err}")),
    }
}

/// SQLite's default busy handler sleeps 1, 2, 5, 10 … ms; the other writer
/// (an sqlx transaction) holds the lock for well under a millisecond, so
/// the lane retries every 20–200 µs, up to [`BUSY_TIMEOUT`].
fn wait_for_the_write_lock(attempt: i32) -> bool {
    thread_local! {
        static FIRST_BUSY: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
    }
    let started = FIRST_BUSY.with(|first| {
        if attempt == 0 || first.get().is_none() {
            first.set(Some(Instant::now()));
        }
        first.get().unwrap_or_else(Instant::now)
    });
    if started.elapsed() >= BUSY_TIMEOUT {
        return false;
    }
    let step = 20u64.saturating_mul(1 << attempt.clamp(0, 3));
    std::thread::sleep(Duration::from_micros(step));
    true
}

/// `sqlx`'s `$n` placeholders as SQLite's `?n`: rusqlite binds by position,
/// and SQLite numbers `$n` parameters by first appearance, `?n` by `n`.
pub(super) fn numbered(sql: &str) -> String {
    sql.replace('$', "?")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_numbered() {
        assert_eq!(
            numbered("UPDATE t SET a = $2 WHERE id = $1 AND b = $12"),
            "UPDATE t SET a = ?2 WHERE id = ?1 AND b = ?12"
        );
    }

    #[test]
    fn the_busy_handler_waits_in_short_steps() {
        let started = Instant::now();
        assert!(wait_for_the_write_lock(0));
        assert!(wait_for_the_write_lock(5));
        assert!(started.elapsed() < Duration::from_millis(50));
    }

    fn lane_on_a_fresh_file() -> (tempfile::TempDir, Lane) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lane.db");
        Connection::open(&path)
            .unwrap()
            .execute_batch("CREATE TABLE t (n INTEGER NOT NULL)")
            .unwrap();
        let lane = Lane::open(&path).unwrap();
        (dir, lane)
    }

    /// Calls queued behind a busy thread land in shared batches; a call
    /// whose work fails loses its own writes and only its own.
    #[tokio::test]
    async fn a_failing_call_in_a_batch_undoes_only_its_own_writes() {
        use futures_util::future::{BoxFuture, FutureExt, join_all};
        const CALLS: i64 = 400;
        let (_dir, lane) = lane_on_a_fresh_file();
        let (release, held) = mpsc::channel::<()>();
        let mut calls: Vec<BoxFuture<'_, Option<(i64, bool)>>> = Vec::new();
        // The first call holds the thread until every other call is queued.
        calls.push(
            lane.run(move |_| {
                let _ = held.recv();
                Ok(())
            })
            .map(|_| None)
            .boxed(),
        );
        for n in 0..CALLS {
            let call = lane.run(move |conn| {
                conn.execute("INSERT INTO t (n) VALUES (?1)", [n])?;
                if n % 3 == 0 {
                    return Err(StoreError::internal("refused on purpose"));
                }
                Ok(())
            });
            calls.push(call.map(move |outcome| Some((n, outcome.is_ok()))).boxed());
        }
        // join_all polls in order: this runs once every call above has sent its job.
        calls.push(
            async move {
                let _ = release.send(());
                None
            }
            .boxed(),
        );
        let mut kept = Vec::new();
        for (n, ok) in join_all(calls).await.into_iter().flatten() {
            assert_eq!(ok, n % 3 != 0, "call {n}");
            if ok {
                kept.push(n);
            }
        }
        let most = 1 + (CALLS as u64).div_ceil(MAX_BATCH as u64);
        assert!(
            lane.batches() <= most,
            "{} transactions for {CALLS} queued calls; group commit allows {most}",
            lane.batches()
        );
        let stored: Vec<i64> = lane
            .run(|conn| {
                let mut stmt = conn.prepare("SELECT n FROM t ORDER BY n")?;
                let rows = stmt.query_map([], |row| row.get(0))?;
                Ok(rows.collect::<Result<Vec<i64>, _>>()?)
            })
            .await
            .unwrap();
        assert_eq!(stored, kept);
    }

    #[tokio::test]
    async fn a_panicking_call_answers_internal_and_the_lane_goes_on() {
        let (_dir, lane) = lane_on_a_fresh_file();
        let panicked = lane
            .run(|conn| -> StoreResult<()> {
                conn.execute("INSERT INTO t (n) VALUES (1)", [])?;
                panic!("a bug in a job")
            })
            .await;
        assert!(matches!(panicked, Err(StoreError::Internal(_))));
        let count: i64 = lane
            .run(|conn| Ok(conn.query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))?))
            .await
            .unwrap();
        assert_eq!(count, 0, "the panicking call's insert was rolled back");
    }

    #[test]
    fn opening_forgets_value_samples_and_keeps_row_counts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("analyzed.db");
        let count = |table: &str| -> i64 {
            Connection::open(&path)
                .unwrap()
                .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
                .unwrap()
        };
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                "CREATE TABLE t (k TEXT NOT NULL); CREATE INDEX t_k ON t (k); \
                 WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 500) \
                 INSERT INTO t (k) SELECT 'key' || (i % 7) FROM s; ANALYZE;",
            )
            .unwrap();
        assert!(count("sqlite_stat4") > 0, "ANALYZE wrote value samples");
        let lane = Lane::open(&path).unwrap();
        assert_eq!(count("sqlite_stat4"), 0);
        assert!(count("sqlite_stat1") > 0, "row counts stay");
        drop(lane);
    }

    #[tokio::test]
    async fn a_closed_lane_answers_unavailable() {
        let (_dir, lane) = lane_on_a_fresh_file();
        lane.close().await;
        let outcome = lane.run(|_| Ok(())).await;
        assert!(matches!(outcome, Err(StoreError::Unavailable(_))));
    }
}
