//! Endpoints: vended (credential minted, shown once), revoked (sessions end
//! everywhere), deleted, and their default lease changed (every session of
//! the endpoint, on every instance, is told its tool list changed).

use crate::delivery::Delivery;
use crate::domain::Invalid;
use crate::domain::Timestamp;
use crate::domain::client_setup::mcp_url;
use crate::domain::duration::parse_positive_duration;
use crate::domain::ids::{SHOWN_PREFIX_CHARS, sha256_hex};
use crate::domain::lease;
use crate::domain::names::validate_agent_name;
use crate::domain::scope::normalize_scope;
use crate::domain::server_key::{
    LONGEST_TOOL_NAME, default_server_key, max_server_key_len, validate_server_key,
};
use crate::mint::{new_endpoint_credential, new_slug};
use crate::store::{AgentKind, Endpoint, NewEndpoint, Revoked, StoreError, StoreResult, Taken};

use super::agents::parse_kind;
use super::webhooks::{self, IssuedWebhook};

/// What a vend request may say.
#[derive(Debug, Clone, Default)]
pub struct Vend {
    /// The agent's name; created (with `kind`) when it does not exist yet.
    pub agent: String,
    /// Kind of a newly created agent; default `session`.
    pub kind: Option<String>,
    /// The name MCP clients know the endpoint by; default `switchboard-<agent>`.
    pub server_name: Option<String>,
    /// Default `["inbox"]`.
    pub queues: Option<Vec<String>>,
    /// Granted verbs; none = all.
    pub verbs: Option<Vec<String>>,
    /// Lifetime, e.g. `30d`.
    pub expires_in: Option<String>,
    pub default_lease_ttl_seconds: Option<i64>,
    /// Also create a token webhook on the first queue.
    pub webhook: bool,
}

/// A vended endpoint, with what is shown this once.
#[derive(Debug, Clone)]
pub struct Vended {
    pub endpoint: Endpoint,
    /// The bearer credential (`sbk_…`).
    pub credential: String,
    pub agent_created: bool,
    /// The name MCP clients know the endpoint by (chosen or default).
    pub server_name: String,
    pub mcp_url: String,
    pub webhook: Option<IssuedWebhook>,
}

/// A vend request with every field checked: nothing is written (not even
/// the agent a vend creates) until the whole request is known to be good.
struct ValidVend {
    agent: String,
    kind: AgentKind,
    server_name: String,
    chosen_server_name: Option<String>,
    queues: Vec<String>,
    verbs: Vec<String>,
    expires_at: Option<Timestamp>,
    default_lease_ttl_seconds: Option<i64>,
    webhook: bool,
}

impl ValidVend {
    fn parse(vend: Vend, now: Timestamp) -> Result<Self, Invalid> {
        validate_agent_name(&vend.agent).map_err(|e| Invalid::new("agent", e.message))?;
        let kind = match vend.kind.as_deref() {
            Some(k) => parse_kind(k)?,
            None => AgentKind::Session,
        };
        // The name must keep every tool name within Claude's limit, the
        // default one included.
        let server_name = match vend.server_name.as_deref() {
            Some(name) => {
                validate_server_key(name, LONGEST_TOOL_NAME, "server_name")?;
                name.to_owned()
            }
            None => {
                let name = default_server_key(&vend.agent);
                validate_server_key(&name, LONGEST_TOOL_NAME, "agent").map_err(|_| {
                    Invalid::new(
                        "agent",
                        format!(
                            "is too long for the default server name {name:?} (at most {} \
                             characters, so that Claude Code's tool names fit in 64): choose a \
                             shorter agent name, or a server_name",
                            max_server_key_len(LONGEST_TOOL_NAME)
                        ),
                    )
                })?;
                name
            }
        };
        let queues = vend.queues.unwrap_or_else(|| vec!["inbox".to_owned()]);
        let (queues, verbs) = normalize_scope(&queues, &vend.verbs.unwrap_or_default())?;
        let expires_at = match vend.expires_in.as_deref() {
            None => None,
            Some(text) => Some(now.saturating_add(parse_positive_duration(text, "expires_in")?)),
        };
        Ok(Self {
            agent: vend.agent,
            kind,
            server_name,
            chosen_server_name: vend.server_name,
            queues,
            verbs,
            expires_at,
            default_lease_ttl_seconds: lease::validate_endpoint_default(
                vend.default_lease_ttl_seconds,
            )?,
            webhook: vend.webhook,
        })
    }
}

/// Vends an endpoint for the human (creating its agent if needed), and a
/// token webhook on its first queue when asked. A freshly minted slug or
/// credential that collides is drawn again, a few times.
pub async fn vend(
    delivery: &Delivery,
    public_url: &str,
    human_id: &str,
    request: Vend,
) -> StoreResult<Vended> {
    let store = delivery.store();
    let vend = ValidVend::parse(request, store.clock().now())?;
    let mut collision = None;
    for _ in 0..5 {
        let credential = new_endpoint_credential();
        let new = NewEndpoint {
            agent_id: String::new(),
            slug: new_slug(&vend.agent),
            credential_hash: sha256_hex(&credential),
            credential_prefix: credential[..SHOWN_PREFIX_CHARS].to_owned(),
            queues: vend.queues.clone(),
            verbs: vend.verbs.clone(),
            expires_at: vend.expires_at,
            default_lease_ttl_seconds: vend.default_lease_ttl_seconds,
            server_name: vend.chosen_server_name.clone(),
        };
        match store
            .vend_endpoint(human_id, &vend.agent, vend.kind, new)
            .await
        {
            Ok((_agent, endpoint, agent_created)) => {
                let webhook = if vend.webhook {
                    let queue = Some(endpoint.scope_queues[0].clone());
                    Some(
                        webhooks::create(delivery, public_url, human_id, &endpoint, queue, false)
                            .await?,
                    )
                } else {
                    None
                };
                tracing::info!(
                    endpoint = %endpoint.slug,
                    agent = %endpoint.agent_name,
                    "endpoint vended"
                );
                return Ok(Vended {
                    mcp_url: mcp_url(public_url, &endpoint.slug),
                    endpoint,
                    credential,
                    agent_created,
                    server_name: vend.server_name,
                    webhook,
                });
            }
            Err(err @ StoreError::Taken(Taken::SlugOrCredential)) => collision = Some(err),
            Err(e) => return Err(e),
        }
    }
    Err(collision.unwrap_or_else(|| StoreError::internal("vend: no slug could be drawn")))
}

/// Revokes an endpoint at once: its live todos become dead letters, its
/// credential stops working, and its sessions end on every instance.
pub async fn revoke(
    delivery: &Delivery,
    human_id: &str,
    endpoint: &Endpoint,
) -> StoreResult<Revoked> {
    let revoked = delivery
        .store()
        .revoke_endpoint(human_id, &endpoint.id)
        .await?;
    let closed = delivery.endpoint_revoked(&endpoint.id);
    tracing::info!(
        endpoint = %endpoint.slug,
        dead_lettered = revoked.dead_lettered,
        sessions_closed = closed,
        "endpoint revoked"
    );
    Ok(revoked)
}

/// Deletes a revoked endpoint and its history (`Conflict` while active).
pub async fn delete(delivery: &Delivery, human_id: &str, endpoint_id: &str) -> StoreResult<()> {
    delivery
        .store()
        .delete_endpoint(human_id, endpoint_id)
        .await
}

/// Stamps the endpoint's server-side `last_seen` (and, when the client
/// reported one, its `last_contact`): an authenticated request is a sign
/// of life. A failure is logged and never fails the request.
pub async fn stamp_seen(
    delivery: &Delivery,
    endpoint: &Endpoint,
    now: Timestamp,
    last_contact: Option<Timestamp>,
) {
    if let Err(e) = delivery
        .store()
        .stamp_endpoint_seen(&endpoint.id, now, last_contact)
        .await
    {
        tracing::warn!(endpoint = %endpoint.slug, error = %e, "could not stamp last_seen");
    }
}

/// How long a test ring waits for its answer unless told, and at most (seconds).
pub const TEST_RING_WAIT_SECONDS: i64 = 10;
pub const MAX_TEST_RING_WAIT_SECONDS: i64 = 120;

/// Rings one hearer of the endpoint with a test doorbell and waits up to
/// `wait_seconds` (1–120, default 10) for its answer
/// (`switchboard doctor --ring`).
pub async fn test_ring(
    delivery: &Delivery,
    endpoint: &Endpoint,
    wait_seconds: Option<i64>,
) -> StoreResult<crate::delivery::TestRing> {
    let wait = wait_seconds.unwrap_or(TEST_RING_WAIT_SECONDS);
    if !(1..=MAX_TEST_RING_WAIT_SECONDS).contains(&wait) {
        return Err(Invalid::new(
            "wait_seconds",
            format!("must be 1–{MAX_TEST_RING_WAIT_SECONDS} seconds"),
        )
        .into());
    }
    if !endpoint.is_active() {
        return Err(StoreError::Conflict(format!(
            "endpoint {} is revoked: nothing can hear it",
            endpoint.slug
        )));
    }
    let outcome = delivery
        .test_ring(endpoint, std::time::Duration::from_secs(wait as u64))
        .await;
    tracing::info!(endpoint = %endpoint.slug, outcome = ?outcome, "test doorbell");
    Ok(outcome)
}

/// Sets (or, with `None`, clears) the endpoint's default lease, 60–86 400
/// seconds. The tool descriptions quote it, so every session of the
/// endpoint on every instance is told its tool list changed.
pub async fn set_default_lease(
    delivery: &Delivery,
    endpoint_id: &str,
    seconds: Option<i64>,
) -> StoreResult<Endpoint> {
    let updated = delivery
        .store()
        .set_default_lease(endpoint_id, seconds)
        .await?;
    delivery.endpoint_changed(endpoint_id);
    Ok(updated)
}
