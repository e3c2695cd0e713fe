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
use crate::domain::scope::GRANTABLE_VERBS;
use crate::ops;

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
    /// The form's one-time token (`ops::forms`): a second click of Vend
    /// answers with the endpoint the first one vended.
    nonce: String,
    /// The endpoint an earlier submission of the same form vended.
    already: Option<String>,
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
        nonce: ops::forms::mint_nonce(),
        already: None,
    })
}

pub(crate) async fn vend(
    State(state): State<BoardState>,
    form: CsrfForm,
) -> Result<Response, BoardError> {
    let input = VendInput::of(&form.fields);
    let human = &form.signed.human.id;
    let mut layout = Layout::new(&form.signed, "vend", "Vend");
    let nonce = form.fields.text(ops::forms::NONCE_FIELD);
    let mut already = None;
    let reveal = match ops::forms::submit(&state.delivery, human, "vend", nonce).await {
        Err(e) => {
            layout.error = Some(refusal(e));
            None
        }
        Ok(ops::forms::Submission::Repeat(prior)) => {
            layout.error = Some(match &prior.result {
                Some(slug) => format!(
                    "already submitted: this form vended {slug} once, and nothing was vended again; \
                     its credential was shown in that first answer and cannot be shown again"
                ),
                None => "already submitted: the first submission of this form is still being \
                         handled, and nothing was vended again"
                    .to_owned(),
            });
            already = prior.result;
            None
        }
        Ok(ops::forms::Submission::First) => match vend_endpoint(&state, human, &input).await {
            Ok(reveal) => {
                // The credential is shown whatever happens here: a replay that
                // finds no result says "still being handled", never vends again.
                if let Some(nonce) = nonce
                    && let Err(e) =
                        ops::forms::settle(&state.delivery, human, nonce, &reveal.slug).await
                {
                    refusal(e);
                }
                layout.notice =
                    Some("endpoint vended: copy the credential now, it is not shown again".into());
                Some(reveal)
            }
            Err(message) => {
                layout.error = Some(message);
                None
            }
        },
    };
    Ok(render(&VendPage {
        layout,
        input,
        verbs: &GRANTABLE_VERBS,
        reveal,
        nonce: ops::forms::mint_nonce(),
        already,
    }))
}

/// Vends through the one vend operation; the reveal shows what it
/// returned this once.
async fn vend_endpoint(
    state: &BoardState,
    human_id: &str,
    input: &VendInput,
) -> Result<Reveal, String> {
    let queues: Vec<String> = input
        .queues
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|q| !q.is_empty())
        .map(str::to_owned)
        .collect();
    let text = |t: &str| Some(t.to_owned()).filter(|t| !t.is_empty());
    let request = ops::endpoints::Vend {
        agent: input.agent.clone(),
        kind: Some(input.kind.clone()),
        server_name: text(&input.server_name),
        queues: Some(queues),
        verbs: Some(input.verbs.clone()),
        expires_in: text(&input.expires_in),
        default_lease_ttl_seconds: None,
        webhook: input.webhook,
    };
    let vended = ops::endpoints::vend(&state.delivery, &state.board.public_url, human_id, request)
        .await
        .map_err(refusal)?;
    let (server_name, url) = (&vended.server_name, &vended.mcp_url);
    Ok(Reveal {
        agent: vended.endpoint.agent_name.clone(),
        slug: vended.endpoint.slug.clone(),
        snippets: ClientSnippets::new(server_name, url, &vended.credential),
        mcp_json: serde_json::to_string_pretty(&mcp_json(server_name, url)).unwrap_or_default(),
        ingest_url: vended.webhook.map(|w| w.ingest_url),
        token: vended.credential,
    })
}
