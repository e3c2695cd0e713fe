//! Ringing one session per todo: streaming sessions first, round-robin per
//! endpoint, bounded non-blocking buffers, never a wait.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use crate::delivery::sessions::{RINGS_REMEMBERED, SendError, Session, SessionRegistry};
use crate::domain::Timestamp;
use crate::domain::doorbell::{DigestReason, TodoBell, todo_doorbell};
use crate::store::RingCandidate;

/// What made a todo ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Trigger {
    /// A genuinely new todo (not counted against the budget).
    Created,
    /// A failed todo's retry window elapsed (not counted).
    Retry,
    /// The re-ring sweep (counted in the database before it rings).
    Sweep,
    /// A digest, with its reason.
    Digest(DigestReason),
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Retry => "retry",
            Self::Sweep => "sweep",
            Self::Digest(reason) => reason.as_str(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    NoSession,
    BufferFull,
    PresenceOut,
    /// Admission pauses the todo's endpoint or queue; resuming sends a digest.
    Paused,
}

impl DropReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoSession => "no_session",
            Self::BufferFull => "buffer_full",
            Self::PresenceOut => "presence_out",
            Self::Paused => "paused",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RingOutcome {
    /// Queued on this session's stream.
    Rung {
        session_id: String,
    },
    Dropped(DropReason),
    /// The same todo rang for this trigger a moment ago.
    Duplicate,
}

/// Failed or unanswered rings in a row after which a session counts as deaf.
pub const DEAF_AFTER: u32 = 3;

pub use crate::delivery::sessions::DEFAULT_UNANSWERED_AFTER;

/// Why a session counts as deaf.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeafReason {
    /// Its buffer was full for [`DEAF_AFTER`] doorbells in a row.
    BufferFull,
    /// It made no request after each of [`DEAF_AFTER`] doorbells in a row.
    Unanswered,
}

impl DeafReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BufferFull => "buffer_full",
            Self::Unanswered => "unanswered",
        }
    }
}

/// How long one todo is shielded from ringing twice for one trigger (the
/// creating request and a bus echo may both see it).
const DUPLICATE_GATE: Duration = Duration::from_secs(5);

/// The labels of `switchboard_doorbells_rung_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RingLabels {
    /// `todo` or `digest`.
    pub kind: &'static str,
    /// `created`, `retry`, `sweep`, …
    pub trigger: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DropLabels {
    pub reason: &'static str,
}

/// Rings and drops, kept as the `/metrics` counters themselves
/// (`switchboard_doorbells_rung_total`, `switchboard_doorbells_dropped_total`,
/// `switchboard_doorbell_write_seconds`): the server's registry holds clones.
#[derive(Debug)]
pub struct RingCounters {
    pub rung: Family<RingLabels, Counter>,
    pub dropped: Family<DropLabels, Counter>,
    /// From the decision to ring to the frame queued on a session's
    /// stream (or held for its next one), per doorbell written.
    pub write_seconds: Histogram,
}

/// Buckets of `switchboard_doorbell_write_seconds`: 10 µs to about 2.6 s
/// (a write never waits on a client, so anything past a millisecond is a
/// lock held too long).
fn write_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.000_01, 4.0, 10)
}

impl Default for RingCounters {
    fn default() -> Self {
        Self {
            rung: Family::default(),
            dropped: Family::default(),
            write_seconds: Histogram::new(write_buckets()),
        }
    }
}

impl RingCounters {
    fn count_ring(&self, kind: &'static str, trigger: Trigger) {
        self.rung
            .get_or_create(&RingLabels {
                kind,
                trigger: trigger.as_str(),
            })
            .inc();
    }

    pub fn count_drop(&self, reason: DropReason) {
        self.dropped
            .get_or_create(&DropLabels {
                reason: reason.as_str(),
            })
            .inc();
    }

    /// Rings counted so far of this kind and trigger.
    pub fn rings(&self, kind: &'static str, trigger: Trigger) -> u64 {
        let labels = RingLabels {
            kind,
            trigger: trigger.as_str(),
        };
        self.rung.get(&labels).map_or(0, |c| c.get())
    }

    /// Doorbells dropped so far for this reason.
    pub fn drops(&self, reason: DropReason) -> u64 {
        let labels = DropLabels {
            reason: reason.as_str(),
        };
        self.dropped.get(&labels).map_or(0, |c| c.get())
    }
}

#[derive(Debug)]
pub struct Doorbells {
    sessions: Arc<SessionRegistry>,
    /// Per endpoint: where the next round-robin pick starts.
    cursors: Mutex<HashMap<String, usize>>,
    /// Per (todo, trigger, counted rings so far): when it last rang. The
    /// count tells one sweep ring from the next (each is its own trigger).
    recent: Mutex<HashMap<(String, Trigger, i64), Instant>>,
    pub counters: RingCounters,
    rings: AtomicU64,
    /// Per endpoint: when this instance last sent it a digest.
    digest_gate: Mutex<HashMap<String, Timestamp>>,
}

/// A reconnect digest goes out at most once per endpoint per 10 minutes.
const RECONNECT_GATE_MS: i64 = 10 * 60 * 1000;

impl Doorbells {
    pub fn new(sessions: Arc<SessionRegistry>) -> Self {
        Self {
            sessions,
            cursors: Mutex::new(HashMap::new()),
            recent: Mutex::new(HashMap::new()),
            counters: RingCounters::default(),
            rings: AtomicU64::new(0),
            digest_gate: Mutex::new(HashMap::new()),
        }
    }

    /// How long a session has to make any request after a doorbell before
    /// that doorbell counts as unanswered (the registry's `--unanswered-after`).
    pub fn unanswered_after(&self) -> Duration {
        self.sessions.unanswered_after()
    }

    pub fn sessions(&self) -> &Arc<SessionRegistry> {
        &self.sessions
    }

    /// Whether this instance hosts the endpoint (at least one attached session).
    pub fn hosts(&self, endpoint_id: &str) -> bool {
        self.sessions.hosts(endpoint_id)
    }

    /// Endpoints with at least one session attached here.
    pub fn hosted_endpoints(&self) -> Arc<[String]> {
        self.sessions.hosted_endpoints()
    }

    /// Why a session counts as deaf, if it does (`docs/doorbells.md`, "Deaf sessions"):
    /// [`DEAF_AFTER`] doorbell writes in a row failed, or [`DEAF_AFTER`]
    /// doorbells were each left without any request from it for
    /// `unanswered_after`, or [`RINGS_REMEMBERED`] doorbells came in a row
    /// without a single request from it, however recent: a stream that is
    /// not read (the kernel's socket buffers swallow hundreds of doorbells
    /// before our own 16 fill) or a client that ignores every ring is deaf
    /// then, not after its round-robin share of a burst.
    pub fn deaf_reason(&self, session: &Session) -> Option<DeafReason> {
        if session.failed_writes() >= DEAF_AFTER {
            Some(DeafReason::BufferFull)
        } else if session.rings_since_request() >= RINGS_REMEMBERED
            || session.unanswered_rings(self.unanswered_after()) >= DEAF_AFTER as usize
        {
            Some(DeafReason::Unanswered)
        } else {
            None
        }
    }

    pub fn is_deaf(&self, session: &Session) -> bool {
        self.deaf_reason(session).is_some()
    }

    /// How many more doorbells the endpoint's hearers here can take now: the
    /// free buffer space of the sessions a ring would try (the streaming
    /// ones if any, else the others). The sweep rings no more than this per
    /// tick (bounded pacing).
    pub fn room(&self, endpoint_id: &str) -> usize {
        let sessions = self.sessions.sessions_of(endpoint_id);
        let streaming = sessions.iter().any(|s| s.is_streaming());
        sessions
            .iter()
            .filter(|s| !streaming || s.is_streaming())
            .map(|s| s.free_slots())
            .sum()
    }

    /// Deaf sessions of an endpoint on this instance.
    pub fn deaf_count(&self, endpoint_id: &str) -> usize {
        self.sessions
            .sessions_of(endpoint_id)
            .iter()
            .filter(|s| self.is_deaf(s))
            .count()
    }

    fn record_write(&self, session: &Session, ok: bool) {
        if ok {
            // The doorbells before this one that nobody answered: warn once,
            // when the third one's window has passed.
            let unanswered = session.unanswered_rings(self.unanswered_after());
            if session.note_ring() {
                self.sessions.count_answers(session.hearer.kind(), false, 1);
            } else if session.rings_since_request() == RINGS_REMEMBERED {
                tracing::warn!(
                    endpoint = %session.slug,
                    client = session.hearer.client_name.as_deref().unwrap_or("unknown"),
                    "a session made no request after {RINGS_REMEMBERED} doorbells in a row; it is \
                     deaf (unanswered) until it makes one — its stream may not be read at all"
                );
            }
            if unanswered == DEAF_AFTER as usize {
                tracing::warn!(
                    endpoint = %session.slug,
                    client = session.hearer.client_name.as_deref().unwrap_or("unknown"),
                    "a session made no request after {DEAF_AFTER} doorbells in a row; it is deaf \
                     (unanswered) until it makes one — a Claude Code started without \
                     --dangerously-load-development-channels drops every doorbell"
                );
            }
        }
        if session.record_write(ok) == DEAF_AFTER {
            tracing::warn!(
                endpoint = %session.slug,
                "a session failed {DEAF_AFTER} doorbell writes in a row; it is deaf until one succeeds"
            );
        }
    }

    /// The endpoint's sessions here to try for one doorbell, in order: the
    /// streaming ones if any (else those whose stream is not open yet),
    /// as [`Self::in_turn`] orders them.
    fn candidates(&self, endpoint_id: &str) -> Vec<Arc<Session>> {
        let (streaming, waiting): (Vec<_>, Vec<_>) = self
            .sessions
            .sessions_of(endpoint_id)
            .into_iter()
            .partition(|s| s.is_streaming());
        if streaming.is_empty() && waiting.is_empty() {
            // No turn taken: an endpoint with no session keeps no cursor.
            Vec::new()
        } else if streaming.is_empty() {
            self.in_turn(endpoint_id, waiting)
        } else {
            self.in_turn(endpoint_id, streaming)
        }
    }

    /// Candidates in the order to try them: runners that are not deaf, then
    /// other sessions that are not deaf, then the deaf, each group rotated
    /// round-robin from the endpoint's cursor. A runner first because the
    /// headless agents it starts open sessions of their own (`claude -p`
    /// opens a stream) that hear nothing: a ring to one of them is lost.
    fn in_turn(&self, endpoint_id: &str, candidates: Vec<Arc<Session>>) -> Vec<Arc<Session>> {
        let start = self.next_turn(endpoint_id, candidates.len());
        let n = candidates.len();
        let rotated = (0..n).map(|i| candidates[(start + i) % n].clone());
        let (hearing, deaf): (Vec<_>, Vec<_>) = rotated.partition(|s| !self.is_deaf(s));
        let (runners, others): (Vec<_>, Vec<_>) = hearing
            .into_iter()
            .partition(|s| s.hearer.kind() == "runner");
        runners.into_iter().chain(others).chain(deaf).collect()
    }

    /// True the first time this todo rings for this trigger (and counted
    /// ring) within [`DUPLICATE_GATE`]; a session or a hook rings only then.
    pub(crate) fn first_time(&self, todo: &RingCandidate, trigger: Trigger) -> bool {
        let now = Instant::now();
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        if recent.len() > 10_000 {
            recent.retain(|_, at| now.duration_since(*at) < DUPLICATE_GATE);
        }
        let key = (todo.id.clone(), trigger, todo.ring_attempts);
        match recent.get(&key) {
            Some(at) if now.duration_since(*at) < DUPLICATE_GATE => false,
            _ => {
                recent.insert(key, now);
                true
            }
        }
    }

    /// Rings exactly one session of the todo's endpoint on this instance:
    /// a streaming one if any (round-robin), else an attached one whose
    /// stream is not open yet; a full buffer moves on to the next candidate.
    pub fn ring(&self, todo: &RingCandidate, trigger: Trigger) -> RingOutcome {
        let decided = Instant::now();
        if !self.first_time(todo, trigger) {
            return RingOutcome::Duplicate;
        }
        let candidates = self.candidates(&todo.endpoint_id);
        if candidates.is_empty() {
            self.counters.count_drop(DropReason::NoSession);
            tracing::debug!(endpoint = %todo.endpoint_id, "doorbell dropped: no session");
            return RingOutcome::Dropped(DropReason::NoSession);
        }
        let message = todo_doorbell(&TodoBell {
            todo_id: &todo.id,
            queue: &todo.queue,
            title: &todo.title,
            kind: todo.kind.as_deref(),
            source: todo.source.as_deref(),
        });
        for session in &candidates {
            match session.try_send_or_hold(message.clone()) {
                Ok(()) => {
                    self.counters
                        .write_seconds
                        .observe(decided.elapsed().as_secs_f64());
                    self.record_write(session, true);
                    self.counters.count_ring("todo", trigger);
                    self.rings.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(endpoint = %session.slug, trigger = trigger.as_str(), "doorbell rung");
                    return RingOutcome::Rung {
                        session_id: session.id.clone(),
                    };
                }
                Err(SendError::BufferFull) | Err(SendError::NoStream) => {
                    self.record_write(session, false);
                }
            }
        }
        self.counters.count_drop(DropReason::BufferFull);
        tracing::debug!(endpoint = %todo.endpoint_id, "doorbell dropped: every buffer is full");
        RingOutcome::Dropped(DropReason::BufferFull)
    }

    /// Rings one session of the endpoint here with a test doorbell (picked
    /// as a todo's would be; counted against no todo). Returns the session
    /// and how many requests it had begun before the ring, to wait for its
    /// answer with [`Session::asked_since`].
    pub fn ring_test(&self, endpoint_id: &str) -> Option<(Arc<Session>, u64)> {
        let message = crate::domain::doorbell::test_doorbell();
        for session in self.candidates(endpoint_id) {
            let seen = session.requests();
            if session.try_send_or_hold(message.clone()).is_ok() {
                self.record_write(&session, true);
                return Some((session, seen));
            }
            self.record_write(&session, false);
        }
        None
    }

    /// Sends a digest to exactly one session of the endpoint here (prefer
    /// streaming; rotate) and arms the reconnect gate. True when written.
    pub fn send_digest(
        &self,
        endpoint_id: &str,
        message: serde_json::Value,
        reason: DigestReason,
        now: Timestamp,
    ) -> bool {
        let decided = Instant::now();
        let candidates = self.candidates(endpoint_id);
        if candidates.is_empty() {
            self.counters.count_drop(DropReason::NoSession);
            return false;
        }
        for session in &candidates {
            if session.try_send_or_hold(message.clone()).is_ok() {
                self.counters
                    .write_seconds
                    .observe(decided.elapsed().as_secs_f64());
                self.record_write(session, true);
                self.counters.count_ring("digest", Trigger::Digest(reason));
                self.arm_reconnect_gate(endpoint_id, now);
                return true;
            }
            self.record_write(session, false);
        }
        self.counters.count_drop(DropReason::BufferFull);
        false
    }

    fn next_turn(&self, endpoint_id: &str, n: usize) -> usize {
        let mut cursors = self.cursors.lock().unwrap_or_else(|p| p.into_inner());
        let cursor = cursors.entry(endpoint_id.to_owned()).or_insert(0);
        let start = *cursor % n.max(1);
        *cursor = cursor.wrapping_add(1);
        start
    }

    fn arm_reconnect_gate(&self, endpoint_id: &str, now: Timestamp) {
        self.digest_gate
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(endpoint_id.to_owned(), now);
    }

    /// True (and armed) when no digest went to this endpoint from here in
    /// the last 10 minutes.
    pub fn reconnect_gate_open(&self, endpoint_id: &str, now: Timestamp) -> bool {
        let mut gate = self.digest_gate.lock().unwrap_or_else(|p| p.into_inner());
        match gate.get(endpoint_id) {
            Some(at) if now.as_millis() - at.as_millis() < RECONNECT_GATE_MS => false,
            _ => {
                gate.insert(endpoint_id.to_owned(), now);
                true
            }
        }
    }

    /// Whether this instance sent the endpoint a digest at or after `since`
    /// (a catch-up does not digest a return twice).
    pub fn digested_since(&self, endpoint_id: &str, since: Timestamp) -> bool {
        self.digest_gate
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(endpoint_id)
            .is_some_and(|at| *at >= since)
    }

    /// Re-opens a gate [`Self::reconnect_gate_open`] armed at `armed_at`
    /// when no digest followed after all (nothing waited, or no session
    /// could take it): only a digest sent uses up the 10 minutes.
    pub fn disarm_reconnect_gate(&self, endpoint_id: &str, armed_at: Timestamp) {
        let mut gate = self.digest_gate.lock().unwrap_or_else(|p| p.into_inner());
        if gate.get(endpoint_id) == Some(&armed_at) {
            gate.remove(endpoint_id);
        }
    }

    /// A ring handed to a notify hook (`delivery::hooks`), counted with the
    /// rings of sessions.
    pub fn count_hook_ring(&self, kind: &'static str, trigger: Trigger) {
        self.counters.count_ring(kind, trigger);
        self.rings.fetch_add(1, Ordering::Relaxed);
    }

    pub fn total_rings(&self) -> u64 {
        self.rings.load(Ordering::Relaxed)
    }
}
