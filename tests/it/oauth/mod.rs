//! OAuth 2.1 on vended endpoints (`docs/oauth.md`), against the real
//! binary over HTTP: the conformance checklist as refusals
//! (`refusals.rs`), client metadata documents behind the SSRF guard
//! (`documents.rs`), the MCP TypeScript SDK's OAuth client provider end to
//! end (`sdk.rs`), and a revocation seen at once by another instance
//! (`cluster.rs`).

mod cluster;
mod documents;
mod refusals;
mod sdk;

use reqwest::Method;
use serde_json::{Value, json};
use switchboard::domain::oauth::s256_challenge;

use crate::board::{Board, Page, field_of};
use crate::support::api::{Body, Server};
use crate::support::server::Process;

/// A running server the helpers below can address: the real binary in
/// `support::api` or a bare process (a cluster's instance).
pub trait Base {
    fn url(&self, path: &str) -> String;
}

impl Base for Server {
    fn url(&self, path: &str) -> String {
        Server::url(self, path)
    }
}

impl Base for Process {
    fn url(&self, path: &str) -> String {
        Process::url(self, path)
    }
}

pub const REDIRECT: &str = "https://client.example/callback";
/// A verifier of 43 unreserved characters.
pub const VERIFIER: &str = "a-verifier-of-at-least-43-characters_0123456789";

/// Registers a client (DCR) with `redirect_uris`; its `client_id`.
pub async fn register(server: &impl Base, redirect_uris: &[&str]) -> String {
    let resp = crate::support::mcp::client()
        .post(server.url("/oauth/register"))
        .json(&json!({
            "client_name": "Test client",
            "redirect_uris": redirect_uris,
            "grant_types": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_method": "none",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let body: Value = resp.json().await.unwrap();
    body["client_id"].as_str().unwrap().to_owned()
}

/// The query of an authorization request.
pub struct Authorize<'a> {
    pub client_id: &'a str,
    pub redirect_uri: &'a str,
    pub challenge: String,
    pub method: &'a str,
    pub resource: Option<String>,
}

impl<'a> Authorize<'a> {
    pub fn new(client_id: &'a str, resource: &str) -> Self {
        Self {
            client_id,
            redirect_uri: REDIRECT,
            challenge: s256_challenge(VERIFIER),
            method: "S256",
            resource: Some(resource.to_owned()),
        }
    }

    pub fn path(&self) -> String {
        let mut pairs = vec![
            ("response_type", "code"),
            ("client_id", self.client_id),
            ("redirect_uri", self.redirect_uri),
            ("code_challenge", self.challenge.as_str()),
            ("code_challenge_method", self.method),
            ("state", "st4te"),
        ];
        if let Some(r) = &self.resource {
            pairs.push(("resource", r.as_str()));
        }
        format!(
            "/oauth/authorize?{}",
            serde_urlencoded::to_string(pairs).unwrap()
        )
    }
}

/// The query parameters of a redirect's `Location`.
pub fn query_of(location: &str) -> Vec<(String, String)> {
    let url = reqwest::Url::parse(location).unwrap();
    url.query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

pub fn param(location: &str, name: &str) -> Option<String> {
    query_of(location)
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
}

/// Posts the consent page's form with `decision` (and `endpoint`, when
/// the page offers a choice); the answer.
pub async fn answer(board: &Board, page: &Page, decision: &str, endpoint: Option<&str>) -> Page {
    assert_eq!(page.status, 200, "{}", page.body);
    let fields: Vec<(&str, String)> = [
        "csrf",
        "client_id",
        "redirect_uri",
        "code_challenge",
        "state",
        "resource",
    ]
    .into_iter()
    .map(|name| (name, field_of(&page.body, name)))
    .collect();
    let mut form: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    form.push(("decision", decision));
    let first_choice;
    match endpoint {
        Some(slug) => form.push(("endpoint", slug)),
        None => {
            first_choice = field_of(&page.body, "endpoint");
            form.push(("endpoint", &first_choice));
        }
    }
    board.post("/oauth/authorize", &form).await
}

/// Authorizes and consents: the code from the redirect.
pub async fn code_for(board: &Board, request: &Authorize<'_>) -> String {
    let page = board.get(&request.path()).await;
    let done = answer(board, &page, "allow", None).await;
    assert_eq!(done.status, 303, "{}", done.body);
    let location = done.location.unwrap();
    assert!(location.starts_with(request.redirect_uri), "{location}");
    param(&location, "code").expect("a code")
}

/// `POST /oauth/token` with `fields`: (status, JSON body).
pub async fn token(server: &impl Base, fields: &[(&str, &str)]) -> (u16, Value) {
    let resp = crate::support::mcp::client()
        .post(server.url("/oauth/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(serde_urlencoded::to_string(fields).unwrap())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    assert_eq!(
        resp.headers()
            .get("cache-control")
            .and_then(|v| v.to_str().ok()),
        Some("no-store")
    );
    (status, resp.json().await.unwrap())
}

/// Redeems `code`: the token answer, which must succeed.
pub async fn redeem(server: &impl Base, client_id: &str, code: &str) -> Value {
    let (status, body) = token(
        server,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", client_id),
            ("code", code),
            ("redirect_uri", REDIRECT),
            ("code_verifier", VERIFIER),
        ],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body
}

/// An MCP `initialize` with `token`: the HTTP status.
pub async fn mcp_status(server: &impl Base, slug: &str, token: &str) -> u16 {
    crate::support::mcp::client()
        .post(server.url(&format!("/mcp/{slug}")))
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(crate::support::mcp::initialize_body(1).to_string())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// `GET /api/v1/endpoints/{slug}/oauth-clients` as `token`.
pub async fn connections(server: &Server, token: &str, slug: &str) -> Vec<Value> {
    server
        .expect(
            200,
            Method::GET,
            &format!("/api/v1/endpoints/{slug}/oauth-clients"),
            token,
            Body::None,
        )
        .await["oauth_clients"]
        .as_array()
        .unwrap()
        .clone()
}
