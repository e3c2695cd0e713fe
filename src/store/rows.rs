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
    ring_attempts, last_ringed_at, created_at, updated_at, claimed_at, completed_at, cancelled_by, priority, run_at"
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

/// A row whose columns can be read by name: sqlx's [`AnyRow`], or a
/// `rusqlite` row on SQLite's writer thread (`sql::sqlite::lane`). The
/// decoders below are written once against it.
pub(super) trait Columns {
    fn text(&self, col: &str) -> Result<String, StoreError>;
    fn opt_text(&self, col: &str) -> Result<Option<String>, StoreError>;
    fn int(&self, col: &str) -> Result<i64, StoreError>;
    fn opt_int(&self, col: &str) -> Result<Option<i64>, StoreError>;
}

impl Columns for AnyRow {
    fn text(&self, col: &str) -> Result<String, StoreError> {
        Ok(self.try_get(col)?)
    }
    fn opt_text(&self, col: &str) -> Result<Option<String>, StoreError> {
        Ok(self.try_get(col)?)
    }
    fn int(&self, col: &str) -> Result<i64, StoreError> {
        Ok(self.try_get(col)?)
    }
    fn opt_int(&self, col: &str) -> Result<Option<i64>, StoreError> {
        Ok(self.try_get(col)?)
    }
}

/// A `rusqlite` row read by name. rusqlite finds a named column by asking
/// SQLite for every column's name until one matches (B1 at c = 1: 7 % of
/// the SQLite loop's CPU went to decoding one todo); this asks once per
/// row. Decoders read the columns in the order the statement lists them,
/// so a lookup first tries the column after the last one found: one
/// comparison per field, no hashing (a `HashMap` built per row was ~1.5 %
/// of the loop's CPU).
pub(super) struct NamedRow<'r> {
    row: &'r rusqlite::Row<'r>,
    names: Vec<&'r str>,
    next: std::cell::Cell<usize>,
}

impl<'r> NamedRow<'r> {
    pub(super) fn new(row: &'r rusqlite::Row<'r>) -> Self {
        let statement = row.as_ref();
        let names = (0..statement.column_count())
            .map(|i| statement.column_name(i).unwrap_or(""))
            .collect();
        Self {
            row,
            names,
            next: std::cell::Cell::new(0),
        }
    }

    fn position(&self, col: &str) -> Option<usize> {
        let hint = self.next.get();
        let found = match self.names.get(hint) {
            Some(name) if *name == col => Some(hint),
            _ => self.names.iter().position(|name| *name == col),
        }?;
        self.next.set(found + 1);
        Some(found)
    }

    fn get<T: rusqlite::types::FromSql>(&self, col: &str) -> Result<T, StoreError> {
        let i = self
            .position(col)
            .ok_or_else(|| rusqlite::Error::InvalidColumnName(col.to_owned()))?;
        Ok(self.row.get(i)?)
    }
}

impl Columns for NamedRow<'_> {
    fn text(&self, col: &str) -> Result<String, StoreError> {
        self.get(col)
    }
    fn opt_text(&self, col: &str) -> Result<Option<String>, StoreError> {
        self.get(col)
    }
    fn int(&self, col: &str) -> Result<i64, StoreError> {
        self.get(col)
    }
    fn opt_int(&self, col: &str) -> Result<Option<i64>, StoreError> {
        self.get(col)
    }
}

fn corrupt(what: &str, value: &str) -> StoreError {
    StoreError::internal(format!("unexpected {what} {value:?} in the database"))
}

/// A text column that must hold one of a closed set of spellings.
fn required<T>(
    row: &impl Columns,
    col: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<T, StoreError> {
    let text = row.text(col)?;
    parse(&text).ok_or_else(|| corrupt(col, &text))
}

/// As [`required`], for a nullable column.
fn parsed<T>(
    row: &impl Columns,
    col: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Option<T>, StoreError> {
    let text = row.opt_text(col)?;
    text.map(|t| parse(&t).ok_or_else(|| corrupt(col, &t)))
        .transpose()
}

fn ts(row: &impl Columns, col: &str) -> Result<Timestamp, StoreError> {
    Ok(Timestamp::from_millis(row.int(col)?))
}

fn opt_ts(row: &impl Columns, col: &str) -> Result<Option<Timestamp>, StoreError> {
    Ok(row.opt_int(col)?.map(Timestamp::from_millis))
}

fn opt_json(row: &impl Columns, col: &str) -> Result<Option<serde_json::Value>, StoreError> {
    match row.opt_text(col)? {
        None => Ok(None),
        Some(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| StoreError::internal(format!("column {col} holds invalid JSON: {e}"))),
    }
}

pub(super) fn todo(row: &impl Columns) -> Result<Todo, StoreError> {
    let state_text = row.text("state")?;
    let state =
        TodoState::parse_field(&state_text, "state").map_err(|_| corrupt("state", &state_text))?;
    let next_retry_at = opt_ts(row, "next_retry_at")?;
    Ok(Todo {
        id: row.text("id")?,
        endpoint_id: row.text("endpoint_id")?,
        queue: row.text("queue")?,
        title: row.text("title")?,
        kind: row.opt_text("kind")?,
        source: row.opt_text("source")?,
        payload: opt_json(row, "payload")?,
        idempotency_key: row.opt_text("idempotency_key")?,
        event_id: row.opt_text("event_id")?,
        dead_letter: state == TodoState::Failed && next_retry_at.is_none(),
        state,
        owner: row.opt_text("owner")?,
        lease_expires_at: opt_ts(row, "lease_expires_at")?,
        fenced: row.opt_text("lease_token_hash")?.is_some(),
        attempt: row.int("attempt")?,
        max_attempts: row.int("max_attempts")?,
        attempts_total: row.int("attempts_total")?,
        attempts_pruned: row.int("attempts_pruned")?,
        next_retry_at,
        result: opt_json(row, "result")?,
        last_note: row.opt_text("last_note")?,
        ring_attempts: row.int("ring_attempts")?,
        last_ringed_at: opt_ts(row, "last_ringed_at")?,
        created_at: ts(row, "created_at")?,
        updated_at: ts(row, "updated_at")?,
        claimed_at: opt_ts(row, "claimed_at")?,
        completed_at: opt_ts(row, "completed_at")?,
        cancelled_by: row.opt_text("cancelled_by")?,
        priority: row.int("priority")?,
        run_at: opt_ts(row, "run_at")?,
    })
}

pub(super) fn attempt(row: &impl Columns) -> Result<Attempt, StoreError> {
    let outcome = match row.opt_text("outcome")? {
        None => None,
        Some(s) => Some(Outcome::parse(&s).ok_or_else(|| corrupt("outcome", &s))?),
    };
    let disposition = match row.opt_text("disposition")? {
        None => None,
        Some(s) => Some(Disposition::parse(&s).ok_or_else(|| corrupt("disposition", &s))?),
    };
    Ok(Attempt {
        seq: row.int("seq")?,
        attempt: row.int("attempt")?,
        claimant: row.opt_text("claimant")?,
        claimed_at: ts(row, "claimed_at")?,
        last_heartbeat_at: opt_ts(row, "last_heartbeat_at")?,
        note: row.opt_text("note")?,
        ended_at: opt_ts(row, "ended_at")?,
        died: outcome.is_some_and(Outcome::died),
        outcome,
        disposition,
        summary: row.opt_text("summary")?,
        summary_truncated: row.int("summary_truncated")? != 0,
    })
}

fn string_list(row: &impl Columns, col: &str) -> Result<Vec<String>, StoreError> {
    let text = row.text(col)?;
    serde_json::from_str(&text)
        .map_err(|e| StoreError::internal(format!("column {col} holds invalid JSON: {e}")))
}

pub(super) fn endpoint(row: &impl Columns) -> Result<Endpoint, StoreError> {
    Ok(Endpoint {
        id: row.text("id")?,
        agent_id: row.text("agent_id")?,
        human_id: row.text("human_id")?,
        slug: row.text("slug")?,
        credential_prefix: row.text("credential_prefix")?,
        scope_queues: string_list(row, "scope_queues")?,
        scope_verbs: string_list(row, "scope_verbs")?,
        state: required(row, "state", EndpointState::parse)?,
        created_at: ts(row, "created_at")?,
        revoked_at: opt_ts(row, "revoked_at")?,
        expires_at: opt_ts(row, "expires_at")?,
        last_seen_at: opt_ts(row, "last_seen_at")?,
        last_contact_at: opt_ts(row, "last_contact_at")?,
        default_lease_ttl_seconds: row.opt_int("default_lease_ttl_seconds")?,
        server_name_set: row.opt_text("server_name")?,
        last_note: row.opt_text("last_note")?,
        last_note_at: opt_ts(row, "last_note_at")?,
        shift: row.opt_text("shift")?,
        presence_override: parsed(row, "presence_override", Presence::parse)?,
        override_until: opt_ts(row, "override_until")?,
        override_set_at: opt_ts(row, "override_set_at")?,
        override_by: parsed(row, "override_by", OverrideBy::parse)?,
        presence_seen: required(row, "presence_seen", Presence::parse)?,
        presence_changed_at: opt_ts(row, "presence_changed_at")?,
        presence_changed_by: row.opt_text("presence_changed_by")?,
        agent_name: row.text("agent_name")?,
        agent_kind: {
            let kind = row.text("agent_kind")?;
            AgentKind::parse(&kind).ok_or_else(|| corrupt("agent kind", &kind))?
        },
        agent_expected_interval_seconds: row.opt_int("agent_expected_interval_seconds")?,
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
        session_of: row.try_get("session_of")?,
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

#[cfg(test)]
mod tests {
    use super::{Columns, NamedRow};

    /// In the statement's order, out of it, twice, and a name it lacks.
    #[test]
    fn a_named_row_finds_columns_in_any_order() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let mut stmt = conn
            .prepare("SELECT 'a' AS first, 2 AS second, NULL AS third")
            .unwrap();
        let mut rows = stmt.query([]).unwrap();
        let row = rows.next().unwrap().unwrap();
        let named = NamedRow::new(row);
        assert_eq!(named.text("first").unwrap(), "a");
        assert_eq!(named.int("second").unwrap(), 2);
        assert_eq!(named.opt_text("third").unwrap(), None);
        assert_eq!(named.int("second").unwrap(), 2);
        assert_eq!(named.text("first").unwrap(), "a");
        assert_eq!(named.opt_int("third").unwrap(), None);
        assert!(named.text("fourth").is_err());
        assert_eq!(named.int("second").unwrap(), 2);
    }
}
