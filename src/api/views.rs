//! What the API returns: plain serialisable views built from store records,
//! each described in the OpenAPI document.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::domain::Timestamp;
use crate::domain::client_setup::ClientSnippets;
use crate::domain::lease::effective_lease_seconds;
use crate::domain::liveness::{self, Subject};
use crate::store::{
    Agent, ApiToken, Attempt, Endpoint, EndpointActivity, Human, IntakeEvent, Todo,
};

fn ts(t: Timestamp) -> String {
    t.to_rfc3339()
}

fn opt_ts(t: Option<Timestamp>) -> Option<String> {
    t.map(ts)
}

#[derive(Debug, Serialize, ToSchema)]
pub struct HumanView {
    pub id: String,
    pub name: String,
    #[schema(format = DateTime)]
    pub created_at: String,
}

impl From<&Human> for HumanView {
    fn from(h: &Human) -> Self {
        Self {
            id: h.id.clone(),
            name: h.name.clone(),
            created_at: ts(h.created_at),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TokenView {
    pub id: String,
    /// The token's first characters, to recognise it.
    pub prefix: String,
    pub label: Option<String>,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub expires_at: Option<String>,
    #[schema(format = DateTime)]
    pub revoked_at: Option<String>,
    #[schema(format = DateTime)]
    pub last_used_at: Option<String>,
}

impl From<&ApiToken> for TokenView {
    fn from(t: &ApiToken) -> Self {
        Self {
            id: t.id.clone(),
            prefix: t.prefix.clone(),
            label: t.label.clone(),
            created_at: ts(t.created_at),
            expires_at: opt_ts(t.expires_at),
            revoked_at: opt_ts(t.revoked_at),
            last_used_at: opt_ts(t.last_used_at),
        }
    }
}

/// A newly created token: the only time `token` is ever shown.
#[derive(Debug, Serialize, ToSchema)]
pub struct NewTokenView {
    pub token: String,
    #[serde(flatten)]
    pub record: TokenView,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TokenList {
    pub tokens: Vec<TokenView>,
    pub next_cursor: Option<String>,
}

/// Liveness as an operator reads it (`docs/api.md`).
#[derive(Debug, Serialize, ToSchema)]
pub struct LivenessView {
    /// Server-side time of the last authenticated request; null = never seen.
    #[schema(format = DateTime)]
    pub last_seen_at: Option<String>,
    /// The agent's own claim of its last contact (diagnostic only).
    #[schema(format = DateTime)]
    pub last_contact_at: Option<String>,
    /// `last_contact_at − last_seen_at` in seconds, when both exist.
    pub contact_skew_seconds: Option<i64>,
    pub expected_interval_seconds: i64,
    /// After this instant without a request the endpoint counts as stale.
    #[schema(format = DateTime)]
    pub stale_after: Option<String>,
    /// `revoked`, `off`, `unknown`, `stale`, `deaf`, `working` or `idle`.
    pub condition: String,
    /// The last heartbeat note, free status text.
    pub note: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ScopeView {
    pub queues: Vec<String>,
    pub verbs: Vec<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ActivityView {
    /// Claimable now.
    pub pending: i64,
    pub claimed: i64,
    /// Failed and waiting for their scheduled retry.
    pub retrying: i64,
    /// Not claimable before their `run_at`.
    pub delayed: i64,
    pub dead_letters: i64,
    /// How long the oldest pending todo has waited, in seconds.
    pub oldest_pending_age_seconds: Option<i64>,
    /// A todo the endpoint holds a live claim on.
    pub working_on: Option<String>,
}

impl ActivityView {
    pub fn of(a: &EndpointActivity, now: crate::domain::Timestamp) -> Self {
        Self {
            pending: a.pending,
            claimed: a.claimed,
            retrying: a.retrying,
            delayed: a.delayed,
            dead_letters: a.dead_letters,
            oldest_pending_age_seconds: a
                .oldest_pending_at
                .map(|at| ((now.as_millis() - at.as_millis()) / 1000).max(0)),
            working_on: a.working_on.clone(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EndpointView {
    pub id: String,
    pub slug: String,
    pub agent: String,
    pub agent_kind: String,
    pub mcp_url: String,
    /// The name MCP clients know it by (`.mcp.json` key, channels flag).
    pub server_name: String,
    /// The credential's first characters (the credential itself is never shown again).
    pub credential_prefix: String,
    pub scope: ScopeView,
    /// `active` or `revoked`.
    pub state: String,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub revoked_at: Option<String>,
    #[schema(format = DateTime)]
    pub expires_at: Option<String>,
    pub default_lease_ttl_seconds: Option<i64>,
    pub effective_lease_ttl_seconds: i64,
    pub presence: PresenceSummary,
    /// This instance's sessions of the endpoint.
    pub sessions: SessionsView,
    pub liveness: LivenessView,
    pub todos: ActivityView,
}

/// Effective presence (`docs/presence.md`).
#[derive(Debug, Serialize, ToSchema)]
pub struct PresenceSummary {
    /// `in` or `out`.
    pub presence: String,
    /// `shift`, `agent`, `operator` or `default`.
    pub source: String,
    /// When the value next changes; null = never.
    #[schema(format = DateTime)]
    pub until: Option<String>,
    pub shift: Option<String>,
}

/// MCP sessions of an endpoint on the instance that answered.
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub struct SessionsView {
    pub attached: i64,
    pub streaming: i64,
    pub deaf: i64,
    /// One row per attached session, oldest id first.
    pub list: Vec<SessionRow>,
}

/// One MCP session on the instance that answered.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SessionRow {
    /// The first 8 characters of its `Mcp-Session-Id`, to tell rows apart.
    pub id_prefix: String,
    /// The hearer kind: `runner` (`switchboard work`) or `session` (any
    /// other MCP client).
    pub hearer: String,
    /// `clientInfo.name` from `initialize`, when the client sent one.
    pub client_name: Option<String>,
    /// `clientInfo.version` from `initialize`, when the client sent one.
    pub client_version: Option<String>,
    pub protocol_version: String,
    /// Its GET notification stream is open.
    pub streaming: bool,
    /// `buffer_full` or `unanswered` when deaf; null when it hears.
    pub deaf_reason: Option<String>,
    /// Doorbells sent since its last request whose answer window passed.
    pub unanswered_doorbells: i64,
    /// Seconds since the newest doorbell it has not answered with any
    /// request; null when it answered every one.
    pub unanswered_since_seconds: Option<i64>,
    /// Seconds since its last request began or ended.
    pub idle_seconds: i64,
}

/// Liveness inputs of one endpoint, decided by the pure rules.
fn endpoint_liveness(
    e: &Endpoint,
    activity: &EndpointActivity,
    sessions: &SessionsView,
    hooked: bool,
    now: Timestamp,
) -> LivenessView {
    let (_, assessment) = crate::delivery::fleet::assess_endpoint(
        e,
        activity.working_on.is_some(),
        crate::domain::liveness::every_hearer_deaf(
            hooked,
            sessions.attached as usize,
            sessions.deaf as usize,
        ),
        now,
    );
    LivenessView {
        last_seen_at: opt_ts(e.last_seen_at),
        last_contact_at: opt_ts(e.last_contact_at),
        contact_skew_seconds: match (e.last_contact_at, e.last_seen_at) {
            (Some(c), Some(s)) => Some((c.as_millis() - s.as_millis()) / 1000),
            _ => None,
        },
        expected_interval_seconds: assessment.expected_interval.as_secs() as i64,
        stale_after: opt_ts(assessment.stale_after),
        condition: assessment.condition.as_str().to_owned(),
        note: e.last_note.clone(),
    }
}

impl EndpointView {
    pub fn build(
        e: &Endpoint,
        activity: &EndpointActivity,
        sessions: SessionsView,
        hooked: bool,
        public_url: &str,
        now: Timestamp,
    ) -> Self {
        let presence = crate::delivery::presence::effective_of(e, now);
        Self {
            id: e.id.clone(),
            slug: e.slug.clone(),
            agent: e.agent_name.clone(),
            agent_kind: e.agent_kind.as_str().to_owned(),
            mcp_url: crate::domain::client_setup::mcp_url(public_url, &e.slug),
            server_name: e.server_name(),
            credential_prefix: e.credential_prefix.clone(),
            scope: ScopeView {
                queues: e.scope_queues.clone(),
                verbs: e.scope_verbs.clone(),
            },
            state: e.state.as_str().to_owned(),
            created_at: ts(e.created_at),
            revoked_at: opt_ts(e.revoked_at),
            expires_at: opt_ts(e.expires_at),
            default_lease_ttl_seconds: e.default_lease_ttl_seconds,
            effective_lease_ttl_seconds: e.effective_lease_seconds(),
            presence: PresenceSummary {
                presence: presence.presence.as_str().to_owned(),
                source: presence.source.as_str().to_owned(),
                until: opt_ts(presence.until),
                shift: e.shift.clone(),
            },
            liveness: endpoint_liveness(e, activity, &sessions, hooked, now),
            sessions,
            todos: ActivityView::of(activity, now),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EndpointList {
    pub endpoints: Vec<EndpointView>,
    pub next_cursor: Option<String>,
}

/// The vend response: the credential and `.mcp.json` block are shown once.
#[derive(Debug, Serialize, ToSchema)]
pub struct VendView {
    pub token: String,
    /// For the project's `.mcp.json` (Claude Code's format): safe to commit,
    /// the token is read from `client.token_env` (Claude Code expands
    /// `${VAR}` in `url` and `headers`).
    #[schema(value_type = Object)]
    pub mcp_json: Value,
    /// Ready-to-paste setups for Claude Code and Codex.
    pub client: ClientSetup,
    pub agent_created: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook: Option<NewWebhookView>,
    #[serde(flatten)]
    pub endpoint: EndpointView,
}

/// How to point an MCP client at a freshly vended endpoint. Only the vend
/// response has it: it carries the token.
#[derive(Debug, Serialize, ToSchema)]
pub struct ClientSetup {
    /// The name the client knows the endpoint by.
    pub server_name: String,
    /// The environment variable the configs below read the token from.
    pub token_env: String,
    /// `export SWITCHBOARD_TOKEN_…='sbk_…'`
    pub export: String,
    /// Claude Code, for you only (`--scope local`: kept out of the
    /// project's files).
    pub claude_mcp_add: String,
    /// Starts Claude Code so that it delivers doorbells (≥ 2.1.80).
    pub claude_launch: String,
    /// Codex: a block for `~/.codex/config.toml` (Codex takes bearer tokens
    /// only from the environment).
    pub codex_toml: String,
    /// Claude Code unattended, one pass over the queue: `claude -p "…"
    /// --allowedTools "mcp__<server_name>"`.
    pub claude_unattended: String,
    /// `switchboard work <mcp_url> --token-env <token_env> -- claude -p …`:
    /// a Claude Code run on every doorbell.
    pub work_claude: String,
    /// `switchboard work <mcp_url> --token-env <token_env> -- codex exec …`:
    /// a Codex run on every doorbell.
    pub work_codex: String,
}

impl ClientSetup {
    pub fn new(server_name: &str, mcp_url: &str, token: &str) -> Self {
        let s = ClientSnippets::new(server_name, mcp_url, token);
        Self {
            server_name: s.server_name,
            token_env: s.token_env,
            export: s.export,
            claude_mcp_add: s.claude_mcp_add,
            claude_launch: s.claude_launch,
            codex_toml: s.codex_toml,
            claude_unattended: s.claude_unattended,
            work_claude: s.work_claude,
            work_codex: s.work_codex,
        }
    }
}

/// Claude Code's `.mcp.json` block for one endpoint (`domain::client_setup`).
pub fn mcp_json(server_name: &str, url: &str) -> Value {
    crate::domain::client_setup::mcp_json(server_name, url)
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AgentView {
    pub id: String,
    pub name: String,
    /// `heartbeat`, `session` or `task`.
    pub kind: String,
    /// Set on the agent; null = the kind's default.
    pub expected_interval_seconds: Option<i64>,
    pub description: Option<String>,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
    /// The latest of its endpoints'.
    #[schema(format = DateTime)]
    pub last_seen_at: Option<String>,
    #[schema(format = DateTime)]
    pub last_contact_at: Option<String>,
    #[schema(format = DateTime)]
    pub stale_after: Option<String>,
    /// Over its active endpoints: see `docs/api.md`.
    pub condition: String,
    pub endpoints: i64,
    pub active_endpoints: i64,
}

impl AgentView {
    /// An agent's liveness over its endpoints: seen when any endpoint was
    /// seen; working when any holds a claim; off when every active endpoint
    /// is out; revoked when it has endpoints and none is active; unknown
    /// when it has none. (Deaf is shown per endpoint, where sessions live.)
    pub fn build(a: &Agent, endpoints: &[(&Endpoint, &EndpointActivity)], now: Timestamp) -> Self {
        let active: Vec<&(&Endpoint, &EndpointActivity)> =
            endpoints.iter().filter(|(e, _)| e.is_active()).collect();
        let last_seen = endpoints.iter().filter_map(|(e, _)| e.last_seen_at).max();
        let last_contact = endpoints
            .iter()
            .filter_map(|(e, _)| e.last_contact_at)
            .max();
        let lease = active
            .iter()
            .map(|(e, _)| e.effective_lease_seconds())
            .max()
            .unwrap_or_else(|| effective_lease_seconds(None));
        // With no endpoints at all nothing is revoked, out or seen: unknown.
        let assessment = liveness::assess(
            &Subject {
                kind: a.kind.as_str(),
                expected_interval_seconds: a.expected_interval_seconds,
                effective_lease_seconds: lease,
                revoked: !endpoints.is_empty() && active.is_empty(),
                presence_out: !active.is_empty()
                    && active
                        .iter()
                        .all(|(e, _)| crate::delivery::presence::is_out(e, now)),
                last_seen,
                all_sessions_deaf: false,
                holds_claim: active.iter().any(|(_, act)| act.working_on.is_some()),
            },
            now,
        );
        Self {
            id: a.id.clone(),
            name: a.name.clone(),
            kind: a.kind.as_str().to_owned(),
            expected_interval_seconds: a.expected_interval_seconds,
            description: a.description.clone(),
            created_at: ts(a.created_at),
            updated_at: ts(a.updated_at),
            last_seen_at: opt_ts(last_seen),
            last_contact_at: opt_ts(last_contact),
            stale_after: opt_ts(assessment.stale_after),
            condition: assessment.condition.as_str().to_owned(),
            endpoints: endpoints.len() as i64,
            active_endpoints: active.len() as i64,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AgentList {
    pub agents: Vec<AgentView>,
    pub next_cursor: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TodoView {
    pub id: String,
    pub endpoint_id: String,
    pub queue: String,
    pub title: String,
    pub kind: Option<String>,
    pub source: Option<String>,
    /// `pending`, `claimed`, `done`, `failed`, `cancelled` or `delayed`.
    pub state: String,
    pub dead_letter: bool,
    /// Who cancelled it (`human:<id>`), while it is `cancelled`.
    pub cancelled_by: Option<String>,
    /// Higher is claimed first.
    pub priority: i64,
    /// When a delayed todo becomes (or became) pending.
    #[schema(format = DateTime)]
    pub run_at: Option<String>,
    pub owner: Option<String>,
    pub attempt: i64,
    pub max_attempts: i64,
    pub attempts_total: i64,
    #[schema(format = DateTime)]
    pub lease_expires_at: Option<String>,
    #[schema(format = DateTime)]
    pub next_retry_at: Option<String>,
    pub idempotency_key: Option<String>,
    /// Whether a human or authenticated webhook created it (it may ring).
    pub has_intake_event: bool,
    pub ring_attempts: i64,
    #[schema(format = DateTime)]
    pub last_ringed_at: Option<String>,
    pub note: Option<String>,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
    #[schema(format = DateTime)]
    pub claimed_at: Option<String>,
    #[schema(format = DateTime)]
    pub completed_at: Option<String>,
    /// Any JSON value (not only objects), or null.
    pub payload: Option<Value>,
    /// Any JSON value from the last `complete`/`fail`, or null.
    pub result: Option<Value>,
}

impl From<&Todo> for TodoView {
    fn from(t: &Todo) -> Self {
        Self {
            id: t.id.clone(),
            endpoint_id: t.endpoint_id.clone(),
            queue: t.queue.clone(),
            title: t.title.clone(),
            kind: t.kind.clone(),
            source: t.source.clone(),
            state: t.state.as_str().to_owned(),
            dead_letter: t.dead_letter,
            cancelled_by: t.cancelled_by.clone(),
            priority: t.priority,
            run_at: t.run_at.map(|t| t.to_rfc3339()),
            owner: t.owner.clone(),
            attempt: t.attempt,
            max_attempts: t.max_attempts,
            attempts_total: t.attempts_total,
            lease_expires_at: opt_ts(t.lease_expires_at),
            next_retry_at: opt_ts(t.next_retry_at),
            idempotency_key: t.idempotency_key.clone(),
            has_intake_event: t.event_id.is_some(),
            ring_attempts: t.ring_attempts,
            last_ringed_at: opt_ts(t.last_ringed_at),
            note: t.last_note.clone(),
            created_at: ts(t.created_at),
            updated_at: ts(t.updated_at),
            claimed_at: opt_ts(t.claimed_at),
            completed_at: opt_ts(t.completed_at),
            payload: t.payload.clone(),
            result: t.result.clone(),
        }
    }
}

/// What one bulk retry or cancel did.
#[derive(Debug, Serialize, ToSchema)]
pub struct BulkResult {
    /// How many todos changed (at most 1 000).
    pub count: usize,
    /// Whether more todos still match the filter: call again to go on.
    pub more: bool,
    /// The todos changed, oldest first.
    pub ids: Vec<String>,
}

impl From<crate::store::BulkOutcome> for BulkResult {
    fn from(o: crate::store::BulkOutcome) -> Self {
        Self {
            count: o.ids.len(),
            more: o.more,
            ids: o.ids,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TodoList {
    pub todos: Vec<TodoView>,
    pub next_cursor: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AttemptView {
    pub seq: i64,
    pub attempt: i64,
    pub claimant: Option<String>,
    #[schema(format = DateTime)]
    pub claimed_at: String,
    #[schema(format = DateTime)]
    pub last_heartbeat_at: Option<String>,
    pub note: Option<String>,
    #[schema(format = DateTime)]
    pub ended_at: Option<String>,
    pub outcome: Option<String>,
    pub disposition: Option<String>,
    pub died: bool,
    pub summary: Option<String>,
    pub summary_truncated: bool,
}

impl From<&Attempt> for AttemptView {
    fn from(a: &Attempt) -> Self {
        Self {
            seq: a.seq,
            attempt: a.attempt,
            claimant: a.claimant.clone(),
            claimed_at: ts(a.claimed_at),
            last_heartbeat_at: opt_ts(a.last_heartbeat_at),
            note: a.note.clone(),
            ended_at: opt_ts(a.ended_at),
            outcome: a.outcome.map(|o| o.as_str().to_owned()),
            disposition: a.disposition.map(|d| d.as_str().to_owned()),
            died: a.died,
            summary: a.summary.clone(),
            summary_truncated: a.summary_truncated,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TodoDetail {
    #[serde(flatten)]
    pub todo: TodoView,
    pub attempts_pruned: i64,
    /// Newest first.
    pub attempts: Vec<AttemptView>,
}

/// The answer to a human-authored todo (`docs/intake.md`).
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedTodoView {
    pub id: String,
    pub endpoint: String,
    pub queue: String,
    pub state: String,
    /// False when the key matched a live todo (nothing was created or rung).
    pub created: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct IntakeEventView {
    pub id: String,
    pub todo_id: String,
    pub endpoint_id: String,
    pub webhook_id: Option<String>,
    /// `operator`, `token` or `signed`.
    pub trust_mode: String,
    pub actor: String,
    #[schema(format = DateTime)]
    pub received_at: String,
    #[schema(value_type = Object)]
    pub headers: Value,
    pub content_type: Option<String>,
    pub body_size: i64,
    /// The whole body as text when it is UTF-8, else null (see `body_base64`).
    pub body: Option<String>,
    pub body_base64: Option<String>,
}

impl IntakeEventView {
    pub fn build(todo_id: &str, e: &IntakeEvent) -> Self {
        use base64::Engine;
        let text = std::str::from_utf8(&e.body).ok().map(str::to_owned);
        Self {
            id: e.id.clone(),
            todo_id: todo_id.to_owned(),
            endpoint_id: e.endpoint_id.clone(),
            webhook_id: e.webhook_id.clone(),
            trust_mode: e.trust_mode.clone(),
            actor: e.actor.clone(),
            received_at: ts(e.received_at),
            headers: e.headers.clone(),
            content_type: e.content_type.clone(),
            body_size: e.body_size,
            body_base64: text
                .is_none()
                .then(|| base64::engine::general_purpose::STANDARD.encode(&e.body)),
            body: text,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookView {
    pub id: String,
    pub endpoint_id: String,
    pub queue: String,
    pub signed: bool,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub rotated_at: Option<String>,
    /// Whom it trusts: `{"trust": "everyone"}` or `{"trust": ["login", …],
    /// "match": "sender"|"author"|"both"}`.
    #[schema(value_type = Object)]
    pub senders: serde_json::Value,
}

/// A created or rotated webhook: the URL and secret are shown once.
#[derive(Debug, Serialize, ToSchema)]
pub struct NewWebhookView {
    pub ingest_url: String,
    /// Present for a signed webhook: the HMAC-SHA256 key.
    pub signing_secret: Option<String>,
    #[serde(flatten)]
    pub webhook: WebhookView,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookList {
    pub webhooks: Vec<WebhookView>,
}

/// One try of a hook delivery.
#[derive(Debug, Serialize, ToSchema)]
pub struct HookDeliveryView {
    #[schema(format = DateTime)]
    pub at: String,
    /// `todo.ready`, `todo.rering`, `digest` or `test`.
    #[serde(rename = "type")]
    pub event: String,
    pub todo_id: Option<String>,
    /// `ok` (a 2xx), `failed` or `refused` (a private target).
    pub outcome: String,
    /// The HTTP status, when the target answered.
    pub status: Option<i64>,
    /// Why it failed, when the target did not answer.
    pub error: Option<String>,
    pub duration_ms: i64,
    /// 1 for the first try of a delivery.
    pub attempt: i64,
}

/// A notify hook (its secret is shown only when it is added).
#[derive(Debug, Serialize, ToSchema)]
pub struct HookView {
    pub id: String,
    pub endpoint_id: String,
    pub url: String,
    /// `enabled`, or `disabled` (after too many failures in a row).
    pub state: &'static str,
    /// Deliveries in a row that failed after every try.
    pub consecutive_failures: i64,
    pub disabled_reason: Option<String>,
    #[schema(format = DateTime)]
    pub disabled_at: Option<String>,
    #[schema(format = DateTime)]
    pub created_at: String,
    /// The last tries, newest first (in listings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_deliveries: Option<Vec<HookDeliveryView>>,
}

/// A hook just added: the signing secret is shown this once.
#[derive(Debug, Serialize, ToSchema)]
pub struct NewHookView {
    /// The Standard Webhooks signing secret (`whsec_…`).
    pub secret: String,
    #[serde(flatten)]
    pub hook: HookView,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct HookList {
    pub hooks: Vec<HookView>,
}

/// How a test delivery went.
#[derive(Debug, Serialize, ToSchema)]
pub struct HookTestView {
    /// `ok`, `failed` or `refused`.
    pub outcome: &'static str,
    pub status: Option<u16>,
    pub error: Option<String>,
    pub duration_ms: i64,
}

/// A schedule: a todo at each occurrence of `cron` in `tz`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduleView {
    pub id: String,
    pub endpoint_id: String,
    pub queue: String,
    /// 5 fields: minute hour day-of-month month day-of-week.
    pub cron: String,
    /// IANA time zone name.
    pub tz: String,
    /// The title template (`{date}`, `{time}`, `{datetime}`: the occurrence's local time).
    pub title: String,
    pub kind: Option<String>,
    pub payload: Option<serde_json::Value>,
    /// `one` or `none`: occurrences missed while no instance ran make one todo, or none.
    pub catch_up: String,
    pub paused: bool,
    /// The next occurrence (its todo is made then, unless paused).
    #[schema(format = DateTime)]
    pub next_at: Option<String>,
    /// The occurrence its last todo was made for.
    #[schema(format = DateTime)]
    pub last_at: Option<String>,
    #[schema(format = DateTime)]
    pub created_at: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduleList {
    pub schedules: Vec<ScheduleView>,
}

impl From<&crate::store::Schedule> for ScheduleView {
    fn from(s: &crate::store::Schedule) -> Self {
        Self {
            id: s.id.clone(),
            endpoint_id: s.endpoint_id.clone(),
            queue: s.queue.clone(),
            cron: s.cron.clone(),
            tz: s.tz.clone(),
            title: s.title.clone(),
            kind: s.kind.clone(),
            payload: s.payload.clone(),
            catch_up: s.catch_up.clone(),
            paused: s.paused,
            // i64::MAX is "never again".
            next_at: (s.next_at.as_millis() != i64::MAX).then(|| s.next_at.to_rfc3339()),
            last_at: s.last_at.map(|t| t.to_rfc3339()),
            created_at: s.created_at.to_rfc3339(),
        }
    }
}
