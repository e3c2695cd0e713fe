//! `GET /healthz` (the process runs) and `GET /readyz` (the database answers
//! and its schema is the one this binary expects).

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use serde_json::json;

use super::AppState;
use crate::store::StoreError;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

async fn healthz() -> impl IntoResponse {
    Json(json!({"status": "ok"}))
}

async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    match state.store.readiness().await {
        Ok(()) => (StatusCode::OK, Json(json!({"status": "ready"}))),
        Err(err) => {
            // The reason is logged in full; the probe gets a short, secret-free one.
            tracing::warn!(error = %err, "readiness check failed");
            let reason = match err {
                StoreError::SchemaMismatch { .. } => "schema not current",
                _ => "database unavailable",
            };
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({"status": "unavailable", "reason": reason})),
            )
        }
    }
}
