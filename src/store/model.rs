//! The records the store reads and writes, and the options of its calls.

use serde::Serialize;
use serde_json::Value;

use crate::domain::Timestamp;
pub use crate::domain::intake::{Decision, Envelope, SenderMatch, Senders};
use crate::domain::todo::{Disposition, Outcome, TodoState};

#[derive(Debug, Clone, Serialize)]
pub struct Human {
    pub id: String,
    pub name: String,
    pub created_at: Timestamp,
}

pub use crate::domain::registry::{AgentKind, EndpointState};

#[derive(Debug, Clone, Serialize)]
pub struct Agent {
    pub id: String,
    pub human_id: String,
    pub name: String,
    pub kind: AgentKind,
    /// Overrides the kind's default expected interval (seconds).
    pub expected_interval_seconds: Option<i64>,
    pub description: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Debug, Clone)]
pub struct NewAgent {
    pub human_id: String,
    pub name: String,
    pub kind: AgentKind,
    pub expected_interval_seconds: Option<i64>,
    pub description: Option<String>,
}

/// A partial update of an agent; `None` leaves a field alone, `Some(None)` clears it.
#[derive(Debug, Clone, Default)]
pub struct AgentPatch {
    pub kind: Option<AgentKind>,
    pub expected_interval_seconds: Option<Option<i64>>,
    pub description: Option<Option<String>>,
}

/// What a vend writes. Secrets arrive already hashed.
#[derive(Debug, Clone)]
pub struct NewEndpoint {
    pub agent_id: String,
    pub slug: String,
    pub credential_hash: String,
    pub credential_prefix: String,
    pub queues: Vec<String>,
    pub verbs: Vec<String>,
    pub expires_at: Option<Timestamp>,
    pub default_lease_ttl_seconds: Option<i64>,
    /// The name MCP clients know it by; `None` = `switchboard-<agent>`.
    pub server_name: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Endpoint {
    pub id: String,
    pub agent_id: String,
    pub human_id: String,
    pub slug: String,
    pub credential_prefix: String,
    pub scope_queues: Vec<String>,
    pub scope_verbs: Vec<String>,
    pub state: EndpointState,
    pub created_at: Timestamp,
    pub revoked_at: Option<Timestamp>,
    pub expires_at: Option<Timestamp>,
    pub last_seen_at: Option<Timestamp>,
    pub last_contact_at: Option<Timestamp>,
    pub default_lease_ttl_seconds: Option<i64>,
    pub last_note: Option<String>,
    pub last_note_at: Option<Timestamp>,
    /// Presence inputs (`docs/presence.md`).
    pub shift: Option<String>,
    pub presence_override: Option<crate::domain::presence::Presence>,
    pub override_until: Option<Timestamp>,
    pub override_set_at: Option<Timestamp>,
    pub override_by: Option<crate::domain::presence::OverrideBy>,
    pub presence_seen: crate::domain::presence::Presence,
    pub presence_changed_at: Option<Timestamp>,
    pub presence_changed_by: Option<String>,
    /// Set at vend; `None` = the default (see [`Endpoint::server_name`]).
    pub server_name_set: Option<String>,
    /// From the owning agent, for display and liveness.
    pub agent_name: String,
    pub agent_kind: AgentKind,
    pub agent_expected_interval_seconds: Option<i64>,
}

impl Endpoint {
    /// The name MCP clients know this endpoint by.
    pub fn server_name(&self) -> String {
        self.server_name_set
            .clone()
            .unwrap_or_else(|| crate::domain::server_key::default_server_key(&self.agent_name))
    }

    pub fn is_active(&self) -> bool {
        self.state == EndpointState::Active
    }

    /// The lease a claim without its own TTL gets: the endpoint default, else 300 s.
    pub fn effective_lease_seconds(&self) -> i64 {
        crate::domain::lease::effective_lease_seconds(self.default_lease_ttl_seconds)
    }

    /// The identity an agent acts under when it calls through this endpoint.
    pub fn caller(&self) -> Caller {
        Caller {
            endpoint_id: self.id.clone(),
            agent_id: self.agent_id.clone(),
            queues: self.scope_queues.clone(),
            default_lease_ttl_seconds: self.default_lease_ttl_seconds,
        }
    }
}

/// When the evaluator must next settle an endpoint, decided from the
/// presence inputs in `inputs`: written only while the row still holds those
/// inputs, so a concurrent change of them is never hidden behind a later
/// check.
#[derive(Debug, Clone, Copy)]
pub struct NextPresenceCheck<'a> {
    pub inputs: &'a Endpoint,
    pub at: Timestamp,
}

/// An agent-facing call's scope: every agent verb takes one, and every query
/// it runs is limited to this endpoint's todos.
#[derive(Debug, Clone)]
pub struct Caller {
    pub endpoint_id: String,
    pub agent_id: String,
    pub queues: Vec<String>,
    pub default_lease_ttl_seconds: Option<i64>,
}

impl Caller {
    /// The lease owner shared by all sessions of the endpoint's agent.
    pub fn owner(&self) -> String {
        format!("agent:{}", self.agent_id)
    }
}

/// How an intake was authenticated (`docs/intake.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TrustMode {
    Operator,
    Token,
    Signed,
}

impl TrustMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Operator => "operator",
            Self::Token => "token",
            Self::Signed => "signed",
        }
    }
}

/// The intake event recorded in the same transaction as the todo it creates.
#[derive(Debug, Clone)]
pub struct NewIntakeEvent {
    pub trust_mode: TrustMode,
    /// `human:<id>` or `webhook:<id>`.
    pub actor: String,
    pub webhook_id: Option<String>,
    /// Sanitized headers (no credentials or signatures).
    pub headers: Value,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
}

#[derive(Debug, Clone)]
pub struct NewTodo {
    pub endpoint_id: String,
    pub queue: String,
    pub title: String,
    pub kind: Option<String>,
    pub source: Option<String>,
    pub payload: Option<Value>,
    pub idempotency_key: Option<String>,
    pub max_attempts: Option<i64>,
    /// Higher is claimed first; 0 by default.
    pub priority: i64,
    /// Not claimable or ringable before this: a todo with a `run_at` still
    /// to come is created `delayed`.
    pub run_at: Option<Timestamp>,
    /// `None` makes a pull-only todo that never rings.
    pub intake: Option<NewIntakeEvent>,
}

impl NewTodo {
    /// A pull-only todo with nothing but the required fields.
    pub fn new(
        endpoint_id: impl Into<String>,
        queue: impl Into<String>,
        title: impl Into<String>,
    ) -> Self {
        Self {
            endpoint_id: endpoint_id.into(),
            queue: queue.into(),
            title: title.into(),
            kind: None,
            source: None,
            payload: None,
            idempotency_key: None,
            max_attempts: None,
            priority: 0,
            run_at: None,
            intake: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Todo {
    pub id: String,
    pub endpoint_id: String,
    pub queue: String,
    pub title: String,
    pub kind: Option<String>,
    pub source: Option<String>,
    pub payload: Option<Value>,
    pub idempotency_key: Option<String>,
    pub event_id: Option<String>,
    pub state: TodoState,
    pub dead_letter: bool,
    pub owner: Option<String>,
    pub lease_expires_at: Option<Timestamp>,
    /// Whether the current lease is fenced (the token itself is never stored).
    pub fenced: bool,
    pub attempt: i64,
    pub max_attempts: i64,
    pub attempts_total: i64,
    pub attempts_pruned: i64,
    pub next_retry_at: Option<Timestamp>,
    pub result: Option<Value>,
    pub last_note: Option<String>,
    pub ring_attempts: i64,
    pub last_ringed_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub claimed_at: Option<Timestamp>,
    pub completed_at: Option<Timestamp>,
    /// Who cancelled it (`human:<id>`), while it is `cancelled`.
    pub cancelled_by: Option<String>,
    /// Higher is claimed first (`docs/queue.md`, "Priority").
    pub priority: i64,
    /// When a delayed todo becomes (or became) pending.
    pub run_at: Option<Timestamp>,
}

#[derive(Debug, Clone)]
pub struct CreatedTodo {
    pub todo: Todo,
    /// `false` when the idempotency key matched a live todo, which is returned unchanged.
    pub created: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Attempt {
    pub seq: i64,
    pub attempt: i64,
    pub claimant: Option<String>,
    pub claimed_at: Timestamp,
    pub last_heartbeat_at: Option<Timestamp>,
    pub note: Option<String>,
    pub ended_at: Option<Timestamp>,
    pub outcome: Option<Outcome>,
    pub disposition: Option<Disposition>,
    pub died: bool,
    pub summary: Option<String>,
    pub summary_truncated: bool,
}

#[derive(Debug, Clone, Default)]
pub struct ClaimOptions {
    pub lease_ttl_seconds: Option<i64>,
    pub require_fence: bool,
    pub claimant: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Claimed {
    pub todo: Todo,
    pub attempt_seq: i64,
    pub prior_attempts: Vec<Attempt>,
    /// Present only for a fenced claim; shown once, stored as a hash.
    pub lease_token: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct HeartbeatOptions {
    pub lease_ttl_seconds: Option<i64>,
    pub lease_token: Option<String>,
    pub note: Option<String>,
}

/// The arguments of `complete` and `fail`.
#[derive(Debug, Clone, Default)]
pub struct Finish {
    pub result: Option<Value>,
    pub summary: Option<String>,
    pub lease_token: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct ReleaseOptions {
    pub summary: Option<String>,
    pub lease_token: Option<String>,
}

/// Enough to route a doorbell for a todo.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TodoRef {
    pub id: String,
    pub endpoint_id: String,
    pub queue: String,
}

impl From<&Todo> for TodoRef {
    fn from(todo: &Todo) -> Self {
        Self {
            id: todo.id.clone(),
            endpoint_id: todo.endpoint_id.clone(),
            queue: todo.queue.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Revoked {
    pub endpoint_id: String,
    pub revoked_at: Timestamp,
    pub dead_lettered: u64,
}

/// Where a retention pass resumes: the listing key (endpoint, creation
/// time, id) of the last todo its previous batch deleted. Retention walks
/// the listings' index in that order, so a pass reads each old todo once
/// however many batches it takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionCursor {
    pub endpoint_id: String,
    pub created_at: Timestamp,
    pub id: String,
}

impl RetentionCursor {
    /// Before every todo: the empty id sorts first in every collation.
    pub fn start() -> Self {
        Self {
            endpoint_id: String::new(),
            created_at: Timestamp::from_millis(i64::MIN),
            id: String::new(),
        }
    }
}

/// One retention batch: how many todos it deleted, and where the next batch
/// of the same pass resumes (`None` when it deleted nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pruned {
    pub deleted: u64,
    pub resume_after: Option<RetentionCursor>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ReapReport {
    pub requeued: Vec<TodoRef>,
    pub dead_lettered: Vec<TodoRef>,
}

/// A human API token's record (the token itself is shown once and stored hashed).
#[derive(Debug, Clone, Serialize)]
pub struct ApiToken {
    pub id: String,
    pub human_id: String,
    /// The first characters of the token, for recognising it in a list.
    pub prefix: String,
    pub label: Option<String>,
    pub created_at: Timestamp,
    pub expires_at: Option<Timestamp>,
    pub revoked_at: Option<Timestamp>,
    pub last_used_at: Option<Timestamp>,
    /// A board session's own token: the id of the token it was signed in
    /// with. It authenticates on the board only, and only while that token
    /// is live too.
    pub session_of: Option<String>,
}

/// A live token, its human, and until when what it derives from lasts.
#[derive(Debug, Clone)]
pub struct AuthenticatedToken {
    pub human: Human,
    pub token: ApiToken,
    /// When the authority behind the token ends (`None`: never): its own
    /// expiry, or for a board session the expiry of the token it was
    /// signed in with. A token it mints may not outlive it.
    pub authority_expires_at: Option<Timestamp>,
}

#[derive(Debug, Clone)]
pub struct NewApiToken {
    pub human_id: String,
    pub token_hash: String,
    pub prefix: String,
    pub label: Option<String>,
    pub expires_at: Option<Timestamp>,
    /// For a board session: the live token of the same human it is signed
    /// in with (the write refuses a dead one).
    pub session_of: Option<String>,
}

/// One page of a newest-first list, and where the next page starts.
#[derive(Debug, Clone, Serialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next_cursor: Option<String>,
}

/// Keyset pagination: at most `limit` rows older than `after`.
#[derive(Debug, Clone, Default)]
pub struct PageRequest {
    pub limit: i64,
    /// An opaque cursor from a previous page's `next_cursor`.
    pub after: Option<String>,
}

/// Filters of a human's todo listing.
#[derive(Debug, Clone, Default)]
pub struct TodoFilter {
    pub endpoint_id: Option<String>,
    pub queue: Option<String>,
    pub state: Option<crate::domain::todo::TodoState>,
    pub dead_letter: Option<bool>,
    pub kind: Option<String>,
    pub source: Option<String>,
    /// A title substring: literal (no wildcards), ASCII case-insensitive.
    pub q: Option<String>,
}

/// What a bulk operator action acts on: every todo matching a filter, or
/// explicit ids (at most [`crate::domain::todo::MAX_BULK`]). Either way only
/// the human's own todos, and only those the action applies to.
#[derive(Debug, Clone)]
pub enum BulkTarget {
    Filter(TodoFilter),
    Ids(Vec<String>),
}

/// What one bulk call did: at most [`crate::domain::todo::MAX_BULK`] todos.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BulkOutcome {
    /// The todos changed, oldest first.
    pub ids: Vec<String>,
    /// Whether more todos matched than this call acted on (call again).
    pub more: bool,
}

/// How many todos a bulk action would touch now, before it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BulkCount {
    /// At most [`crate::domain::todo::MAX_BULK`]: what one call acts on.
    pub count: i64,
    /// Whether more match than one call acts on.
    pub more: bool,
}

/// A form submission seen before: its nonce was recorded by an earlier POST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriorSubmission {
    /// Which form recorded it (`vend`, `push`, …).
    pub form: String,
    /// What the first POST made (a slug, a todo id), once it finished.
    pub result: Option<String>,
}

/// Work counts of one endpoint, for liveness and the board.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EndpointActivity {
    pub pending: i64,
    pub claimed: i64,
    /// Failed todos waiting for their scheduled retry (neither pending nor
    /// dead yet): counted on their own so that the counts add up.
    pub retrying: i64,
    /// Delayed todos: not claimable before their `run_at`.
    pub delayed: i64,
    pub dead_letters: i64,
    /// When the oldest pending todo was created, if any is pending.
    pub oldest_pending_at: Option<Timestamp>,
    /// The oldest todo the endpoint holds a live claim on, if any.
    pub working_on: Option<String>,
}

/// An intake event as stored (`docs/intake.md`).
#[derive(Debug, Clone, Serialize)]
pub struct IntakeEvent {
    pub id: String,
    pub endpoint_id: String,
    pub webhook_id: Option<String>,
    pub trust_mode: String,
    pub actor: String,
    pub received_at: Timestamp,
    pub headers: Value,
    pub content_type: Option<String>,
    #[serde(skip)]
    pub body: Vec<u8>,
    pub body_size: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Webhook {
    pub id: String,
    pub endpoint_id: String,
    pub human_id: String,
    pub queue: String,
    pub signed: bool,
    pub created_at: Timestamp,
    pub rotated_at: Option<Timestamp>,
    /// Whom it trusts (`everyone` unless set).
    pub senders: Senders,
    /// Its routing rules; `None` routes everything to `queue`.
    #[serde(skip)]
    pub rules: Option<crate::domain::rules::RuleSet>,
}

/// What a delivery needs to know about the webhook its URL names.
#[derive(Debug, Clone)]
pub struct WebhookTarget {
    pub webhook: Webhook,
    pub endpoint_active: bool,
    /// The HMAC key of a signed webhook.
    pub signing_secret: Option<String>,
}

/// A todo a doorbell may be rung for, with what the doorbell says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingCandidate {
    pub id: String,
    pub endpoint_id: String,
    pub queue: String,
    pub title: String,
    pub kind: Option<String>,
    pub source: Option<String>,
    pub ring_attempts: i64,
    pub created_at: Timestamp,
    /// Its ring clock's last ring or digest (for a ring the sweep just
    /// counted: that count's instant, which undoing it is guarded by).
    pub last_ringed_at: Option<Timestamp>,
}

impl From<&Todo> for RingCandidate {
    fn from(t: &Todo) -> Self {
        Self {
            id: t.id.clone(),
            endpoint_id: t.endpoint_id.clone(),
            queue: t.queue.clone(),
            title: t.title.clone(),
            kind: t.kind.clone(),
            source: t.source.clone(),
            ring_attempts: t.ring_attempts,
            created_at: t.created_at,
            last_ringed_at: t.last_ringed_at,
        }
    }
}

/// A push-eligible pending todo as a digest counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestTodo {
    pub id: String,
    pub queue: String,
    pub created_at: Timestamp,
}

/// Queue-wide counts for `/metrics` (`unscoped_queue_stats`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueStats {
    pub by_state: StateCounts,
    /// Failed todos with no retry scheduled (a subset of `by_state.failed`).
    pub dead_letters: i64,
    /// When the oldest pending todo was created; `None` when nothing is pending.
    pub oldest_pending_created_at: Option<Timestamp>,
}

/// How many todos are in each state (zero for a state with none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StateCounts {
    pub pending: i64,
    pub claimed: i64,
    pub done: i64,
    pub failed: i64,
    pub cancelled: i64,
    pub delayed: i64,
}

impl StateCounts {
    pub fn get(&self, state: TodoState) -> i64 {
        match state {
            TodoState::Pending => self.pending,
            TodoState::Claimed => self.claimed,
            TodoState::Done => self.done,
            TodoState::Failed => self.failed,
            TodoState::Cancelled => self.cancelled,
            TodoState::Delayed => self.delayed,
        }
    }

    pub fn set(&mut self, state: TodoState, n: i64) {
        match state {
            TodoState::Pending => self.pending = n,
            TodoState::Claimed => self.claimed = n,
            TodoState::Done => self.done = n,
            TodoState::Failed => self.failed = n,
            TodoState::Cancelled => self.cancelled = n,
            TodoState::Delayed => self.delayed = n,
        }
    }
}

/// One active endpoint's stored liveness inputs (`unscoped_liveness_inputs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LivenessInputs {
    pub endpoint_id: String,
    pub agent_kind: AgentKind,
    pub agent_expected_interval_seconds: Option<i64>,
    pub default_lease_ttl_seconds: Option<i64>,
    pub last_seen_at: Option<Timestamp>,
    /// The presence last recorded by the presence evaluator is `out`.
    pub presence_out: bool,
    /// Holds at least one claim whose lease has not lapsed.
    pub holds_claim: bool,
}

/// An outbound notify hook of an endpoint (`docs/doorbells.md`, "Notify
/// hooks"). Its secret is not part of this record: it is shown once, when
/// made, and read only by the delivery path ([`HookTarget`]).
#[derive(Debug, Clone, Serialize)]
pub struct Hook {
    pub id: String,
    pub endpoint_id: String,
    pub human_id: String,
    pub url: String,
    pub consecutive_failures: i64,
    /// Why and when it was disabled; `None` while enabled.
    pub disabled_reason: Option<String>,
    pub disabled_at: Option<Timestamp>,
    pub created_at: Timestamp,
}

impl Hook {
    pub fn is_enabled(&self) -> bool {
        self.disabled_at.is_none()
    }
}

/// What a delivery needs: the hook, its secret and its endpoint's slug.
#[derive(Debug, Clone)]
pub struct HookTarget {
    pub hook: Hook,
    pub secret: String,
    pub endpoint_slug: String,
}

/// One attempt of a hook delivery, as logged (never a body or a secret).
#[derive(Debug, Clone, Serialize)]
pub struct HookDelivery {
    pub hook_id: String,
    pub at: Timestamp,
    /// `todo.ready`, `todo.rering`, `digest` or `test`.
    pub event: String,
    pub todo_id: Option<String>,
    /// `ok`, `failed` or `refused`.
    pub outcome: String,
    /// The HTTP status, when the target answered.
    pub status: Option<i64>,
    /// What went wrong when it did not answer (no secret, no body).
    pub error: Option<String>,
    pub duration_ms: i64,
    /// 1 for the first try.
    pub attempt: i64,
}

/// What a final failure did to its hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HookFailure {
    /// Final failures in a row now.
    pub consecutive_failures: i64,
    /// True for exactly the one failure that disabled it.
    pub disabled_now: bool,
}

/// The most groups `queue_summary` names per dimension (kind, source,
/// sender); the rest are counted together as `other`.
pub const SUMMARY_TOP: i64 = 10;

/// An endpoint's live work at a glance (`queue_summary`): counts only, no
/// title or payload.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueSummary {
    /// The queues with live todos, by name.
    pub queues: Vec<QueueCounts>,
    /// Pending todos by kind, source and sender (the creating intake
    /// event's actor, e.g. `webhook:wh_…`; `None` when the todo has no event).
    pub pending_by_kind: SummaryGroups,
    pub pending_by_source: SummaryGroups,
    pub pending_by_sender: SummaryGroups,
}

/// One queue's live todos.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueCounts {
    pub queue: String,
    pub pending: i64,
    pub claimed: i64,
    /// Failed and waiting for their retry (`next_retry_at` set).
    pub held: i64,
    /// When the oldest pending todo was created.
    pub oldest_pending_at: Option<Timestamp>,
}

/// The largest groups of one dimension, largest first (at most
/// [`SUMMARY_TOP`]; `None` is "no value"), and how many todos the other
/// groups hold together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SummaryGroups {
    pub top: Vec<(Option<String>, i64)>,
    pub other: i64,
}

/// A schedule (`docs/queue.md`, "Recurring todos"): a todo at each
/// occurrence of `cron` in `tz`.
#[derive(Debug, Clone, Serialize)]
pub struct Schedule {
    pub id: String,
    pub endpoint_id: String,
    pub human_id: String,
    pub queue: String,
    pub cron: String,
    pub tz: String,
    pub title: String,
    pub kind: Option<String>,
    pub payload: Option<Value>,
    /// `one` or `none` (`crate::domain::schedule::CatchUp`).
    pub catch_up: String,
    pub paused: bool,
    /// The occurrence it waits for.
    pub next_at: Timestamp,
    /// The occurrence its last todo was made for.
    pub last_at: Option<Timestamp>,
    pub created_at: Timestamp,
}

/// A schedule to make, checked by its operation (`ops::schedules`).
#[derive(Debug, Clone)]
pub struct NewSchedule {
    pub endpoint_id: String,
    pub queue: String,
    pub cron: String,
    pub tz: String,
    pub title: String,
    pub kind: Option<String>,
    pub payload: Option<Value>,
    pub catch_up: String,
    pub next_at: Timestamp,
}

/// What moving a schedule from one occurrence to the next did.
#[derive(Debug, Clone)]
pub enum Fired {
    /// Another caller moved it first (or it was paused or deleted): nothing changed.
    Lost,
    /// Moved on without a todo (a skipped occurrence).
    Advanced,
    /// Moved on, and this todo was made in the same transaction.
    Created(Box<CreatedTodo>),
}

/// A webhook delivery to record (`docs/intake.md`, "Delivery history").
#[derive(Debug, Clone)]
pub struct NewDelivery {
    pub webhook_id: String,
    pub human_id: String,
    pub endpoint_id: String,
    pub decision: Decision,
    /// Why a refused delivery was refused (`bad_signature`, `too_large`,
    /// `endpoint_revoked`).
    pub reason: Option<String>,
    /// The routing rule that decided, when one did.
    pub rule: Option<String>,
    pub envelope: Envelope,
    /// Sanitized headers.
    pub headers: Value,
    /// `None` when the body was not verified (a refused delivery).
    pub body: Option<Vec<u8>>,
    /// What the todo is (or would be) titled, and its kind and source.
    pub title: Option<String>,
    pub kind: Option<String>,
    pub source: Option<String>,
    pub idempotency_key: Option<String>,
    /// The todo made or matched; for `accepted` the store fills it in.
    pub todo_id: Option<String>,
    /// The delivery this one replays.
    pub replay_of: Option<String>,
}

/// A recorded delivery.
#[derive(Debug, Clone)]
pub struct DeliveryRecord {
    pub id: String,
    pub webhook_id: String,
    pub human_id: String,
    pub endpoint_id: String,
    pub received_at: Timestamp,
    pub decision: Decision,
    pub reason: Option<String>,
    pub rule: Option<String>,
    pub envelope: Envelope,
    pub headers: Value,
    pub body: Option<Vec<u8>>,
    pub title: Option<String>,
    pub kind: Option<String>,
    pub source: Option<String>,
    pub idempotency_key: Option<String>,
    pub todo_id: Option<String>,
    pub replay_of: Option<String>,
    /// When a quarantined delivery was released or discarded.
    pub settled_at: Option<Timestamp>,
}

/// What a delivery write does in the todo's transaction.
#[derive(Debug, Clone)]
pub enum DeliveryWrite {
    /// Record a new delivery, `accepted`, naming the todo.
    Record(Box<NewDelivery>),
    /// Settle the human's quarantined delivery as `released`, naming the todo.
    Release { human_id: String, id: String },
}

/// The listing's filters (each exact).
#[derive(Debug, Clone, Default)]
pub struct DeliveryFilter {
    pub decision: Option<Decision>,
    pub event: Option<String>,
    pub sender: Option<String>,
}

/// An endpoint's (`queue` = None) or a queue's admission limits, and what
/// is used of them now (`docs/queue.md`, "Admission").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    pub queue: Option<String>,
    pub limits: crate::domain::admission::Limits,
    pub usage: crate::domain::admission::Usage,
    pub updated_at: Timestamp,
}

/// What happened in one queue during one bucket of a range's length: as an
/// instance adds it, and as a chart reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueActivity {
    pub endpoint_id: String,
    pub queue: String,
    /// Whose bucket length this is.
    pub range: crate::domain::activity::ActivityRange,
    /// The bucket's start.
    pub bucket_at: Timestamp,
    pub activity: crate::domain::activity::Activity,
}

/// An OAuth client (`docs/oauth.md`): registered (RFC 7591, id `oc_…`) or
/// known by its metadata document (the id is the document's URL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthClient {
    pub id: String,
    /// Whether the client's metadata was fetched from its own URL
    /// (`true`) or asserted by whoever registered it (`false`).
    pub verified: bool,
    pub name: Option<String>,
    pub client_uri: Option<String>,
    pub redirect_uris: Vec<String>,
    pub created_at: Timestamp,
    /// A metadata document's last fetch.
    pub fetched_at: Option<Timestamp>,
}

/// What an authorization writes: a code for one of the human's endpoints.
/// The code arrives hashed.
#[derive(Debug, Clone)]
pub struct NewOAuthCode {
    pub code_hash: String,
    pub client_id: String,
    pub human_id: String,
    pub endpoint_id: String,
    pub redirect_uri: String,
    pub code_challenge: String,
    pub resource: String,
}

/// A code as it was taken (deleted) from the store.
#[derive(Debug, Clone)]
pub struct OAuthCode {
    pub client_id: String,
    pub human_id: String,
    pub endpoint_id: String,
    pub redirect_uri: String,
    pub code_challenge: String,
    pub resource: String,
    pub expires_at: Timestamp,
}

/// A pair of tokens to write, hashed; the store decides their expiry (an
/// access token never outlives its endpoint: `domain::oauth::access_expiry`).
#[derive(Debug, Clone)]
pub struct NewOAuthTokens {
    pub access_hash: String,
    pub refresh_hash: String,
}

/// A connection of a client to an endpoint, with its tokens' expiry as
/// last minted.
#[derive(Debug, Clone)]
pub struct OAuthGrant {
    pub id: String,
    pub client_id: String,
    pub human_id: String,
    pub endpoint_id: String,
    pub resource: String,
    pub created_at: Timestamp,
    pub last_used_at: Option<Timestamp>,
    pub revoked_at: Option<Timestamp>,
}

/// Tokens just minted for a grant.
#[derive(Debug, Clone)]
pub struct OAuthIssued {
    pub grant: OAuthGrant,
    pub access_expires_at: Timestamp,
    pub refresh_expires_at: Timestamp,
}

/// What presenting a refresh token came to.
#[derive(Debug, Clone)]
pub enum OAuthRefresh {
    /// Spent, and a new pair written.
    Rotated(OAuthIssued),
    /// Unknown, expired, another client's, or its grant or endpoint is gone.
    Refused,
    /// Spent already: its grant (the whole family) is revoked now.
    Reused {
        grant_id: String,
        endpoint_id: String,
    },
}

/// A client connected to an endpoint, as the board and the API list it.
#[derive(Debug, Clone)]
pub struct OAuthConnection {
    pub grant: OAuthGrant,
    pub client: OAuthClient,
}
