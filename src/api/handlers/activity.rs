//! A queue's activity over time (`docs/board.md`, "Queues";
//! `domain::activity`): `GET /api/v1/endpoints/{ref}/activity`, the numbers
//! the board's charts draw, for scripts and dashboards of one's own.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::api::ApiState;
use crate::api::extract::{ApiPath, ApiQuery, HumanAuth};
use crate::domain::Invalid;
use crate::domain::activity::{Activity, ActivityRange, LatencyHistogram, series};
use crate::http::error::{ApiResult, ErrorBody, NamedEndpoint};

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct ActivityQuery {
    /// `hour` (per minute, the default), `day` (per quarter hour) or `week`
    /// (per hour).
    pub range: Option<String>,
    /// One queue of the endpoint's scope; all of them when left out.
    pub queue: Option<String>,
}

/// What happened in one interval, or over the whole range.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct QueueActivityNumbers {
    pub created: u64,
    pub completed: u64,
    /// `fail` calls and lapsed leases (retried or not).
    pub failed: u64,
    pub dead_lettered: u64,
    /// From ready (created, or `run_at`) to the first claim, in ms: the
    /// upper bound of the √2-wide bin holding the percentile; null without
    /// a claim.
    pub claim_p50_ms: Option<i64>,
    pub claim_p95_ms: Option<i64>,
    pub claim_p99_ms: Option<i64>,
    /// From ready to done, in ms, likewise.
    pub complete_p50_ms: Option<i64>,
    pub complete_p95_ms: Option<i64>,
    pub complete_p99_ms: Option<i64>,
}

impl QueueActivityNumbers {
    fn of(a: &Activity) -> Self {
        let p = |h: &LatencyHistogram, q| h.percentile(q);
        Self {
            created: a.created,
            completed: a.completed,
            failed: a.failed,
            dead_lettered: a.dead_lettered,
            claim_p50_ms: p(&a.claim_latency, 0.5),
            claim_p95_ms: p(&a.claim_latency, 0.95),
            claim_p99_ms: p(&a.claim_latency, 0.99),
            complete_p50_ms: p(&a.complete_latency, 0.5),
            complete_p95_ms: p(&a.complete_latency, 0.95),
            complete_p99_ms: p(&a.complete_latency, 0.99),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct QueueActivityBucket {
    /// When the interval starts (RFC 3339, UTC).
    pub at: String,
    #[serde(flatten)]
    pub numbers: QueueActivityNumbers,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct QueueActivityView {
    pub endpoint: String,
    /// The queue, or null for all the endpoint's queues.
    pub queue: Option<String>,
    pub range: String,
    pub bucket_seconds: i64,
    /// Every interval of the range, oldest first (empty ones included).
    pub buckets: Vec<QueueActivityBucket>,
    /// The whole range.
    pub totals: QueueActivityNumbers,
}

/// An endpoint's activity over the last hour, day or week: todos created,
/// completed, failed and dead-lettered per interval, and the time to claim
/// and to complete as percentiles. Each instance writes its activity down
/// every few seconds (`--activity-interval`).
#[utoipa::path(get, path = "/api/v1/endpoints/{reference}/activity", operation_id = "endpoint_activity", tag = "endpoints",
    params(("reference" = String, Path, description = "Endpoint slug or id"), ActivityQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, body = QueueActivityView),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn show(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(reference): ApiPath<String>,
    ApiQuery(q): ApiQuery<ActivityQuery>,
) -> ApiResult<Json<QueueActivityView>> {
    let range = match q.range.as_deref() {
        None => ActivityRange::Hour,
        Some(text) => ActivityRange::parse(text)
            .ok_or_else(|| Invalid::new("range", "must be hour, day or week"))?,
    };
    let endpoint = state
        .store
        .get_endpoint(&auth.human.id, &reference)
        .await
        .or_unknown_endpoint(&reference)?;
    if let Some(queue) = &q.queue
        && !endpoint.scope_queues.contains(queue)
    {
        return Err(Invalid::new(
            "queue",
            format!("{queue:?} is not one of the endpoint's queues"),
        )
        .into());
    }
    let now = state.store.clock().now();
    let stored = state
        .store
        .queue_activity(
            std::slice::from_ref(&endpoint.id),
            q.queue.as_deref(),
            range,
            range.first_bucket(now),
        )
        .await?;
    let buckets = series(
        range,
        now,
        stored.into_iter().map(|row| (row.bucket_at, row.activity)),
    );
    let mut totals = Activity::default();
    for (_, a) in &buckets {
        totals.merge(a);
    }
    Ok(Json(QueueActivityView {
        endpoint: endpoint.slug,
        queue: q.queue,
        range: range.as_str().to_owned(),
        bucket_seconds: range.span_seconds(),
        buckets: buckets
            .iter()
            .map(|(at, a)| QueueActivityBucket {
                at: at.to_rfc3339(),
                numbers: QueueActivityNumbers::of(a),
            })
            .collect(),
        totals: QueueActivityNumbers::of(&totals),
    }))
}
