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

use crate::store::{Store, StoreError};

pub fn router(store: Arc<dyn Store>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(store)
}

async fn healthz() -> impl IntoResponse {
    Json(json!({"status": "ok"}))
}

async fn readyz(State(store): State<Arc<dyn Store>>) -> impl IntoResponse {
    match store.readiness().await {
        Ok(()) => (StatusCode::OK, Json(json!({"status": "ready"}))),
        Err(err) => {
            // The reason is logged in full; the probe gets a short, secret-free one.
            tracing::warn!(error = %err, "readiness check failed");
            let reason = match err {
                StoreError::Unavailable(msg) if msg.starts_with("schema") => "schema not current",
                _ => "database unavailable",
            };
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({"status": "unavailable", "reason": reason})),
            )
        }
    }
}
