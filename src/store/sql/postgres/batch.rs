//! Group commit on PostgreSQL (issue 47; River's batch completer is the
//! model): concurrent `complete`s, concurrent `fail`s, and concurrent
//! pending claims of one endpoint (and queue), each as one statement and
//! one commit (claims under admission limits too, when the batch is
//! admitted as a whole: `claims.rs`).
//!
//! A call that finds no other of its kind and key running runs alone, as
//! before: one statement, one commit. One that arrives while another is
//! running waits, and when that one is done, everything that waited
//! meanwhile runs as ONE statement and one commit. Each caller is still
//! answered only once its own change is committed, and only with its own
//! row: every row of the batch is held to its own guard, and a caller the
//! batch could not serve runs alone instead, so it gets the answer it
//! would have had alone.
//!
//! What keeps the semantics: a batch never holds the same todo twice (a
//! second `complete` of one todo waits for the next batch, so it meets the
//! first one's outcome, as it would alone); a caller that gave up before its
//! batch ran (its future dropped) is left out of it; and when a batch's
//! statement fails (a lost connection, a deadlock with another instance's
//! batch), every caller in it runs alone instead.
//!
//! The kinds are [`FinishInput`] (`complete`, `fail` and `release`, `transitions.rs`)
//! and [`ClaimInput`] (`claims.rs`).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::hash::Hash;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::store::StoreResult;
use crate::store::sql::SqlStore;

pub(in crate::store::sql) use super::claims::ClaimInput;
pub(in crate::store::sql) use super::transitions::FinishInput;

/// The most calls one statement takes.
const MAX_BATCH: usize = 64;

/// A kind of call that may run in batches.
pub(in crate::store::sql) trait Batched:
    Clone + Send + Sync + Sized + 'static
{
    /// Only calls with the same key run together.
    type Key: Clone + Eq + Hash + Send;
    /// A call's answer.
    type Output: Send + 'static;

    fn key(&self) -> Self::Key;

    /// Calls with the same value here never share a batch (a todo's id).
    fn once(&self) -> Option<&str>;

    /// The store's batcher of this kind, when group commit is on.
    fn batcher(store: &SqlStore) -> Option<&Batcher<Self>>;

    /// One call alone: today's statement.
    fn run_one(
        store: &SqlStore,
        input: &Self,
    ) -> impl Future<Output = StoreResult<Self::Output>> + Send;

    /// Several calls as one statement: per call, in order, its answer, or
    /// `None` when this batch could not serve it (it then runs alone).
    fn run_together(
        store: &SqlStore,
        inputs: &[&Self],
    ) -> impl Future<Output = StoreResult<Together<Self::Output>>> + Send;
}

/// What a batch's statement gave back.
pub(in crate::store::sql) struct Together<O> {
    /// Per call, in order: its answer, or `None` (it runs alone).
    pub answers: Vec<Option<O>>,
    /// The key's calls should run alone for a while: the statement learned
    /// that a batch cannot serve them (a claim under admission limits).
    pub run_alone_for: Option<Duration>,
}

/// A batch's answer to one caller: its own, or `None` when it must run alone.
type Answer<O> = Option<StoreResult<O>>;

type Waiting<I> = (I, oneshot::Sender<Answer<<I as Batched>::Output>>);

pub(in crate::store::sql) struct Batcher<I: Batched> {
    keys: Mutex<HashMap<I::Key, KeyState<I>>>,
    /// Statements of more than one call that served some of them, and the
    /// calls they served (answered without running alone).
    batches: AtomicU64,
    batched: AtomicU64,
}

impl<I: Batched> Default for Batcher<I> {
    fn default() -> Self {
        Self {
            keys: Mutex::default(),
            batches: AtomicU64::new(0),
            batched: AtomicU64::new(0),
        }
    }
}

impl<I: Batched> std::fmt::Debug for Batcher<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher")
            .field("batches", &self.batches)
            .field("batched", &self.batched)
            .finish_non_exhaustive()
    }
}

/// One key's calls: whether one runs, who waits, and until when its calls
/// run alone.
struct KeyState<I: Batched> {
    running: bool,
    waiting: Vec<Waiting<I>>,
    alone_until: Option<Instant>,
}

impl<I: Batched> Default for KeyState<I> {
    fn default() -> Self {
        Self {
            running: false,
            waiting: Vec::new(),
            alone_until: None,
        }
    }
}

impl<I: Batched> KeyState<I> {
    fn idle(&self) -> bool {
        !self.running && self.waiting.is_empty() && self.alone_until.is_none()
    }
}

/// How a call goes: alone now (it leads: whatever arrives meanwhile waits
/// for it), in a batch, or alone without leading.
pub(in crate::store::sql) enum Turn<I: Batched> {
    Alone(I),
    Lead(I),
    Wait(I, oneshot::Receiver<Answer<I::Output>>),
}

impl<I: Batched> Batcher<I> {
    pub(in crate::store::sql) fn join(&self, input: I) -> Turn<I> {
        let mut keys = self.lock();
        let state = keys.entry(input.key()).or_default();
        if let Some(until) = state.alone_until {
            if Instant::now() < until {
                return Turn::Alone(input);
            }
            state.alone_until = None;
        }
        if !state.running {
            state.running = true;
            return Turn::Lead(input);
        }
        let (tx, rx) = oneshot::channel();
        state.waiting.push((input.clone(), tx));
        Turn::Wait(input, rx)
    }

    /// Calls waiting for a batch (tests wait for them).
    pub(in crate::store::sql) fn waiting(&self) -> usize {
        self.lock().values().map(|s| s.waiting.len()).sum()
    }

    /// (statements of more than one call that served some, calls served).
    pub(in crate::store::sql) fn counts(&self) -> (u64, u64) {
        (
            self.batches.load(Ordering::Relaxed),
            self.batched.load(Ordering::Relaxed),
        )
    }

    /// The key's next batch, once its running call is done: every caller
    /// still waiting, each `once` value once, at most [`MAX_BATCH`]. `None`
    /// (and nothing running any more) when nobody waits.
    fn next_batch(&self, key: &I::Key) -> Option<Vec<Waiting<I>>> {
        let mut keys = self.lock();
        let state = keys.get_mut(key)?;
        state.waiting.retain(|(_, reply)| !reply.is_closed());
        if state.waiting.is_empty() {
            state.running = false;
            if state.idle() {
                keys.remove(key);
            }
            return None;
        }
        let mut once = HashSet::new();
        let mut batch = Vec::new();
        let mut rest = Vec::new();
        for waiting in std::mem::take(&mut state.waiting) {
            let first = waiting.0.once().is_none_or(|v| once.insert(v.to_owned()));
            if batch.len() < MAX_BATCH && first {
                batch.push(waiting);
            } else {
                rest.push(waiting);
            }
        }
        state.waiting = rest;
        Some(batch)
    }

    /// The key's calls run alone for `period` (those waiting already still
    /// get their batch's answer).
    fn run_alone(&self, key: &I::Key, period: Duration) {
        if let Some(state) = self.lock().get_mut(key) {
            state.alone_until = Some(Instant::now() + period);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<I::Key, KeyState<I>>> {
        // A panic while holding the lock left a valid state behind.
        self.keys.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Held by the caller running alone: when it is done, however it ends
/// (answered, failed, or its future dropped mid-statement), whatever waited
/// for its key meanwhile runs as the next batch.
struct Leading<'a, I: Batched> {
    store: &'a SqlStore,
    key: I::Key,
}

impl<I: Batched> Drop for Leading<'_, I> {
    fn drop(&mut self) {
        let Some(batcher) = I::batcher(self.store) else {
            return;
        };
        if let Some(batch) = batcher.next_batch(&self.key) {
            let store = self.store.clone();
            let key = self.key.clone();
            tokio::spawn(async move { run_batches(&store, key, batch).await });
        }
    }
}

/// A call of kind `I`: alone when group commit is off or nothing else of
/// its key runs, else in the next batch; alone after all when the batch
/// could not serve it or failed.
pub(in crate::store::sql) async fn call<I: Batched>(
    store: &SqlStore,
    input: I,
) -> StoreResult<I::Output> {
    let turn = match I::batcher(store) {
        Some(batcher) => batcher.join(input),
        None => Turn::Alone(input),
    };
    match turn {
        Turn::Alone(input) => I::run_one(store, &input).await,
        Turn::Lead(input) => {
            let _leading = Leading::<I> {
                store,
                key: input.key(),
            };
            I::run_one(store, &input).await
        }
        Turn::Wait(input, answer) => match answer.await {
            Ok(Some(answer)) => answer,
            // Not served, the batch failed, or the runtime is shutting down.
            Ok(None) | Err(_) => I::run_one(store, &input).await,
        },
    }
}

async fn run_batches<I: Batched>(store: &SqlStore, key: I::Key, mut batch: Vec<Waiting<I>>) {
    loop {
        if batch.len() == 1 {
            let (input, reply) = batch.pop().expect("one");
            let _ = reply.send(Some(I::run_one(store, &input).await));
        } else {
            let inputs: Vec<&I> = batch.iter().map(|(i, _)| i).collect();
            let together = I::run_together(store, &inputs).await;
            let batcher = I::batcher(store);
            match together {
                Ok(together) => {
                    if let Some(batcher) = batcher {
                        let served = together.answers.iter().flatten().count() as u64;
                        if served > 0 {
                            batcher.batches.fetch_add(1, Ordering::Relaxed);
                            batcher.batched.fetch_add(served, Ordering::Relaxed);
                        }
                        if let Some(period) = together.run_alone_for {
                            batcher.run_alone(&key, period);
                        }
                    }
                    for ((_, reply), answer) in batch.drain(..).zip(together.answers) {
                        let _ = reply.send(answer.map(Ok));
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "a batch failed; each of its calls runs alone");
                    for (_, reply) in batch.drain(..) {
                        let _ = reply.send(None);
                    }
                }
            }
        }
        match I::batcher(store).and_then(|b| b.next_batch(&key)) {
            Some(next) => batch = next,
            None => return,
        }
    }
}
