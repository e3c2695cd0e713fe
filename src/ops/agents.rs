//! A human's agents: registered and edited (vending may also create one,
//! [`super::endpoints::vend`]).

use crate::delivery::Delivery;
use crate::domain::Invalid;
use crate::store::{Agent, AgentKind, AgentPatch, NewAgent, StoreError, StoreResult};

/// An agent kind as a request names it (`heartbeat`, `session`, `task`).
pub fn parse_kind(kind: &str) -> Result<AgentKind, Invalid> {
    AgentKind::parse(kind).ok_or_else(|| {
        Invalid::new(
            "kind",
            format!("{kind:?} is not an agent kind; expected heartbeat, session or task"),
        )
    })
}

/// What a request may say of a new agent.
#[derive(Debug, Clone, Default)]
pub struct Register {
    pub name: String,
    /// Default `session`.
    pub kind: Option<String>,
    pub expected_interval_seconds: Option<i64>,
    pub description: Option<String>,
}

/// Registers an agent (it grants nothing by itself).
pub async fn register(delivery: &Delivery, human_id: &str, new: Register) -> StoreResult<Agent> {
    let kind = match new.kind.as_deref() {
        Some(k) => parse_kind(k)?,
        None => AgentKind::Session,
    };
    delivery
        .store()
        .register_agent(NewAgent {
            human_id: human_id.to_owned(),
            name: new.name,
            kind,
            expected_interval_seconds: new.expected_interval_seconds,
            description: new.description,
        })
        .await
        .map_err(request_field)
}

/// Edits an agent's kind, expected interval or description (`None` leaves
/// a field alone; `Some(None)` clears it).
pub async fn update(
    delivery: &Delivery,
    human_id: &str,
    name: &str,
    patch: AgentPatch,
) -> StoreResult<Agent> {
    delivery
        .store()
        .update_agent(human_id, name, patch)
        .await
        .map_err(request_field)
}

/// The store names the interval `expected_interval`; every request names
/// it `expected_interval_seconds`.
fn request_field(err: StoreError) -> StoreError {
    match err {
        StoreError::InvalidArgument(mut invalid) if invalid.field == "expected_interval" => {
            invalid.field = "expected_interval_seconds";
            StoreError::InvalidArgument(invalid)
        }
        other => other,
    }
}
