//! Webhook deliveries (`docs/intake.md`, "Delivery history", "Trusted
//! senders and quarantine", "Replay"): the history, a webhook's trusted
//! senders, and what a human does with a delivery.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};

use super::page_request;
use crate::api::ApiState;
use crate::api::extract::{ApiJson, ApiJsonOrEmpty, ApiPath, ApiQuery, HumanAuth};
use crate::api::views::WebhookView;
use crate::domain::intake::{Decision, Envelope, SenderMatch, Senders};
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::ops;
use crate::ops::intake::Decided;
use crate::store::{DeliveryFilter, DeliveryRecord};

/// The wire shape of a webhook's senders.
pub(crate) fn senders_view(senders: &Senders) -> Value {
    match senders {
        Senders::Everyone => json!({"trust": "everyone"}),
        Senders::Logins { logins, by } => json!({"trust": logins, "match": by}),
    }
}

/// One delivery. `body` (UTF-8) or `body_base64` is present only on
/// `GET /deliveries/{id}`, and never for a refused delivery.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DeliveryView {
    pub id: String,
    pub webhook_id: String,
    pub endpoint_id: String,
    #[schema(format = DateTime)]
    pub received_at: String,
    /// accepted, duplicate, dropped, quarantined, refused, released, discarded.
    pub decision: String,
    /// Why a refused delivery was refused.
    pub reason: Option<String>,
    /// The routing rule that decided, if one did.
    pub rule: Option<String>,
    /// The verified envelope: source, event, action, kind, sender, author,
    /// repository, labels, trust_mode, verified, content_type, size.
    #[schema(value_type = Object)]
    pub envelope: Value,
    pub title: Option<String>,
    pub todo_id: Option<String>,
    pub replay_of: Option<String>,
    #[schema(format = DateTime)]
    pub settled_at: Option<String>,
    #[schema(value_type = Option<Object>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
}

impl DeliveryView {
    fn of(d: &DeliveryRecord, full: bool) -> Self {
        let text = d
            .body
            .as_ref()
            .filter(|_| full)
            .and_then(|b| String::from_utf8(b.clone()).ok());
        let base64 = match (&d.body, &text) {
            (Some(b), None) if full => Some(base64::engine::general_purpose::STANDARD.encode(b)),
            _ => None,
        };
        Self {
            id: d.id.clone(),
            webhook_id: d.webhook_id.clone(),
            endpoint_id: d.endpoint_id.clone(),
            received_at: d.received_at.to_rfc3339(),
            decision: d.decision.as_str().to_owned(),
            reason: d.reason.clone(),
            rule: d.rule.clone(),
            envelope: envelope_view(&d.envelope),
            title: d.title.clone(),
            todo_id: d.todo_id.clone(),
            replay_of: d.replay_of.clone(),
            settled_at: d.settled_at.map(|t| t.to_rfc3339()),
            headers: full.then(|| d.headers.clone()),
            body: text,
            body_base64: base64,
        }
    }
}

fn envelope_view(e: &Envelope) -> Value {
    serde_json::to_value(e).unwrap_or(Value::Null)
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DeliveryList {
    pub deliveries: Vec<DeliveryView>,
    /// Pass as `cursor` for the next page; absent on the last.
    pub next_cursor: Option<String>,
}

/// A delivery decided by a release or a replay, with its todo if one was made or matched.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DecidedView {
    pub delivery: DeliveryView,
    /// `{id, queue, created}`; null when no todo (quarantined).
    #[schema(value_type = Option<Object>)]
    pub todo: Option<Value>,
}

impl From<&Decided> for DecidedView {
    fn from(d: &Decided) -> Self {
        Self {
            delivery: DeliveryView::of(&d.record, false),
            todo: d
                .todo
                .as_ref()
                .map(|c| json!({"id": c.todo.id, "queue": c.todo.queue, "created": c.created})),
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SetSenders {
    /// `"everyone"` or a list of logins.
    #[schema(value_type = Object)]
    pub trust: Value,
    /// With a list: which identity must be trusted (default `sender`).
    #[serde(rename = "match")]
    pub by: Option<String>,
}

/// Sets whom a webhook trusts; an untrusted delivery is quarantined.
#[utoipa::path(put, path = "/api/v1/webhooks/{id}/senders", operation_id = "set_webhook_senders", tag = "webhooks",
    request_body = SetSenders,
    params(("id" = String, Path, description = "Webhook id")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = WebhookView),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn set_senders(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<SetSenders>,
) -> ApiResult<Json<WebhookView>> {
    let senders = match &body.trust {
        Value::String(s) if s == "everyone" => {
            if body.by.is_some() {
                return Err(ApiError::invalid("match", "only with a list of logins"));
            }
            Senders::Everyone
        }
        Value::Array(items) => {
            let mut logins = Vec::with_capacity(items.len());
            for item in items {
                let Some(login) = item.as_str() else {
                    return Err(ApiError::invalid("trust", "logins are strings"));
                };
                logins.push(login.to_owned());
            }
            let by = match body.by.as_deref() {
                None => SenderMatch::Sender,
                Some(text) => SenderMatch::parse_field(text, "match")?,
            };
            Senders::logins(logins, by)?
        }
        _ => {
            return Err(ApiError::invalid(
                "trust",
                "must be \"everyone\" or a list of logins",
            ));
        }
    };
    let webhook =
        ops::webhooks::set_senders(&state.delivery, &auth.human.id, &id, &senders).await?;
    Ok(Json(WebhookView::from(&webhook)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct DeliveryQuery {
    /// accepted, duplicate, dropped, quarantined, refused, released or discarded.
    pub decision: Option<String>,
    /// The forge event, exactly (`issues`, `pull_request`).
    pub event: Option<String>,
    /// The sender's login (case-insensitive).
    pub sender: Option<String>,
    /// 1–200, default 50.
    #[param(value_type = Option<i64>, minimum = 1, maximum = 200)]
    pub limit: Option<String>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// A webhook's deliveries, newest first.
#[utoipa::path(get, path = "/api/v1/webhooks/{id}/deliveries", operation_id = "list_deliveries", tag = "webhooks",
    params(("id" = String, Path, description = "Webhook id"), DeliveryQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, body = DeliveryList),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn list(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<DeliveryQuery>,
) -> ApiResult<Json<DeliveryList>> {
    let page = page_request(q.limit.as_deref(), q.cursor.as_deref())?;
    let filter = DeliveryFilter {
        decision: q
            .decision
            .as_deref()
            .map(|d| Decision::parse_field(d, "decision"))
            .transpose()?,
        event: q.event,
        sender: q.sender,
    };
    let page = state
        .store
        .list_deliveries(&auth.human.id, &id, &filter, &page)
        .await?;
    Ok(Json(DeliveryList {
        deliveries: page
            .items
            .iter()
            .map(|d| DeliveryView::of(d, false))
            .collect(),
        next_cursor: page.next_cursor,
    }))
}

/// One delivery with its kept headers and body.
#[utoipa::path(get, path = "/api/v1/deliveries/{id}", operation_id = "show_delivery", tag = "webhooks",
    params(("id" = String, Path, description = "Delivery id (dl_…)")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = DeliveryView),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn show(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<DeliveryView>> {
    let record = state.store.get_delivery(&auth.human.id, &id).await?;
    Ok(Json(DeliveryView::of(&record, true)))
}

/// Releases a quarantined delivery: its todo is created now and rings.
#[utoipa::path(post, path = "/api/v1/deliveries/{id}/release", operation_id = "release_delivery", tag = "webhooks",
    params(("id" = String, Path, description = "Delivery id (dl_…)")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = DecidedView),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn release(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<DecidedView>> {
    let decided = ops::intake::release(&state.delivery, &auth.human.id, &id).await?;
    Ok(Json(DecidedView::from(&decided)))
}

/// Discards a quarantined delivery: no todo; it stays in the history.
#[utoipa::path(post, path = "/api/v1/deliveries/{id}/discard", operation_id = "discard_delivery", tag = "webhooks",
    params(("id" = String, Path, description = "Delivery id (dl_…)")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = DeliveryView),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn discard(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<DeliveryView>> {
    let record = ops::intake::discard(&state.delivery, &auth.human.id, &id).await?;
    Ok(Json(DeliveryView::of(&record, false)))
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReplayDelivery {
    /// Use a fresh idempotency key instead of the original one.
    pub new_key: Option<bool>,
}

/// Re-runs a stored delivery through the current senders and records a new delivery.
#[utoipa::path(post, path = "/api/v1/deliveries/{id}/replay", operation_id = "replay_delivery", tag = "webhooks",
    request_body(content = Option<ReplayDelivery>),
    params(("id" = String, Path, description = "Delivery id (dl_…)")),
    security(("bearer" = [])),
    responses(
        (status = 201, body = DecidedView),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn replay(
    State(state): State<ApiState>,
    auth: HumanAuth,
    ApiPath(id): ApiPath<String>,
    ApiJsonOrEmpty(body): ApiJsonOrEmpty<ReplayDelivery>,
) -> ApiResult<(StatusCode, Json<DecidedView>)> {
    let decided = ops::intake::replay(
        &state.delivery,
        &auth.human.id,
        &id,
        body.new_key.unwrap_or(false),
    )
    .await?;
    Ok((StatusCode::CREATED, Json(DecidedView::from(&decided))))
}
