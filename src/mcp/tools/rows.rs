//! The shapes agents see: full rows, compact rows, attempts.

use serde_json::{Value, json};

use crate::domain::Timestamp;
use crate::store::{Attempt, Todo};

fn ts(t: Option<Timestamp>) -> Value {
    t.map_or(Value::Null, |t| Value::String(t.to_rfc3339()))
}

/// `id, queue, title, kind, source, state, owner, attempt, max_attempts,
/// lease_expires_at, next_retry_at, dead_letter, created_at, payload`: every
/// key always present, `null` when absent.
pub fn full_row(t: &Todo) -> Value {
    json!({
        "id": t.id,
        "queue": t.queue,
        "title": t.title,
        "kind": t.kind,
        "source": t.source,
        "state": t.state.as_str(),
        "owner": t.owner,
        "attempt": t.attempt,
        "max_attempts": t.max_attempts,
        "lease_expires_at": ts(t.lease_expires_at),
        "next_retry_at": ts(t.next_retry_at),
        "dead_letter": t.dead_letter,
        "created_at": t.created_at.to_rfc3339(),
        "payload": t.payload,
    })
}

/// A list row: the full row without `payload`, with `payload_size` (bytes of JSON).
pub fn compact_row(t: &Todo) -> Value {
    let mut row = full_row(t);
    let size = t.payload.as_ref().map_or(0, |p| p.to_string().len());
    if let Some(obj) = row.as_object_mut() {
        obj.remove("payload");
        obj.insert("payload_size".into(), json!(size));
    }
    row
}

pub fn attempt(a: &Attempt) -> Value {
    json!({
        "seq": a.seq,
        "attempt": a.attempt,
        "claimant": a.claimant,
        "claimed_at": a.claimed_at.to_rfc3339(),
        "last_heartbeat_at": ts(a.last_heartbeat_at),
        "note": a.note,
        "ended_at": ts(a.ended_at),
        "outcome": a.outcome.map(|o| o.as_str()),
        "disposition": a.disposition.map(|d| d.as_str()),
        "died": a.died,
        "summary": a.summary,
        "summary_truncated": a.summary_truncated,
    })
}
