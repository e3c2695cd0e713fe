//! Ringing one session per todo: streaming sessions first, round-robin per
//! endpoint, bounded non-blocking buffers, never a wait.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::domain::doorbell::{TodoBell, todo_doorbell};
use crate::domain::todo::TodoState;
use crate::mcp::sessions::{SendError, Session, SessionRegistry};
use crate::store::{RingCandidate, Todo};

/// What made a todo ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Trigger {
    /// A genuinely new todo (not counted against the budget).
    Created,
    /// A failed todo's retry window elapsed (not counted).
    Retry,
    /// The re-ring sweep (counted in the database before it rings).
    Sweep,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Retry => "retry",
            Self::Sweep => "sweep",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    NoSession,
    BufferFull,
    PresenceOut,
}

impl DropReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoSession => "no_session",
            Self::BufferFull => "buffer_full",
            Self::PresenceOut => "presence_out",
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

/// Failed rings in a row after which a session counts as deaf.
pub const DEAF_AFTER: u32 = 3;

/// How long one todo is shielded from ringing twice for one trigger (the
/// creating request and a bus echo may both see it).
const DUPLICATE_GATE: Duration = Duration::from_secs(5);

#[derive(Debug, Default)]
pub struct RingCounters {
    pub rung: Mutex<HashMap<(&'static str, &'static str), u64>>,
    pub dropped: Mutex<HashMap<&'static str, u64>>,
}

impl RingCounters {
    fn count_ring(&self, kind: &'static str, trigger: Trigger) {
        *self
            .rung
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry((kind, trigger.as_str()))
            .or_default() += 1;
    }

    pub fn count_drop(&self, reason: DropReason) {
        *self
            .dropped
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(reason.as_str())
            .or_default() += 1;
    }
}

#[derive(Debug)]
pub struct Doorbells {
    sessions: Arc<SessionRegistry>,
    /// Per endpoint: where the next round-robin pick starts.
    cursors: Mutex<HashMap<String, usize>>,
    /// Per (todo, trigger): when it last rang.
    recent: Mutex<HashMap<(String, Trigger), Instant>>,
    /// Per session: failed rings in a row.
    failures: Mutex<HashMap<String, u32>>,
    pub counters: RingCounters,
    rings: AtomicU64,
}

impl Doorbells {
    pub fn new(sessions: Arc<SessionRegistry>) -> Self {
        Self {
            sessions,
            cursors: Mutex::new(HashMap::new()),
            recent: Mutex::new(HashMap::new()),
            failures: Mutex::new(HashMap::new()),
            counters: RingCounters::default(),
            rings: AtomicU64::new(0),
        }
    }

    pub fn sessions(&self) -> &Arc<SessionRegistry> {
        &self.sessions
    }

    /// Whether this instance hosts the endpoint (at least one attached session).
    pub fn hosts(&self, endpoint_id: &str) -> bool {
        !self.sessions.sessions_of(endpoint_id).is_empty()
    }

    /// Endpoints with at least one session attached here.
    pub fn hosted_endpoints(&self) -> Vec<String> {
        self.sessions.hosted_endpoints()
    }

    /// A session is deaf after [`DEAF_AFTER`] failed rings in a row.
    pub fn is_deaf(&self, session_id: &str) -> bool {
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(session_id)
            .is_some_and(|n| *n >= DEAF_AFTER)
    }

    /// Deaf sessions of an endpoint on this instance.
    pub fn deaf_count(&self, endpoint_id: &str) -> usize {
        self.sessions
            .sessions_of(endpoint_id)
            .iter()
            .filter(|s| self.is_deaf(&s.id))
            .count()
    }

    fn record_write(&self, session: &Session, ok: bool) {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if ok {
            failures.remove(&session.id);
            return;
        }
        let n = failures.entry(session.id.clone()).or_insert(0);
        *n += 1;
        if *n == DEAF_AFTER {
            tracing::warn!(
                endpoint = %session.slug,
                "a session failed {DEAF_AFTER} doorbell writes in a row; it is deaf until one succeeds"
            );
        }
    }

    fn first_time(&self, todo_id: &str, trigger: Trigger) -> bool {
        let now = Instant::now();
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        if recent.len() > 10_000 {
            recent.retain(|_, at| now.duration_since(*at) < DUPLICATE_GATE);
        }
        let key = (todo_id.to_owned(), trigger);
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
        if !self.first_time(&todo.id, trigger) {
            return RingOutcome::Duplicate;
        }
        let sessions = self.sessions.sessions_of(&todo.endpoint_id);
        if sessions.is_empty() {
            self.counters.count_drop(DropReason::NoSession);
            tracing::debug!(endpoint = %todo.endpoint_id, "doorbell dropped: no session");
            return RingOutcome::Dropped(DropReason::NoSession);
        }
        let (streaming, waiting): (Vec<_>, Vec<_>) =
            sessions.into_iter().partition(|s| s.is_streaming());
        let candidates = if streaming.is_empty() {
            waiting
        } else {
            streaming
        };
        let start = {
            let mut cursors = self.cursors.lock().unwrap_or_else(|p| p.into_inner());
            let cursor = cursors.entry(todo.endpoint_id.clone()).or_insert(0);
            let start = *cursor % candidates.len();
            *cursor = cursor.wrapping_add(1);
            start
        };
        let message = todo_doorbell(&TodoBell {
            todo_id: &todo.id,
            queue: &todo.queue,
            title: &todo.title,
            kind: todo.kind.as_deref(),
            source: todo.source.as_deref(),
        });
        for i in 0..candidates.len() {
            let session = &candidates[(start + i) % candidates.len()];
            match session.try_send_or_hold(message.clone()) {
                Ok(()) => {
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

    /// The trigger for a genuinely new todo (a dedup hit rings nothing: the
    /// caller only calls this when the store created a row). The sender gate:
    /// only todos created by authenticated intake ring.
    pub fn ring_new(&self, todo: &Todo) -> Option<RingOutcome> {
        if todo.event_id.is_none() || todo.state != TodoState::Pending {
            return None;
        }
        Some(self.ring(&RingCandidate::from(todo), Trigger::Created))
    }

    pub fn total_rings(&self) -> u64 {
        self.rings.load(Ordering::Relaxed)
    }
}
