//! `/board/queues`: every queue of the human's active endpoints — pending,
//! in flight, retrying, the oldest pending age — with its admission (paused,
//! limits, held and until) and a pause toggle per endpoint and per queue
//! (`docs/queue.md`, "Admission"). Counts read the live todos only (the
//! pending, claimed and retry indexes), never the history.
//!
//! Under the table, charts of a range (`?range=hour|day|week`) for all the
//! human's active endpoints, one endpoint (`?endpoint=<slug>`) or one queue
//! (`&queue=<name>`), read from the stored activity buckets
//! (`domain::activity`): at most 168 per queue, whatever the history holds.
//! With one endpoint chosen, a push form for it.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::response::Response;

use super::refusal;
use crate::board::BoardState;
use crate::board::auth::Signed;
use crate::board::charts::{self, BucketRow, Chart};
use crate::board::error::BoardError;
use crate::board::form::CsrfForm;
use crate::board::view::{Layout, Messages, all_endpoints, back, relative, render};
use crate::domain::activity::{ActivityRange, series};
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
    dead_letters: i64,
    oldest: String,
    paused: bool,
    limits: String,
    /// `paused`, `in flight limit`, `window budget`, with when it reopens.
    held: String,
}

/// `?range=…&endpoint=…&queue=…`: what the charts show.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct ChartQuery {
    range: Option<String>,
    endpoint: Option<String>,
    queue: Option<String>,
}

/// A link of the range picker.
struct RangeLink {
    label: &'static str,
    href: String,
    current: bool,
}

/// The endpoint the charts (and the push form) are about, when one is chosen.
struct Chosen {
    slug: String,
    queues: Vec<String>,
    queue: Option<String>,
}

#[derive(Template)]
#[template(path = "board/queues.html")]
struct QueuesPage {
    layout: Layout,
    rows: Vec<QueueRow>,
    /// `all active endpoints`, `reviewer`, `reviewer / triage`.
    scope: String,
    ranges: Vec<RangeLink>,
    charts: Vec<Chart>,
    buckets: Vec<BucketRow>,
    chosen: Option<Chosen>,
    push_nonce: String,
    /// The link that keeps the charts as they are (the live region's URL).
    self_href: String,
}

fn href(range: ActivityRange, endpoint: Option<&str>, queue: Option<&str>) -> String {
    let mut pairs = vec![("range", range.as_str())];
    if let Some(e) = endpoint {
        pairs.push(("endpoint", e));
        if let Some(q) = queue {
            pairs.push(("queue", q));
        }
    }
    format!(
        "/board/queues?{}",
        serde_urlencoded::to_string(pairs).unwrap_or_default()
    )
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
    Query(query): Query<ChartQuery>,
) -> Result<Response, BoardError> {
    let now = state.store.clock().now();
    let range = query
        .range
        .as_deref()
        .and_then(ActivityRange::parse)
        .unwrap_or(ActivityRange::Hour);
    let mut rows = Vec::new();
    let mut charted: Vec<String> = Vec::new();
    let mut chosen: Option<Chosen> = None;
    for endpoint in all_endpoints(&state, &signed.human.id).await? {
        if !endpoint.is_active() {
            continue;
        }
        match query.endpoint.as_deref() {
            None | Some("") => charted.push(endpoint.id.clone()),
            Some(slug) if slug == endpoint.slug => {
                charted.push(endpoint.id.clone());
                chosen = Some(Chosen {
                    slug: endpoint.slug.clone(),
                    queues: endpoint.scope_queues.clone(),
                    queue: query
                        .queue
                        .clone()
                        .filter(|q| endpoint.scope_queues.contains(q)),
                });
            }
            Some(_) => {}
        }
        let summary = state
            .store
            .queue_summary(&endpoint.caller(), None, SUMMARY_TOP)
            .await?;
        let levels = state.store.unscoped_admission(&endpoint.id).await?;
        let dead = state
            .store
            .unscoped_dead_letters_by_queue(&endpoint.id)
            .await?;
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
            dead_letters: 0,
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
            let dead_letters = dead.iter().find(|(q, _)| q == queue).map_or(0, |(_, n)| *n);
            let at = counts.and_then(|c| c.oldest_pending_at);
            oldest = match (oldest, at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            total.pending += pending;
            total.in_flight += in_flight;
            total.retrying += retrying;
            total.dead_letters += dead_letters;
            let a = level(Some(queue));
            queue_rows.push(QueueRow {
                endpoint: endpoint.slug.clone(),
                queue: Some(queue.clone()),
                pending,
                in_flight,
                retrying,
                dead_letters,
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
    let mut layout = Layout::new(&signed, "queues", "Queues").with_messages(&messages);
    let (endpoint, queue) = match &chosen {
        Some(c) => (Some(c.slug.as_str()), c.queue.as_deref()),
        None => (None, None),
    };
    if query.endpoint.as_deref().is_some_and(|e| !e.is_empty()) && chosen.is_none() {
        layout.error = Some(format!(
            "endpoint: no active endpoint of yours is called {:?}; showing all of them",
            query.endpoint.as_deref().unwrap_or_default()
        ));
    }
    let stored = state
        .store
        .queue_activity(&charted, queue, range, range.first_bucket(now))
        .await?;
    let series = series(
        range,
        now,
        stored.into_iter().map(|row| (row.bucket_at, row.activity)),
    );
    let scope = match (endpoint, queue) {
        (None, _) => "all active endpoints".to_owned(),
        (Some(e), None) => e.to_owned(),
        (Some(e), Some(q)) => format!("{e} / {q}"),
    };
    let page = QueuesPage {
        layout,
        rows,
        scope,
        ranges: ActivityRange::ALL
            .into_iter()
            .map(|r| RangeLink {
                label: match r {
                    ActivityRange::Hour => "Last hour",
                    ActivityRange::Day => "Last day",
                    ActivityRange::Week => "Last week",
                },
                href: href(r, endpoint, queue),
                current: r == range,
            })
            .collect(),
        charts: vec![
            charts::throughput(range, &series),
            charts::latency(range, &series),
        ],
        buckets: charts::bucket_rows(&series),
        self_href: href(range, endpoint, queue),
        chosen,
        push_nonce: ops::forms::mint_nonce(),
    };
    Ok(render(&page))
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
