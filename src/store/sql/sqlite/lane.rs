//! SQLite's hot path on a connection of its own (issue 14).
//!
//! sqlx runs every SQLite statement as a round trip to a per-connection
//! worker thread: a claim was BEGIN, UPDATE, INSERT, COMMIT = four hand-offs,
//! and B1 spent 64 % of its CPU in the kernel switching threads (~3 % in
//! SQLite itself; `docs/decisions.md`). The lane is one `rusqlite`
//! connection behind a mutex; a whole transition (the claim and its attempt
//! record, the completion and the closing of its attempt, …) is one job on
//! it, run as one transaction with cached prepared statements, no `Any` row
//! conversion.
//!
//! Who runs a job: a caller that finds the lane idle runs its own (and
//! whatever queued before it) on its own thread — no hand-off. Under load
//! the lane's thread leads: calls queued while a batch ran commit together
//! (group commit). A caller never waits for the write lock on its tokio
//! worker: a batch that meets the lock goes to the thread, whose busy
//! handler waits in steps of tens of microseconds, not milliseconds.
//! Checkpoints run on a second thread, outside every caller's commit.
//!
//! The lane takes the calls an agent makes in its loop (`claim_next`'s
//! pending path, `complete`, `heartbeat`, authenticating the credential and
//! stamping `last_seen`); everything else stays on the sqlx pools. Both
//! write the same file in WAL mode with `BEGIN IMMEDIATE`, so SQLite's own
//! write lock orders them. What a lane job cannot decide alone (nothing
//! matched: why?) the caller asks on the transaction path, exactly as
//! PostgreSQL's one-statement transitions do (`todos/fast.rs`).

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
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

/// Prepared statements kept per connection; the lane runs about a dozen.
const STATEMENT_CACHE: usize = 64;

/// The most calls committed together. Calls queue only while another runs
/// a batch, so a batch is what arrived during the previous commit.
const MAX_BATCH: usize = 64;

/// Page cache of the lane's connection, in KiB: SQLite's default, on
/// purpose. When a b-tree split reuses free pages, SQLite renumbers the new
/// pages through a temporary page number past the file's end; the commit
/// then drops cached pages past the end by walking the whole cache (its
/// hash table and every page in it). That walk costs in proportion to the
/// cache's size: B1 (SQLite store, c = 1, 4, 16) ran 3-20 % more loops/s
/// with 2 MiB than with 64 MiB, and a big cache only gets slower as it
/// fills. The queue's hot pages fit; misses read the OS's page cache.
const CACHE_KIB: i64 = 2 * 1024;

/// The lane's connection checkpoints only when its WAL reaches this many
/// pages (SQLite's default: 1 000); below it the checkpointer thread does,
/// every [`CHECKPOINT_EVERY`] commits. A checkpoint syncs the WAL and the
/// database file; on the committing call's path those syncs were most of
/// B1's wall time at c = 1 (`folio_wait_writeback` under `fsync`).
const FOREGROUND_CHECKPOINT_PAGES: i64 = 8_000;

/// Commits between two background checkpoints.
const CHECKPOINT_EVERY: u64 = 64;

/// Page size, in bytes, of a database file the store creates (SQLite's
/// default is 4 096). A commit writes every page it changed to the WAL
/// whole, and an agent's loop changes about nine pages (the todo's row, its
/// attempt, and their index entries, in five b-trees) to write a few hundred
/// bytes: half-size pages halve the bytes each loop writes, copies and
/// checksums (B1, SQLite store: 37 → 21 KiB per loop at c = 1; on a host
/// whose disk took ~235 MB/s, those bytes were the limit). A file that
/// exists keeps the page size it has (`docs/storage.md` says how to change
/// it).
const NEW_FILE_PAGE_SIZE: i64 = 2_048;

/// What the lane's thread is asked to do.
enum Errand {
    /// A batch whose `BEGIN IMMEDIATE` found the write lock held: run it,
    /// waiting for the lock, then lead.
    Wait(Vec<Box<dyn Job>>),
    /// Calls are queued and their leader stepped down: lead.
    Lead,
}

/// Calls waiting for a leader.
struct Queue {
    jobs: VecDeque<Box<dyn Job>>,
    /// Set by `close`: calls then answer `unavailable`.
    closed: bool,
}

struct Shared {
    /// `None` once closed. Whoever holds it leads: runs every queued call.
    conn: Mutex<Option<Connection>>,
    queue: Mutex<Queue>,
    /// Transactions run (committed or not); calls / batches is how much
    /// group commit saves.
    batches: AtomicU64,
    commits: AtomicU64,
    /// Set while the thread leads (or is about to): callers then queue
    /// without trying to lead themselves.
    thread_leads: AtomicBool,
    /// Wakes the checkpointer (`None` once closed); a full slot means a
    /// checkpoint is already due.
    checkpoint: Mutex<Option<mpsc::SyncSender<()>>>,
    /// `PRAGMA data_version` as of the lane's last transaction: it moves
    /// when another connection (the sqlx pools, another process) commits.
    data_version: AtomicI64,
    /// Called when it moved: what the store caches about the file may be
    /// stale.
    on_outside_commit: OutsideCommit,
    /// How long a batch waits for SQLite's write lock before its calls
    /// answer `unavailable`: the store's acquire timeout, as the sqlx
    /// connections' `busy_timeout`.
    busy_timeout: Duration,
}

/// What the lane calls when it sees that another connection committed.
pub(in crate::store) type OutsideCommit = Box<dyn Fn() + Send + Sync>;

pub(in crate::store) struct Lane {
    shared: Arc<Shared>,
    /// To the thread that waits for the write lock and leads under load.
    errands: Mutex<Option<mpsc::Sender<Errand>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    checkpointer: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Lane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lane").finish_non_exhaustive()
    }
}

fn locked<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Jobs run under `catch_unwind`, so a poisoned lock holds consistent data.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Lane {
    /// Opens `path` (creating it if needed) and starts the thread. Opened
    /// before the sqlx pools, so that none of them loads value samples
    /// ([`forget_value_samples`]). `on_outside_commit` runs (on whichever
    /// thread leads) at the start of the first transaction after another
    /// connection committed to the file.
    pub(in crate::store::sql) fn open(
        path: &Path,
        busy_timeout: Duration,
        on_outside_commit: OutsideCommit,
    ) -> StoreResult<Self> {
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
        // Before anything writes the file: after that it is fixed.
        conn.pragma_update(None, "page_size", NEW_FILE_PAGE_SIZE)
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
        conn.pragma_update(None, "wal_autocheckpoint", FOREGROUND_CHECKPOINT_PAGES)
            .map_err(open_err)?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        conn.busy_handler(Some(wait_for_the_write_lock))
            .map_err(open_err)?;
        let data_version = data_version(&conn).map_err(open_err)?;
        let checkpoints = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(open_err)?;
        let (checkpoint, due) = mpsc::sync_channel::<()>(1);
        let checkpointer = std::thread::Builder::new()
            .name("sqlite-checkpointer".into())
            .spawn(move || {
                while due.recv().is_ok() {
                    // PASSIVE: copies what it can without waiting for anyone;
                    // a failure only leaves the WAL longer until the next one.
                    let _ = checkpoints.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                }
            })
            .map_err(|e| {
                StoreError::Unavailable(Box::new(WithContext {
                    context: "cannot start the SQLite checkpointer thread".into(),
                    source: Box::new(e),
                }))
            })?;

        let shared = Arc::new(Shared {
            conn: Mutex::new(Some(conn)),
            queue: Mutex::new(Queue {
                jobs: VecDeque::new(),
                closed: false,
            }),
            batches: AtomicU64::new(0),
            commits: AtomicU64::new(0),
            thread_leads: AtomicBool::new(false),
            checkpoint: Mutex::new(Some(checkpoint)),
            data_version: AtomicI64::new(data_version),
            on_outside_commit,
            busy_timeout,
        });
        let (errands, inbox) = mpsc::channel::<Errand>();
        let on_thread = shared.clone();
        let thread = std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || serve(&on_thread, &inbox))
            .map_err(|e| {
                StoreError::Unavailable(Box::new(WithContext {
                    context: "cannot start the SQLite writer thread".into(),
                    source: Box::new(e),
                }))
            })?;
        Ok(Self {
            shared,
            errands: Mutex::new(Some(errands)),
            thread: Mutex::new(Some(thread)),
            checkpointer: Mutex::new(Some(checkpointer)),
        })
    }

    /// Runs `work` inside a write transaction on the lane's connection and
    /// returns what it returned once that transaction has committed. An
    /// `Err` from `work` undoes its writes (and only its).
    ///
    /// The caller runs it itself when no one else is writing (flat
    /// combining): each hand-off to another thread costs a wake-up, which
    /// on this kind of machine costs more than the SQL (B1 at c = 1: two
    /// wake-ups per call were most of its CPU). A caller that finds the
    /// connection taken queues its call for whoever holds it.
    pub(in crate::store::sql) async fn run<R: Send + 'static>(
        &self,
        work: impl FnOnce(&Connection) -> StoreResult<R> + Send + 'static,
    ) -> StoreResult<R> {
        let (reply, answered) = tokio::sync::oneshot::channel();
        let job: Box<dyn Job> = Box::new(Call {
            work: Some(work),
            outcome: None,
            reply,
        });
        {
            let mut queue = locked(&self.shared.queue);
            if queue.closed {
                return Err(StoreError::unavailable(
                    "the SQLite writer thread is closed",
                ));
            }
            queue.jobs.push_back(job);
        }
        self.lead_inline();
        answered
            .await
            .map_err(|_| StoreError::internal("the SQLite writer thread dropped a call"))?
    }

    /// Leads if the lane is idle: runs one batch (this caller's call and
    /// whatever queued before it) on the caller's thread. Under load the
    /// lane's thread leads instead (calls queued while it runs a batch
    /// commit together), so a tokio worker runs at most one batch.
    fn lead_inline(&self) {
        if self.shared.thread_leads.load(Ordering::SeqCst) {
            // The thread drains the queue, this call included.
            return;
        }
        let Ok(conn) = self.shared.conn.try_lock() else {
            // Whoever holds it looks at the queue again once done.
            return;
        };
        let Some(connection) = conn.as_ref() else {
            drop(conn);
            return self.ask(Errand::Lead);
        };
        let mut batch = self.shared.take_batch();
        if !batch.is_empty() {
            match self.shared.begin(connection) {
                Ok(()) => self.shared.run_and_answer(connection, batch),
                Err(e) if is_busy(&e) => {
                    // Another connection writes: waiting is the thread's job,
                    // never a tokio worker's.
                    drop(conn);
                    return self.ask(Errand::Wait(batch));
                }
                Err(e) => answer_all(&mut batch, &e.into()),
            }
        }
        drop(conn);
        if !locked(&self.shared.queue).jobs.is_empty() {
            self.ask(Errand::Lead);
        }
    }

    /// Hands work to the thread. Once closing, a queued call is run by
    /// `close` itself; a batch in hand answers `unavailable`.
    fn ask(&self, errand: Errand) {
        self.shared.thread_leads.store(true, Ordering::SeqCst);
        let refused = match &*locked(&self.errands) {
            Some(errands) => errands.send(errand).err().map(|e| e.0),
            None => Some(errand),
        };
        if let Some(Errand::Wait(mut batch)) = refused {
            answer_all(
                &mut batch,
                &StoreError::unavailable("the SQLite writer thread is closed"),
            );
        }
    }

    /// How many transactions the lane has run so far.
    pub(in crate::store::sql) fn batches(&self) -> u64 {
        self.shared.batches.load(Ordering::Relaxed)
    }

    /// Lets queued calls finish, then stops the thread and closes the
    /// connection; later calls answer `unavailable`.
    pub(in crate::store::sql) async fn close(&self) {
        locked(&self.errands).take();
        let thread = locked(&self.thread).take();
        let checkpointer = locked(&self.checkpointer).take();
        let shared = self.shared.clone();
        let _ = tokio::task::spawn_blocking(move || {
            if let Some(thread) = thread {
                let _ = thread.join();
            }
            locked(&shared.checkpoint).take();
            if let Some(checkpointer) = checkpointer {
                let _ = checkpointer.join();
            }
            let mut conn = locked(&shared.conn);
            locked(&shared.queue).closed = true;
            // Nothing is queued after `closed`: this runs the last of it.
            if let Some(connection) = conn.as_ref() {
                shared.lead(connection);
            }
            conn.take();
        })
        .await;
    }
}

impl Shared {
    /// Opens a batch's transaction, and tells whoever cares when another
    /// connection committed since the lane's last one (before any job reads).
    fn begin(&self, conn: &Connection) -> rusqlite::Result<()> {
        control(conn, "BEGIN IMMEDIATE")?;
        self.batches.fetch_add(1, Ordering::Relaxed);
        let now = data_version(conn).inspect_err(|_| {
            let _ = control(conn, "ROLLBACK");
        })?;
        if self.data_version.swap(now, Ordering::Relaxed) != now {
            (self.on_outside_commit)();
        }
        Ok(())
    }

    fn take_batch(&self) -> Vec<Box<dyn Job>> {
        let mut queue = locked(&self.queue);
        let n = queue.jobs.len().min(MAX_BATCH);
        queue.jobs.drain(..n).collect()
    }

    /// Runs batches until the queue is empty, waiting for the write lock
    /// when it is held (the thread's way; never on a tokio worker).
    fn lead(&self, conn: &Connection) {
        loop {
            let mut batch = self.take_batch();
            if batch.is_empty() {
                return;
            }
            self.begin_waiting_and_run(conn, &mut batch);
        }
    }

    fn begin_waiting_and_run(&self, conn: &Connection, batch: &mut Vec<Box<dyn Job>>) {
        let began = MAY_WAIT.with(|may| {
            may.set(Some(self.busy_timeout));
            let began = self.begin(conn);
            may.set(None);
            began
        });
        match began {
            Ok(()) => self.run_and_answer(conn, std::mem::take(batch)),
            Err(e) => answer_all(batch, &e.into()),
        }
    }

    /// Runs `batch` in the transaction just begun and answers every call
    /// once it has committed (or failed).
    fn run_and_answer(&self, conn: &Connection, mut batch: Vec<Box<dyn Job>>) {
        let failed = run_batch(conn, &mut batch).err();
        let due = failed.is_none()
            && self
                .commits
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(CHECKPOINT_EVERY);
        if due && let Some(checkpoint) = &*locked(&self.checkpoint) {
            let _ = checkpoint.try_send(());
        }
        for job in batch {
            job.answer(failed.as_ref().map(copy_failure));
        }
    }
}

fn answer_all(batch: &mut Vec<Box<dyn Job>>, err: &StoreError) {
    for job in batch.drain(..) {
        job.answer(Some(copy_failure(err)));
    }
}

/// The thread: waits for the write lock where a caller could not, and
/// leads while calls keep arriving; once the queue is empty, callers lead
/// again.
fn serve(shared: &Shared, inbox: &mpsc::Receiver<Errand>) {
    while let Ok(errand) = inbox.recv() {
        let mut waiting = match errand {
            Errand::Wait(batch) => Some(batch),
            Errand::Lead => None,
        };
        loop {
            {
                let conn = locked(&shared.conn);
                let Some(connection) = conn.as_ref() else {
                    return;
                };
                if let Some(mut batch) = waiting.take() {
                    shared.begin_waiting_and_run(connection, &mut batch);
                }
                shared.lead(connection);
                shared.thread_leads.store(false, Ordering::SeqCst);
            }
            // A call queued after the last batch was taken but before the
            // flag fell saw the thread leading: it is the thread's to run.
            if locked(&shared.queue).jobs.is_empty() {
                break;
            }
            shared.thread_leads.store(true, Ordering::SeqCst);
        }
    }
}

thread_local! {
    /// How long this thread may wait in SQLite's busy handler: only the
    /// lane's own thread may (its lane's busy timeout), never a tokio
    /// worker leading inline (`None`).
    static MAY_WAIT: std::cell::Cell<Option<Duration>> = const { std::cell::Cell::new(None) };
}

/// SQLite's counter of commits made by other connections to this file, as
/// this connection last saw it.
fn data_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.prepare_cached("PRAGMA data_version")?
        .query_row([], |row| row.get(0))
}

fn is_busy(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// A transaction-control statement (`BEGIN IMMEDIATE`, `COMMIT`, a
/// savepoint …) from the statement cache: two per transaction, and
/// `execute_batch` parsed them anew each time (~1 % of B1's CPU at c = 1).
fn control(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

/// Runs the jobs of a batch whose transaction is open, and ends it.
fn run_batch(conn: &Connection, batch: &mut [Box<dyn Job>]) -> StoreResult<()> {
    let ended = match run_jobs(conn, batch) {
        Ok(Finish::Commit) => control(conn, "COMMIT"),
        Ok(Finish::Rollback) => control(conn, "ROLLBACK"),
        Err(e) => Err(e),
    };
    ended.map_err(|e| {
        // Whatever is left of the transaction goes; the answers say it failed.
        let _ = control(conn, "ROLLBACK");
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
        control(conn, "SAVEPOINT job")?;
        if job.run(conn).is_err() {
            control(conn, "ROLLBACK TO job")?;
        }
        control(conn, "RELEASE job")?;
    }
    Ok(Finish::Commit)
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
/// the lane retries every 20–200 µs, up to its busy timeout.
fn wait_for_the_write_lock(attempt: i32) -> bool {
    let Some(busy_timeout) = MAY_WAIT.with(std::cell::Cell::get) else {
        return false;
    };
    thread_local! {
        static FIRST_BUSY: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
    }
    let started = FIRST_BUSY.with(|first| {
        if attempt == 0 || first.get().is_none() {
            first.set(Some(Instant::now()));
        }
        first.get().unwrap_or_else(Instant::now)
    });
    if started.elapsed() >= busy_timeout {
        return false;
    }
    let step = 20u64.saturating_mul(1 << attempt.clamp(0, 3));
    std::thread::sleep(Duration::from_micros(step));
    true
}

/// `sqlx`'s `$n` placeholders as SQLite's `?n`: rusqlite binds by position,
/// and SQLite numbers `$n` parameters by first appearance, `?n` by `n`.
pub(in crate::store::sql) fn numbered(sql: &str) -> String {
    sql.replace('$', "?")
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEST_BUSY: Duration = Duration::from_secs(5);

    #[test]
    fn placeholders_become_numbered() {
        assert_eq!(
            numbered("UPDATE t SET a = $2 WHERE id = $1 AND b = $12"),
            "UPDATE t SET a = ?2 WHERE id = ?1 AND b = ?12"
        );
    }

    #[test]
    fn the_busy_handler_waits_in_short_steps_and_only_on_the_lanes_thread() {
        assert!(
            !wait_for_the_write_lock(0),
            "a caller leading inline never waits"
        );
        MAY_WAIT.with(|may| may.set(Some(Duration::from_secs(5))));
        let started = Instant::now();
        assert!(wait_for_the_write_lock(0));
        assert!(wait_for_the_write_lock(5));
        assert!(started.elapsed() < Duration::from_millis(50));
        // Past the busy timeout it gives up.
        MAY_WAIT.with(|may| may.set(Some(Duration::ZERO)));
        assert!(!wait_for_the_write_lock(6));
        MAY_WAIT.with(|may| may.set(None));
    }

    fn lane_on_a_fresh_file() -> (tempfile::TempDir, Lane) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lane.db");
        Connection::open(&path)
            .unwrap()
            .execute_batch("CREATE TABLE t (n INTEGER NOT NULL)")
            .unwrap();
        let lane = Lane::open(&path, TEST_BUSY, Box::new(|| {})).unwrap();
        (dir, lane)
    }

    fn page_size(path: &Path) -> i64 {
        Connection::open(path)
            .unwrap()
            .query_row("PRAGMA page_size", [], |row| row.get(0))
            .unwrap()
    }

    /// A file the lane creates has half-size pages; a file that exists
    /// keeps its own, and the lane writes it as before.
    #[tokio::test]
    async fn a_new_file_gets_small_pages_and_an_existing_one_keeps_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("new.db");
        let lane = Lane::open(&new, TEST_BUSY, Box::new(|| {})).unwrap();
        lane.run(|conn| {
            conn.execute_batch("CREATE TABLE t (n INTEGER NOT NULL)")?;
            Ok(())
        })
        .await
        .unwrap();
        lane.close().await;
        assert_eq!(page_size(&new), NEW_FILE_PAGE_SIZE);

        let (dir, lane) = lane_on_a_fresh_file();
        lane.run(|conn| {
            conn.execute("INSERT INTO t (n) VALUES (1)", [])?;
            Ok(())
        })
        .await
        .unwrap();
        assert_eq!(stored_numbers(&lane).await, [1]);
        lane.close().await;
        assert_eq!(page_size(&dir.path().join("lane.db")), 4_096);
    }

    /// Every `n` in the test table, in order.
    async fn stored_numbers(lane: &Lane) -> Vec<i64> {
        lane.run(|conn| {
            let mut stmt = conn.prepare("SELECT n FROM t ORDER BY n")?;
            let rows = stmt.query_map([], |row| row.get(0))?;
            Ok(rows.collect::<Result<Vec<i64>, _>>()?)
        })
        .await
        .unwrap()
    }

    /// The lane tells its owner when another connection committed to the
    /// file (the store then forgets cached credentials), once per such
    /// commit seen, and never for its own commits.
    #[tokio::test]
    async fn a_commit_by_another_connection_is_noticed_at_the_next_transaction() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lane.db");
        let other = Connection::open(&path).unwrap();
        other
            .execute_batch("CREATE TABLE t (n INTEGER NOT NULL)")
            .unwrap();
        let noticed = Arc::new(AtomicU64::new(0));
        let count = noticed.clone();
        let lane = Lane::open(
            &path,
            TEST_BUSY,
            Box::new(move || {
                count.fetch_add(1, Ordering::SeqCst);
            }),
        )
        .unwrap();
        let insert = |n: i64| {
            lane.run(move |conn| {
                conn.execute("INSERT INTO t (n) VALUES (?1)", [n])?;
                Ok(())
            })
        };
        insert(1).await.unwrap();
        insert(2).await.unwrap();
        assert_eq!(noticed.load(Ordering::SeqCst), 0, "the lane's own commits");

        other.execute("INSERT INTO t (n) VALUES (3)", []).unwrap();
        assert_eq!(
            noticed.load(Ordering::SeqCst),
            0,
            "seen only by a transaction"
        );
        assert_eq!(stored_numbers(&lane).await, [1, 2, 3]);
        assert_eq!(noticed.load(Ordering::SeqCst), 1);
        insert(4).await.unwrap();
        assert_eq!(noticed.load(Ordering::SeqCst), 1, "noticed once");
        lane.close().await;
    }

    /// Calls queued behind a busy connection land in shared batches; a
    /// call whose work fails loses its own writes and only its own.
    #[tokio::test]
    async fn a_failing_call_in_a_batch_undoes_only_its_own_writes() {
        use futures_util::future::{BoxFuture, FutureExt, join_all};
        const CALLS: i64 = 400;
        let (_dir, lane) = lane_on_a_fresh_file();
        let lane = Arc::new(lane);
        let (holding, held) = mpsc::channel::<()>();
        let (release, released) = mpsc::channel::<()>();
        // The first call leads on a thread of its own and holds the
        // connection until every other call is queued.
        let holder = {
            let lane = lane.clone();
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                runtime.block_on(lane.run(move |_| {
                    let _ = holding.send(());
                    let _ = released.recv();
                    Ok(())
                }))
            })
        };
        held.recv().unwrap();
        let mut calls: Vec<BoxFuture<'_, Option<(i64, bool)>>> = Vec::new();
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
        // join_all polls in order: this runs once every call above has queued.
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
        holder.join().unwrap().unwrap();
        let most = 1 + (CALLS as u64).div_ceil(MAX_BATCH as u64);
        assert!(
            lane.batches() <= most,
            "{} transactions for {CALLS} queued calls; group commit allows {most}",
            lane.batches()
        );
        let stored = stored_numbers(&lane).await;
        assert_eq!(stored, kept);
    }

    /// Uncontended, a call runs on its caller's own thread: no hand-off.
    #[tokio::test]
    async fn an_uncontended_call_runs_on_the_callers_thread() {
        let (_dir, lane) = lane_on_a_fresh_file();
        let ran_on = lane
            .run(|conn| {
                conn.execute("INSERT INTO t (n) VALUES (1)", [])?;
                Ok(std::thread::current().id())
            })
            .await
            .unwrap();
        assert_eq!(ran_on, std::thread::current().id());
    }

    /// While another connection holds the write lock, the call waits on
    /// the lane's thread: the caller's runtime (one thread here) goes on.
    #[tokio::test]
    async fn a_call_that_meets_the_write_lock_waits_off_the_runtime() {
        let (dir, lane) = lane_on_a_fresh_file();
        let other = Connection::open(dir.path().join("lane.db")).unwrap();
        other
            .execute_batch("BEGIN IMMEDIATE; INSERT INTO t (n) VALUES (7)")
            .unwrap();
        let (committed, commit) = tokio::sync::oneshot::channel::<()>();
        let other_writer = tokio::spawn(async move {
            // Runs only once the call below awaits its answer, and only if
            // the runtime's one thread is free.
            other.execute_batch("COMMIT").unwrap();
            let _ = committed.send(());
        });
        let ran_on = lane
            .run(|conn| {
                conn.execute("INSERT INTO t (n) VALUES (8)", [])?;
                Ok(std::thread::current().id())
            })
            .await
            .unwrap();
        commit.await.unwrap();
        other_writer.await.unwrap();
        assert_ne!(
            ran_on,
            std::thread::current().id(),
            "it waited on the lane's thread"
        );
        let stored = stored_numbers(&lane).await;
        assert_eq!(stored, vec![7, 8]);
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
        let lane = Lane::open(&path, TEST_BUSY, Box::new(|| {})).unwrap();
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
