//! `GET /healthz` (the process runs) and `GET /readyz` (the database answers,
//! its schema is the one this binary expects, and the server is not shutting
//! down). A 503 names its reason, one of [`NotReady`], from the typed error.

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use serde_json::json;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

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
    /// Set once a shutdown signal arrived: the instance drains, not ready.
    pub draining: Arc<AtomicBool>,
}

/// Why `/readyz` answers 503: the `reason` field, stable for probes and alerts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotReady {
    /// The database cannot be reached, refused the connection, or timed out.
    DatabaseUnreachable,
    /// The database answers but its schema is not the one this binary expects.
    SchemaNotCurrent,
    /// The database answered with an error of another kind (see the log).
    DatabaseError,
    /// A shutdown signal arrived; in-flight requests are finishing.
    ShuttingDown,
}

impl NotReady {
    pub fn of(err: &StoreError) -> Self {
        match err {
            StoreError::SchemaMismatch { .. } => Self::SchemaNotCurrent,
            StoreError::Unavailable(_) => Self::DatabaseUnreachable,
            _ => Self::DatabaseError,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::DatabaseUnreachable => "database_unreachable",
            Self::SchemaNotCurrent => "schema_not_current",
            Self::DatabaseError => "database_error",
            Self::ShuttingDown => "shutting_down",
        }
    }
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

fn not_ready(reason: NotReady, instance: &InstanceId) -> (StatusCode, Json<serde_json::Value>) {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({"status": "unavailable", "reason": reason.as_str(), "instance": instance})),
    )
}

async fn readyz(State(state): State<HealthState>) -> impl IntoResponse {
    if state.draining.load(Ordering::SeqCst) {
        return not_ready(NotReady::ShuttingDown, &state.instance);
    }
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
            not_ready(NotReady::of(&err), &state.instance)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_come_from_the_error_variant() {
        let unreachable = StoreError::unavailable("connection refused");
        assert_eq!(NotReady::of(&unreachable).as_str(), "database_unreachable");
        let old = StoreError::SchemaMismatch {
            found: 1,
            expected: 5,
        };
        assert_eq!(NotReady::of(&old).as_str(), "schema_not_current");
        let other = StoreError::internal("a bug");
        assert_eq!(NotReady::of(&other).as_str(), "database_error");
        assert_eq!(NotReady::ShuttingDown.as_str(), "shutting_down");
    }
}
