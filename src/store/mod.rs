//! The storage contract and its two backends.
//!
//! [`Store`] is the one contract every surface talks to, the sum of small
//! capability traits ([`TodoStore`], [`RegistryStore`] = [`HumanStore`] +
//! [`AgentStore`] + [`EndpointStore`] + [`WebhookStore`], [`TokenStore`],
//! [`HookStore`], [`ScheduleStore`], [`PresenceStore`], [`RingStore`], [`SweepStore`], [`StatsStore`], over
//! [`StoreBase`]); `use crate::store::prelude::*;` brings them all in scope. [`SqlStore`] implements
//! it for SQLite (embedded, one server) and PostgreSQL (any number of
//! instances); the SQL differs only where the dialects do, in [`dialect`].
//! Every state change that must hold across instances is one guarded
//! statement; zero rows back means "someone else decided".
//!
//! Methods that act for an agent take a [`Caller`] and see only its endpoint's
//! todos. Background sweeps are named `unscoped_*` so that a reader can tell
//! at the call site that no tenant boundary applies.

pub mod auth_cache;
pub mod circuit;
pub mod dialect;
pub mod error;
mod issue;
pub mod lock;
pub mod migrate;
pub mod model;
mod rows;
pub mod sql;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

pub use dialect::Dialect;
pub use error::{StoreError, StoreResult, Taken};
pub use issue::{issue_api_token, issue_session_token, store_api_token};
pub use model::*;
pub use sql::{DatabaseLocation, SqlStore, StoreOptions};

use crate::clock::SharedClock;
use crate::domain::Timestamp;
use crate::domain::activity::ActivityRange;

/// What every store is: its dialect, its clock and whether it is ready.
#[async_trait]
pub trait StoreBase: Send + Sync + 'static {
    fn dialect(&self) -> Dialect;
    fn clock(&self) -> &SharedClock;
    /// Ok when the database answers and its schema is the one this binary expects.
    async fn readiness(&self) -> StoreResult<()>;
    /// Drops every cached credential → endpoint mapping: another instance
    /// announced a revocation, or the bus lost messages (see `auth_cache`).
    fn forget_credentials(&self) {}
}

/// Todos as their agent (through a [`Caller`]) and their human act on and read them.
#[async_trait]
pub trait TodoStore: Send + Sync {
    /// Creates a todo, or returns the live todo with the same idempotency key
    /// (`created: false`, nothing changed).
    async fn create_todo(&self, new: NewTodo) -> StoreResult<CreatedTodo>;
    async fn get_todo(&self, caller: &Caller, id: &str) -> StoreResult<Todo>;
    /// The most recent attempt records of a todo, newest first.
    async fn list_attempts(
        &self,
        caller: &Caller,
        todo_id: &str,
        limit: i64,
    ) -> StoreResult<Vec<Attempt>>;
    async fn claim(&self, caller: &Caller, id: &str, opts: ClaimOptions) -> StoreResult<Claimed>;
    /// The oldest claimable todo in the granted queues (or the named one);
    /// `None` when nothing is claimable.
    async fn claim_next(
        &self,
        caller: &Caller,
        queue: Option<&str>,
        opts: ClaimOptions,
    ) -> StoreResult<Option<Claimed>>;
    async fn heartbeat(
        &self,
        caller: &Caller,
        id: &str,
        opts: HeartbeatOptions,
    ) -> StoreResult<Todo>;
    async fn complete(&self, caller: &Caller, id: &str, finish: Finish) -> StoreResult<Todo>;
    async fn fail(&self, caller: &Caller, id: &str, finish: Finish) -> StoreResult<Todo>;
    /// `complete`, then — once it succeeded — `claim_next` with `queue` and
    /// `opts` for the same caller: the agent's loop in one call, and on the
    /// fast paths in one commit. Everything `claim_next` would refuse
    /// (`queue`, `opts`) is checked before anything is written; a refused
    /// completion claims nothing. Answers the completed row and what the
    /// claim found (`None`: nothing claimable).
    async fn complete_then_claim_next(
        &self,
        caller: &Caller,
        id: &str,
        finish: Finish,
        queue: Option<&str>,
        opts: ClaimOptions,
    ) -> StoreResult<(Todo, Option<Claimed>)>;
    async fn release(&self, caller: &Caller, id: &str, opts: ReleaseOptions) -> StoreResult<Todo>;
    /// Completes each of `ids` (1 to `MAX_COMPLETE_MANY`, none twice) that
    /// the caller holds, in one transaction, as `complete` would (attempt
    /// closed with the same `summary`, the same `result`). Answers per id, in
    /// order: the done row, or `NotFound`/`Conflict` as `complete` would
    /// refuse it; a refused id changes nothing and does not undo the others.
    /// An outage or a bad `result` fails the whole call and changes nothing.
    async fn complete_many(
        &self,
        caller: &Caller,
        ids: &[String],
        finish: Finish,
    ) -> StoreResult<Vec<StoreResult<Todo>>>;
    /// The caller's live todos counted (one read): by queue (all of its
    /// queues, or `queue`), and its pending ones by kind, source and sender,
    /// at most `top` groups each.
    async fn queue_summary(
        &self,
        caller: &Caller,
        queue: Option<&str>,
        top: i64,
    ) -> StoreResult<QueueSummary>;
    /// An agent's listing of its endpoint's todos, newest first.
    async fn list_todos(
        &self,
        caller: &Caller,
        queue: Option<&str>,
        state: Option<crate::domain::todo::TodoState>,
        limit: i64,
    ) -> StoreResult<Vec<Todo>>;
    /// A human's retry of a failed, dead-lettered or cancelled todo: back to
    /// pending with `attempt = 0`.
    async fn human_retry(&self, human_id: &str, id: &str) -> StoreResult<Todo>;
    /// A human's change of a live todo's priority (pending, claimed or
    /// waiting for a retry); a finished one → `Conflict`, a foreign one →
    /// `NotFound`.
    async fn human_set_priority(
        &self,
        human_id: &str,
        id: &str,
        priority: i64,
    ) -> StoreResult<Todo>;
    /// A human's cancel of a pending, claimed or waiting-for-retry todo: terminal
    /// `cancelled`; a claimed one's attempt closes as `cancelled`, and its
    /// holder's next call gets `conflict`. A finished todo → `Conflict`
    /// naming its state; a foreign one → `NotFound`.
    async fn human_cancel(&self, human_id: &str, id: &str) -> StoreResult<Todo>;
    /// Cancels at most [`crate::domain::todo::MAX_BULK`] of the human's
    /// cancellable todos (pending, claimed, waiting for a retry) matching the
    /// target, oldest first, in one transaction.
    async fn human_bulk_cancel(
        &self,
        human_id: &str,
        target: &BulkTarget,
    ) -> StoreResult<BulkOutcome>;
    /// Retries at most [`crate::domain::todo::MAX_BULK`] of the human's failed
    /// or cancelled todos matching the target, oldest first, in one
    /// transaction. A filter without `state` means `state = failed`.
    async fn human_bulk_retry(
        &self,
        human_id: &str,
        target: &BulkTarget,
    ) -> StoreResult<BulkOutcome>;
    /// How many of the human's todos a bulk retry (`retry`) or cancel would
    /// touch now, by the same conditions as the action itself.
    async fn human_bulk_count(
        &self,
        human_id: &str,
        target: &BulkTarget,
        retry: bool,
    ) -> StoreResult<BulkCount>;
    /// Deletes one of the human's todos for good, with its attempt history
    /// and intake event. A claimed todo → `Conflict` (cancel or release it
    /// first); a foreign one → `NotFound`. Returns the todo as it was.
    async fn human_delete_todo(&self, human_id: &str, id: &str) -> StoreResult<Todo>;
    /// A human's release of a claimed todo.
    async fn human_release(&self, human_id: &str, id: &str) -> StoreResult<Todo>;
    async fn human_list_todos(
        &self,
        human_id: &str,
        filter: &TodoFilter,
        page: &PageRequest,
    ) -> StoreResult<Page<Todo>>;
    async fn human_get_todo(&self, human_id: &str, id: &str) -> StoreResult<Todo>;
    async fn human_list_attempts(
        &self,
        human_id: &str,
        todo_id: &str,
        limit: i64,
    ) -> StoreResult<Vec<Attempt>>;
    async fn human_get_intake_event(
        &self,
        human_id: &str,
        todo_id: &str,
    ) -> StoreResult<IntakeEvent>;
    /// The newest finished attempt of each of these todos of the human's
    /// (at most 200 ids), by todo id: why a dead letter died, for a table.
    async fn human_last_attempts(
        &self,
        human_id: &str,
        todo_ids: &[String],
    ) -> StoreResult<std::collections::HashMap<String, Attempt>>;
}

/// Humans (part of [`RegistryStore`]).
#[async_trait]
pub trait HumanStore: Send + Sync {
    async fn create_human(&self, name: &str) -> StoreResult<Human>;
    async fn count_humans(&self) -> StoreResult<i64>;
    async fn get_human(&self, id: &str) -> StoreResult<Human>;
    async fn find_human_by_name(&self, name: &str) -> StoreResult<Human>;
    /// Records a form's one-time nonce (one guarded insert): `None` the first
    /// time, else what the earlier submission recorded. Prunes nonces older
    /// than a day.
    async fn claim_form_nonce(
        &self,
        human_id: &str,
        form: &str,
        nonce: &str,
    ) -> StoreResult<Option<PriorSubmission>>;
    /// Records what the first submission of a nonce made.
    async fn settle_form_nonce(&self, human_id: &str, nonce: &str, result: &str)
    -> StoreResult<()>;
}

/// Agents as their human sees them (part of [`RegistryStore`]).
#[async_trait]
pub trait AgentStore: Send + Sync {
    async fn create_agent(&self, human_id: &str, name: &str, kind: AgentKind)
    -> StoreResult<Agent>;
    async fn register_agent(&self, new: NewAgent) -> StoreResult<Agent>;
    async fn list_agents(&self, human_id: &str, page: &PageRequest) -> StoreResult<Page<Agent>>;
    async fn get_agent(&self, human_id: &str, name: &str) -> StoreResult<Agent>;
    async fn update_agent(
        &self,
        human_id: &str,
        name: &str,
        patch: AgentPatch,
    ) -> StoreResult<Agent>;
}

/// Endpoints: vending, revoking, and agents reaching theirs (part of [`RegistryStore`]).
#[async_trait]
pub trait EndpointStore: Send + Sync {
    async fn create_endpoint(&self, new: NewEndpoint) -> StoreResult<Endpoint>;
    /// An endpoint by id, whoever owns it: for the server's own wiring only.
    async fn unscoped_get_endpoint(&self, id: &str) -> StoreResult<Endpoint>;
    /// Revokes one of `human_id`'s endpoints and dead-letters its live todos.
    /// `Conflict` when it is already revoked.
    async fn revoke_endpoint(&self, human_id: &str, endpoint_id: &str) -> StoreResult<Revoked>;
    /// Creates the endpoint, and the agent first when the human has none of
    /// that name (with `kind`). Returns whether the agent was created.
    async fn vend_endpoint(
        &self,
        human_id: &str,
        agent_name: &str,
        kind: AgentKind,
        new: NewEndpoint,
    ) -> StoreResult<(Agent, Endpoint, bool)>;
    async fn list_endpoints(
        &self,
        human_id: &str,
        page: &PageRequest,
    ) -> StoreResult<Page<Endpoint>>;
    async fn endpoints_of_agents(
        &self,
        human_id: &str,
        agent_ids: &[String],
    ) -> StoreResult<Vec<Endpoint>>;
    /// One of the human's endpoints by slug or id.
    async fn get_endpoint(&self, human_id: &str, reference: &str) -> StoreResult<Endpoint>;
    /// `Conflict` when the endpoint is revoked.
    async fn set_default_lease(
        &self,
        endpoint_id: &str,
        seconds: Option<i64>,
    ) -> StoreResult<Endpoint>;
    /// Only a revoked endpoint may be deleted (`Conflict` otherwise).
    async fn delete_endpoint(&self, human_id: &str, endpoint_id: &str) -> StoreResult<()>;
    async fn endpoint_activity(
        &self,
        endpoint_ids: &[String],
    ) -> StoreResult<std::collections::HashMap<String, EndpointActivity>>;
    /// The active, unexpired endpoint whose credential has this hash.
    async fn authenticate_endpoint(
        &self,
        credential_hash: &str,
    ) -> StoreResult<Option<Arc<Endpoint>>>;
    /// Stamps `last_seen_at` (never backwards) and, when given, the agent's
    /// own `last_contact_at` claim.
    async fn stamp_endpoint_seen(
        &self,
        endpoint_id: &str,
        seen_at: crate::domain::Timestamp,
        last_contact: Option<crate::domain::Timestamp>,
    ) -> StoreResult<()>;
    /// How many pending todos the endpoint has.
    async fn count_pending(&self, endpoint_id: &str) -> StoreResult<i64>;
}

/// Intake webhooks (part of [`RegistryStore`]).
#[async_trait]
pub trait WebhookStore: Send + Sync {
    /// A webhook for one of the human's endpoints (by id) and a queue of its scope.
    async fn create_webhook(
        &self,
        human_id: &str,
        endpoint_id: &str,
        queue: &str,
        token_hash: &str,
        signing_secret: Option<&str>,
    ) -> StoreResult<Webhook>;
    async fn get_webhook(&self, human_id: &str, id: &str) -> StoreResult<Webhook>;
    async fn list_webhooks(&self, human_id: &str, endpoint_id: &str) -> StoreResult<Vec<Webhook>>;
    /// New URL token (and secret, when signed); the old ones stop working at once.
    async fn rotate_webhook(
        &self,
        human_id: &str,
        id: &str,
        token_hash: &str,
        signing_secret: Option<&str>,
    ) -> StoreResult<Webhook>;
    async fn delete_webhook(&self, human_id: &str, id: &str) -> StoreResult<()>;
    /// The webhook a delivery URL names, whoever owns it.
    async fn unscoped_find_webhook(&self, token_hash: &str) -> StoreResult<Option<WebhookTarget>>;
}

/// Webhook deliveries as recorded (`docs/intake.md`, "Delivery history")
/// and whom a webhook trusts.
#[async_trait]
pub trait DeliveryStore: Send + Sync {
    /// Sets whom the human's webhook trusts.
    async fn set_webhook_senders(
        &self,
        human_id: &str,
        id: &str,
        senders: &Senders,
    ) -> StoreResult<Webhook>;
    /// Replaces the human's webhook's routing rules (`None`: no rules).
    async fn set_webhook_rules(
        &self,
        human_id: &str,
        id: &str,
        rules: Option<&crate::domain::rules::RuleSet>,
    ) -> StoreResult<Webhook>;
    /// The dropped delivery of this webhook that spent `key`, if any.
    async fn find_dropped_delivery(
        &self,
        webhook_id: &str,
        key: &str,
    ) -> StoreResult<Option<DeliveryRecord>>;
    /// Records a delivery that made no todo itself (duplicate, quarantined,
    /// dropped, refused).
    async fn record_delivery(&self, new: NewDelivery) -> StoreResult<DeliveryRecord>;
    /// Creates a todo and, in the same transaction, records or releases its
    /// delivery. When the key matched a live todo (`created: false`) nothing
    /// is written and no record is returned: the caller records the duplicate.
    async fn create_todo_with_delivery(
        &self,
        new: NewTodo,
        write: DeliveryWrite,
    ) -> StoreResult<(CreatedTodo, Option<DeliveryRecord>)>;
    /// One of the human's deliveries; `NotFound` for another's.
    async fn get_delivery(&self, human_id: &str, id: &str) -> StoreResult<DeliveryRecord>;
    /// The deliveries of one of the human's webhooks, newest first.
    async fn list_deliveries(
        &self,
        human_id: &str,
        webhook_id: &str,
        filter: &DeliveryFilter,
        page: &PageRequest,
    ) -> StoreResult<Page<DeliveryRecord>>;
    /// A quarantined delivery becomes `to` (released, naming `todo_id`, or
    /// discarded); `Conflict` when it is not quarantined (any more).
    async fn settle_delivery(
        &self,
        human_id: &str,
        id: &str,
        to: Decision,
        todo_id: Option<&str>,
    ) -> StoreResult<DeliveryRecord>;
    /// Deletes at most `limit` deliveries received before `older_than` ago;
    /// returns how many.
    async fn unscoped_prune_deliveries(&self, older_than: Duration, limit: i64)
    -> StoreResult<u64>;
}

/// Outbound notify hooks (`docs/doorbells.md`, "Notify hooks") and their
/// delivery log.
#[async_trait]
pub trait HookStore: Send + Sync {
    /// A hook on one of the human's endpoints (by id); `Conflict` when revoked.
    async fn create_hook(
        &self,
        human_id: &str,
        endpoint_id: &str,
        url: &str,
        secret: &str,
    ) -> StoreResult<Hook>;
    async fn get_hook(&self, human_id: &str, id: &str) -> StoreResult<Hook>;
    /// The endpoint's hooks, oldest first.
    async fn list_hooks(&self, human_id: &str, endpoint_id: &str) -> StoreResult<Vec<Hook>>;
    async fn delete_hook(&self, human_id: &str, id: &str) -> StoreResult<()>;
    /// Enables a hook again with its failure count reset.
    async fn enable_hook(&self, human_id: &str, id: &str) -> StoreResult<Hook>;
    /// A hook with its secret, for a human's test.
    async fn hook_target(&self, human_id: &str, id: &str) -> StoreResult<HookTarget>;
    /// The last deliveries (attempts) of one of the human's hooks, newest first.
    async fn list_hook_deliveries(
        &self,
        human_id: &str,
        hook_id: &str,
        limit: i64,
    ) -> StoreResult<Vec<HookDelivery>>;
    /// The enabled hooks of an active endpoint, oldest first, with their
    /// secrets (empty when it has none, or is revoked).
    async fn unscoped_enabled_hooks(&self, endpoint_id: &str) -> StoreResult<Vec<HookTarget>>;
    /// Active endpoints with at least one enabled hook (every instance hosts them).
    async fn unscoped_hooked_endpoints(&self) -> StoreResult<Vec<String>>;
    /// Logs one attempt and keeps the hook's last
    /// [`crate::domain::hook::KEPT_DELIVERIES`].
    async fn unscoped_record_hook_delivery(&self, delivery: &HookDelivery) -> StoreResult<()>;
    /// A delivery was received: the failures in a row start again from 0.
    async fn unscoped_hook_succeeded(&self, hook_id: &str) -> StoreResult<()>;
    /// A delivery failed for good: one more failure in a row (one
    /// statement); at `disable_after` the hook is disabled, by one guarded
    /// statement whose caller alone sees `disabled_now`.
    async fn unscoped_hook_failed(
        &self,
        hook_id: &str,
        disable_after: i64,
        reason: &str,
    ) -> StoreResult<HookFailure>;
}

/// Humans' API tokens.
#[async_trait]
pub trait TokenStore: Send + Sync {
    /// `NotFound` when the human, or the live token a session is of, is not there.
    async fn create_api_token(&self, new: NewApiToken) -> StoreResult<ApiToken>;
    /// The live (unrevoked, unexpired) token with this hash and its human;
    /// a board session's token only while the token it is of is live too.
    async fn authenticate_api_token(
        &self,
        token_hash: &str,
    ) -> StoreResult<Option<AuthenticatedToken>>;
    async fn list_api_tokens(
        &self,
        human_id: &str,
        page: &PageRequest,
    ) -> StoreResult<Page<ApiToken>>;
    /// `Conflict` when already revoked. The board sessions signed in with
    /// the token are revoked with it, in the same statement.
    async fn revoke_api_token(&self, human_id: &str, id: &str) -> StoreResult<ApiToken>;
}

/// Presence (05): overrides, shifts, transitions and the evaluator's reads.
#[async_trait]
pub trait PresenceStore: Send + Sync {
    /// Writes an override on an active endpoint (`Conflict` when revoked).
    async fn set_presence_override(
        &self,
        endpoint_id: &str,
        override_: &crate::domain::presence::Override,
    ) -> StoreResult<Endpoint>;
    /// Clears the override; with `only_if_set_at`, only that very override
    /// (a dead one found by a reader). Returns whether one was cleared.
    async fn clear_presence_override(
        &self,
        endpoint_id: &str,
        only_if_set_at: Option<crate::domain::Timestamp>,
    ) -> StoreResult<bool>;
    /// Stores a shift (or none). In the same transaction, and first, clears
    /// the override if `override_dead_under_old_shift` says it is dead.
    async fn set_shift(
        &self,
        endpoint_id: &str,
        shift: Option<&str>,
        override_dead_under_old_shift: &(dyn for<'e> Fn(&'e Endpoint) -> bool + Send + Sync),
    ) -> StoreResult<Endpoint>;
    /// Claims a presence transition that happened `at` (stored as
    /// `presence_changed_at`): true only for the caller whose update changed
    /// `presence_seen` (exactly once across instances). A claim that wins
    /// also records `next_check` in the same statement (guarded as in
    /// [`PresenceStore::set_presence_recheck`]), so a transition costs one
    /// commit, not two.
    async fn claim_presence_transition(
        &self,
        endpoint_id: &str,
        new: crate::domain::presence::Presence,
        by: &str,
        at: crate::domain::Timestamp,
        next_check: Option<NextPresenceCheck<'_>>,
    ) -> StoreResult<bool>;
    /// Active endpoints whose presence may change by itself (a shift, an
    /// override, or last seen out), by id, after `after_id` (keyset pages).
    async fn unscoped_presence_candidates(
        &self,
        after_id: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<Endpoint>>;
    /// When the evaluator must next settle this endpoint; written only if
    /// its presence inputs are still `next.inputs`.
    async fn set_presence_recheck(&self, next: NextPresenceCheck<'_>) -> StoreResult<()>;
    async fn unscoped_endpoints_by_ids(&self, ids: &[String]) -> StoreResult<Vec<Endpoint>>;
}

/// Doorbells: what may ring, and claiming the rings that are due.
#[async_trait]
pub trait RingStore: Send + Sync {
    /// The endpoint's push-eligible pending todos, oldest first.
    async fn unscoped_digest_todos(&self, endpoint_id: &str) -> StoreResult<Vec<DigestTodo>>;
    /// Sets `last_ringed_at` on exactly these todos where still pending.
    async fn unscoped_mark_rung(
        &self,
        ids: &[String],
        at: crate::domain::Timestamp,
    ) -> StoreResult<u64>;
    /// The todo, if it may ring now: pending, created by authenticated
    /// intake (the sender gate), on an active endpoint.
    async fn unscoped_ringable_todo(&self, id: &str) -> StoreResult<Option<RingCandidate>>;
    /// Which of these endpoints have at least one ring due (a read; the
    /// sweep then checks presence for only those), at most `limit`, in the
    /// order [`Self::unscoped_claim_due_rings`] takes their first rings (by
    /// each one's longest-waiting due ring: its ring clock, then its id):
    /// the first `limit` of them are the endpoints that claim would ring, so
    /// a sweep reads presence for what it can ring this tick, not for every
    /// endpoint with a ring due.
    async fn unscoped_endpoints_with_due_rings(
        &self,
        endpoint_ids: &[String],
        steps: &[std::time::Duration],
        limit: i64,
    ) -> StoreResult<Vec<String>>;
    /// The re-ring sweep's one statement: among the given (hosted, present)
    /// endpoints' pending push-eligible todos, those whose next ring is due
    /// by `steps` are counted (`ring_attempts += 1`, `last_ringed_at = now`)
    /// and returned, round-robin across endpoints (each endpoint's
    /// longest-waiting ring first, and so across them), at most `limit`.
    async fn unscoped_claim_due_rings(
        &self,
        endpoint_ids: &[String],
        steps: &[std::time::Duration],
        limit: i64,
    ) -> StoreResult<Vec<RingCandidate>>;
    /// Undoes one ring [`Self::unscoped_claim_due_rings`] counted and no
    /// hearer could take (every buffer refused it): `ring_attempts` back by
    /// one and the ring clock back to what it was, so the ring is due again
    /// at the next tick. Only while the row still holds that count
    /// (`ring_attempts`, written at `counted_at`); true when undone.
    async fn unscoped_uncount_ring(
        &self,
        id: &str,
        ring_attempts: i64,
        counted_at: crate::domain::Timestamp,
    ) -> StoreResult<bool>;
    /// Claims the one ring of a todo that became ready (created, or pending
    /// again after a retry) for the calling instance: true for exactly one
    /// caller per readiness across instances, and only while the todo is
    /// pending, push-eligible and on an active endpoint.
    async fn unscoped_claim_ready_ring(&self, id: &str) -> StoreResult<Option<RingCandidate>>;
    /// Ids of these endpoints' pending push-eligible todos that became
    /// ready (created, or a delayed one come due: `run_at`) at or after
    /// `since` and that no instance has rung at all — no ring claimed, none
    /// counted, no digest — oldest first (what a lost bus message would have
    /// rung).
    async fn unscoped_unrung_since(
        &self,
        endpoint_ids: &[String],
        since: crate::domain::Timestamp,
        limit: i64,
    ) -> StoreResult<Vec<String>>;
}

/// Background sweeps: the reaper, retries, endpoint expiry and retention.
#[async_trait]
pub trait SweepStore: Send + Sync {
    /// Lapsed leases nobody took over: back to pending, or dead letter at the cap.
    async fn unscoped_reap_lapsed_leases(&self, limit: i64) -> StoreResult<ReapReport>;
    /// Failed todos whose retry window elapsed: back to pending.
    async fn unscoped_schedule_due_retries(&self, limit: i64) -> StoreResult<Vec<TodoRef>>;
    /// Delayed todos whose `run_at` has come: pending, by one guarded
    /// statement (each is moved, and so rung, by one caller in the cluster),
    /// earliest first, at most `limit`.
    async fn unscoped_promote_due_delayed(&self, limit: i64) -> StoreResult<Vec<TodoRef>>;
    /// The earliest `run_at` of a delayed todo, if any (one index read).
    async fn unscoped_next_delayed_at(&self) -> StoreResult<Option<Timestamp>>;
    /// Revokes every active endpoint whose `expires_at` has passed.
    async fn unscoped_expire_endpoints(&self, limit: i64) -> StoreResult<Vec<Revoked>>;
    /// Deletes up to `limit` terminal todos (done, dead letter, cancelled)
    /// finished longer ago than `older_than`, from those after `after` in
    /// listing order; a pass starts at [`RetentionCursor::start`] and hands
    /// each batch's `resume_after` to the next.
    async fn unscoped_prune_terminal_todos(
        &self,
        older_than: Duration,
        limit: i64,
        after: &RetentionCursor,
    ) -> StoreResult<Pruned>;
}

/// Metrics reads (`/metrics`, read at scrape time).
#[async_trait]
pub trait StatsStore: Send + Sync {
    /// Todos per state, dead letters and the oldest pending todo's creation,
    /// over every endpoint, in one aggregate query. It scans the whole todos
    /// table (done rows included), so its cost grows with the retention window.
    async fn unscoped_queue_stats(&self) -> StoreResult<QueueStats>;
    /// What the liveness condition of each active endpoint is decided from
    /// (sessions aside, which are in memory), in one query, at most `limit`
    /// endpoints (by id).
    async fn unscoped_liveness_inputs(&self, limit: i64) -> StoreResult<Vec<LivenessInputs>>;
}

/// Schedules (`docs/queue.md`, "Recurring todos").
#[async_trait]
pub trait ScheduleStore: Send + Sync {
    /// A schedule on one of the human's endpoints (by id); `EndpointRevoked`
    /// when revoked, `NotFound` when missing or foreign.
    async fn create_schedule(&self, human_id: &str, new: NewSchedule) -> StoreResult<Schedule>;
    async fn get_schedule(&self, human_id: &str, id: &str) -> StoreResult<Schedule>;
    /// The endpoint's schedules, oldest first.
    async fn list_schedules(&self, human_id: &str, endpoint_id: &str)
    -> StoreResult<Vec<Schedule>>;
    async fn delete_schedule(&self, human_id: &str, id: &str) -> StoreResult<()>;
    /// Pauses, or resumes waiting for `next_at`.
    async fn set_schedule_paused(
        &self,
        human_id: &str,
        id: &str,
        paused: bool,
        next_at: Timestamp,
    ) -> StoreResult<Schedule>;
    /// Unpaused schedules of active endpoints whose `next_at` is at or before
    /// `now`, earliest first, at most `limit`.
    async fn unscoped_due_schedules(
        &self,
        now: Timestamp,
        limit: i64,
    ) -> StoreResult<Vec<Schedule>>;
    /// Moves an unpaused schedule from the occurrence `from` (as read) to
    /// `to` by one guarded statement and, when it moved and `todo` is given,
    /// creates that todo in the same transaction: one todo per occurrence,
    /// whoever calls. A todo refused (its queue left the scope, its endpoint
    /// was revoked) is an error and nothing moved.
    async fn unscoped_fire_schedule(
        &self,
        id: &str,
        from: Timestamp,
        to: Timestamp,
        occurrence: Timestamp,
        todo: Option<NewTodo>,
    ) -> StoreResult<Fired>;
}

/// Admission limits (`docs/queue.md`, "Admission"); the claim statements
/// enforce them.
#[async_trait]
pub trait AdmissionStore: Send + Sync {
    /// Sets the limits of one of the human's endpoints (`queue` = None) or
    /// of one of its scope's queues, replacing what was set; open limits
    /// remove the row. `NotFound` for a missing or foreign endpoint,
    /// `EndpointRevoked` when revoked, `InvalidArgument` (field `queue`) for
    /// a queue outside the scope.
    async fn set_admission(
        &self,
        human_id: &str,
        endpoint_id: &str,
        queue: Option<&str>,
        limits: &crate::domain::admission::Limits,
    ) -> StoreResult<Option<Admission>>;
    /// The limits set on the endpoint and its queues, endpoint first, with
    /// their usage now. The caller has checked who may see them.
    async fn unscoped_admission(&self, endpoint_id: &str) -> StoreResult<Vec<Admission>>;
    /// Whether the endpoint or its queue `queue` is paused (a limit of 0
    /// pauses too): its todos are not rung.
    async fn unscoped_paused(&self, endpoint_id: &str, queue: &str) -> StoreResult<bool>;
}

/// A queue's activity over time, for the board's charts
/// (`domain::activity`, `docs/board.md`, "Queues").
#[async_trait]
pub trait ActivityStore: Send + Sync {
    /// Adds what an instance counted to the stored buckets (created when
    /// missing), in one transaction. Rows of deleted endpoints are skipped.
    async fn add_queue_activity(&self, rows: &[QueueActivity]) -> StoreResult<()>;
    /// The buckets of `range` from `since` on, of the endpoints (and of
    /// `queue` only, when given); one key range per endpoint, whatever the
    /// history holds. The caller has checked who may see them.
    async fn queue_activity(
        &self,
        endpoint_ids: &[String],
        queue: Option<&str>,
        range: ActivityRange,
        since: Timestamp,
    ) -> StoreResult<Vec<QueueActivity>>;
    /// Deletes buckets older than their range keeps them; how many.
    async fn unscoped_prune_queue_activity(&self) -> StoreResult<u64>;
    /// The endpoint's dead letters per queue (its dead letters' partial
    /// index: what the dead letters hold, not the history). The caller has
    /// checked who may see them.
    async fn unscoped_dead_letters_by_queue(
        &self,
        endpoint_id: &str,
    ) -> StoreResult<Vec<(String, i64)>>;
}

/// OAuth 2.1 (`docs/oauth.md`): clients, codes, grants and their tokens.
/// Every token is a credential of one endpoint, live only while the
/// endpoint is active and unexpired and the grant unrevoked.
#[async_trait]
pub trait OAuthStore: Send + Sync {
    async fn get_oauth_client(&self, client_id: &str) -> StoreResult<Option<OAuthClient>>;
    /// Registers a client (RFC 7591) under a minted `oc_…` id.
    async fn register_oauth_client(
        &self,
        metadata: &crate::domain::oauth::ClientMetadata,
    ) -> StoreResult<OAuthClient>;
    /// Writes (or refreshes) the cached metadata of a client known by the
    /// URL of its metadata document.
    async fn put_oauth_document_client(
        &self,
        client_id: &str,
        metadata: &crate::domain::oauth::ClientMetadata,
    ) -> StoreResult<OAuthClient>;
    /// Writes a code for one of the human's active endpoints: `NotFound`
    /// when the endpoint is not the human's or not active (one statement).
    async fn create_oauth_code(&self, new: NewOAuthCode) -> StoreResult<()>;
    /// Takes a code: it is deleted whatever happens next (single use; two
    /// redeemers race, one gets it). `None`: unknown or taken already.
    async fn take_oauth_code(&self, code_hash: &str) -> StoreResult<Option<OAuthCode>>;
    /// Creates a grant with its first tokens, for an active endpoint of the
    /// code's human (`NotFound` otherwise).
    async fn create_oauth_grant(
        &self,
        code: &OAuthCode,
        tokens: NewOAuthTokens,
    ) -> StoreResult<OAuthIssued>;
    /// Spends a refresh token of `client_id` and writes a new pair, or
    /// revokes the grant when the token was spent already.
    async fn refresh_oauth_grant(
        &self,
        client_id: &str,
        refresh_hash: &str,
        tokens: NewOAuthTokens,
    ) -> StoreResult<OAuthRefresh>;
    /// The endpoint a live access token is a credential of.
    async fn authenticate_oauth_token(
        &self,
        access_hash: &str,
    ) -> StoreResult<Option<Arc<Endpoint>>>;
    /// The live grants of one of the human's endpoints, newest first.
    async fn list_oauth_connections(
        &self,
        human_id: &str,
        endpoint_id: &str,
    ) -> StoreResult<Vec<OAuthConnection>>;
    /// Revokes one of the human's grants of that endpoint (`NotFound`
    /// otherwise; `Conflict` when revoked already).
    async fn revoke_oauth_grant(
        &self,
        human_id: &str,
        endpoint_id: &str,
        grant_id: &str,
    ) -> StoreResult<OAuthGrant>;
    /// Deletes codes and tokens past their expiry, and revoked grants'
    /// tokens; returns how many rows went.
    async fn unscoped_prune_oauth(&self) -> StoreResult<u64>;
}

/// The registry: humans, agents, endpoints and webhooks.
pub trait RegistryStore:
    HumanStore + AgentStore + EndpointStore + WebhookStore + DeliveryStore
{
}

impl<T: HumanStore + AgentStore + EndpointStore + WebhookStore + DeliveryStore> RegistryStore
    for T
{
}

/// The whole storage contract: every capability. Surfaces hold an
/// `Arc<dyn Store>`; bring the capability traits into scope with
/// `use crate::store::prelude::*;`.
pub trait Store:
    StoreBase
    + TodoStore
    + RegistryStore
    + TokenStore
    + OAuthStore
    + HookStore
    + ScheduleStore
    + AdmissionStore
    + ActivityStore
    + PresenceStore
    + RingStore
    + SweepStore
    + StatsStore
{
}

impl<T> Store for T where
    T: StoreBase
        + TodoStore
        + RegistryStore
        + TokenStore
        + OAuthStore
        + HookStore
        + ScheduleStore
        + AdmissionStore
        + ActivityStore
        + PresenceStore
        + RingStore
        + SweepStore
        + StatsStore
{
}

/// Every store trait, for `use crate::store::prelude::*;` (a supertrait's
/// methods are callable only with the supertrait in scope).
pub mod prelude {
    pub use super::{
        ActivityStore, AdmissionStore, AgentStore, DeliveryStore, EndpointStore, HookStore,
        HumanStore, OAuthStore, PresenceStore, RegistryStore, RingStore, ScheduleStore, StatsStore,
        Store, StoreBase, SweepStore, TodoStore, TokenStore, WebhookStore,
    };
}
