//! `/board/agents`: the human's agents with their endpoints' liveness, and
//! a form to register one.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::response::Response;

use super::refusal;
use crate::board::BoardState;
use crate::board::auth::Signed;
use crate::board::error::BoardError;
use crate::board::form::CsrfForm;
use crate::board::view::{EndpointCard, Layout, Messages, all_endpoints, back, cards, render};
use crate::ops;
use crate::store::{AgentPatch, PageRequest};

pub(crate) struct AgentRow {
    pub(crate) name: String,
    pub(crate) kind: &'static str,
    pub(crate) description: String,
    pub(crate) interval: String,
    /// The agent's own interval in seconds, empty for the kind's default (the edit form).
    pub(crate) interval_seconds: String,
    pub(crate) endpoints: Vec<EndpointCard>,
}

#[derive(Template)]
#[template(path = "board/agents.html")]
struct AgentsPage {
    layout: Layout,
    agents: Vec<AgentRow>,
}

pub(crate) async fn page(
    State(state): State<BoardState>,
    signed: Signed,
    Query(messages): Query<Messages>,
) -> Result<Response, BoardError> {
    let agents = state
        .store
        .list_agents(
            &signed.human.id,
            &PageRequest {
                limit: 200,
                after: None,
            },
        )
        .await?;
    let endpoints = all_endpoints(&state, &signed.human.id).await?;
    let mut all_cards = cards(&state, &endpoints).await?;
    let rows = agents
        .items
        .iter()
        .map(|a| {
            let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut all_cards)
                .into_iter()
                .partition(|c| c.agent == a.name);
            all_cards = rest;
            AgentRow {
                name: a.name.clone(),
                kind: a.kind.as_str(),
                description: a.description.clone().unwrap_or_default(),
                interval: a
                    .expected_interval_seconds
                    .map(|s| format!("{s} s"))
                    .unwrap_or_else(|| "kind default".into()),
                interval_seconds: a
                    .expected_interval_seconds
                    .map(|s| s.to_string())
                    .unwrap_or_default(),
                endpoints: mine,
            }
        })
        .collect();
    Ok(render(&AgentsPage {
        layout: Layout::new(&signed, "agents", "Agents").with_messages(&messages),
        agents: rows,
    }))
}

/// Registers an agent: `name`, `kind`, optional `description`.
pub(crate) async fn create(
    State(state): State<BoardState>,
    form: CsrfForm,
) -> Result<Response, BoardError> {
    let register = ops::agents::Register {
        name: form.fields.text("name").unwrap_or("").to_owned(),
        kind: Some(form.fields.text("kind").unwrap_or("session").to_owned()),
        expected_interval_seconds: None,
        description: form.fields.text("description").map(str::to_owned),
    };
    let outcome = ops::agents::register(&state.delivery, &form.signed.human.id, register)
        .await
        .map(|agent| format!("agent {} registered", agent.name))
        .map_err(refusal);
    Ok(back("/board/agents", outcome))
}

/// Edits an agent: `kind`, `expected_interval_seconds` (empty returns to
/// the kind's default), `description` (empty clears it).
pub(crate) async fn edit(
    State(state): State<BoardState>,
    Path(name): Path<String>,
    form: CsrfForm,
) -> Result<Response, BoardError> {
    let human = &form.signed.human.id;
    // A foreign or missing agent is 404 before anything is parsed.
    let agent = state.store.get_agent(human, &name).await?;
    let kind =
        match ops::agents::parse_kind(form.fields.text("kind").unwrap_or(agent.kind.as_str())) {
            Ok(kind) => kind,
            Err(e) => return Ok(back("/board/agents", Err(e.to_string()))),
        };
    let interval = match form.fields.text("expected_interval_seconds") {
        None => None,
        Some(text) => match text.parse::<i64>() {
            Ok(n) => Some(n),
            Err(_) => {
                return Ok(back(
                    "/board/agents",
                    Err("expected_interval_seconds: a whole number of seconds, or empty for the kind's default".into()),
                ));
            }
        },
    };
    let patch = AgentPatch {
        kind: Some(kind),
        expected_interval_seconds: Some(interval),
        description: Some(form.fields.text("description").map(str::to_owned)),
    };
    let outcome = ops::agents::update(&state.delivery, human, &agent.name, patch)
        .await
        .map(|a| format!("agent {} saved", a.name))
        .map_err(refusal);
    Ok(back("/board/agents", outcome))
}
