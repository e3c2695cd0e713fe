//! The shapes agents see: full rows, compact rows, attempts, and each tool's
//! result. Every key is always present (`null` when absent) unless said.
//!
//! Results reach the client as `serde_json::Value` (`structuredContent`,
//! and its text), whose objects keep their keys sorted: the field order
//! here does not show on the wire.

use serde::Serialize;
use serde_json::Value;

use crate::domain::Timestamp;
use crate::domain::lease::{
    DEFAULT_LEASE_SECONDS, MAX_LEASE_SECONDS, MIN_ENDPOINT_DEFAULT_LEASE_SECONDS,
};
use crate::ops::Answer;
use crate::store::{Attempt, Claimed, QueueSummary, StoreResult, SummaryGroups, Todo};

fn ts(t: Option<Timestamp>) -> Option<String> {
    t.map(|t| t.to_rfc3339())
}

/// The columns shared by full and compact rows.
#[derive(Debug, Serialize)]
pub struct RowHead<'a> {
    pub id: &'a str,
    pub queue: &'a str,
    pub title: &'a str,
    pub kind: Option<&'a str>,
    pub source: Option<&'a str>,
    pub state: &'static str,
    pub owner: Option<&'a str>,
    pub attempt: i64,
    pub max_attempts: i64,
    pub lease_expires_at: Option<String>,
    pub next_retry_at: Option<String>,
    pub dead_letter: bool,
    pub created_at: String,
}

impl<'a> RowHead<'a> {
    fn of(t: &'a Todo) -> Self {
        Self {
            id: &t.id,
            queue: &t.queue,
            title: &t.title,
            kind: t.kind.as_deref(),
            source: t.source.as_deref(),
            state: t.state.as_str(),
            owner: t.owner.as_deref(),
            attempt: t.attempt,
            max_attempts: t.max_attempts,
            lease_expires_at: ts(t.lease_expires_at),
            next_retry_at: ts(t.next_retry_at),
            dead_letter: t.dead_letter,
            created_at: t.created_at.to_rfc3339(),
        }
    }
}

/// `id, queue, title, kind, source, state, owner, attempt, max_attempts,
/// lease_expires_at, next_retry_at, dead_letter, created_at, payload`.
#[derive(Debug, Serialize)]
pub struct FullRow<'a> {
    #[serde(flatten)]
    pub head: RowHead<'a>,
    /// `null` when a claim result left it out (see [`PayloadCut`]).
    pub payload: Option<&'a Value>,
    #[serde(flatten)]
    pub cut: Option<PayloadCut>,
}

pub fn full_row(t: &Todo) -> FullRow<'_> {
    FullRow {
        head: RowHead::of(t),
        payload: t.payload.as_ref(),
        cut: None,
    }
}

/// `id, queue, state, attempt, max_attempts, lease_expires_at,
/// next_retry_at, dead_letter`: what `heartbeat`, `complete`, `fail` and
/// `release` answer. Never the title or payload: the agent has them from
/// its claim, and a webhook's payload is often 15 KB (spec 03, "A short
/// row").
#[derive(Debug, Serialize)]
pub struct ShortRow<'a> {
    pub id: &'a str,
    pub queue: &'a str,
    pub state: &'static str,
    pub attempt: i64,
    pub max_attempts: i64,
    pub lease_expires_at: Option<String>,
    pub next_retry_at: Option<String>,
    pub dead_letter: bool,
}

pub fn short_row(t: &Todo) -> ShortRow<'_> {
    ShortRow {
        id: &t.id,
        queue: &t.queue,
        state: t.state.as_str(),
        attempt: t.attempt,
        max_attempts: t.max_attempts,
        lease_expires_at: ts(t.lease_expires_at),
        next_retry_at: ts(t.next_retry_at),
        dead_letter: t.dead_letter,
    }
}

/// How much of a payload a claim result previews when it leaves the payload out.
pub const PAYLOAD_PREVIEW_BYTES: usize = 1024;

/// In a claim result, in place of a payload over the inline limit: its
/// size, the start of its JSON text, and `payload_truncated: true`
/// (`get_todo` returns it whole).
#[derive(Debug, Serialize)]
pub struct PayloadCut {
    /// Bytes of the payload's JSON text.
    pub payload_size: usize,
    /// The first [`PAYLOAD_PREVIEW_BYTES`] (at most) of that text, cut on a
    /// character boundary.
    pub payload_preview: String,
    pub payload_truncated: bool,
}

/// The full row of a claim result: the payload inline when its JSON text is
/// at most `inline_max` bytes, else `payload: null` and a [`PayloadCut`].
pub fn claim_row(t: &Todo, inline_max: usize) -> FullRow<'_> {
    let mut row = full_row(t);
    if let Some(payload) = &t.payload {
        let text = payload.to_string();
        if text.len() > inline_max {
            row.payload = None;
            row.cut = Some(PayloadCut {
                payload_size: text.len(),
                payload_preview: crate::domain::text::cut_to_bytes(&text, PAYLOAD_PREVIEW_BYTES)
                    .to_owned(),
                payload_truncated: true,
            });
        }
    }
    row
}

/// A list row: the full row without `payload`, with `payload_size` (bytes of JSON).
#[derive(Debug, Serialize)]
pub struct CompactRow<'a> {
    #[serde(flatten)]
    pub head: RowHead<'a>,
    pub payload_size: usize,
}

pub fn compact_row(t: &Todo) -> CompactRow<'_> {
    CompactRow {
        head: RowHead::of(t),
        payload_size: t.payload.as_ref().map_or(0, |p| p.to_string().len()),
    }
}

#[derive(Debug, Serialize)]
pub struct AttemptRow<'a> {
    pub seq: i64,
    pub attempt: i64,
    pub claimant: Option<&'a str>,
    pub claimed_at: String,
    pub last_heartbeat_at: Option<String>,
    pub note: Option<&'a str>,
    pub ended_at: Option<String>,
    pub outcome: Option<&'static str>,
    pub disposition: Option<&'static str>,
    pub died: bool,
    pub summary: Option<&'a str>,
    pub summary_truncated: bool,
}

pub fn attempt(a: &Attempt) -> AttemptRow<'_> {
    AttemptRow {
        seq: a.seq,
        attempt: a.attempt,
        claimant: a.claimant.as_deref(),
        claimed_at: a.claimed_at.to_rfc3339(),
        last_heartbeat_at: ts(a.last_heartbeat_at),
        note: a.note.as_deref(),
        ended_at: ts(a.ended_at),
        outcome: a.outcome.map(|o| o.as_str()),
        disposition: a.disposition.map(|d| d.as_str()),
        died: a.died,
        summary: a.summary.as_deref(),
        summary_truncated: a.summary_truncated,
    }
}

/// How much of each prior attempt's free text a claim result carries (the
/// whole is in `get_todo`'s `attempts`): `summary`, heartbeat `note` and
/// `claimant`, in bytes. A claim result stays small whatever the history
/// (`docs/mcp.md`: at most 1.25 x the payload + 4 KiB); the tools try
/// [`PriorCut::LEVELS`] in turn until it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriorCut {
    pub summary: usize,
    pub note: usize,
    pub claimant: usize,
}

impl PriorCut {
    /// Nothing cut.
    pub const WHOLE: PriorCut = PriorCut {
        summary: usize::MAX,
        note: usize::MAX,
        claimant: usize::MAX,
    };

    /// Shorter and shorter; the last leaves the free text out.
    pub const LEVELS: [PriorCut; 3] = [
        PriorCut {
            summary: 160,
            note: 80,
            claimant: 128,
        },
        PriorCut {
            summary: 48,
            note: 24,
            claimant: 24,
        },
        PriorCut {
            summary: 0,
            note: 0,
            claimant: 0,
        },
    ];
}

/// An attempt as a claim's `prior_attempts` shows it: its free text cut to
/// `cut` (`summary_truncated` says when the summary was; a text cut to
/// nothing is `null`).
pub fn prior_attempt(a: &Attempt, cut: PriorCut) -> AttemptRow<'_> {
    fn shorten(text: Option<&str>, max: usize) -> Option<&str> {
        text.map(|t| crate::domain::text::cut_to_bytes(t, max))
            .filter(|t| !t.is_empty() || max > 0)
    }
    let mut row = attempt(a);
    let summary = shorten(row.summary, cut.summary);
    row.summary_truncated |= summary.map_or(0, str::len) < row.summary.map_or(0, str::len);
    row.summary = summary;
    row.note = shorten(row.note, cut.note);
    row.claimant = shorten(row.claimant, cut.claimant);
    row
}

/// `list_todos`.
#[derive(Debug, Serialize)]
pub struct TodoList<'a> {
    pub todos: Vec<CompactRow<'a>>,
}

impl<'a> TodoList<'a> {
    pub fn of(todos: &'a [Todo]) -> Self {
        Self {
            todos: todos.iter().map(compact_row).collect(),
        }
    }
}

/// `get_todo`: the full row with the result and the attempt history.
#[derive(Debug, Serialize)]
pub struct TodoDetail<'a> {
    #[serde(flatten)]
    pub row: FullRow<'a>,
    pub result: Option<&'a Value>,
    pub attempts: Vec<AttemptRow<'a>>,
    pub attempts_total: i64,
    pub attempts_pruned: i64,
}

impl<'a> TodoDetail<'a> {
    pub fn of(todo: &'a Todo, attempts: &'a [Attempt]) -> Self {
        Self {
            row: full_row(todo),
            result: todo.result.as_ref(),
            attempts: attempts.iter().map(attempt).collect(),
            attempts_total: todo.attempts_total,
            attempts_pruned: todo.attempts_pruned,
        }
    }
}

/// What a claim adds beside the row; `lease_token` only for a fenced claim.
#[derive(Debug, Serialize)]
pub struct ClaimExtras<'a> {
    pub attempt_seq: i64,
    pub attempts_total: i64,
    pub prior_attempts: Vec<AttemptRow<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_token: Option<&'a str>,
}

impl<'a> ClaimExtras<'a> {
    fn of(claimed: &'a Claimed, cut: PriorCut) -> Self {
        Self {
            attempt_seq: claimed.attempt_seq,
            attempts_total: claimed.todo.attempts_total,
            prior_attempts: claimed
                .prior_attempts
                .iter()
                .map(|a| prior_attempt(a, cut))
                .collect(),
            lease_token: claimed.lease_token.as_deref(),
        }
    }
}

/// `claim`: the row and the claim's extras, side by side.
#[derive(Debug, Serialize)]
pub struct ClaimedRow<'a> {
    #[serde(flatten)]
    pub row: FullRow<'a>,
    #[serde(flatten)]
    pub extras: ClaimExtras<'a>,
}

impl<'a> ClaimedRow<'a> {
    /// With the payload inline up to `inline_max` bytes (see [`claim_row`])
    /// and the prior attempts' free text cut to `cut`.
    pub fn of(claimed: &'a Claimed, inline_max: usize, cut: PriorCut) -> Self {
        Self {
            row: claim_row(&claimed.todo, inline_max),
            extras: ClaimExtras::of(claimed, cut),
        }
    }
}

/// `claim_next`: `{"empty": true}`, or the row under `todo` with the
/// claim's extras beside it.
#[derive(Debug, Serialize)]
pub struct NextClaim<'a> {
    pub empty: bool,
    /// Why nothing may be claimed, when admission holds the work:
    /// `paused`, `in_flight_limit` or `window_budget`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<&'static str>,
    /// When a window budget reopens (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub todo: Option<FullRow<'a>>,
    #[serde(flatten)]
    pub extras: Option<ClaimExtras<'a>>,
}

impl<'a> NextClaim<'a> {
    /// With the payload inline up to `inline_max` bytes (see [`claim_row`])
    /// and the prior attempts' free text cut to `cut`.
    pub fn of(claimed: Option<&'a Claimed>, inline_max: usize, cut: PriorCut) -> Self {
        Self {
            empty: claimed.is_none(),
            held: None,
            until: None,
            todo: claimed.map(|c| claim_row(&c.todo, inline_max)),
            extras: claimed.map(|c| ClaimExtras::of(c, cut)),
        }
    }
}

impl NextClaim<'_> {
    /// An empty answer with admission's reason, if it holds the work.
    pub fn held(mut self, held: Option<crate::domain::admission::Held>) -> Self {
        if let Some(held) = held {
            self.held = Some(held.reason.as_str());
            self.until = held.until.map(|t| t.to_rfc3339());
        }
        self
    }
}

/// `get_default_lease`, `set_default_lease`.
#[derive(Debug, Serialize)]
pub struct LeaseView {
    pub default_lease_ttl_seconds: Option<i64>,
    pub effective_lease_ttl_seconds: i64,
    pub server_default_lease_ttl_seconds: i64,
    pub min: i64,
    pub max: i64,
}

impl LeaseView {
    pub fn of(default: Option<i64>) -> Self {
        Self {
            default_lease_ttl_seconds: default,
            effective_lease_ttl_seconds: crate::domain::lease::effective_lease_seconds(default),
            server_default_lease_ttl_seconds: DEFAULT_LEASE_SECONDS,
            min: MIN_ENDPOINT_DEFAULT_LEASE_SECONDS,
            max: MAX_LEASE_SECONDS,
        }
    }
}

/// `queue_summary`: counts only (`docs/mcp.md`), a few hundred bytes.
#[derive(Debug, Serialize)]
pub struct SummaryView<'a> {
    pub queues: Vec<QueueView<'a>>,
    pub pending: i64,
    pub claimed: i64,
    pub held: i64,
    pub oldest_pending_age_seconds: Option<i64>,
    pub pending_by_kind: GroupsView<'a>,
    pub pending_by_source: GroupsView<'a>,
    pub pending_by_sender: GroupsView<'a>,
}

#[derive(Debug, Serialize)]
pub struct QueueView<'a> {
    pub queue: &'a str,
    pub pending: i64,
    pub claimed: i64,
    pub held: i64,
    pub oldest_pending_age_seconds: Option<i64>,
}

#[derive(Debug, Serialize)]
pub struct GroupsView<'a> {
    pub top: Vec<GroupView<'a>>,
    pub other: i64,
}

#[derive(Debug, Serialize)]
pub struct GroupView<'a> {
    pub value: Option<&'a str>,
    pub pending: i64,
}

impl<'a> GroupsView<'a> {
    fn of(groups: &'a SummaryGroups) -> Self {
        Self {
            top: groups
                .top
                .iter()
                .map(|(value, pending)| GroupView {
                    value: value.as_deref(),
                    pending: *pending,
                })
                .collect(),
            other: groups.other,
        }
    }
}

impl<'a> SummaryView<'a> {
    /// Ages are whole seconds before `now`.
    pub fn of(summary: &'a QueueSummary, now: Timestamp) -> Self {
        let age =
            |at: Option<Timestamp>| at.map(|at| (now.as_millis() - at.as_millis()).max(0) / 1000);
        let queues: Vec<QueueView<'a>> = summary
            .queues
            .iter()
            .map(|q| QueueView {
                queue: &q.queue,
                pending: q.pending,
                claimed: q.claimed,
                held: q.held,
                oldest_pending_age_seconds: age(q.oldest_pending_at),
            })
            .collect();
        Self {
            pending: queues.iter().map(|q| q.pending).sum(),
            claimed: queues.iter().map(|q| q.claimed).sum(),
            held: queues.iter().map(|q| q.held).sum(),
            oldest_pending_age_seconds: queues
                .iter()
                .filter_map(|q| q.oldest_pending_age_seconds)
                .max(),
            queues,
            pending_by_kind: GroupsView::of(&summary.pending_by_kind),
            pending_by_source: GroupsView::of(&summary.pending_by_source),
            pending_by_sender: GroupsView::of(&summary.pending_by_sender),
        }
    }
}

/// `complete_many`: per id `ok` or the error code, never a row.
#[derive(Debug, Serialize)]
pub struct CompletedMany<'a> {
    pub results: Vec<CompletedOne<'a>>,
    pub completed: usize,
}

#[derive(Debug, Serialize)]
pub struct CompletedOne<'a> {
    pub id: &'a str,
    pub status: &'static str,
}

impl<'a> CompletedMany<'a> {
    /// `answers` in the order of `ids`; a refusal by its code.
    pub fn of(ids: &'a [String], answers: &[StoreResult<Todo>]) -> Self {
        let results: Vec<CompletedOne<'a>> = ids
            .iter()
            .zip(answers)
            .map(|(id, answer)| CompletedOne {
                id,
                status: match answer {
                    Ok(_) => "ok",
                    Err(err) => Answer::of(err).code,
                },
            })
            .collect();
        Self {
            completed: answers.iter().filter(|a| a.is_ok()).count(),
            results,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::todo::{Disposition, Outcome, TodoState};

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millis(1_700_000_000_000 + ms)
    }

    fn todo(full: bool) -> Todo {
        let some = |s: &str| full.then(|| s.to_owned());
        Todo {
            id: "td_1".into(),
            endpoint_id: "ep_1".into(),
            queue: "inbox".into(),
            title: "a title".into(),
            kind: some("k"),
            source: some("s"),
            payload: full.then(|| json!({"b": [1, 2], "a": "x"})),
            idempotency_key: some("idem"),
            event_id: some("ev"),
            state: if full {
                TodoState::Claimed
            } else {
                TodoState::Pending
            },
            dead_letter: full,
            owner: some("agent"),
            lease_expires_at: full.then(|| at(1)),
            fenced: full,
            attempt: 2,
            max_attempts: 5,
            attempts_total: 3,
            attempts_pruned: 1,
            next_retry_at: full.then(|| at(2)),
            result: full.then(|| json!({"ok": true})),
            last_note: some("note"),
            ring_attempts: 0,
            last_ringed_at: None,
            created_at: at(0),
            updated_at: at(3),
            claimed_at: full.then(|| at(4)),
            completed_at: None,
            cancelled_by: None,
            priority: 0,
            run_at: None,
        }
    }

    fn attempt_of(full: bool) -> Attempt {
        let some = |s: &str| full.then(|| s.to_owned());
        Attempt {
            seq: 7,
            attempt: 1,
            claimant: some("me"),
            claimed_at: at(5),
            last_heartbeat_at: full.then(|| at(6)),
            note: some("n"),
            ended_at: full.then(|| at(7)),
            outcome: full.then_some(Outcome::Failed),
            disposition: full.then_some(Disposition::RetryScheduled),
            died: full,
            summary: some("sum"),
            summary_truncated: full,
        }
    }

    // The json! builders these types replaced, kept as the oracle.
    fn old_ts(t: Option<Timestamp>) -> Value {
        t.map_or(Value::Null, |t| Value::String(t.to_rfc3339()))
    }

    fn old_full_row(t: &Todo) -> Value {
        json!({
            "id": t.id, "queue": t.queue, "title": t.title, "kind": t.kind,
            "source": t.source, "state": t.state.as_str(), "owner": t.owner,
            "attempt": t.attempt, "max_attempts": t.max_attempts,
            "lease_expires_at": old_ts(t.lease_expires_at),
            "next_retry_at": old_ts(t.next_retry_at), "dead_letter": t.dead_letter,
            "created_at": t.created_at.to_rfc3339(), "payload": t.payload,
        })
    }

    fn old_attempt(a: &Attempt) -> Value {
        json!({
            "seq": a.seq, "attempt": a.attempt, "claimant": a.claimant,
            "claimed_at": a.claimed_at.to_rfc3339(),
            "last_heartbeat_at": old_ts(a.last_heartbeat_at), "note": a.note,
            "ended_at": old_ts(a.ended_at), "outcome": a.outcome.map(|o| o.as_str()),
            "disposition": a.disposition.map(|d| d.as_str()), "died": a.died,
            "summary": a.summary, "summary_truncated": a.summary_truncated,
        })
    }

    fn old_claim_extras(out: &mut Value, claimed: &Claimed) {
        let obj = out.as_object_mut().unwrap();
        obj.insert("attempt_seq".into(), json!(claimed.attempt_seq));
        obj.insert("attempts_total".into(), json!(claimed.todo.attempts_total));
        obj.insert(
            "prior_attempts".into(),
            claimed.prior_attempts.iter().map(old_attempt).collect(),
        );
        if let Some(token) = &claimed.lease_token {
            obj.insert("lease_token".into(), json!(token));
        }
    }

    /// Same JSON, and the same text once it is a `Value` (what `ok` sends).
    fn same(new: impl Serialize, old: Value) {
        let new = serde_json::to_value(new).unwrap();
        assert_eq!(new, old);
        assert_eq!(new.to_string(), old.to_string());
    }

    #[test]
    fn rows_are_what_the_json_builders_made() {
        for full in [true, false] {
            let t = todo(full);
            same(full_row(&t), old_full_row(&t));

            let mut compact = old_full_row(&t);
            let obj = compact.as_object_mut().unwrap();
            obj.remove("payload");
            let size = t.payload.as_ref().map_or(0, |p| p.to_string().len());
            obj.insert("payload_size".into(), json!(size));
            same(compact_row(&t), compact.clone());
            let todos = vec![t.clone(), t.clone()];
            same(
                TodoList::of(&todos),
                json!({"todos": [compact.clone(), compact]}),
            );

            let attempts = vec![attempt_of(true), attempt_of(false)];
            let mut detail = old_full_row(&t);
            let obj = detail.as_object_mut().unwrap();
            obj.insert("result".into(), t.result.clone().unwrap_or(Value::Null));
            obj.insert(
                "attempts".into(),
                attempts.iter().map(old_attempt).collect(),
            );
            obj.insert("attempts_total".into(), json!(t.attempts_total));
            obj.insert("attempts_pruned".into(), json!(t.attempts_pruned));
            same(TodoDetail::of(&t, &attempts), detail);

            let claimed = Claimed {
                todo: t.clone(),
                attempt_seq: 9,
                prior_attempts: attempts.clone(),
                lease_token: full.then(|| "lt_x".to_owned()),
            };
            let mut row = old_full_row(&t);
            old_claim_extras(&mut row, &claimed);
            same(ClaimedRow::of(&claimed, usize::MAX, PriorCut::WHOLE), row);

            let mut next = json!({"empty": false, "todo": old_full_row(&t)});
            old_claim_extras(&mut next, &claimed);
            same(
                NextClaim::of(Some(&claimed), usize::MAX, PriorCut::WHOLE),
                next,
            );
        }
        same(
            NextClaim::of(None, 0, PriorCut::WHOLE),
            json!({"empty": true}),
        );
    }

    #[test]
    fn claim_rows_leave_large_payloads_out() {
        let mut t = todo(true);
        // Multi-byte characters, so the preview must find a boundary.
        let big = "é".repeat(2000);
        t.payload = Some(json!({"text": big}));
        let size = t.payload.as_ref().unwrap().to_string().len();

        let inline = serde_json::to_value(claim_row(&t, size)).unwrap();
        assert_eq!(inline["payload"], *t.payload.as_ref().unwrap());
        assert!(inline.get("payload_truncated").is_none());

        let cut = serde_json::to_value(claim_row(&t, size - 1)).unwrap();
        assert_eq!(cut["payload"], Value::Null);
        assert_eq!(cut["payload_truncated"], true);
        assert_eq!(cut["payload_size"], size);
        let preview = cut["payload_preview"].as_str().unwrap();
        assert!(preview.len() <= PAYLOAD_PREVIEW_BYTES && preview.len() > 1000);
        assert!(t.payload.as_ref().unwrap().to_string().starts_with(preview));

        // No payload: nothing to leave out.
        let empty = serde_json::to_value(claim_row(&todo(false), 0)).unwrap();
        assert_eq!(empty["payload"], Value::Null);
        assert!(empty.get("payload_truncated").is_none());
    }

    /// The worst history and labels the store allows, every character one
    /// JSON must escape: a claim result (as sent: the summary text beside
    /// `structuredContent`) still costs at most 1.25 x the payload + 4 KiB,
    /// whole JSON-RPC answer included.
    #[test]
    fn claim_results_stay_within_their_budget() {
        use crate::domain::todo::{
            MAX_CLAIMANT_BYTES, MAX_LABEL_BYTES, MAX_NOTE_BYTES, MAX_SUMMARY_BYTES,
            MAX_TITLE_BYTES, PRIOR_ATTEMPTS_ON_CLAIM,
        };
        let quotes = |n: usize| "\"".repeat(n);
        let mut t = todo(true);
        t.id = format!("td_{}", "0".repeat(32));
        t.queue = "q".repeat(64);
        t.title = quotes(MAX_TITLE_BYTES);
        t.kind = Some(quotes(MAX_LABEL_BYTES));
        t.source = Some(quotes(MAX_LABEL_BYTES));
        t.owner = Some(format!("agent:ag_{}", "0".repeat(32)));
        let mut prior = attempt_of(true);
        prior.claimant = Some(quotes(MAX_CLAIMANT_BYTES));
        prior.summary = Some(quotes(MAX_SUMMARY_BYTES));
        prior.note = Some(quotes(MAX_NOTE_BYTES));
        let inline_max = 16 * 1024;
        for payload_bytes in [0, 100, 4_000, inline_max - 20, inline_max + 100, 200_000] {
            t.payload = (payload_bytes > 0).then(|| json!("\"".repeat(payload_bytes / 2)));
            let size = t.payload.as_ref().map_or(0, |p| p.to_string().len());
            let claimed = Claimed {
                todo: t.clone(),
                attempt_seq: 99,
                prior_attempts: vec![prior.clone(); PRIOR_ATTEMPTS_ON_CLAIM as usize],
                lease_token: Some(format!("lt_{}", "0".repeat(32))),
            };
            for by_id in [false, true] {
                let result = super::super::claim_result(&claimed, by_id, inline_max).unwrap();
                let answer = crate::mcp::jsonrpc::success(&json!(123_456), result);
                let bytes = answer.to_string().len();
                let budget = size + size / 4 + 4096;
                assert!(
                    bytes <= budget,
                    "{bytes} bytes for a {size}-byte payload (budget {budget})"
                );
            }
        }
    }

    #[test]
    fn prior_attempts_in_claims_are_cut_short() {
        let mut a = attempt_of(true);
        a.summary = Some("é".repeat(1000));
        a.summary_truncated = false;
        a.note = Some("n".repeat(500));
        let first = PriorCut::LEVELS[0];
        let row = prior_attempt(&a, first);
        assert!(row.summary.unwrap().len() <= first.summary);
        assert!(row.summary_truncated);
        assert_eq!(row.note.unwrap().len(), first.note);
        assert_eq!(row.claimant, Some("me"));
        let short = attempt_of(true);
        let row = prior_attempt(&short, first);
        assert_eq!((row.summary, row.note), (Some("sum"), Some("n")));
        let none = prior_attempt(&a, PriorCut::LEVELS[2]);
        assert_eq!((none.summary, none.note, none.claimant), (None, None, None));
        assert!(none.summary_truncated);
        // get_todo's attempts are whole.
        assert_eq!(attempt(&a).summary.unwrap().len(), 2000);
    }

    #[test]
    fn lease_view_shape() {
        for default in [None, Some(600)] {
            same(
                LeaseView::of(default),
                json!({
                    "default_lease_ttl_seconds": default,
                    "effective_lease_ttl_seconds": default.unwrap_or(DEFAULT_LEASE_SECONDS),
                    "server_default_lease_ttl_seconds": DEFAULT_LEASE_SECONDS,
                    "min": MIN_ENDPOINT_DEFAULT_LEASE_SECONDS,
                    "max": MAX_LEASE_SECONDS,
                }),
            );
        }
    }
}
