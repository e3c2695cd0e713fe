//! `/board/vend`: a short form (agent, kind, queues, verbs, expiry,
//! webhook) ending in a one-time reveal of the credential and the client
//! snippets (`domain::client_setup`, the same text the API and `switchboard
//! vend` give). The reveal is the POST's own answer: the credential is
//! never in a URL, a redirect or the log.

use askama::Template;
use axum::extract::{Query, State};
use axum::response::Response;

use super::refusal;
use crate::board::BoardState;
use crate::board::auth::Signed;
use crate::board::error::BoardError;
use crate::board::form::{CsrfForm, Fields};
use crate::board::view::{Layout, Messages, render};
use crate::domain::client_setup::{ClientSnippets, mcp_json};
use crate::domain::duration::parse_positive_duration;
use crate::domain::ids::{SHOWN_PREFIX_CHARS, sha256_hex};
use crate::domain::scope::GRANTABLE_VERBS;
use crate::domain::server_key::{LONGEST_TOOL_NAME, default_server_key, validate_server_key};
use crate::domain::todo::validate_queue_name;
use crate::mint::{new_endpoint_credential, new_slug, new_webhook_url_token};
use crate::store::{AgentKind, NewEndpoint, StoreError, Taken};

/// What was typed, to fill the form again after an error.
#[derive(Default)]
pub(crate) struct VendInput {
    pub(crate) agent: String,
    pub(crate) kind: String,
    pub(crate) server_name: String,
    pub(crate) queues: String,
    pub(crate) verbs: Vec<String>,
    pub(crate) expires_in: String,
    pub(crate) webhook: bool,
}

impl VendInput {
    fn of(fields: &Fields) -> Self {
        Self {
            agent: fields.text("agent").unwrap_or("").to_owned(),
            kind: fields.text("kind").unwrap_or("session").to_owned(),
            server_name: fields.text("server_name").unwrap_or("").to_owned(),
            queues: fields.text("queues").unwrap_or("inbox").to_owned(),
            verbs: fields.all("verbs").into_iter().map(str::to_owned).collect(),
            expires_in: fields.text("expires_in").unwrap_or("").to_owned(),
            webhook: fields.get("webhook").is_some(),
        }
    }
}

/// The one-time reveal.
pub(crate) struct Reveal {
    pub(crate) agent: String,
    pub(crate) slug: String,
    pub(crate) token: String,
    pub(crate) snippets: ClientSnippets,
    pub(crate) mcp_json: String,
    pub(crate) ingest_url: Option<String>,
}

#[derive(Template)]
#[template(path = "board/vend.html")]
struct VendPage {
    layout: Layout,
    input: VendInput,
    verbs: &'static [&'static str],
    reveal: Option<Reveal>,
}

pub(crate) async fn page(signed: Signed, Query(messages): Query<Messages>) -> Response {
    render(&VendPage {
        layout: Layout::new(&signed, "vend", "Vend").with_messages(&messages),
        input: VendInput {
            kind: "session".into(),
            queues: "inbox".into(),
            ..VendInput::default()
        },
        verbs: &GRANTABLE_VERBS,
        reveal: None,
    })
}

pub(crate) async fn vend(
    State(state): State<BoardState>,
    form: CsrfForm,
) -> Result<Response, BoardError> {
    let input = VendInput::of(&form.fields);
    let mut layout = Layout::new(&form.signed, "vend", "Vend");
    let outcome = vend_endpoint(&state, &form.signed.human.id, &input).await;
    let reveal = match outcome {
        Ok(reveal) => {
            layout.notice =
                Some("endpoint vended: copy the credential now, it is not shown again".into());
            Some(reveal)
        }
        Err(message) => {
            layout.error = Some(message);
            None
        }
    };
    Ok(render(&VendPage {
        layout,
        input,
        verbs: &GRANTABLE_VERBS,
        reveal,
    }))
}

/// Validates everything before writing anything, then vends (drawing a new
/// slug on the unlikely collision, as the API does).
async fn vend_endpoint(
    state: &BoardState,
    human_id: &str,
    input: &VendInput,
) -> Result<Reveal, String> {
    crate::domain::names::validate_agent_name(&input.agent)
        .map_err(|e| format!("agent: {}", e.message))?;
    let kind = AgentKind::parse(&input.kind)
        .ok_or_else(|| "kind: expected heartbeat, session or task".to_owned())?;
    let server_name = if input.server_name.is_empty() {
        let name = default_server_key(&input.agent);
        validate_server_key(&name, LONGEST_TOOL_NAME, "agent").map_err(|e| {
            format!("{e} (the default server name {name:?}): choose a shorter agent name, or a server name")
        })?;
        name
    } else {
        validate_server_key(&input.server_name, LONGEST_TOOL_NAME, "server_name")
            .map_err(|e| e.to_string())?;
        input.server_name.clone()
    };
    let queues: Vec<String> = input
        .queues
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|q| !q.is_empty())
        .map(str::to_owned)
        .collect();
    for q in &queues {
        validate_queue_name(q, "queues").map_err(|e| e.to_string())?;
    }
    let now = state.store.clock().now();
    let expires_at = match input.expires_in.as_str() {
        "" => None,
        text => Some(now.saturating_add(
            parse_positive_duration(text, "expires_in").map_err(|e| e.to_string())?,
        )),
    };
    for _ in 0..5 {
        let credential = new_endpoint_credential();
        let new = NewEndpoint {
            agent_id: String::new(),
            slug: new_slug(&input.agent),
            credential_hash: sha256_hex(&credential),
            credential_prefix: credential[..SHOWN_PREFIX_CHARS].to_owned(),
            queues: queues.clone(),
            verbs: input.verbs.clone(),
            expires_at,
            default_lease_ttl_seconds: None,
            server_name: (!input.server_name.is_empty()).then(|| input.server_name.clone()),
        };
        match state
            .store
            .vend_endpoint(human_id, &input.agent, kind, new)
            .await
        {
            Ok((_, endpoint, _)) => {
                let url = format!("{}/mcp/{}", state.board.public_url, endpoint.slug);
                let ingest_url = if input.webhook {
                    let url_token = new_webhook_url_token();
                    state
                        .store
                        .create_webhook(
                            human_id,
                            &endpoint.id,
                            &endpoint.scope_queues[0],
                            &sha256_hex(&url_token),
                            None,
                        )
                        .await
                        .map_err(refusal)?;
                    Some(format!("{}/webhooks/w/{url_token}", state.board.public_url))
                } else {
                    None
                };
                tracing::info!(endpoint = %endpoint.slug, agent = %endpoint.agent_name, "endpoint vended (board)");
                return Ok(Reveal {
                    agent: endpoint.agent_name.clone(),
                    slug: endpoint.slug.clone(),
                    snippets: ClientSnippets::new(&server_name, &url, &credential),
                    mcp_json: serde_json::to_string_pretty(&mcp_json(&server_name, &url))
                        .unwrap_or_default(),
                    token: credential,
                    ingest_url,
                });
            }
            Err(StoreError::Taken(Taken::SlugOrCredential)) => continue,
            Err(e) => return Err(refusal(e)),
        }
    }
    Err("the vend failed; try again".into())
}
