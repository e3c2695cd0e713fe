//! `/board/queues`: every queue of the human's active endpoints — pending,
//! in flight, retrying, the oldest pending age — with its admission (paused,
//! limits, held and until) and a pause toggle per endpoint and per queue
//! (`docs/queue.md`, "Admission"). Counts read the live todos only (the
//! pending, claimed and retry indexes), never the history.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::response::Response;

use super::refusal;
use crate::board::BoardState;
use crate::board::auth::Signed;
use crate::board::error::BoardError;
use crate::board::form::CsrfForm;
use crate::board::view::{Layout, Messages, all_endpoints, back, relative, render};
use crate::domain::admission::held;
use crate::domain::doorbell::age_label;
use crate::ops;
use crate::store::{Admission, SUMMARY_TOP};

/// One row: a queue of an endpoint, or the endpoint as a whole.
struct QueueRow {
    endpoint: String,
    /// `None`: the endpoint's own row (all its queues).
    queue: Option<String>,
    pending: i64,
    in_flight: i64,
    retrying: i64,
    oldest: String,
    paused: bool,
    limits: String,
    /// `paused`, `in flight limit`, `window budget`, with when it reopens.
    held: String,
}

#[derive(Template)]
#[template(path = "board/queues.html")]
struct QueuesPage {
    layout: Layout,
    rows: Vec<QueueRow>,
}

fn limits_text(a: Option<&Admission>) -> String {
    let Some(a) = a else {
        return String::new();
    };
    let mut parts = Vec::new();
    if let Some(n) = a.limits.max_in_flight {
        parts.push(format!("{}/{n} in flight", a.usage.in_flight));
    }
    if let (Some(w), Some(n)) = (a.limits.window, a.limits.max_claims_per_window) {
        parts.push(format!(
            "{n} claims per {}",
            age_label(w.as_millis() as i64)
        ));
    }
    parts.join(", ")
}

pub(crate) async fn page(
    State(state): State<BoardState>,
    signed: Signed,
    Query(messages): Query<Messages>,
) -> Result<Response, BoardError> {
    let now = state.store.clock().now();
    let mut rows = Vec::new();
    for endpoint in all_endpoints(&state, &signed.human.id).await? {
        if !endpoint.is_active() {
            continue;
        }
        let summary = state
            .store
            .queue_summary(&endpoint.caller(), None, SUMMARY_TOP)
            .await?;
        let levels = state.store.unscoped_admission(&endpoint.id).await?;
        let level = |queue: Option<&str>| levels.iter().find(|a| a.queue.as_deref() == queue);
        let hold_text = |a: Option<&Admission>| {
            a.and_then(|a| held(&a.limits, &a.usage, now))
                .map(|h| match h.until {
                    Some(until) => format!(
                        "{} until {} ({})",
                        h.reason.as_str().replace('_', " "),
                        until.to_rfc3339(),
                        relative(now, until)
                    ),
                    None => h.reason.as_str().replace('_', " "),
                })
                .unwrap_or_default()
        };
        let mut total = QueueRow {
            endpoint: endpoint.slug.clone(),
            queue: None,
            pending: 0,
            in_flight: 0,
            retrying: 0,
            oldest: String::new(),
            paused: level(None).is_some_and(|a| a.limits.paused),
            limits: limits_text(level(None)),
            held: hold_text(level(None)),
        };
        let mut oldest: Option<crate::domain::Timestamp> = None;
        let mut queue_rows = Vec::new();
        for queue in &endpoint.scope_queues {
            let counts = summary.queues.iter().find(|q| &q.queue == queue);
            let (pending, in_flight, retrying) =
                counts.map_or((0, 0, 0), |c| (c.pending, c.claimed, c.held));
            let at = counts.and_then(|c| c.oldest_pending_at);
            oldest = match (oldest, at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            total.pending += pending;
            total.in_flight += in_flight;
            total.retrying += retrying;
            let a = level(Some(queue));
            queue_rows.push(QueueRow {
                endpoint: endpoint.slug.clone(),
                queue: Some(queue.clone()),
                pending,
                in_flight,
                retrying,
                oldest: at
                    .map(|t| age_label(now.as_millis() - t.as_millis()))
                    .unwrap_or_default(),
                paused: a.is_some_and(|a| a.limits.paused),
                limits: limits_text(a),
                held: hold_text(a),
            });
        }
        total.oldest = oldest
            .map(|t| age_label(now.as_millis() - t.as_millis()))
            .unwrap_or_default();
        rows.push(total);
        rows.extend(queue_rows);
    }
    let layout = Layout::new(&signed, "queues", "Queues").with_messages(&messages);
    Ok(render(&QueuesPage { layout, rows }))
}

/// Pauses or resumes claims on an endpoint (`queue` empty) or one of its
/// queues, keeping the level's limits; resuming sends one digest of what
/// waited.
pub(crate) async fn set_paused(
    State(state): State<BoardState>,
    Path(slug): Path<String>,
    form: CsrfForm,
) -> Result<Response, BoardError> {
    let human = &form.signed.human.id;
    let endpoint = state.store.get_endpoint(human, &slug).await?;
    let queue = form.fields.text("queue").map(str::to_owned);
    let paused = form.fields.text("paused") == Some("true");
    let what = match &queue {
        Some(q) => format!("{} queue {q}", endpoint.slug),
        None => endpoint.slug.clone(),
    };
    let outcome = ops::admission::set_paused(
        &state.delivery,
        human,
        &endpoint.id,
        queue.as_deref(),
        paused,
    )
    .await
    .map(|_| {
        if paused {
            format!("{what}: claims paused")
        } else {
            format!("{what}: claims resumed")
        }
    })
    .map_err(refusal);
    Ok(back("/board/queues", outcome))
}
