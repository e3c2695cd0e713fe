//! The OAuth 2.1 authorization server's writes (`docs/oauth.md`): a
//! client registered (RFC 7591) or its metadata document fetched and
//! cached, a code issued on a human's consent, a code or a refresh token
//! exchanged for tokens, a connection revoked. Every secret is minted here
//! and only its hash is written.

use std::time::Duration;

use crate::delivery::Delivery;
use crate::delivery::counters::OAuthEvent;
use crate::delivery::hooks::client as guarded;
use crate::domain::Timestamp;
use crate::domain::ids::sha256_hex;
use crate::domain::oauth::{
    self, ACCESS_TOKEN_PREFIX, CODE_PREFIX, ClientMetadataInput, MAX_METADATA_BYTES,
    METADATA_CACHE_MS, REFRESH_TOKEN_PREFIX, REGISTERED_CLIENT_PREFIX,
};
use crate::mint::random_token;
use crate::store::{
    NewOAuthCode, NewOAuthTokens, OAuthClient, OAuthGrant, OAuthIssued, OAuthRefresh, StoreError,
    StoreResult,
};

/// What the authorization server needs besides the store: its issuer (the
/// public URL) and the guarded client that fetches metadata documents.
#[derive(Debug)]
pub struct OAuthServer {
    /// The issuer identifier (RFC 8414, RFC 9207): this server's public URL.
    pub issuer: String,
    /// `--allow-private-client-metadata`: metadata documents may be
    /// fetched from loopback and private addresses (and `http` on loopback).
    pub allow_private: bool,
    client: reqwest::Client,
}

/// How long a metadata document's server has to answer it all.
pub const METADATA_FETCH_TIMEOUT: Duration = Duration::from_secs(5);

impl OAuthServer {
    pub fn new(public_url: &str, allow_private: bool) -> Self {
        Self {
            issuer: public_url.trim_end_matches('/').to_owned(),
            allow_private,
            client: guarded::build(allow_private),
        }
    }
}

/// Why a client could not be found or used, said to the human (on the
/// authorization page) or the client (`invalid_client`).
#[derive(Debug, thiserror::Error)]
pub enum ClientRefused {
    #[error("client_id: no such client")]
    Unknown,
    /// The metadata document could not be fetched or is not acceptable.
    #[error("client_id: {0}")]
    Metadata(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Registers a client (RFC 7591). Public clients only: no secret is issued.
pub async fn register(delivery: &Delivery, input: ClientMetadataInput) -> StoreResult<OAuthClient> {
    let metadata = input.check()?;
    let client = delivery.store().register_oauth_client(&metadata).await?;
    delivery
        .counters()
        .count_oauth(OAuthEvent::ClientRegistered);
    Ok(client)
}

/// The client a `client_id` names: a registered one, or the one whose
/// metadata document that URL is (fetched when not cached in the last hour).
pub async fn resolve_client(
    delivery: &Delivery,
    server: &OAuthServer,
    client_id: &str,
) -> Result<OAuthClient, ClientRefused> {
    let store = delivery.store();
    if client_id.starts_with(REGISTERED_CLIENT_PREFIX) {
        return store
            .get_oauth_client(client_id)
            .await?
            .ok_or(ClientRefused::Unknown);
    }
    let url = oauth::check_metadata_url(client_id, server.allow_private)
        .map_err(|e| ClientRefused::Metadata(e.message))?;
    let now = store.clock().now();
    if let Some(cached) = store.get_oauth_client(client_id).await?
        && cached
            .fetched_at
            .is_some_and(|at| now.as_millis() - at.as_millis() < METADATA_CACHE_MS)
    {
        return Ok(cached);
    }
    let document = fetch_metadata(server, url).await?;
    let input: ClientMetadataInput = serde_json::from_slice(&document).map_err(|_| {
        ClientRefused::Metadata("the metadata document is not a JSON object".into())
    })?;
    if input.client_id.as_deref() != Some(client_id) {
        return Err(ClientRefused::Metadata(
            "the metadata document's client_id is not its own URL".into(),
        ));
    }
    let metadata = input
        .check()
        .map_err(|e| ClientRefused::Metadata(format!("the metadata document's {e}")))?;
    Ok(store
        .put_oauth_document_client(client_id, &metadata)
        .await?)
}

/// GETs a metadata document: no redirects, no private address (unless
/// allowed; checked at dial time), at most 5 KiB, within 5 s.
async fn fetch_metadata(server: &OAuthServer, url: reqwest::Url) -> Result<Vec<u8>, ClientRefused> {
    let refused = |why: String| ClientRefused::Metadata(why);
    if !server.allow_private
        && let Some(private) = guarded::refuse_literal(&url)
    {
        return Err(refused(format!(
            "the metadata URL's address {} is private (allowed with \
             --allow-private-client-metadata)",
            private.0
        )));
    }
    let fetch = async {
        let mut response = server
            .client
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| {
                if guarded::is_refusal(&e) {
                    refused(
                        "the metadata URL resolves only to private addresses (allowed with \
                         --allow-private-client-metadata)"
                            .into(),
                    )
                } else {
                    refused(format!(
                        "the metadata document could not be fetched ({})",
                        guarded::describe(&e)
                    ))
                }
            })?;
        let status = response.status();
        if status.is_redirection() {
            return Err(refused(
                "the metadata URL redirects; it must serve the document itself".into(),
            ));
        }
        if !status.is_success() {
            return Err(refused(format!(
                "the metadata URL answered {}",
                status.as_u16()
            )));
        }
        if response
            .content_length()
            .is_some_and(|n| n > MAX_METADATA_BYTES as u64)
        {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| {
            refused(format!(
                "the metadata document could not be read ({})",
                guarded::describe(&e)
            ))
        })? {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_METADATA_BYTES {
                return Err(too_large());
            }
        }
        Ok(body)
    };
    tokio::time::timeout(METADATA_FETCH_TIMEOUT, fetch)
        .await
        .unwrap_or_else(|_| {
            Err(refused(format!(
                "the metadata document took more than {} s",
                METADATA_FETCH_TIMEOUT.as_secs()
            )))
        })
}

fn too_large() -> ClientRefused {
    ClientRefused::Metadata(format!(
        "the metadata document is larger than {MAX_METADATA_BYTES} bytes"
    ))
}

/// What a human consented to: a client's access to one of their endpoints.
#[derive(Debug, Clone)]
pub struct Consent {
    pub client_id: String,
    pub endpoint_id: String,
    pub redirect_uri: String,
    pub code_challenge: String,
    pub resource: String,
}

/// Issues an authorization code for the human's consent: `NotFound` when
/// the endpoint is not an active one of theirs. Returns the code (shown
/// once, in the redirect).
pub async fn issue_code(
    delivery: &Delivery,
    human_id: &str,
    consent: Consent,
) -> StoreResult<String> {
    let code = format!("{CODE_PREFIX}{}", random_token(32));
    delivery
        .store()
        .create_oauth_code(NewOAuthCode {
            code_hash: sha256_hex(&code),
            client_id: consent.client_id,
            human_id: human_id.to_owned(),
            endpoint_id: consent.endpoint_id,
            redirect_uri: consent.redirect_uri,
            code_challenge: consent.code_challenge,
            resource: consent.resource,
        })
        .await?;
    delivery.counters().count_oauth(OAuthEvent::CodeIssued);
    Ok(code)
}

/// A refusal of the token endpoint, as RFC 6749 section 5.2 names it.
#[derive(Debug, thiserror::Error)]
pub enum TokenRefused {
    #[error("{0}")]
    InvalidRequest(String),
    #[error("{0}")]
    InvalidGrant(String),
    #[error("{0}")]
    InvalidClient(String),
    #[error("{0}")]
    InvalidTarget(String),
    #[error("only authorization_code and refresh_token")]
    UnsupportedGrantType,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl TokenRefused {
    /// The `error` code of the JSON answer.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidRequest(_) => "invalid_request",
            Self::InvalidGrant(_) => "invalid_grant",
            Self::InvalidClient(_) => "invalid_client",
            Self::InvalidTarget(_) => "invalid_target",
            Self::UnsupportedGrantType => "unsupported_grant_type",
            Self::Store(_) => "server_error",
        }
    }
}

/// Tokens just issued: the secrets (shown once) and when they expire.
#[derive(Debug)]
pub struct Tokens {
    pub access_token: String,
    pub refresh_token: String,
    pub expires_in: i64,
    pub grant: OAuthGrant,
}

fn mint_tokens() -> (String, String, NewOAuthTokens) {
    let access = format!("{ACCESS_TOKEN_PREFIX}{}", random_token(32));
    let refresh = format!("{REFRESH_TOKEN_PREFIX}{}", random_token(32));
    let hashes = NewOAuthTokens {
        access_hash: sha256_hex(&access),
        refresh_hash: sha256_hex(&refresh),
    };
    (access, refresh, hashes)
}

fn tokens(access: String, refresh: String, issued: OAuthIssued, now: Timestamp) -> Tokens {
    Tokens {
        access_token: access,
        refresh_token: refresh,
        expires_in: ((issued.access_expires_at.as_millis() - now.as_millis()) / 1000).max(0),
        grant: issued.grant,
    }
}

/// What the token endpoint was given for `authorization_code`.
#[derive(Debug)]
pub struct CodeExchange<'a> {
    pub client_id: &'a str,
    pub code: &'a str,
    pub redirect_uri: &'a str,
    pub code_verifier: Option<&'a str>,
    pub resource: Option<&'a str>,
}

/// Redeems a code: it is taken (gone) first, whatever is wrong with the
/// rest, so that a code is tried at most once; then its client, redirect
/// URI, verifier, resource and age must all match.
pub async fn exchange_code(
    delivery: &Delivery,
    exchange: CodeExchange<'_>,
) -> Result<Tokens, TokenRefused> {
    let answer = redeem_code(delivery, exchange).await;
    count_token_answer(delivery, &answer, OAuthEvent::TokensIssued);
    answer
}

/// Counts what the token endpoint answered: `issued` for tokens, a refusal
/// (not a store failure: that is ours, not the client's) as one.
fn count_token_answer(
    delivery: &Delivery,
    answer: &Result<Tokens, TokenRefused>,
    issued: OAuthEvent,
) {
    let event = match answer {
        Ok(_) => issued,
        Err(TokenRefused::Store(_)) => return,
        Err(_) => OAuthEvent::TokenRefused,
    };
    delivery.counters().count_oauth(event);
}

async fn redeem_code(
    delivery: &Delivery,
    exchange: CodeExchange<'_>,
) -> Result<Tokens, TokenRefused> {
    let store = delivery.store();
    let Some(verifier) = exchange.code_verifier.filter(|v| !v.is_empty()) else {
        return Err(TokenRefused::InvalidRequest(
            "code_verifier: required (PKCE)".into(),
        ));
    };
    let taken = store.take_oauth_code(&sha256_hex(exchange.code)).await?;
    let invalid = |why: &str| TokenRefused::InvalidGrant(why.to_owned());
    let Some(code) = taken else {
        return Err(invalid("code: unknown, expired or used already"));
    };
    let now = store.clock().now();
    if !oauth::code_is_fresh(code.expires_at, now) {
        return Err(invalid("code: unknown, expired or used already"));
    }
    if code.client_id != exchange.client_id {
        return Err(invalid("code: issued to another client"));
    }
    if code.redirect_uri != exchange.redirect_uri {
        return Err(invalid("redirect_uri: not the one the code was issued for"));
    }
    if !oauth::verifier_matches(verifier, &code.code_challenge) {
        return Err(invalid("code_verifier: does not match the code_challenge"));
    }
    if let Some(resource) = exchange.resource
        && resource != code.resource
    {
        return Err(TokenRefused::InvalidTarget(
            "resource: not the one the code was issued for".into(),
        ));
    }
    let (access, refresh, hashes) = mint_tokens();
    let issued = match store.create_oauth_grant(&code, hashes).await {
        Ok(issued) => issued,
        Err(StoreError::NotFound) => {
            return Err(invalid("the endpoint is revoked or expired"));
        }
        Err(e) => return Err(e.into()),
    };
    tracing::info!(grant = %issued.grant.id, client = %code.client_id, "oauth grant issued");
    Ok(tokens(access, refresh, issued, now))
}

/// Rotates a refresh token: the one presented is spent and a new pair
/// issued; presenting a spent one revokes the whole grant.
pub async fn refresh(
    delivery: &Delivery,
    client_id: &str,
    refresh_token: &str,
    resource: Option<&str>,
) -> Result<Tokens, TokenRefused> {
    let answer = rotate(delivery, client_id, refresh_token, resource).await;
    count_token_answer(delivery, &answer, OAuthEvent::TokensRefreshed);
    answer
}

async fn rotate(
    delivery: &Delivery,
    client_id: &str,
    refresh_token: &str,
    resource: Option<&str>,
) -> Result<Tokens, TokenRefused> {
    let store = delivery.store();
    let now = store.clock().now();
    let (access, refresh, hashes) = mint_tokens();
    match store
        .refresh_oauth_grant(client_id, &sha256_hex(refresh_token), hashes)
        .await?
    {
        OAuthRefresh::Rotated(issued) => {
            if let Some(resource) = resource
                && resource != issued.grant.resource
            {
                // Rotated already: the new pair is simply never handed out,
                // and the grant stays usable with nothing (the client must
                // authorize again); a misbehaving client gets no token.
                return Err(TokenRefused::InvalidTarget(
                    "resource: not the one this grant is for".into(),
                ));
            }
            Ok(tokens(access, refresh, issued, now))
        }
        OAuthRefresh::Refused => Err(TokenRefused::InvalidGrant(
            "refresh_token: unknown, expired, revoked or another client's".into(),
        )),
        OAuthRefresh::Reused {
            grant_id,
            endpoint_id,
        } => {
            tracing::warn!(grant = %grant_id, "oauth refresh token reused: the grant is revoked");
            delivery.counters().count_oauth(OAuthEvent::RefreshReused);
            delivery.endpoint_changed(&endpoint_id);
            Err(TokenRefused::InvalidGrant(
                "refresh_token: used already; this grant is revoked".into(),
            ))
        }
    }
}

/// Revokes a client's connection to one of the human's endpoints: its
/// access and refresh tokens stop working at once, on every instance.
pub async fn revoke_connection(
    delivery: &Delivery,
    human_id: &str,
    endpoint_id: &str,
    grant_id: &str,
) -> StoreResult<OAuthGrant> {
    let grant = delivery
        .store()
        .revoke_oauth_grant(human_id, endpoint_id, grant_id)
        .await?;
    delivery
        .counters()
        .count_oauth(OAuthEvent::ConnectionRevoked);
    // Other instances drop their cached credentials too.
    delivery.endpoint_changed(endpoint_id);
    Ok(grant)
}

/// Deletes expired codes and tokens, and the tokens of revoked grants.
pub async fn prune(delivery: &Delivery) -> StoreResult<u64> {
    delivery.store().unscoped_prune_oauth().await
}
