//! Delivery (`docs/doorbells.md`, `docs/presence.md`): who can hear a doorbell
//! on this instance ([`sessions`]), ringing one of them ([`hub`]), the
//! re-ring sweep ([`sweep`]), and presence with its digests ([`presence`]).
//!
//! [`Delivery`] is the one event path: every "someone must be told" event —
//! a todo became ready (API push, webhook, retry), an endpoint was revoked or
//! expired, presence inputs changed, a transition was claimed — goes through
//! one of its methods, which acts on this instance and publishes the event on
//! the [`Bus`] for the others.
//!
//! A doorbell is a hint. Nothing here waits on a client, and losing a
//! doorbell never loses work: every todo stays pullable.

pub mod activity;
pub mod counters;
pub mod fleet;
pub mod hooks;
pub mod hub;
pub mod listener;
pub mod presence;
pub mod sessions;
pub mod sweep;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub use counters::{AttemptEnd, EventCounters, HumanAction};
pub use hub::{Doorbells, DropLabels, DropReason, RingLabels, RingOutcome, Trigger};

use crate::bus::{Bus, Message};
use crate::domain::Timestamp;
use crate::domain::doorbell::DigestReason;
use crate::store::{Endpoint, RingCandidate, Store, StoreError, StoreResult, Todo, TodoRef};

/// How long an instance whose sessions of an endpoint are all streamless
/// waits before claiming a ring (04: a streaming session anywhere first).
/// The wait runs in a task of its own ([`Delivery::ring_ready`]): no
/// request, maintenance tick or bus message ever waits for it.
pub const STREAMLESS_GRACE: std::time::Duration = std::time::Duration::from_millis(250);

/// Rings of this instance in tasks of their own at once at most (deferred
/// streamless rings, and the rings and digests the bus listener hands off).
/// Past it a ring runs in its caller, without the grace: its claim is one
/// statement, never a sleep.
const RING_TASKS: usize = 1024;

/// At most this many missed todos are rung by one catch-up pass (the sweep
/// re-rings the rest on its schedule).
const MISSED_RINGS_CAP: i64 = 500;
use hooks::{HookConfig, Hooks};
use sessions::SessionRegistry;

/// The store, this instance's doorbells (and so its sessions), its notify
/// hooks, and the bus.
pub struct Delivery {
    store: Arc<dyn Store>,
    doorbells: Arc<Doorbells>,
    bus: Arc<dyn Bus>,
    /// Notify hooks: hearers of every instance, preferred to sessions.
    hooks: Arc<Hooks>,
    /// When this instance last claimed a transition, per endpoint: a
    /// catch-up after a bus gap must not digest this instance's own claims
    /// twice. Memory only; entries older than a day are dropped.
    claimed_here: Mutex<HashMap<String, Timestamp>>,
    /// Attempts finished and todos created, for `/metrics`.
    counters: EventCounters,
    /// The same events per queue and bucket, for the board's charts.
    activity: activity::ActivityRecorder,
    /// Permits for rings in tasks of their own ([`RING_TASKS`]).
    ring_tasks: Arc<tokio::sync::Semaphore>,
    /// How far back a catch-up after a bus gap looks for todos nobody rang:
    /// the first re-ring step (older ones are the sweep's, due at once).
    catch_up_window: std::time::Duration,
}

impl Delivery {
    pub fn new(store: Arc<dyn Store>, doorbells: Arc<Doorbells>, bus: Arc<dyn Bus>) -> Self {
        let hooks = Arc::new(Hooks::new(
            store.clone(),
            bus.clone(),
            HookConfig::default(),
            doorbells.sessions().answers().clone(),
        ));
        Self {
            store,
            doorbells,
            bus,
            hooks,
            claimed_here: Mutex::new(HashMap::new()),
            counters: EventCounters::default(),
            activity: activity::ActivityRecorder::default(),
            ring_tasks: Arc::new(tokio::sync::Semaphore::new(RING_TASKS)),
            catch_up_window: sweep::DEFAULT_STEPS[0],
        }
    }

    /// The first re-ring step (`--ring-steps`): a catch-up after a bus gap
    /// rings the todos nobody rang that are younger than it; the sweep
    /// rings the older ones, due already.
    pub fn with_catch_up_window(mut self, window: std::time::Duration) -> Self {
        self.catch_up_window = window;
        self
    }

    /// A permit to run one ring in a task of its own, if fewer than
    /// [`RING_TASKS`] run now.
    pub(crate) fn ring_task_permit(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.ring_tasks.clone().try_acquire_owned().ok()
    }

    /// How notify hooks are delivered (`--allow-private-hooks`).
    pub fn with_hook_config(mut self, config: HookConfig) -> Self {
        self.hooks = Arc::new(Hooks::new(
            self.store.clone(),
            self.bus.clone(),
            config,
            self.doorbells.sessions().answers().clone(),
        ));
        self
    }

    /// This instance's notify hooks.
    pub fn hooks(&self) -> &Arc<Hooks> {
        &self.hooks
    }

    /// An endpoint's hooks were added, deleted or enabled here: this
    /// instance and the others read again whether it has an enabled one.
    pub async fn hooks_changed(&self, endpoint_id: &str) {
        self.hooks.refresh(endpoint_id).await;
        self.bus.publish(Message::HooksChanged {
            endpoint_id: endpoint_id.to_owned(),
        });
    }

    /// Rings a todo this instance is to ring: one enabled hook of its
    /// endpoint if it has any (the operator wired it on purpose; see
    /// `docs/decisions.md`), else one session here. True when a hearer took
    /// it (false: every buffer refused it, or no session is left).
    pub(crate) fn ring_candidate(&self, candidate: &RingCandidate, trigger: Trigger) -> bool {
        ring_candidate(&self.doorbells, &self.hooks, candidate, trigger)
    }

    pub fn store(&self) -> &dyn Store {
        &*self.store
    }

    pub fn doorbells(&self) -> &Doorbells {
        &self.doorbells
    }

    /// The sessions of this instance: who can hear a doorbell here.
    pub fn sessions(&self) -> &Arc<SessionRegistry> {
        self.doorbells.sessions()
    }

    pub fn bus(&self) -> &dyn Bus {
        &*self.bus
    }

    /// The throughput counters (`/metrics` holds clones of their families).
    pub fn counters(&self) -> &EventCounters {
        &self.counters
    }

    /// Each queue's activity since the last flush, for the board's charts
    /// (`ops::activity::flush` writes it down).
    pub fn activity(&self) -> &activity::ActivityRecorder {
        &self.activity
    }

    /// `n` attempts ended this way (a surface's `complete`, `fail`,
    /// `release`, or the reaper's lapsed leases).
    pub fn attempts_finished(&self, end: AttemptEnd, n: u64) {
        self.counters.count_attempts(end, n);
    }

    /// A `claim_next` found the work held by admission.
    pub fn claim_held(&self, reason: crate::domain::admission::HeldReason) {
        self.counters.count_held(reason);
    }

    /// A human retried, released or cancelled `n` todos.
    pub fn human_acted(&self, action: HumanAction, n: u64) {
        self.counters.count_action(action, n);
    }

    /// A todo was created (the store made a row, not a dedup hit), by a
    /// sender of this trust mode. Counted apart from [`Self::todo_created`],
    /// which rings, so that a todo that rings nothing still counts.
    pub fn todo_counted(&self, mode: crate::store::TrustMode) {
        self.counters.count_created(mode);
    }

    /// A webhook delivery was decided (recorded, released or discarded).
    pub fn delivery_decided(&self, decision: crate::domain::intake::Decision) {
        self.counters.count_decision(decision);
    }

    /// A genuinely new todo (the caller only calls this when the store
    /// created a row; a dedup hit rings nothing). Held while its endpoint is
    /// out.
    pub async fn todo_created(&self, todo: &Todo) {
        self.created(todo, None).await;
    }

    /// [`Self::todo_created`] by a caller that read the todo's endpoint for
    /// this request (the API's push): its presence is judged on that read,
    /// so the push reads the endpoint once, not twice.
    pub async fn todo_created_on(&self, todo: &Todo, endpoint: &Endpoint) {
        self.created(todo, Some(endpoint)).await;
    }

    async fn created(&self, todo: &Todo, endpoint: Option<&Endpoint>) {
        // The sender gate: only todos created by authenticated intake ring.
        if todo.event_id.is_none() || todo.state != crate::domain::todo::TodoState::Pending {
            return;
        }
        self.bus.publish(Message::TodoReady {
            endpoint_id: todo.endpoint_id.clone(),
            todo_id: todo.id.clone(),
            retried: false,
        });
        let known = RingCandidate::from(todo);
        let endpoint = endpoint.filter(|e| e.id == todo.endpoint_id);
        self.ring_ready(
            &todo.endpoint_id,
            &todo.id,
            Some(known),
            endpoint,
            Trigger::Created,
        )
        .await;
    }

    /// A delayed todo's `run_at` came and it is pending now: it rings as a
    /// new todo does (its creation's ring, deferred), once in the cluster.
    pub async fn todo_due(&self, todo: &TodoRef) {
        self.bus.publish(Message::TodoReady {
            endpoint_id: todo.endpoint_id.clone(),
            todo_id: todo.id.clone(),
            retried: false,
        });
        self.ring_ready(&todo.endpoint_id, &todo.id, None, None, Trigger::Created)
            .await;
    }

    /// A failed todo's retry window elapsed and it is pending again.
    pub async fn todo_retried(&self, todo: &TodoRef) {
        self.bus.publish(Message::TodoReady {
            endpoint_id: todo.endpoint_id.clone(),
            todo_id: todo.id.clone(),
            retried: true,
        });
        self.ring_ready(&todo.endpoint_id, &todo.id, None, None, Trigger::Retry)
            .await;
    }

    /// Todos a human retried in bulk: each rings as [`Self::todo_retried`]
    /// does, one after another in a task of its own, so that the request
    /// that retried them does not wait for the rings.
    pub fn todos_retried_in_background(self: &Arc<Self>, ids: Vec<String>) {
        if ids.is_empty() {
            return;
        }
        let delivery = self.clone();
        tokio::spawn(async move {
            for id in &ids {
                match delivery.store().unscoped_ringable_todo(id).await {
                    Ok(Some(todo)) => {
                        let todo = TodoRef {
                            id: todo.id,
                            endpoint_id: todo.endpoint_id,
                            queue: todo.queue,
                        };
                        delivery.todo_retried(&todo).await;
                    }
                    // Claimed or changed since, or a pull-only todo: nothing to ring.
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(todo = %id, error = %e, "doorbell skipped: retried todo unreadable");
                    }
                }
            }
        });
    }

    /// A todo became ready on another instance.
    pub async fn todo_ready(&self, endpoint_id: &str, todo_id: &str, trigger: Trigger) {
        self.ring_ready(endpoint_id, todo_id, None, None, trigger)
            .await;
    }

    /// Rings one session of this instance for a todo that became ready, if
    /// this instance is the one to ring it. Alone (one instance) that is
    /// decided here, in memory; in a cluster, by one guarded statement,
    /// which an instance with a streaming session of the endpoint tries at
    /// once and one whose sessions are all streamless tries after a short
    /// grace, so that a streaming session anywhere is preferred (`docs/doorbells.md`).
    /// That grace runs in a task of its own: the caller (a request, the
    /// maintenance tick, the bus listener) never waits for it.
    /// `endpoint`: the endpoint as the caller read it for this event, if it
    /// did (else it is read here).
    async fn ring_ready(
        &self,
        endpoint_id: &str,
        todo_id: &str,
        known: Option<RingCandidate>,
        endpoint: Option<&Endpoint>,
        trigger: Trigger,
    ) {
        let (store, doorbells) = (self.store(), self.doorbells());
        let clustered = self.bus.spans_instances();
        let local_candidate = if clustered {
            None
        } else {
            match known {
                Some(candidate) => Some(candidate),
                None => match store.unscoped_ringable_todo(todo_id).await {
                    Ok(Some(candidate)) => Some(candidate),
                    Ok(None) => return,
                    Err(e) => {
                        tracing::warn!(todo = %todo_id, error = %e, "doorbell skipped: todo unreadable");
                        return;
                    }
                },
            }
        };
        // An endpoint with an enabled hook is hosted on every instance.
        let hooked = self.hooks.hooked(endpoint_id);
        let sessions = self.sessions().sessions_of(endpoint_id);
        if sessions.is_empty() && !hooked {
            // In a cluster another instance may host it: no drop here.
            if !clustered {
                doorbells.counters.count_drop(DropReason::NoSession);
            }
            return;
        }
        let endpoint = match endpoint {
            Some(endpoint) => Ok(endpoint.clone()),
            None => store.unscoped_get_endpoint(endpoint_id).await,
        };
        match endpoint {
            Ok(endpoint) if endpoint.is_active() => {
                if presence::is_out(&endpoint, store.clock().now()) {
                    doorbells.counters.count_drop(DropReason::PresenceOut);
                    return;
                }
                let queue = local_candidate.as_ref().map(|c| c.queue.as_str());
                if let Some(queue) = queue
                    && store
                        .unscoped_paused(endpoint_id, queue)
                        .await
                        .unwrap_or(false)
                {
                    doorbells.counters.count_drop(DropReason::Paused);
                    return;
                }
            }
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(error = %e, "doorbell skipped: endpoint unreadable");
                return;
            }
        }
        if let Some(candidate) = local_candidate {
            self.ring_candidate(&candidate, trigger);
            return;
        }
        let streamless = !hooked && !sessions.iter().any(|s| s.is_streaming());
        if streamless && let Some(permit) = self.ring_task_permit() {
            // The grace runs in a task of its own, never in the caller (a
            // request, the maintenance tick, the bus listener): many
            // deferred rings wait side by side, and the claim below still
            // decides the one instance that rings.
            let (store, doorbells, hooks) = (
                self.store.clone(),
                self.doorbells.clone(),
                self.hooks.clone(),
            );
            let todo_id = todo_id.to_owned();
            tokio::spawn(async move {
                let _permit = permit;
                tokio::time::sleep(STREAMLESS_GRACE).await;
                // Shutting down meanwhile: the streams have ended and the
                // database is closing; the todo stays pullable.
                if !doorbells.sessions().is_shutting_down() {
                    claim_and_ring(&*store, &doorbells, &hooks, &todo_id, trigger).await;
                }
            });
            return;
        }
        // A streaming session here (or a hook): claim at once. So too when
        // too many deferred rings wait already: one statement, no grace.
        claim_and_ring(&*self.store, &self.doorbells, &self.hooks, todo_id, trigger).await;
    }

    /// Rings one hearer of the endpoint on this instance with a test
    /// doorbell (counted against no todo; held while the endpoint is out)
    /// and waits up to `wait` for it to answer with any request.
    pub async fn test_ring(&self, endpoint: &Endpoint, wait: std::time::Duration) -> TestRing {
        if presence::is_out(endpoint, self.store.clock().now()) {
            return TestRing::Held;
        }
        // A hooked endpoint's rings go to a hook: so does the test's.
        if self.hooks.hooked(&endpoint.id)
            && let Some((target, delivered)) = self.hooks.test_ring(&endpoint.id).await
        {
            return TestRing::Rung {
                hearer: "hook",
                client: None,
                hearer_id: target.hook.id,
                answered_after: matches!(delivered.outcome, hooks::Outcome::Ok { .. })
                    .then(|| std::time::Duration::from_millis(delivered.duration_ms as u64)),
            };
        }
        let Some((session, seen)) = self.doorbells.ring_test(&endpoint.id) else {
            return TestRing::NoHearer;
        };
        let rung = std::time::Instant::now();
        let answered = session.asked_since(seen, wait).await;
        TestRing::Rung {
            hearer: session.hearer.kind(),
            client: session.hearer.client_name.clone(),
            hearer_id: session.id.chars().take(8).collect(),
            answered_after: answered.then(|| rung.elapsed()),
        }
    }

    /// Where a catch-up after a bus gap starts looking: the catch-up window
    /// (the first re-ring step) before now.
    pub(crate) fn catch_up_since(&self) -> Timestamp {
        self.store
            .clock()
            .now()
            .saturating_sub(self.catch_up_window)
    }

    /// After a gap on the bus: rings, once in the cluster, the todos of these
    /// endpoints that became ready (created, or a delayed one come due) at or
    /// after `since` and whose ring no instance has claimed — whatever
    /// message was lost, and whenever it was sent: the ledger is the claim
    /// on the row, not the time a message was heard. Returns how many rang
    /// here at once (a streamless endpoint's rings wait for their grace in
    /// tasks of their own and are not counted in it). No more are rung per
    /// endpoint than its hearers here have room for; the rest stay
    /// unclaimed, for the sweep. One instance alone (no bus between instances)
    /// rang everything it published itself: nothing to catch up.
    pub async fn ring_missed(&self, endpoint_ids: &[String], since: Timestamp) -> usize {
        if !self.bus.spans_instances() {
            return 0;
        }
        let ids = match retry_unavailable(|| {
            self.store()
                .unscoped_unrung_since(endpoint_ids, since, MISSED_RINGS_CAP)
        })
        .await
        {
            Ok(ids) => ids,
            Err(e) => {
                tracing::warn!(error = %e, "bus catch-up could not read unrung todos");
                return 0;
            }
        };
        let before = self.doorbells.total_rings();
        // Paced as the sweep is: no more rings per endpoint than its hearers
        // here have room for; the rest stay unclaimed for the sweep.
        let mut room: HashMap<String, usize> = HashMap::new();
        for id in &ids {
            // The endpoint is read again per todo: cheap, and rare.
            if let Ok(Some(todo)) =
                retry_unavailable(|| self.store().unscoped_ringable_todo(id)).await
            {
                let left = room.entry(todo.endpoint_id.clone()).or_insert_with(|| {
                    match self.hooks.hooked(&todo.endpoint_id) {
                        true => usize::MAX,
                        false => self.doorbells.room(&todo.endpoint_id),
                    }
                });
                if *left == 0 {
                    continue;
                }
                *left -= 1;
                self.ring_ready(&todo.endpoint_id, &todo.id, None, None, Trigger::Created)
                    .await;
            }
        }
        (self.doorbells.total_rings() - before) as usize
    }

    /// An endpoint was revoked or expired: its sessions on this instance end
    /// now (their streams close), and the others are told. Returns how many
    /// sessions were closed here.
    pub fn endpoint_revoked(&self, endpoint_id: &str) -> usize {
        self.store.forget_credentials();
        self.bus.publish(Message::EndpointRevoked {
            endpoint_id: endpoint_id.to_owned(),
        });
        self.hooks.forget(endpoint_id);
        self.sessions().close_endpoint(endpoint_id)
    }

    /// An endpoint's settings that its sessions see (the default lease the
    /// tool descriptions quote) were written here: cached credentials,
    /// which carry the endpoint's row, are dropped on every instance, and
    /// every session of the endpoint is told its tool list changed.
    pub fn endpoint_changed(&self, endpoint_id: &str) {
        self.bus.publish(Message::EndpointChanged {
            endpoint_id: endpoint_id.to_owned(),
        });
        self.endpoint_changed_here(endpoint_id);
    }

    /// [`Self::endpoint_changed`] on this instance only (what the bus
    /// listener does for another instance's change). Returns how many
    /// sessions were told.
    pub fn endpoint_changed_here(&self, endpoint_id: &str) -> usize {
        self.store.forget_credentials();
        let note = crate::domain::doorbell::tools_changed();
        self.sessions()
            .sessions_of(endpoint_id)
            .iter()
            .filter(|session| session.try_send_or_hold(note.clone()).is_ok())
            .count()
    }

    /// An endpoint's presence inputs were written here.
    pub(crate) fn presence_inputs_changed(&self, endpoint_id: &str) {
        self.bus.publish(Message::PresenceChanged {
            endpoint_id: endpoint_id.to_owned(),
        });
    }

    /// A human resumed claims on the endpoint (or a queue of it): one digest
    /// of the work that waited, on this instance (`docs/queue.md`,
    /// "Admission").
    pub(crate) async fn claims_resumed(&self, endpoint: &crate::store::Endpoint) -> bool {
        self.bus.publish(Message::ClaimsResumed {
            endpoint_id: endpoint.id.clone(),
        });
        presence::send_resumed_digest(self, endpoint).await
    }

    /// This instance claimed a presence transition (with, for out→in, the
    /// digest's reason): the other instances send their own digests.
    pub(crate) fn transition_claimed(
        &self,
        endpoint_id: &str,
        presence: crate::domain::presence::Presence,
        digest: Option<DigestReason>,
    ) {
        let now = self.store.clock().now();
        {
            let mut claimed = self.claimed_here.lock().unwrap_or_else(|p| p.into_inner());
            claimed.retain(|_, at| now.as_millis() - at.as_millis() < 86_400_000);
            claimed.insert(endpoint_id.to_owned(), now);
        }
        self.bus.publish(Message::TransitionClaimed {
            endpoint_id: endpoint_id.to_owned(),
            presence,
            digest,
            instance: self.bus.instance().clone(),
        });
    }

    /// Whether this instance claimed a transition of the endpoint at or
    /// after `since`.
    pub(crate) fn claimed_here_since(&self, endpoint_id: &str, since: Timestamp) -> bool {
        self.claimed_here
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(endpoint_id)
            .is_some_and(|at| *at >= since)
    }
}

/// What a test ring found (`switchboard doctor --ring`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TestRing {
    /// The endpoint is out: its doorbells are held, the test's too.
    Held,
    /// No hearer of the endpoint here (in a cluster: on this instance).
    NoHearer,
    /// Rung: which hearer, and how soon it answered, if it did in time.
    Rung {
        /// `session`, `runner` or `hook`.
        hearer: &'static str,
        client: Option<String>,
        /// A session's first 8 characters, or the hook's id.
        hearer_id: String,
        answered_after: Option<std::time::Duration>,
    },
}

/// Rings a todo this instance is to ring: one enabled hook of its endpoint
/// if it has any (the operator wired it on purpose; see
/// `docs/decisions.md`), else one session here. True when it was handed to
/// a hearer (a session's buffer took it, or a hook's task).
fn ring_candidate(
    doorbells: &Doorbells,
    hooks: &Arc<Hooks>,
    candidate: &RingCandidate,
    trigger: Trigger,
) -> bool {
    if !hooks.hooked(&candidate.endpoint_id) {
        return matches!(
            doorbells.ring(candidate, trigger),
            RingOutcome::Rung { .. } | RingOutcome::Duplicate
        );
    }
    if doorbells.first_time(candidate, trigger) {
        doorbells.count_hook_ring("todo", trigger);
        hooks.ring(candidate, trigger == Trigger::Sweep);
    }
    true
}

/// Claims a ready todo's one ring in the cluster (one guarded statement)
/// and, when this instance won it, rings it here.
async fn claim_and_ring(
    store: &dyn Store,
    doorbells: &Doorbells,
    hooks: &Arc<Hooks>,
    todo_id: &str,
    trigger: Trigger,
) {
    match store.unscoped_claim_ready_ring(todo_id).await {
        Ok(Some(candidate)) => {
            ring_candidate(doorbells, hooks, &candidate, trigger);
        }
        // Another instance rings it, or it is no longer pending.
        Ok(None) => {}
        Err(e) => {
            tracing::warn!(todo = %todo_id, error = %e, "doorbell skipped: ring claim failed");
        }
    }
}

/// Runs a read of the bus catch-up, again while it fails as `Unavailable`
/// (for about 12 s at most). The catch-up runs right after the listener
/// reconnects, which after a database restart is before the store's pool has
/// noticed that its idle connections died with the server (it does not test
/// them before use): each dead one fails at once and is dropped, and the
/// catch-up would otherwise be lost until the sweep (minutes).
pub(crate) async fn retry_unavailable<T, F, Fut>(mut read: F) -> StoreResult<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = StoreResult<T>>,
{
    let mut delay = std::time::Duration::from_millis(10);
    let mut attempt = 1;
    loop {
        match read().await {
            Err(StoreError::Unavailable(e)) if attempt < 30 => {
                tracing::debug!(error = %e, attempt, "catch-up read unavailable; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(std::time::Duration::from_millis(500));
                attempt += 1;
            }
            other => return other,
        }
    }
}
