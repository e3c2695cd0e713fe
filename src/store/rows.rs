//! Decoding rows into records. Column lists live here beside their decoders
//! so a query and its decoder cannot drift apart. They are macros so that
//! `concat!` can build each statement as one `&'static str`.

use sqlx::Row;
use sqlx::any::AnyRow;

use super::StoreError;
use super::model::{
    Agent, AgentKind, ApiToken, Attempt, Endpoint, EndpointState, Human, IntakeEvent, Todo,
};
use crate::domain::Timestamp;
use crate::domain::presence::{OverrideBy, Presence};
use crate::domain::todo::{Disposition, Outcome, TodoState};

macro_rules! todo_columns {
    () => {
        "id, endpoint_id, queue, title, kind, source, payload, \
    idempotency_key, event_id, state, owner, lease_expires_at, lease_token_hash, attempt, \
    max_attempts, attempts_total, attempts_pruned, next_retry_at, result, last_note, \
    ring_attempts, last_ringed_at, created_at, updated_at, claimed_at, completed_at, cancelled_by"
    };
}
pub(crate) use todo_columns;

macro_rules! attempt_columns {
    () => {
        "seq, attempt, claimant, claimed_at, last_heartbeat_at, note, \
    ended_at, outcome, disposition, summary, summary_truncated"
    };
}
pub(crate) use attempt_columns;

macro_rules! agent_columns {
    () => {
        "id, human_id, name, kind, expected_interval_seconds, description, created_at, updated_at"
    };
}
pub(crate) use agent_columns;

macro_rules! endpoint_columns {
    () => {
        "e.id, e.agent_id, e.human_id, e.slug, e.credential_prefix, e.scope_queues, \
         e.scope_verbs, e.state, e.created_at, e.revoked_at, e.expires_at, e.last_seen_at, \
         e.last_contact_at, e.default_lease_ttl_seconds, e.last_note, e.last_note_at, e.shift, \
         e.presence_override, e.override_until, e.override_set_at, e.override_by, \
         e.presence_seen, e.presence_changed_at, e.presence_changed_by, e.server_name, \
         a.name AS agent_name, a.kind AS agent_kind, \
         a.expected_interval_seconds AS agent_expected_interval_seconds \
         FROM endpoints e JOIN agents a ON a.id = e.agent_id"
    };
}
pub(crate) use endpoint_columns;

fn corrupt(what: &str, value: &str) -> StoreError {
    StoreError::internal(format!("unexpected {what} {value:?} in the database"))
}

/// A text column that must hold one of a closed set of spellings.
fn required<T>(
    row: &AnyRow,
    col: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<T, StoreError> {
    let text: String = row.try_get(col)?;
    parse(&text).ok_or_else(|| corrupt(col, &text))
}

/// As [`required`], for a nullable column.
fn parsed<T>(
    row: &AnyRow,
    col: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Option<T>, StoreError> {
    let text: Option<String> = row.try_get(col)?;
    text.map(|t| parse(&t).ok_or_else(|| corrupt(col, &t)))
        .transpose()
}

fn ts(row: &AnyRow, col: &str) -> Result<Timestamp, StoreError> {
    Ok(Timestamp::from_millis(row.try_get::<i64, _>(col)?))
}

fn opt_ts(row: &AnyRow, col: &str) -> Result<Option<Timestamp>, StoreError> {
    Ok(row
        .try_get::<Option<i64>, _>(col)?
        .map(Timestamp::from_millis))
}

fn opt_json(row: &AnyRow, col: &str) -> Result<Option<serde_json::Value>, StoreError> {
    match row.try_get::<Option<String>, _>(col)? {
        None => Ok(None),
        Some(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| StoreError::internal(format!("column {col} holds invalid JSON: {e}"))),
    }
}

pub(super) fn todo(row: &AnyRow) -> Result<Todo, StoreError> {
    let state_text: String = row.try_get("state")?;
    let state =
        TodoState::parse_field(&state_text, "state").map_err(|_| corrupt("state", &state_text))?;
    let next_retry_at = opt_ts(row, "next_retry_at")?;
    Ok(Todo {
        id: row.try_get("id")?,
        endpoint_id: row.try_get("endpoint_id")?,
        queue: row.try_get("queue")?,
        title: row.try_get("title")?,
        kind: row.try_get("kind")?,
        source: row.try_get("source")?,
        payload: opt_json(row, "payload")?,
        idempotency_key: row.try_get("idempotency_key")?,
        event_id: row.try_get("event_id")?,
        dead_letter: state == TodoState::Failed && next_retry_at.is_none(),
        state,
        owner: row.try_get("owner")?,
        lease_expires_at: opt_ts(row, "lease_expires_at")?,
        fenced: row
            .try_get::<Option<String>, _>("lease_token_hash")?
            .is_some(),
        attempt: row.try_get("attempt")?,
        max_attempts: row.try_get("max_attempts")?,
        attempts_total: row.try_get("attempts_total")?,
        attempts_pruned: row.try_get("attempts_pruned")?,
        next_retry_at,
        result: opt_json(row, "result")?,
        last_note: row.try_get("last_note")?,
        ring_attempts: row.try_get("ring_attempts")?,
        last_ringed_at: opt_ts(row, "last_ringed_at")?,
        created_at: ts(row, "created_at")?,
        updated_at: ts(row, "updated_at")?,
        claimed_at: opt_ts(row, "claimed_at")?,
        completed_at: opt_ts(row, "completed_at")?,
        cancelled_by: row.try_get("cancelled_by")?,
    })
}

pub(super) fn attempt(row: &AnyRow) -> Result<Attempt, StoreError> {
    let outcome = match row.try_get::<Option<String>, _>("outcome")? {
        None => None,
        Some(s) => Some(Outcome::parse(&s).ok_or_else(|| corrupt("outcome", &s))?),
    };
    let disposition = match row.try_get::<Option<String>, _>("disposition")? {
        None => None,
        Some(s) => Some(Disposition::parse(&s).ok_or_else(|| corrupt("disposition", &s))?),
    };
    Ok(Attempt {
        seq: row.try_get("seq")?,
        attempt: row.try_get("attempt")?,
        claimant: row.try_get("claimant")?,
        claimed_at: ts(row, "claimed_at")?,
        last_heartbeat_at: opt_ts(row, "last_heartbeat_at")?,
        note: row.try_get("note")?,
        ended_at: opt_ts(row, "ended_at")?,
        died: outcome.is_some_and(Outcome::died),
        outcome,
        disposition,
        summary: row.try_get("summary")?,
        summary_truncated: row.try_get::<i64, _>("summary_truncated")? != 0,
    })
}

fn string_list(row: &AnyRow, col: &str) -> Result<Vec<String>, StoreError> {
    let text: String = row.try_get(col)?;
    serde_json::from_str(&text)
        .map_err(|e| StoreError::internal(format!("column {col} holds invalid JSON: {e}")))
}

pub(super) fn endpoint(row: &AnyRow) -> Result<Endpoint, StoreError> {
    Ok(Endpoint {
        id: row.try_get("id")?,
        agent_id: row.try_get("agent_id")?,
        human_id: row.try_get("human_id")?,
        slug: row.try_get("slug")?,
        credential_prefix: row.try_get("credential_prefix")?,
        scope_queues: string_list(row, "scope_queues")?,
        scope_verbs: string_list(row, "scope_verbs")?,
        state: required(row, "state", EndpointState::parse)?,
        created_at: ts(row, "created_at")?,
        revoked_at: opt_ts(row, "revoked_at")?,
        expires_at: opt_ts(row, "expires_at")?,
        last_seen_at: opt_ts(row, "last_seen_at")?,
        last_contact_at: opt_ts(row, "last_contact_at")?,
        default_lease_ttl_seconds: row.try_get("default_lease_ttl_seconds")?,
        server_name_set: row.try_get("server_name")?,
        last_note: row.try_get("last_note")?,
        last_note_at: opt_ts(row, "last_note_at")?,
        shift: row.try_get("shift")?,
        presence_override: parsed(row, "presence_override", Presence::parse)?,
        override_until: opt_ts(row, "override_until")?,
        override_set_at: opt_ts(row, "override_set_at")?,
        override_by: parsed(row, "override_by", OverrideBy::parse)?,
        presence_seen: required(row, "presence_seen", Presence::parse)?,
        presence_changed_at: opt_ts(row, "presence_changed_at")?,
        presence_changed_by: row.try_get("presence_changed_by")?,
        agent_name: row.try_get("agent_name")?,
        agent_kind: {
            let kind: String = row.try_get("agent_kind")?;
            AgentKind::parse(&kind).ok_or_else(|| corrupt("agent kind", &kind))?
        },
        agent_expected_interval_seconds: row.try_get("agent_expected_interval_seconds")?,
    })
}

pub(super) fn human(row: &AnyRow) -> Result<Human, StoreError> {
    Ok(Human {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        created_at: ts(row, "created_at")?,
    })
}

pub(super) fn agent(row: &AnyRow) -> Result<Agent, StoreError> {
    let kind: String = row.try_get("kind")?;
    Ok(Agent {
        id: row.try_get("id")?,
        human_id: row.try_get("human_id")?,
        name: row.try_get("name")?,
        kind: AgentKind::parse(&kind).ok_or_else(|| corrupt("agent kind", &kind))?,
        expected_interval_seconds: row.try_get("expected_interval_seconds")?,
        description: row.try_get("description")?,
        created_at: ts(row, "created_at")?,
        updated_at: ts(row, "updated_at")?,
    })
}

pub(super) fn api_token(row: &AnyRow) -> Result<ApiToken, StoreError> {
    Ok(ApiToken {
        id: row.try_get("id")?,
        human_id: row.try_get("human_id")?,
        prefix: row.try_get("token_prefix")?,
        label: row.try_get("label")?,
        created_at: ts(row, "created_at")?,
        expires_at: opt_ts(row, "expires_at")?,
        revoked_at: opt_ts(row, "revoked_at")?,
        last_used_at: opt_ts(row, "last_used_at")?,
    })
}

pub(super) fn intake_event(row: &AnyRow) -> Result<IntakeEvent, StoreError> {
    let headers: String = row.try_get("headers")?;
    Ok(IntakeEvent {
        id: row.try_get("id")?,
        endpoint_id: row.try_get("endpoint_id")?,
        webhook_id: row.try_get("webhook_id")?,
        trust_mode: row.try_get("trust_mode")?,
        actor: row.try_get("actor")?,
        received_at: ts(row, "received_at")?,
        headers: serde_json::from_str(&headers).unwrap_or(serde_json::Value::Null),
        content_type: row.try_get("content_type")?,
        body: row
            .try_get::<Option<Vec<u8>>, _>("body")?
            .unwrap_or_default(),
        body_size: row.try_get("body_size")?,
    })
}
