//! `GET /healthz` (the process runs) and `GET /readyz` (the database answers
//! and its schema is the one this binary expects).

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use serde_json::json;

use std::sync::Arc;

use crate::bus::InstanceId;
use crate::bus::pg::PgBusStats;
use crate::store::{Store, StoreError};

/// What the probes read.
#[derive(Clone)]
pub struct HealthState {
    pub store: Arc<dyn Store>,
    pub instance: InstanceId,
    /// The PostgreSQL bus, when there is one.
    pub bus: Option<Arc<PgBusStats>>,
}

pub(super) fn router(state: HealthState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(state)
}

async fn healthz() -> impl IntoResponse {
    Json(json!({"status": "ok"}))
}

async fn readyz(State(state): State<HealthState>) -> impl IntoResponse {
    // A bus listener that is down makes doorbells across instances late,
    // not wrong: the instance still serves, so it stays ready and says so.
    let bus = state
        .bus
        .as_ref()
        .map(|b| {
            if b.is_connected() {
                "connected"
            } else {
                "reconnecting"
            }
        })
        .unwrap_or("in_process");
    match state.store.readiness().await {
        Ok(()) => (
            StatusCode::OK,
            Json(json!({
                "status": "ready",
                "version": env!("CARGO_PKG_VERSION"),
                "instance": state.instance,
                "bus": bus,
            })),
        ),
        Err(err) => {
            // The reason is logged in full; the probe gets a short, secret-free one.
            tracing::warn!(error = %err, "readiness check failed");
            let reason = match err {
                StoreError::SchemaMismatch { .. } => "schema not current",
                _ => "database unavailable",
            };
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(
                    json!({"status": "unavailable", "reason": reason, "instance": state.instance}),
                ),
            )
        }
    }
}
