//! `/oauth/authorize`: an OAuth client asks for access to one of the
//! signed-in human's endpoints (`docs/oauth.md`). The GET checks the
//! request and shows the consent page; the page's form posts the human's
//! answer back (CSRF-checked like every board form), and the answer is a
//! redirect to the client with a code, or with `access_denied`.
//!
//! The request is checked in RFC 6749's order: a bad client or redirect
//! URI is told to the human (never redirected to an unverified place);
//! everything else goes back to the client as `error=…`. Signing in comes
//! first: an anonymous request never makes this server fetch a client's
//! metadata document.

use askama::Template;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use crate::board::BoardState;
use crate::board::auth::Signed;
use crate::board::error::BoardError;
use crate::board::form::{CsrfForm, Fields};
use crate::board::view::Layout;
use crate::domain::oauth::{self, mcp_url, redirect_with, resource_slug};
use crate::domain::registry::EndpointState;
use crate::domain::scope::GRANTABLE_VERBS;
use crate::ops;
use crate::ops::oauth::{ClientRefused, Consent};
use crate::store::{Endpoint, OAuthClient, StoreError};

/// The parameters of an authorization request, from the query (GET) or
/// the consent form's hidden fields (POST).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct AuthorizeParams {
    response_type: Option<String>,
    client_id: Option<String>,
    redirect_uri: Option<String>,
    code_challenge: Option<String>,
    code_challenge_method: Option<String>,
    state: Option<String>,
    resource: Option<String>,
}

impl AuthorizeParams {
    fn of(fields: &Fields) -> Self {
        let text = |name: &str| fields.get(name).map(str::to_owned);
        Self {
            response_type: text("response_type"),
            client_id: text("client_id"),
            redirect_uri: text("redirect_uri"),
            code_challenge: text("code_challenge"),
            code_challenge_method: text("code_challenge_method"),
            state: text("state"),
            resource: text("resource"),
        }
    }
}

/// A request that passed every check.
struct Checked {
    client: OAuthClient,
    redirect_uri: String,
    challenge: String,
    state: Option<String>,
    /// The endpoint `resource` names, when it names one.
    endpoint: Option<Endpoint>,
}

/// Why a request is refused: to the human (bad client or redirect URI),
/// or back to the client.
enum Refused {
    Page(BoardError),
    Redirect {
        redirect_uri: String,
        state: Option<String>,
        error: &'static str,
        description: String,
    },
}

impl Refused {
    fn into_response(self, state: &BoardState) -> Response {
        match self {
            Self::Page(e) => e.into_response(),
            Self::Redirect {
                redirect_uri,
                state: client_state,
                error,
                description,
            } => back_to_client(
                state,
                &redirect_uri,
                &[("error", error), ("error_description", &description)],
                client_state.as_deref(),
            ),
        }
    }
}

/// A redirect to the client with `params`, its `state` and our `iss`
/// (RFC 9207: the client can tell which server answered).
fn back_to_client(
    state: &BoardState,
    redirect_uri: &str,
    params: &[(&str, &str)],
    client_state: Option<&str>,
) -> Response {
    let issuer = state.board.public_url.as_str();
    let mut all: Vec<(&str, &str)> = params.to_vec();
    if let Some(s) = client_state {
        all.push(("state", s));
    }
    all.push(("iss", issuer));
    match redirect_with(redirect_uri, &all) {
        Some(to) => Redirect::to(&to).into_response(),
        None => BoardError::BadRequest("redirect_uri: not a URL".into()).into_response(),
    }
}

async fn check(
    state: &BoardState,
    human_id: &str,
    params: &AuthorizeParams,
) -> Result<Checked, Refused> {
    let page = |field: &str, message: &str| {
        Refused::Page(BoardError::BadRequest(format!("{field}: {message}")))
    };
    let client_id = params
        .client_id
        .as_deref()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| page("client_id", "required"))?;
    let client =
        match ops::oauth::resolve_client(&state.delivery, &state.board.oauth, client_id).await {
            Ok(client) => client,
            Err(ClientRefused::Store(e)) => return Err(Refused::Page(e.into())),
            Err(e) => return Err(Refused::Page(BoardError::BadRequest(e.to_string()))),
        };
    let redirect_uri = match params.redirect_uri.as_deref().filter(|r| !r.is_empty()) {
        Some(presented) => {
            if !client
                .redirect_uris
                .iter()
                .any(|r| oauth::redirect_uri_matches(r, presented))
            {
                return Err(page(
                    "redirect_uri",
                    "not one of the client's registered redirect URIs",
                ));
            }
            presented.to_owned()
        }
        None => match client.redirect_uris.as_slice() {
            [only] => only.clone(),
            _ => return Err(page("redirect_uri", "required")),
        },
    };
    let back = |error: &'static str, description: String| Refused::Redirect {
        redirect_uri: redirect_uri.clone(),
        state: params.state.clone(),
        error,
        description,
    };
    if params.response_type.as_deref() != Some("code") {
        return Err(back(
            "unsupported_response_type",
            "response_type: only code".into(),
        ));
    }
    let challenge = oauth::check_challenge(
        params.code_challenge.as_deref(),
        params.code_challenge_method.as_deref(),
    )
    .map_err(|e| back("invalid_request", e.to_string()))?;
    let endpoint = match params.resource.as_deref().filter(|r| !r.is_empty()) {
        None => None,
        Some(resource) => {
            let not_yours = || {
                back(
                    "invalid_target",
                    "resource: not the MCP URL of an active endpoint of the signed-in human".into(),
                )
            };
            let slug = resource_slug(&state.board.public_url, resource).ok_or_else(not_yours)?;
            // A foreign endpoint answers exactly like a missing one.
            match state.store.get_endpoint(human_id, slug).await {
                Ok(e) if e.state == EndpointState::Active && e.slug == slug => Some(e),
                Ok(_) | Err(StoreError::NotFound) => return Err(not_yours()),
                Err(e) => return Err(Refused::Page(e.into())),
            }
        }
    };
    Ok(Checked {
        client,
        redirect_uri,
        challenge,
        state: params.state.clone(),
        endpoint,
    })
}

/// One endpoint the human may connect the client to.
pub(crate) struct Choice {
    slug: String,
    agent: String,
    queues: String,
    verbs: String,
}

impl Choice {
    fn of(e: &Endpoint) -> Self {
        Self {
            slug: e.slug.clone(),
            agent: e.agent_name.clone(),
            queues: e.scope_queues.join(", "),
            verbs: if e.scope_verbs.is_empty() {
                "all".to_owned()
            } else {
                e.scope_verbs.join(", ")
            },
        }
    }
}

#[derive(Template)]
#[template(path = "board/consent.html")]
struct ConsentPage {
    layout: Layout,
    client_name: String,
    client_id: String,
    verified: bool,
    redirect_host: String,
    /// The endpoint `resource` named: the only choice.
    fixed: bool,
    choices: Vec<Choice>,
    verbs: &'static [&'static str],
    params: Hidden,
}

/// The request's parameters, carried through the form.
struct Hidden {
    client_id: String,
    redirect_uri: String,
    code_challenge: String,
    state: String,
    resource: String,
}

#[derive(Template)]
#[template(path = "board/oauth_continue.html")]
struct ContinuePage {
    next: String,
}

/// `GET /oauth/authorize`.
pub(crate) async fn authorize(State(state): State<BoardState>, request: Request) -> Response {
    let (mut parts, _) = request.into_parts();
    let signed = match Signed::from_request_parts(&mut parts, &state).await {
        Ok(signed) => signed,
        Err(BoardError::SignIn | BoardError::SignInWholePage) => {
            let here = parts
                .uri
                .path_and_query()
                .map_or("/oauth/authorize", |p| p.as_str());
            return continue_to_sign_in(here);
        }
        Err(e) => return e.into_response(),
    };
    let params: AuthorizeParams =
        serde_urlencoded::from_str(parts.uri.query().unwrap_or("")).unwrap_or_default();
    let checked = match check(&state, &signed.human.id, &params).await {
        Ok(checked) => checked,
        Err(refused) => return refused.into_response(&state),
    };
    let choices = match &checked.endpoint {
        Some(e) => vec![Choice::of(e)],
        None => match active_endpoints(&state, &signed.human.id).await {
            Ok(all) => all.iter().map(Choice::of).collect(),
            Err(e) => return BoardError::from(e).into_response(),
        },
    };
    let client = &checked.client;
    let page = ConsentPage {
        layout: Layout::new(&signed, "", "Connect a client"),
        client_name: client
            .name
            .clone()
            .unwrap_or_else(|| "An unnamed client".into()),
        client_id: client.id.clone(),
        verified: client.verified,
        redirect_host: oauth::redirect_host(&checked.redirect_uri),
        fixed: checked.endpoint.is_some(),
        choices,
        verbs: &GRANTABLE_VERBS,
        params: Hidden {
            client_id: client.id.clone(),
            redirect_uri: checked.redirect_uri.clone(),
            code_challenge: checked.challenge.clone(),
            state: checked.state.clone().unwrap_or_default(),
            resource: params.resource.clone().unwrap_or_default(),
        },
    };
    let mut response = crate::board::render::render(&page);
    // The answer redirects to the client: the page's form may go there.
    let origin = oauth::redirect_origin(&checked.redirect_uri).unwrap_or_default();
    if let Ok(csp) = HeaderValue::from_str(&crate::board::render::csp_with_form_action(&origin)) {
        response
            .headers_mut()
            .insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    response
}

async fn active_endpoints(state: &BoardState, human_id: &str) -> Result<Vec<Endpoint>, StoreError> {
    Ok(crate::board::view::all_endpoints(state, human_id)
        .await?
        .into_iter()
        .filter(|e| e.state == EndpointState::Active)
        .collect())
}

/// Not signed in here: a page of ours that goes on to the sign-in form.
/// (A redirect would not do: arriving from the client's site, the
/// browser withholds the board's `SameSite=Strict` cookie until a
/// navigation of our own.)
fn continue_to_sign_in(here: &str) -> Response {
    let next: String = url::form_urlencoded::byte_serialize(here.as_bytes()).collect();
    let mut response = crate::board::render::render(&ContinuePage {
        next: format!("/board/sign-in?next={next}"),
    });
    *response.status_mut() = StatusCode::OK;
    response
}

/// `POST /oauth/authorize`: the human's answer.
pub(crate) async fn answer(State(state): State<BoardState>, form: CsrfForm) -> Response {
    let human = &form.signed.human.id;
    let mut params = AuthorizeParams::of(&form.fields);
    params.response_type = Some("code".into());
    params.code_challenge_method = Some("S256".into());
    let checked = match check(&state, human, &params).await {
        Ok(checked) => checked,
        Err(refused) => return refused.into_response(&state),
    };
    let client_state = checked.state.as_deref().filter(|s| !s.is_empty());
    if form.fields.get("decision") != Some("allow") {
        return back_to_client(
            &state,
            &checked.redirect_uri,
            &[
                ("error", "access_denied"),
                ("error_description", "the human declined"),
            ],
            client_state,
        );
    }
    let endpoint = match (&checked.endpoint, form.fields.text("endpoint")) {
        (Some(named), _) => named.clone(),
        (None, Some("new")) => match vend_for(&state, human, &form.fields).await {
            Ok(e) => e,
            Err(message) => return BoardError::BadRequest(message).into_response(),
        },
        (None, Some(slug)) => match state.store.get_endpoint(human, slug).await {
            Ok(e) if e.slug == slug => e,
            Ok(_) | Err(StoreError::NotFound) => return BoardError::NotFound.into_response(),
            Err(e) => return BoardError::from(e).into_response(),
        },
        (None, None) => {
            return BoardError::BadRequest("endpoint: choose one".into()).into_response();
        }
    };
    let consent = Consent {
        client_id: checked.client.id.clone(),
        endpoint_id: endpoint.id.clone(),
        redirect_uri: checked.redirect_uri.clone(),
        code_challenge: checked.challenge.clone(),
        resource: mcp_url(&state.board.public_url, &endpoint.slug),
    };
    match ops::oauth::issue_code(&state.delivery, human, consent).await {
        Ok(code) => {
            tracing::info!(
                client = %checked.client.id,
                endpoint = %endpoint.slug,
                "oauth authorization granted"
            );
            back_to_client(
                &state,
                &checked.redirect_uri,
                &[("code", &code)],
                client_state,
            )
        }
        Err(e) => BoardError::from(e).into_response(),
    }
}

/// Vends a new endpoint for the client, from the consent form's fields
/// (its `sbk_` credential is never shown: the client's tokens are its
/// credentials, and the board can vend another).
async fn vend_for(state: &BoardState, human: &str, fields: &Fields) -> Result<Endpoint, String> {
    let queues: Vec<String> = fields
        .text("new_queues")
        .unwrap_or("inbox")
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|q| !q.is_empty())
        .map(str::to_owned)
        .collect();
    let request = ops::endpoints::Vend {
        agent: fields.text("new_agent").unwrap_or("").to_owned(),
        kind: Some("session".into()),
        server_name: None,
        queues: Some(queues),
        verbs: Some(
            fields
                .all("new_verbs")
                .into_iter()
                .map(str::to_owned)
                .collect(),
        ),
        expires_in: None,
        default_lease_ttl_seconds: None,
        webhook: false,
    };
    ops::endpoints::vend(&state.delivery, &state.board.public_url, human, request)
        .await
        .map(|vended| vended.endpoint)
        .map_err(super::refusal)
}
