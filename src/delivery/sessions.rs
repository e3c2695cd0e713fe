//! The doorbell hearers on this instance — sessions — of any transport: an
//! MCP session (from `initialize` until closed), or any other hearer a
//! transport registers. A session is **attached** while it exists and
//! **streaming** while its stream (the doorbell sink: whatever the
//! transport drains from [`SessionRegistry::open_stream`]) is open, known
//! exactly from the connections' own lifetimes. Delivery rings sessions
//! alike; what a transport knows of its client is a [`Hearer`], shown to
//! operators and never used to decide who is rung.
//!
//! A **ghost** is a session whose stream the peer closed and that has made
//! no request since, for longer than the registry's ghost grace (two SSE
//! keepalive periods): an exited client that never sent `DELETE` (Claude
//! Code never does). It is no hearer — [`SessionRegistry::sessions_of`]
//! leaves it out, so it is not rung, counted or deaf — and
//! [`SessionRegistry::close_ghosts`] closes it (`docs/doorbells.md`, "Ghost sessions").
//!
//! Memory only: a session is lost with the process, as it may be.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::mint::random_token;

/// Outbound messages a session's stream can hold before it counts as full.
pub const STREAM_BUFFER: usize = 16;

pub use crate::domain::doorbell::RUNNER_CLIENT_NAME;

/// How long a session has to answer a doorbell with any request.
pub const DEFAULT_UNANSWERED_AFTER: Duration = Duration::from_secs(120);

/// The labels of `switchboard_rings_answered_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AnswerLabels {
    /// `session`, `runner` or `hook`.
    pub hearer: &'static str,
    /// `acknowledged` (a request, or a hook's 2xx, within
    /// `--unanswered-after`) or `unheard`.
    pub answer: &'static str,
}

/// Who a session is, as the transport that registered it describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hearer {
    /// The transport: `mcp`, or another's name.
    pub transport: &'static str,
    /// The client's own name and version, when it gave them (MCP's
    /// `clientInfo`).
    pub client_name: Option<String>,
    pub client_version: Option<String>,
    /// The transport's protocol version, when it has one (MCP's
    /// `protocolVersion`).
    pub protocol_version: Option<String>,
}

impl Hearer {
    /// The hearer kind its rings are counted under: `runner` for
    /// `switchboard work`, else `session`.
    pub fn kind(&self) -> &'static str {
        if self.client_name.as_deref() == Some(RUNNER_CLIENT_NAME) {
            "runner"
        } else {
            "session"
        }
    }
}

#[derive(Debug)]
pub struct Session {
    pub id: String,
    pub endpoint_id: String,
    pub slug: String,
    pub hearer: Hearer,
    state: Mutex<SessionState>,
    /// Requests begun so far, and a wake-up for whoever waits for the next
    /// one (a test ring waiting for its answer).
    requests: AtomicU64,
    asked: tokio::sync::Notify,
}

#[derive(Debug)]
struct SessionState {
    last_activity: Instant,
    in_flight: usize,
    stream: Option<StreamSlot>,
    /// Messages for a session whose stream is not open (yet): delivered when
    /// it opens, bounded like a stream's buffer.
    waiting: std::collections::VecDeque<Value>,
    /// When this session was rung since its last request (any request
    /// clears them), the newest [`RINGS_REMEMBERED`] at most.
    rung_since_request: std::collections::VecDeque<Instant>,
    /// Doorbell writes that failed in a row (a full buffer).
    failed_writes: u32,
    /// When the peer closed this session's stream, if it has made no
    /// request since (any request clears it).
    stream_closed_at: Option<Instant>,
}

/// Rings remembered per session for the "unanswered" rule; as many in a row
/// without a single request make a session deaf at once (`docs/doorbells.md`).
pub const RINGS_REMEMBERED: usize = 16;

#[derive(Debug)]
struct StreamSlot {
    generation: u64,
    sender: mpsc::Sender<Value>,
}

/// Why a message could not be queued on a session's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    NoStream,
    BufferFull,
}

impl Session {
    fn lock(&self) -> std::sync::MutexGuard<'_, SessionState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the peer closed this session's stream more than `grace` ago
    /// and it has made no request since: a client that went away.
    pub fn is_ghost(&self, grace: Duration, now: Instant) -> bool {
        let state = self.lock();
        state.in_flight == 0
            && state
                .stream_closed_at
                .is_some_and(|closed| now.saturating_duration_since(closed) >= grace)
    }

    pub fn is_streaming(&self) -> bool {
        self.lock()
            .stream
            .as_ref()
            .is_some_and(|s| !s.sender.is_closed())
    }

    /// Records a doorbell write to this session that failed (`false`: its
    /// buffer was full) or succeeded; returns the failures in a row.
    pub fn record_write(&self, ok: bool) -> u32 {
        let mut state = self.lock();
        state.failed_writes = if ok { 0 } else { state.failed_writes + 1 };
        state.failed_writes
    }

    pub fn failed_writes(&self) -> u32 {
        self.lock().failed_writes
    }

    /// Records that a doorbell was written to this session. True when the
    /// oldest unanswered one had to be forgotten to make room (it went
    /// unheard).
    pub fn note_ring(&self) -> bool {
        let mut state = self.lock();
        let forgot = state.rung_since_request.len() == RINGS_REMEMBERED;
        if forgot {
            state.rung_since_request.pop_front();
        }
        state.rung_since_request.push_back(Instant::now());
        forgot
    }

    /// How many doorbells this session was sent since its last request whose
    /// answer window (`within`) has passed: each went unanswered.
    pub fn unanswered_rings(&self, within: Duration) -> usize {
        let now = Instant::now();
        self.lock()
            .rung_since_request
            .iter()
            .filter(|at| now.duration_since(**at) >= within)
            .count()
    }

    /// How long ago the last doorbell it has not answered was written.
    pub fn unanswered_for(&self) -> Option<Duration> {
        self.lock().rung_since_request.back().map(Instant::elapsed)
    }

    /// Waits until this session has begun more than `seen` requests (see
    /// [`Self::requests`]), or `within` passes; true when it has.
    pub async fn asked_since(&self, seen: u64, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let next = self.asked.notified();
            tokio::pin!(next);
            next.as_mut().enable();
            if self.requests.load(Ordering::SeqCst) > seen {
                return true;
            }
            if tokio::time::timeout_at(deadline, next).await.is_err() {
                return self.requests.load(Ordering::SeqCst) > seen;
            }
        }
    }

    /// Requests this session has begun so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    /// How long since this session's last request began or ended.
    pub fn idle_for(&self) -> Duration {
        self.lock().last_activity.elapsed()
    }

    /// How many more messages this session can take now: its open stream's
    /// free buffer, or (no stream) what its held messages leave of theirs.
    pub fn free_slots(&self) -> usize {
        let state = self.lock();
        match state.stream.as_ref() {
            Some(slot) if !slot.sender.is_closed() => slot.sender.capacity(),
            _ => STREAM_BUFFER.saturating_sub(state.waiting.len()),
        }
    }

    /// Doorbells written to it since its last request (at most
    /// [`RINGS_REMEMBERED`]).
    pub fn rings_since_request(&self) -> usize {
        self.lock().rung_since_request.len()
    }

    /// Queues a message on the open stream without waiting.
    pub fn try_send(&self, message: Value) -> Result<(), SendError> {
        let state = self.lock();
        let Some(slot) = state.stream.as_ref() else {
            return Err(SendError::NoStream);
        };
        slot.sender.try_send(message).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => SendError::BufferFull,
            mpsc::error::TrySendError::Closed(_) => SendError::NoStream,
        })
    }

    /// Queues a message on the open stream, or, when none is open, keeps it
    /// (bounded) for the next stream this session opens.
    pub fn try_send_or_hold(&self, message: Value) -> Result<(), SendError> {
        let mut state = self.lock();
        if let Some(slot) = state.stream.as_ref()
            && !slot.sender.is_closed()
        {
            return slot
                .sender
                .try_send(message)
                .map_err(|_| SendError::BufferFull);
        }
        if state.waiting.len() >= STREAM_BUFFER {
            return Err(SendError::BufferFull);
        }
        state.waiting.push_back(message);
        Ok(())
    }
}

/// Marks a request in flight for the idle janitor; ends it on drop.
pub struct InFlight(Arc<Session>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.in_flight = state.in_flight.saturating_sub(1);
        state.last_activity = Instant::now();
    }
}

/// Holds a session's stream open; dropping it (the connection went away)
/// marks the session as no longer streaming, unless a newer stream replaced it.
pub struct StreamGuard {
    session: Arc<Session>,
    generation: u64,
    _in_flight: InFlight,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let mut state = self.session.lock();
        if state
            .stream
            .as_ref()
            .is_some_and(|s| s.generation == self.generation)
        {
            // This stream was still the session's own (not replaced, not
            // ended by us): the peer went away from it.
            state.stream = None;
            state.stream_closed_at = Some(Instant::now());
        }
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SessionCounts {
    pub attached: usize,
    pub streaming: usize,
}

/// This instance's sessions, by id and by endpoint: a doorbell looks up
/// its endpoint's sessions without scanning every session.
#[derive(Debug)]
pub struct SessionRegistry {
    inner: RwLock<Sessions>,
    generations: AtomicU64,
    /// Sessions one endpoint may have here; one more closes one of them
    /// (streamless first, then the least recently active).
    max_per_endpoint: usize,
    /// Set on shutdown: every stream has ended and new ones end at once.
    shutting_down: AtomicBool,
    /// How long a session whose stream the peer closed stays a hearer
    /// without making a request (two SSE keepalive periods).
    ghost_grace: Duration,
    /// How long a session has to answer a doorbell with any request
    /// (`--unanswered-after`).
    unanswered_after: Duration,
    /// `switchboard_rings_answered_total`: rings acknowledged or unheard, by
    /// hearer kind (the server's registry holds a clone).
    answers: Family<AnswerLabels, Counter>,
}

/// The ghost grace unless configured: two default SSE keepalive periods.
pub const DEFAULT_GHOST_GRACE: Duration = Duration::from_secs(30);

/// Sessions per endpoint per instance unless configured
/// (`--max-sessions-per-endpoint`).
pub const DEFAULT_MAX_SESSIONS_PER_ENDPOINT: usize = 64;

#[derive(Debug, Default)]
struct Sessions {
    by_id: HashMap<String, Arc<Session>>,
    /// Ordered by session id, so a round-robin over them is stable.
    by_endpoint: HashMap<String, BTreeMap<String, Arc<Session>>>,
    /// `by_endpoint`'s keys, sorted, until they change: every sweep tick
    /// reads them, and copying and sorting 10 000 ids each time took ~5 ms
    /// of a 45 ms tick (B5).
    hosted: Option<Arc<[String]>>,
}

impl Sessions {
    /// Removes the endpoint's sessions until one more fits under `max`;
    /// returns them. Sessions without an open stream go first — they hear
    /// no doorbell now, while a listening one is how the endpoint is rung
    /// (63 streamless sessions of one client must never close the one that
    /// listens) — then, within each kind, the least recently active; a
    /// session with a request in flight (other than its stream) goes last
    /// of its kind: it is busy now.
    fn make_room(&mut self, endpoint_id: &str, max: usize) -> Vec<Arc<Session>> {
        let Some(of_endpoint) = self.by_endpoint.get(endpoint_id) else {
            return Vec::new();
        };
        let excess = (of_endpoint.len() + 1).saturating_sub(max);
        if excess == 0 {
            return Vec::new();
        }
        let mut ranked: Vec<(bool, bool, Instant, String)> = of_endpoint
            .values()
            .map(|s| {
                let state = s.lock();
                let stream = usize::from(state.stream.is_some());
                let busy = state.in_flight > stream;
                let listening = state.stream.as_ref().is_some_and(|s| !s.sender.is_closed());
                (listening, busy, state.last_activity, s.id.clone())
            })
            .collect();
        ranked.sort();
        ranked
            .into_iter()
            .take(excess)
            .filter_map(|(_, _, _, id)| self.remove(&id))
            .collect()
    }

    fn remove(&mut self, id: &str) -> Option<Arc<Session>> {
        let session = self.by_id.remove(id)?;
        if let Some(of_endpoint) = self.by_endpoint.get_mut(&session.endpoint_id) {
            of_endpoint.remove(id);
            if of_endpoint.is_empty() {
                self.by_endpoint.remove(&session.endpoint_id);
                self.hosted = None;
            }
        }
        Some(session)
    }
}

impl Default for SessionRegistry {
    fn default() -> Self {
        Self::new()
    }
}

impl SessionRegistry {
    pub fn new() -> Self {
        Self::with_max_per_endpoint(DEFAULT_MAX_SESSIONS_PER_ENDPOINT)
    }

    /// A registry where opening a session beyond `max` for one endpoint
    /// closes one of that endpoint's sessions first: one without an open
    /// stream if any, the least recently active of them.
    pub fn with_max_per_endpoint(max: usize) -> Self {
        Self {
            inner: RwLock::new(Sessions::default()),
            generations: AtomicU64::new(1),
            max_per_endpoint: max.max(1),
            shutting_down: AtomicBool::new(false),
            ghost_grace: DEFAULT_GHOST_GRACE,
            unanswered_after: DEFAULT_UNANSWERED_AFTER,
            answers: Family::default(),
        }
    }

    /// How long a session has to make any request after a doorbell before
    /// that doorbell counts as unanswered (`--unanswered-after`).
    pub fn with_unanswered_after(mut self, within: Duration) -> Self {
        self.unanswered_after = within;
        self
    }

    pub fn unanswered_after(&self) -> Duration {
        self.unanswered_after
    }

    /// Rings acknowledged or unheard, by hearer kind (for `/metrics`).
    pub fn answers(&self) -> &Family<AnswerLabels, Counter> {
        &self.answers
    }

    /// Counts `n` rings of a hearer of this kind as acknowledged or unheard.
    pub fn count_answers(&self, hearer: &'static str, acknowledged: bool, n: u64) {
        if n == 0 {
            return;
        }
        let answer = if acknowledged {
            "acknowledged"
        } else {
            "unheard"
        };
        self.answers
            .get_or_create(&AnswerLabels { hearer, answer })
            .inc_by(n);
    }

    /// Rings counted so far for this hearer kind and answer.
    pub fn answered(&self, hearer: &'static str, answer: &'static str) -> u64 {
        self.answers
            .get(&AnswerLabels { hearer, answer })
            .map_or(0, |c| c.get())
    }

    /// A session leaves: the doorbells it never answered went unheard, and
    /// its stream (if any) ends.
    fn retire(&self, session: &Session) {
        let mut state = session.lock();
        state.stream = None;
        let unheard = state.rung_since_request.len() as u64;
        state.rung_since_request.clear();
        drop(state);
        self.count_answers(session.hearer.kind(), false, unheard);
    }

    /// How long a session whose stream the peer closed, and that has made
    /// no request since, stays a hearer (`docs/doorbells.md`, "Ghost sessions").
    pub fn with_ghost_grace(mut self, grace: Duration) -> Self {
        self.ghost_grace = grace;
        self
    }

    pub fn ghost_grace(&self) -> Duration {
        self.ghost_grace
    }

    /// Ends every open stream now (a clean end of stream: clients reconnect,
    /// elsewhere) and every stream opened from now on at once. The sessions
    /// stay, so requests in flight finish.
    pub fn shut_down(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        for session in self.all() {
            session.lock().stream = None;
        }
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Sessions> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Sessions> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a session of the endpoint for a hearer of any transport.
    pub fn create(&self, endpoint_id: &str, slug: &str, hearer: Hearer) -> Arc<Session> {
        let session = Arc::new(Session {
            id: random_token(24),
            endpoint_id: endpoint_id.to_owned(),
            slug: slug.to_owned(),
            hearer,
            state: Mutex::new(SessionState {
                last_activity: Instant::now(),
                in_flight: 0,
                stream: None,
                waiting: std::collections::VecDeque::new(),
                rung_since_request: std::collections::VecDeque::new(),
                failed_writes: 0,
                stream_closed_at: None,
            }),
            requests: AtomicU64::new(0),
            asked: tokio::sync::Notify::new(),
        });
        let mut sessions = self.write();
        let evicted = sessions.make_room(endpoint_id, self.max_per_endpoint);
        sessions.by_id.insert(session.id.clone(), session.clone());
        if !sessions.by_endpoint.contains_key(endpoint_id) {
            sessions.hosted = None;
        }
        sessions
            .by_endpoint
            .entry(endpoint_id.to_owned())
            .or_default()
            .insert(session.id.clone(), session.clone());
        drop(sessions);
        for old in evicted {
            self.retire(&old);
            tracing::info!(
                endpoint = %old.slug,
                max = self.max_per_endpoint,
                "MCP session closed: the endpoint opened one more than the cap (streamless first, then the least recently active)"
            );
        }
        session
    }

    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.read().by_id.get(id).cloned()
    }

    /// Ends a session: it is forgotten and its stream (if any) ends.
    pub fn close(&self, id: &str) -> bool {
        let removed = self.write().remove(id);
        if let Some(session) = &removed {
            self.retire(session);
        }
        removed.is_some()
    }

    /// Ends every session of an endpoint (revocation, expiry). Returns how many.
    pub fn close_endpoint(&self, endpoint_id: &str) -> usize {
        let mut sessions = self.write();
        let Some(of_endpoint) = sessions.by_endpoint.remove(endpoint_id) else {
            return 0;
        };
        sessions.hosted = None;
        for id in of_endpoint.keys() {
            sessions.by_id.remove(id);
        }
        drop(sessions);
        for session in of_endpoint.values() {
            self.retire(session);
        }
        of_endpoint.len()
    }

    pub fn begin_request(&self, session: &Arc<Session>) -> InFlight {
        let now = Instant::now();
        let mut state = session.lock();
        state.in_flight += 1;
        state.last_activity = now;
        // Any request answers every doorbell before it (in time, or too
        // late: unheard), and shows the client is still there.
        let in_time = state
            .rung_since_request
            .iter()
            .filter(|at| now.saturating_duration_since(**at) < self.unanswered_after)
            .count() as u64;
        let late = state.rung_since_request.len() as u64 - in_time;
        state.rung_since_request.clear();
        state.stream_closed_at = None;
        drop(state);
        let kind = session.hearer.kind();
        self.count_answers(kind, true, in_time);
        self.count_answers(kind, false, late);
        session.requests.fetch_add(1, Ordering::SeqCst);
        session.asked.notify_waiters();
        InFlight(session.clone())
    }

    /// Opens the session's stream, replacing (and so ending) any previous one.
    pub fn open_stream(&self, session: &Arc<Session>) -> (StreamGuard, mpsc::Receiver<Value>) {
        let (sender, receiver) = mpsc::channel(STREAM_BUFFER);
        let generation = self.generations.fetch_add(1, Ordering::Relaxed);
        let in_flight = self.begin_request(session);
        if self.is_shutting_down() {
            // The sender goes with this scope: the stream ends at once.
            let (_, receiver) = mpsc::channel(1);
            return (
                StreamGuard {
                    session: session.clone(),
                    generation,
                    _in_flight: in_flight,
                },
                receiver,
            );
        }
        let mut state = session.lock();
        // What waited for a stream goes first (it fits: both are bounded alike).
        while let Some(message) = state.waiting.pop_front() {
            let _ = sender.try_send(message);
        }
        state.stream = Some(StreamSlot { generation, sender });
        drop(state);
        (
            StreamGuard {
                session: session.clone(),
                generation,
                _in_flight: in_flight,
            },
            receiver,
        )
    }

    /// The endpoint's hearers on this instance, by id: its sessions but
    /// ghosts (a ghost is not rung, counted or deaf).
    pub fn sessions_of(&self, endpoint_id: &str) -> Vec<Arc<Session>> {
        let now = Instant::now();
        self.read()
            .by_endpoint
            .get(endpoint_id)
            .map(|of_endpoint| {
                of_endpoint
                    .values()
                    .filter(|s| !s.is_ghost(self.ghost_grace, now))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Closes every ghost (a session whose stream the peer closed over the
    /// ghost grace ago, with no request since). Returns their ids. Run
    /// before the sweep reads the hosted endpoints, so that an endpoint
    /// whose only sessions are ghosts is not hosted and keeps its budget.
    pub fn close_ghosts(&self) -> Vec<String> {
        let now = Instant::now();
        let ghosts: Vec<String> = self
            .read()
            .by_id
            .values()
            .filter(|s| s.is_ghost(self.ghost_grace, now))
            .map(|s| s.id.clone())
            .collect();
        for id in &ghosts {
            self.close(id);
        }
        ghosts
    }

    /// Endpoints with at least one session attached here.
    pub fn hosted_endpoints(&self) -> Arc<[String]> {
        if let Some(hosted) = &self.read().hosted {
            return hosted.clone();
        }
        let mut sessions = self.write();
        let Sessions {
            by_endpoint,
            hosted,
            ..
        } = &mut *sessions;
        hosted
            .get_or_insert_with(|| {
                let mut ids: Vec<String> = by_endpoint.keys().cloned().collect();
                ids.sort();
                ids.into()
            })
            .clone()
    }

    /// Whether at least one session of the endpoint is attached here.
    pub fn hosts(&self, endpoint_id: &str) -> bool {
        self.read().by_endpoint.contains_key(endpoint_id)
    }

    pub fn counts(&self, endpoint_id: &str) -> SessionCounts {
        let sessions = self.sessions_of(endpoint_id);
        SessionCounts {
            attached: sessions.len(),
            streaming: sessions.iter().filter(|s| s.is_streaming()).count(),
        }
    }

    /// Closes sessions with nothing in flight (an open stream counts) for
    /// longer than `idle_limit`. Returns the closed sessions' ids.
    pub fn close_idle(&self, idle_limit: Duration) -> Vec<String> {
        let now = Instant::now();
        let idle: Vec<String> = self
            .read()
            .by_id
            .values()
            .filter(|s| {
                let state = s.lock();
                state.in_flight == 0 && now.duration_since(state.last_activity) >= idle_limit
            })
            .map(|s| s.id.clone())
            .collect();
        for id in &idle {
            self.close(id);
        }
        idle
    }

    pub fn total(&self) -> usize {
        self.read().by_id.len()
    }

    /// Every session on this instance (for counting them, e.g. `/metrics`).
    pub fn all(&self) -> Vec<Arc<Session>> {
        self.read().by_id.values().cloned().collect()
    }

    /// Every hearer on this instance: every session but ghosts (what
    /// `/metrics` counts).
    pub fn hearers(&self) -> Vec<Arc<Session>> {
        let now = Instant::now();
        self.read()
            .by_id
            .values()
            .filter(|s| !s.is_ghost(self.ghost_grace, now))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hosted_list_follows_every_way_an_endpoint_gains_or_loses_its_sessions() {
        let reg = SessionRegistry::with_max_per_endpoint(1);
        let hosted = |reg: &SessionRegistry| reg.hosted_endpoints().to_vec();
        assert!(hosted(&reg).is_empty());
        let b = reg.create("ep_b", "w-b", Hearer::default());
        reg.create("ep_a", "w-a", Hearer::default());
        assert_eq!(hosted(&reg), ["ep_a", "ep_b"], "sorted, both");
        // A second session over the cap evicts the first: still hosted.
        let b2 = reg.create("ep_b", "w-b2", Hearer::default());
        assert!(reg.get(&b.id).is_none());
        assert_eq!(hosted(&reg), ["ep_a", "ep_b"]);
        assert!(reg.close(&b2.id));
        assert_eq!(hosted(&reg), ["ep_a"], "its last session closed");
        assert_eq!(reg.close_endpoint("ep_a"), 1);
        assert!(hosted(&reg).is_empty(), "every session of it ended");
        reg.create("ep_c", "w-c", Hearer::default());
        assert_eq!(hosted(&reg), ["ep_c"], "a first session again");
    }

    #[tokio::test]
    async fn attached_and_streaming_follow_the_connections() {
        let reg = SessionRegistry::new();
        let s = reg.create("ep_1", "w-1", Hearer::default());
        assert_eq!(
            reg.counts("ep_1"),
            SessionCounts {
                attached: 1,
                streaming: 0
            }
        );
        let (guard, mut rx) = reg.open_stream(&s);
        assert_eq!(reg.counts("ep_1").streaming, 1);
        s.try_send(serde_json::json!({"n": 1})).unwrap();
        assert_eq!(rx.recv().await.unwrap()["n"], 1);
        drop(guard);
        assert_eq!(
            reg.counts("ep_1").streaming,
            0,
            "a dropped connection stops streaming"
        );
        assert_eq!(s.try_send(serde_json::json!({})), Err(SendError::NoStream));
    }

    #[tokio::test]
    async fn held_messages_wait_for_the_next_stream() {
        let reg = SessionRegistry::new();
        let s = reg.create("ep_1", "w-1", Hearer::default());
        for i in 0..STREAM_BUFFER {
            s.try_send_or_hold(serde_json::json!(i)).unwrap();
        }
        assert_eq!(
            s.try_send_or_hold(serde_json::json!("x")),
            Err(SendError::BufferFull)
        );
        let (_guard, mut rx) = reg.open_stream(&s);
        assert_eq!(rx.recv().await.unwrap(), serde_json::json!(0));
    }

    #[tokio::test]
    async fn a_second_stream_replaces_the_first() {
        let reg = SessionRegistry::new();
        let s = reg.create("ep_1", "w-1", Hearer::default());
        let (old_guard, mut old_rx) = reg.open_stream(&s);
        let (_new_guard, _new_rx) = reg.open_stream(&s);
        assert!(old_rx.recv().await.is_none(), "the old stream ends");
        drop(old_guard);
        assert!(
            s.is_streaming(),
            "dropping the old guard leaves the new stream alone"
        );
    }

    #[tokio::test]
    async fn buffers_are_bounded_and_close_endpoint_ends_streams() {
        let reg = SessionRegistry::new();
        let s = reg.create("ep_1", "w-1", Hearer::default());
        let (_guard, mut rx) = reg.open_stream(&s);
        for i in 0..STREAM_BUFFER {
            s.try_send(serde_json::json!(i)).unwrap();
        }
        assert_eq!(
            s.try_send(serde_json::json!("x")),
            Err(SendError::BufferFull)
        );
        assert_eq!(reg.close_endpoint("ep_1"), 1);
        for _ in 0..STREAM_BUFFER {
            rx.recv().await.unwrap();
        }
        assert!(rx.recv().await.is_none(), "closed with the endpoint");
        assert!(reg.get(&s.id).is_none());
    }

    #[test]
    fn one_session_over_the_cap_closes_the_oldest_idle_one() {
        let reg = SessionRegistry::with_max_per_endpoint(2);
        let oldest = reg.create("ep_1", "w-1", Hearer::default());
        let busy = reg.create("ep_1", "w-1", Hearer::default());
        let _other = reg.create("ep_2", "w-2", Hearer::default());
        let _req = reg.begin_request(&busy);
        let newest = reg.create("ep_1", "w-1", Hearer::default());
        assert!(
            reg.get(&oldest.id).is_none(),
            "the oldest idle one is closed"
        );
        assert!(reg.get(&busy.id).is_some() && reg.get(&newest.id).is_some());
        assert_eq!(reg.counts("ep_1").attached, 2);
        assert_eq!(
            reg.counts("ep_2").attached,
            1,
            "other endpoints are untouched"
        );
    }

    #[tokio::test]
    async fn the_cap_closes_a_streamless_session_before_the_one_that_listens() {
        let reg = SessionRegistry::with_max_per_endpoint(3);
        let listener = reg.create("ep_1", "w-1", Hearer::default());
        let (_guard, _rx) = reg.open_stream(&listener);
        let quiet = reg.create("ep_1", "w-1", Hearer::default());
        let asking = reg.create("ep_1", "w-1", Hearer::default());
        drop(reg.begin_request(&asking));
        // The listener is the least recently active; a streamless one goes.
        reg.create("ep_1", "w-1", Hearer::default());
        assert!(
            reg.get(&quiet.id).is_none(),
            "the quiet streamless one goes"
        );
        assert!(reg.get(&listener.id).is_some() && reg.get(&asking.id).is_some());
        assert!(listener.is_streaming());
    }

    #[tokio::test]
    async fn shutting_down_ends_every_stream_and_new_ones_at_once() {
        let reg = SessionRegistry::new();
        let s = reg.create("ep_1", "w-1", Hearer::default());
        let (_guard, mut rx) = reg.open_stream(&s);
        reg.shut_down();
        assert!(rx.recv().await.is_none(), "the open stream ends");
        let (_guard, mut rx) = reg.open_stream(&s);
        assert!(rx.recv().await.is_none(), "a new stream ends at once");
        assert!(
            reg.get(&s.id).is_some(),
            "the session stays for requests in flight"
        );
    }

    #[test]
    fn a_session_whose_peer_closed_its_stream_is_a_ghost_after_the_grace_until_it_asks() {
        let reg = SessionRegistry::new().with_ghost_grace(Duration::ZERO);
        let gone = reg.create("ep_1", "w-1", Hearer::default());
        let (guard, _rx) = reg.open_stream(&gone);
        assert_eq!(reg.sessions_of("ep_1").len(), 1, "streaming: a hearer");
        drop(guard);
        assert!(reg.sessions_of("ep_1").is_empty(), "the peer left: a ghost");
        assert_eq!(reg.counts("ep_1"), SessionCounts::default(), "not counted");
        // A request brings it back: it was only between streams.
        drop(reg.begin_request(&gone));
        assert_eq!(reg.sessions_of("ep_1").len(), 1);

        // Never streamed: not a ghost (nothing says its client left).
        let never = reg.create("ep_2", "w-2", Hearer::default());
        // Ended by us (replaced, shut down, closed): not a ghost either.
        let replaced = reg.create("ep_2", "w-2", Hearer::default());
        let (old, _rx1) = reg.open_stream(&replaced);
        let (_new, _rx2) = reg.open_stream(&replaced);
        drop(old);
        assert_eq!(reg.sessions_of("ep_2").len(), 2);

        let (guard, _rx) = reg.open_stream(&gone);
        drop(guard);
        assert_eq!(reg.close_ghosts(), vec![gone.id.clone()]);
        assert!(reg.get(&gone.id).is_none() && reg.get(&never.id).is_some());
        assert_eq!(&*reg.hosted_endpoints(), ["ep_2"], "a ghost hosts nothing");
    }

    #[test]
    fn a_ghost_is_a_hearer_within_its_grace() {
        let reg = SessionRegistry::new().with_ghost_grace(Duration::from_secs(3600));
        let s = reg.create("ep_1", "w-1", Hearer::default());
        let (guard, _rx) = reg.open_stream(&s);
        drop(guard);
        assert_eq!(reg.sessions_of("ep_1").len(), 1, "momentarily streamless");
        assert!(reg.close_ghosts().is_empty());
    }

    #[test]
    fn idle_sessions_close_unless_in_flight() {
        let reg = SessionRegistry::new();
        let busy = reg.create("ep_1", "w-1", Hearer::default());
        let _idle = reg.create("ep_1", "w-1", Hearer::default());
        let _req = reg.begin_request(&busy);
        let closed = reg.close_idle(Duration::ZERO);
        assert_eq!(closed.len(), 1);
        assert!(reg.get(&busy.id).is_some());
    }
}
