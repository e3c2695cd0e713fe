//! The pure rules of Switchboard's OAuth 2.1 authorization server
//! (`docs/oauth.md`): PKCE (S256 only), redirect URIs and how one is
//! matched (exact, any port on loopback), the `resource` an authorization
//! names (one endpoint's MCP URL), a client's metadata, and how long codes
//! and tokens live. No IO: every rule takes what it needs as arguments.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use url::{Host, Url};

use super::{Invalid, Timestamp};

/// An authorization code is good for this long (the spec: ≤ 60 s).
pub const CODE_TTL_MS: i64 = 60_000;
/// An access token lives an hour at most (less when its endpoint expires sooner).
pub const ACCESS_TTL_MS: i64 = 3_600_000;
/// A refresh token lives 30 days unless used (each use rotates it).
pub const REFRESH_TTL_MS: i64 = 30 * 86_400_000;
/// A client metadata document fetched is trusted this long before it is fetched again.
pub const METADATA_CACHE_MS: i64 = 3_600_000;
/// A registered client that never got a code this long after registering
/// is deleted (registration is open to anyone: the table must not grow
/// with abandoned or hostile registrations).
pub const UNUSED_CLIENT_MS: i64 = 86_400_000;
/// A client metadata document may be at most this large.
pub const MAX_METADATA_BYTES: usize = 5 * 1024;

/// Prefixes of the secrets the authorization server mints: access tokens,
/// refresh tokens, authorization codes. Dynamically registered clients'
/// ids start with [`REGISTERED_CLIENT_PREFIX`] (public, not a secret).
pub const ACCESS_TOKEN_PREFIX: &str = "sbo_";
pub const REFRESH_TOKEN_PREFIX: &str = "sbr_";
pub const CODE_PREFIX: &str = "sbc_";
pub const REGISTERED_CLIENT_PREFIX: &str = "oc_";

/// At most this many redirect URIs per client, each at most this long.
pub const MAX_REDIRECT_URIS: usize = 10;
const MAX_URI_BYTES: usize = 2000;
const MAX_CLIENT_NAME_BYTES: usize = 200;

/// `code_verifier` → `code_challenge` by S256 (RFC 7636 section 4.2).
pub fn s256_challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// A verifier is 43 to 128 unreserved characters (RFC 7636 section 4.1).
pub fn check_verifier(verifier: &str) -> Result<(), Invalid> {
    if !(43..=128).contains(&verifier.len()) || !verifier.bytes().all(is_unreserved) {
        return Err(Invalid::new(
            "code_verifier",
            "must be 43 to 128 characters of [A-Za-z0-9-._~]",
        ));
    }
    Ok(())
}

/// The challenge of an authorization request: S256 only (OAuth 2.1 lets a
/// server refuse `plain`, and a server that accepts it gains nothing).
pub fn check_challenge(challenge: Option<&str>, method: Option<&str>) -> Result<String, Invalid> {
    let Some(challenge) = challenge.filter(|c| !c.is_empty()) else {
        return Err(Invalid::new("code_challenge", "required (PKCE with S256)"));
    };
    match method {
        Some("S256") => {}
        Some(_) => {
            return Err(Invalid::new(
                "code_challenge_method",
                "only S256 is supported",
            ));
        }
        None => {
            return Err(Invalid::new(
                "code_challenge_method",
                "required: S256 (plain is refused)",
            ));
        }
    }
    if challenge.len() != 43 || !challenge.bytes().all(is_base64url) {
        return Err(Invalid::new(
            "code_challenge",
            "must be the base64url SHA-256 of the verifier (43 characters)",
        ));
    }
    Ok(challenge.to_owned())
}

/// Whether `verifier` is the one `challenge` was made from. Constant time
/// is not needed: the challenge is public, the verifier is what is secret.
pub fn verifier_matches(verifier: &str, challenge: &str) -> bool {
    check_verifier(verifier).is_ok() && s256_challenge(verifier) == challenge
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn is_base64url(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_')
}

/// Whether a URL's host is a loopback one a native client listens on.
fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// A redirect URI a client may register: `https`, `http` on loopback (a
/// native client's listener), or a private-use scheme with a dot in it
/// (`com.example.app:/callback`, RFC 8252 section 7.1); never a fragment,
/// never credentials.
pub fn check_redirect_uri(uri: &str) -> Result<Url, Invalid> {
    let field = "redirect_uris";
    if uri.len() > MAX_URI_BYTES {
        return Err(Invalid::new(field, "a redirect URI is at most 2000 bytes"));
    }
    let url = Url::parse(uri)
        .map_err(|_| Invalid::new(field, format!("{uri:?} is not an absolute URL")))?;
    if url.fragment().is_some() {
        return Err(Invalid::new(field, "a redirect URI has no fragment"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Invalid::new(field, "a redirect URI carries no credentials"));
    }
    let ok = match url.scheme() {
        "https" => url.host().is_some(),
        "http" => is_loopback(&url),
        scheme => scheme.contains('.'),
    };
    if !ok {
        return Err(Invalid::new(
            field,
            format!(
                "{uri:?}: use https, http on a loopback address, or a private-use scheme \
                 such as com.example.app:"
            ),
        ));
    }
    Ok(url)
}

/// Whether the `redirect_uri` of a request is one the client registered:
/// the same string, except that a loopback `http` URI matches on any port
/// (RFC 8252 section 7.3: a native client picks a free one per run).
pub fn redirect_uri_matches(registered: &str, presented: &str) -> bool {
    if registered == presented {
        return true;
    }
    let (Ok(r), Ok(p)) = (Url::parse(registered), Url::parse(presented)) else {
        return false;
    };
    r.scheme() == "http"
        && p.scheme() == "http"
        && is_loopback(&r)
        && r.host() == p.host()
        && r.path() == p.path()
        && r.query() == p.query()
        && r.fragment().is_none()
        && p.fragment().is_none()
        && p.username().is_empty()
        && p.password().is_none()
}

/// The slug of the MCP URL `resource` names (RFC 8707): exactly
/// `<public URL>/mcp/<slug>`, nothing else.
pub fn resource_slug<'a>(public_url: &str, resource: &'a str) -> Option<&'a str> {
    let base = public_url.trim_end_matches('/');
    let rest = resource.strip_prefix(base)?.strip_prefix("/mcp/")?;
    let ok = !rest.is_empty()
        && rest
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    ok.then_some(rest)
}

/// The MCP URL of an endpoint: the `resource` its tokens are for.
pub fn mcp_url(public_url: &str, slug: &str) -> String {
    format!("{}/mcp/{slug}", public_url.trim_end_matches('/'))
}

/// Where an MCP URL's protected-resource metadata is (RFC 9728 section
/// 3.1: the well-known name inserted before the resource's path).
pub fn resource_metadata_url(public_url: &str, slug: &str) -> String {
    format!(
        "{}/.well-known/oauth-protected-resource/mcp/{slug}",
        public_url.trim_end_matches('/')
    )
}

/// When an access token minted at `now` expires: an hour on, or when its
/// endpoint does, whichever is sooner.
pub fn access_expiry(now: Timestamp, endpoint_expires_at: Option<Timestamp>) -> Timestamp {
    let hour = Timestamp::from_millis(now.as_millis() + ACCESS_TTL_MS);
    endpoint_expires_at.map_or(hour, |at| at.min(hour))
}

/// Whether an authorization code created at `created_at` may still be redeemed.
pub fn code_is_fresh(expires_at: Timestamp, now: Timestamp) -> bool {
    now < expires_at
}

/// A `client_id` that is a Client ID Metadata Document URL: `https` with a
/// path, no fragment, no credentials, no dot segments. With
/// `allow_loopback_http` (a server that may dial private addresses, for
/// tests and local setups) an `http` URL on loopback is accepted too.
pub fn check_metadata_url(client_id: &str, allow_loopback_http: bool) -> Result<Url, Invalid> {
    let field = "client_id";
    let url = Url::parse(client_id)
        .map_err(|_| Invalid::new(field, "not a registered client nor an https URL"))?;
    let scheme_ok = url.scheme() == "https"
        || (allow_loopback_http && url.scheme() == "http" && is_loopback(&url));
    if !scheme_ok {
        return Err(Invalid::new(field, "a client metadata URL must be https"));
    }
    if url.fragment().is_some() || !url.username().is_empty() || url.password().is_some() {
        return Err(Invalid::new(
            field,
            "a client metadata URL has no fragment and no credentials",
        ));
    }
    if url.path() == "/" || url.path().split('/').any(|s| s == "." || s == "..") {
        return Err(Invalid::new(
            field,
            "a client metadata URL has a path without dot segments",
        ));
    }
    // The document names itself: the exact string, as the client sends it.
    if url.as_str() != client_id {
        return Err(Invalid::new(
            field,
            "a client metadata URL must be normalised",
        ));
    }
    Ok(url)
}

/// What a client says of itself, registered (RFC 7591) or in its metadata
/// document. Unknown fields are ignored (RFC 7591 section 2).
#[derive(Debug, Clone, Deserialize, Default)]
pub struct ClientMetadataInput {
    #[serde(default)]
    pub client_id: Option<String>,
    #[serde(default)]
    pub client_name: Option<String>,
    #[serde(default)]
    pub client_uri: Option<String>,
    #[serde(default)]
    pub redirect_uris: Option<Vec<String>>,
    #[serde(default)]
    pub grant_types: Option<Vec<String>>,
    #[serde(default)]
    pub response_types: Option<Vec<String>>,
    #[serde(default)]
    pub token_endpoint_auth_method: Option<String>,
}

/// A client's metadata, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientMetadata {
    pub name: Option<String>,
    pub client_uri: Option<String>,
    pub redirect_uris: Vec<String>,
}

impl ClientMetadataInput {
    /// Checks what a public client may say: redirect URIs (1 to 10), the
    /// `authorization_code`/`refresh_token` grants, `code` responses, and
    /// no client authentication (`none`): this server has public clients only.
    pub fn check(self) -> Result<ClientMetadata, Invalid> {
        let uris = self.redirect_uris.unwrap_or_default();
        if uris.is_empty() || uris.len() > MAX_REDIRECT_URIS {
            return Err(Invalid::new(
                "redirect_uris",
                format!("1 to {MAX_REDIRECT_URIS} redirect URIs required"),
            ));
        }
        for uri in &uris {
            check_redirect_uri(uri)?;
        }
        if let Some(method) = &self.token_endpoint_auth_method
            && method != "none"
        {
            return Err(Invalid::new(
                "token_endpoint_auth_method",
                "only none: clients of this server are public (PKCE, no secret)",
            ));
        }
        if let Some(grants) = &self.grant_types
            && let Some(bad) = grants
                .iter()
                .find(|g| !matches!(g.as_str(), "authorization_code" | "refresh_token"))
        {
            return Err(Invalid::new(
                "grant_types",
                format!("{bad:?} is not supported (authorization_code, refresh_token)"),
            ));
        }
        if let Some(types) = &self.response_types
            && types.iter().any(|t| t != "code")
        {
            return Err(Invalid::new("response_types", "only code is supported"));
        }
        let name = self
            .client_name
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty());
        if let Some(name) = &name
            && (name.len() > MAX_CLIENT_NAME_BYTES || name.chars().any(char::is_control))
        {
            return Err(Invalid::new("client_name", "one line of at most 200 bytes"));
        }
        let client_uri = match self.client_uri.filter(|u| !u.is_empty()) {
            Some(uri) => {
                let ok = uri.len() <= MAX_URI_BYTES
                    && Url::parse(&uri).is_ok_and(|u| u.scheme() == "https");
                if !ok {
                    return Err(Invalid::new("client_uri", "an https URL"));
                }
                Some(uri)
            }
            None => None,
        };
        Ok(ClientMetadata {
            name,
            client_uri,
            redirect_uris: uris,
        })
    }
}

/// The host a redirect URI sends the browser to, as the consent page
/// shows it (`claude.ai`, `127.0.0.1`, `com.example.app:`).
pub fn redirect_host(uri: &str) -> String {
    match Url::parse(uri) {
        Ok(url) => match url.host_str() {
            Some(host) => host.to_owned(),
            None => format!("{}:", url.scheme()),
        },
        Err(_) => uri.chars().take(60).collect(),
    }
}

/// The origin a redirect goes to (`scheme://host[:port]`), for the consent
/// page's `form-action`; `None` for a scheme without an origin.
pub fn redirect_origin(uri: &str) -> Option<String> {
    let url = Url::parse(uri).ok()?;
    match url.origin() {
        url::Origin::Tuple(..) => Some(url.origin().ascii_serialization()),
        url::Origin::Opaque(_) => Some(format!("{}:", url.scheme())),
    }
}

/// The redirect back to a client: its `redirect_uri` with `params` added
/// to whatever query it has (RFC 6749 section 4.1.2).
pub fn redirect_with(redirect_uri: &str, params: &[(&str, &str)]) -> Option<String> {
    let mut url = Url::parse(redirect_uri).ok()?;
    {
        let mut query = url.query_pairs_mut();
        for (k, v) in params {
            query.append_pair(k, v);
        }
    }
    Some(url.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 7636 appendix B.
    const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

    #[test]
    fn s256_is_rfc_7636s_example() {
        assert_eq!(s256_challenge(VERIFIER), CHALLENGE);
        assert!(verifier_matches(VERIFIER, CHALLENGE));
        assert!(!verifier_matches(&VERIFIER.replace('d', "e"), CHALLENGE));
        assert!(!verifier_matches("short", &s256_challenge("short")));
    }

    #[test]
    fn only_s256_challenges_are_accepted() {
        assert_eq!(
            check_challenge(Some(CHALLENGE), Some("S256")).unwrap(),
            CHALLENGE
        );
        assert_eq!(
            check_challenge(Some(CHALLENGE), Some("plain"))
                .unwrap_err()
                .field,
            "code_challenge_method"
        );
        assert_eq!(
            check_challenge(Some(CHALLENGE), None).unwrap_err().field,
            "code_challenge_method"
        );
        assert_eq!(
            check_challenge(None, Some("S256")).unwrap_err().field,
            "code_challenge"
        );
        assert_eq!(
            check_challenge(Some("abc"), Some("S256"))
                .unwrap_err()
                .field,
            "code_challenge"
        );
    }

    #[test]
    fn redirect_uris_match_exactly_except_the_loopback_port() {
        let cases = [
            ("https://claude.ai/cb", "https://claude.ai/cb", true),
            ("https://claude.ai/cb", "https://claude.ai/cb/", false),
            ("https://claude.ai/cb", "https://claude.ai/cb?x=1", false),
            ("https://claude.ai/cb", "https://claude.ai:8443/cb", false),
            ("http://127.0.0.1/cb", "http://127.0.0.1:53124/cb", true),
            ("http://127.0.0.1:1/cb", "http://127.0.0.1:53124/cb", true),
            ("http://localhost/cb", "http://localhost:9/cb", true),
            ("http://[::1]/cb", "http://[::1]:9/cb", true),
            ("http://127.0.0.1/cb", "http://127.0.0.1:9/other", false),
            ("http://127.0.0.1/cb", "http://localhost:9/cb", false),
            ("http://127.0.0.1/cb", "https://127.0.0.1:9/cb", false),
            ("http://127.0.0.1/cb", "http://u:p@127.0.0.1:9/cb", false),
        ];
        for (registered, presented, expected) in cases {
            assert_eq!(
                redirect_uri_matches(registered, presented),
                expected,
                "{registered} vs {presented}"
            );
        }
    }

    #[test]
    fn redirect_uris_are_https_loopback_http_or_private_schemes() {
        for ok in [
            "https://claude.ai/api/mcp/auth_callback",
            "http://127.0.0.1:33418/callback",
            "http://localhost/cb",
            "http://[::1]:8/cb",
            "com.example.app:/oauth",
        ] {
            assert!(check_redirect_uri(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://example.com/cb",
            "https://claude.ai/cb#frag",
            "https://u:p@claude.ai/cb",
            "javascript:alert(1)",
            "/relative",
        ] {
            assert!(check_redirect_uri(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_resource_names_exactly_one_mcp_url_of_this_server() {
        let base = "https://sb.example.com";
        assert_eq!(
            resource_slug(base, "https://sb.example.com/mcp/worker-ab12"),
            Some("worker-ab12")
        );
        assert_eq!(
            resource_slug("https://sb.example.com/", "https://sb.example.com/mcp/w"),
            Some("w")
        );
        for bad in [
            "https://other.example.com/mcp/worker-ab12",
            "https://sb.example.com/mcp/",
            "https://sb.example.com/mcp/w/x",
            "https://sb.example.com/mcp/w?x=1",
            "https://sb.example.com/api/v1",
            "https://sb.example.com.evil/mcp/w",
        ] {
            assert_eq!(resource_slug(base, bad), None, "{bad}");
        }
        assert_eq!(
            resource_metadata_url(base, "w"),
            "https://sb.example.com/.well-known/oauth-protected-resource/mcp/w"
        );
    }

    #[test]
    fn an_access_token_never_outlives_its_endpoint() {
        let now = Timestamp::from_millis(1_000);
        assert_eq!(
            access_expiry(now, None),
            Timestamp::from_millis(1_000 + ACCESS_TTL_MS)
        );
        let soon = Timestamp::from_millis(5_000);
        assert_eq!(access_expiry(now, Some(soon)), soon);
        assert!(code_is_fresh(
            Timestamp::from_millis(61_000),
            Timestamp::from_millis(60_999)
        ));
        assert!(!code_is_fresh(
            Timestamp::from_millis(61_000),
            Timestamp::from_millis(61_000)
        ));
    }

    #[test]
    fn metadata_urls_are_https_with_a_path() {
        assert!(check_metadata_url("https://app.example.com/oauth/client.json", false).is_ok());
        for bad in [
            "http://app.example.com/client.json",
            "https://app.example.com/",
            "https://app.example.com",
            "https://app.example.com/a/../b",
            "https://app.example.com/c.json#x",
            "https://u@app.example.com/c.json",
            "oc_123",
        ] {
            assert!(check_metadata_url(bad, false).is_err(), "{bad}");
        }
        assert!(check_metadata_url("http://127.0.0.1:9/c.json", false).is_err());
        assert!(check_metadata_url("http://127.0.0.1:9/c.json", true).is_ok());
        assert!(check_metadata_url("http://10.0.0.1/c.json", true).is_err());
    }

    #[test]
    fn client_metadata_is_checked_field_by_field() {
        let input = |json: serde_json::Value| -> ClientMetadataInput {
            serde_json::from_value(json).unwrap()
        };
        let ok = input(serde_json::json!({
            "client_name": " Claude ",
            "redirect_uris": ["https://claude.ai/api/mcp/auth_callback"],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            "scope": "anything",
        }))
        .check()
        .unwrap();
        assert_eq!(ok.name.as_deref(), Some("Claude"));
        let refused = |json, field| {
            assert_eq!(input(json).check().unwrap_err().field, field);
        };
        refused(serde_json::json!({}), "redirect_uris");
        refused(
            serde_json::json!({"redirect_uris": ["http://example.com/cb"]}),
            "redirect_uris",
        );
        refused(
            serde_json::json!({"redirect_uris": ["https://a.b/c"], "token_endpoint_auth_method": "client_secret_basic"}),
            "token_endpoint_auth_method",
        );
        refused(
            serde_json::json!({"redirect_uris": ["https://a.b/c"], "grant_types": ["client_credentials"]}),
            "grant_types",
        );
        refused(
            serde_json::json!({"redirect_uris": ["https://a.b/c"], "client_name": "a\nb"}),
            "client_name",
        );
    }

    #[test]
    fn a_redirect_keeps_the_clients_own_query() {
        assert_eq!(
            redirect_with(
                "https://c.example/cb?x=1",
                &[("code", "a b"), ("state", "s")]
            )
            .unwrap(),
            "https://c.example/cb?x=1&code=a+b&state=s"
        );
    }

    #[test]
    fn the_consent_page_shows_where_a_redirect_goes() {
        assert_eq!(redirect_host("https://claude.ai/cb"), "claude.ai");
        assert_eq!(redirect_host("com.example.app:/cb"), "com.example.app:");
        assert_eq!(
            redirect_origin("http://127.0.0.1:5/cb").as_deref(),
            Some("http://127.0.0.1:5")
        );
    }
}
