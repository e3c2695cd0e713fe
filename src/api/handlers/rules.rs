//! A webhook's routing rules (`docs/intake.md`, "Routing rules"), their dry
//! run, and the batch replay of its deliveries ("Replay").

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::deliveries::DecidedView;
use crate::api::ApiState;
use crate::api::extract::{ApiJson, ApiJsonOrEmpty, ApiPath, HumanAuth};
use crate::domain::intake::Decision;
use crate::domain::rules::{Outcome, RuleSet};
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::ops;
use crate::ops::rules::SaveRulesError;
use crate::store::DeliveryFilter;

impl From<SaveRulesError> for ApiError {
    fn from(e: SaveRulesError) -> Self {
        match e {
            SaveRulesError::Invalid(bad) => ApiError::invalid(&bad.field, bad.message),
            SaveRulesError::Store(e) => e.into(),
        }
    }
}

/// A webhook's rules: in order, the first whose condition's first output is
/// truthy decides; else `default` (null: the webhook's queue).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub(crate) struct RulesBody {
    /// At most 32: `{"if": "<jq>", "then": ACTION}`, ACTION one of
    /// `{"queue": "<name in the endpoint's scope>"}`, `{"drop": true}`,
    /// `{"quarantine": true}`.
    #[schema(value_type = Vec<Object>)]
    pub rules: Vec<Value>,
    /// ACTION, or null for the webhook's queue.
    #[schema(value_type = Option<Object>)]
    pub default: Option<Value>,
    /// `quarantine` (default: fail closed) or `skip`.
    pub on_error: Option<String>,
}

fn rules_view(rules: Option<&RuleSet>) -> Value {
    rules.cloned().unwrap_or_default().to_json()
}

/// The webhook's routing rules.
#[utoipa::path(get, path = "/api/v1/webhooks/{id}/rules", operation_id = "get_webhook_rules", tag = "webhooks",
    params(("id" = String, Path, description = "Webhook id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = RulesBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn show(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<Value>> {
    let webhook = state.store.get_webhook(&auth.human.id, &id).await?;
    Ok(Json(rules_view(webhook.rules.as_ref())))
}

/// Replaces the webhook's routing rules, validated whole (400 names
/// `rules[i].if` and why; nothing changes).
#[utoipa::path(put, path = "/api/v1/webhooks/{id}/rules", operation_id = "set_webhook_rules", tag = "webhooks",
    request_body = RulesBody,
    params(("id" = String, Path, description = "Webhook id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = RulesBody),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn set(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<Value>,
) -> ApiResult<Json<Value>> {
    let webhook = ops::rules::save(&state.delivery, &auth.human.id, &id, &body).await?;
    Ok(Json(rules_view(webhook.rules.as_ref())))
}

/// A dry run: a stored delivery of this webhook and, optionally, candidate rules.
// The schema of the body, which is read as JSON so that a bad rule is
// named by its own field (`rules[3].if`).
#[allow(dead_code)]
#[derive(Debug, Deserialize, ToSchema)]
pub(crate) struct TestRules {
    /// The delivery (`dl_…`) to evaluate.
    pub delivery_id: String,
    /// Candidate rules; without them, the saved ones.
    #[schema(value_type = Option<Vec<Object>>)]
    pub rules: Option<Vec<Value>>,
    #[schema(value_type = Option<Object>)]
    pub default: Option<Value>,
    pub on_error: Option<String>,
}

/// What one rule did in a dry run.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RuleTraceView {
    /// `rules[i]`.
    pub rule: String,
    /// `matched`, `not_matched` or `error`.
    pub outcome: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The decision the rules would make, and the trace of the rules that ran.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DryRunView {
    /// `accepted`, `dropped` or `quarantined`.
    pub decision: String,
    /// The queue of an accepted delivery.
    pub queue: Option<String>,
    /// The rule that decided (`rules[2]`), if one did.
    pub rule: Option<String>,
    /// `senders`, `rule`, `on_error` or `default`.
    pub by: String,
    pub trace: Vec<RuleTraceView>,
}

/// Evaluates the given (or saved) rules on one of the webhook's stored
/// deliveries, after its senders. Stores nothing.
#[utoipa::path(post, path = "/api/v1/webhooks/{id}/rules/test", operation_id = "test_webhook_rules", tag = "webhooks",
    request_body = TestRules,
    params(("id" = String, Path, description = "Webhook id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = DryRunView),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn test(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<Value>,
) -> ApiResult<Json<DryRunView>> {
    let Value::Object(mut body) = body else {
        return Err(ApiError::invalid(
            "body",
            "the request body must be a JSON object",
        ));
    };
    if let Some(key) = body
        .keys()
        .find(|k| !matches!(k.as_str(), "delivery_id" | "rules" | "default" | "on_error"))
    {
        return Err(ApiError::invalid(key, "unknown field"));
    }
    let delivery_id = match body.remove("delivery_id") {
        Some(Value::String(id)) => id,
        _ => {
            return Err(ApiError::invalid(
                "delivery_id",
                "required: a delivery id (dl_…)",
            ));
        }
    };
    // What remains is the candidate rule set, if any.
    let candidate = (!body.is_empty()).then(|| Value::Object(std::mem::take(&mut body)));
    let run = ops::rules::dry_run(
        &state.delivery,
        &auth.human.id,
        &id,
        &delivery_id,
        candidate.as_ref(),
    )
    .await?;
    Ok(Json(DryRunView {
        decision: run.decision.as_str().to_owned(),
        queue: run.queue,
        rule: run.rule,
        by: run.by.to_owned(),
        trace: run
            .trace
            .iter()
            .enumerate()
            .map(|(i, outcome)| RuleTraceView {
                rule: format!("rules[{i}]"),
                outcome: match outcome {
                    Outcome::Matched => "matched",
                    Outcome::NotMatched => "not_matched",
                    Outcome::Error(_) => "error",
                }
                .to_owned(),
                error: match outcome {
                    Outcome::Error(text) => Some(text.clone()),
                    _ => None,
                },
            })
            .collect(),
    }))
}

/// A batch replay: the listing's filters and the key choice.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReplayBatch {
    /// accepted, duplicate, dropped, quarantined, released or discarded.
    pub decision: Option<String>,
    /// The forge event, exactly.
    pub event: Option<String>,
    /// The sender's login (case-insensitive).
    pub sender: Option<String>,
    /// Use fresh idempotency keys instead of the originals.
    pub new_key: Option<bool>,
}

/// What a batch replay did.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ReplayBatchView {
    /// How many deliveries were replayed (at most 1000).
    pub replayed: usize,
    /// Matching deliveries that cannot be replayed (refused ones).
    pub skipped: usize,
    /// The new deliveries, newest original first.
    pub deliveries: Vec<DecidedView>,
}

/// Re-runs the webhook's deliveries that match the filters (at most 1000,
/// newest first) through its current senders and rules.
#[utoipa::path(post, path = "/api/v1/webhooks/{id}/deliveries/replay", operation_id = "replay_webhook_deliveries", tag = "webhooks",
    request_body(content = Option<ReplayBatch>),
    params(("id" = String, Path, description = "Webhook id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = ReplayBatchView),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn replay(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(id): ApiPath<String>,
    ApiJsonOrEmpty(body): ApiJsonOrEmpty<ReplayBatch>,
) -> ApiResult<Json<ReplayBatchView>> {
    let filter = DeliveryFilter {
        decision: body
            .decision
            .as_deref()
            .map(|d| Decision::parse_field(d, "decision"))
            .transpose()?,
        event: body.event,
        sender: body.sender,
    };
    let batch = ops::intake::replay_batch(
        &state.delivery,
        &auth.human.id,
        &id,
        &filter,
        body.new_key.unwrap_or(false),
    )
    .await?;
    Ok(Json(ReplayBatchView {
        replayed: batch.decided.len(),
        skipped: batch.skipped,
        deliveries: batch.decided.iter().map(DecidedView::from).collect(),
    }))
}
