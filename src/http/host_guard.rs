//! The DNS-rebinding guard, on every route (`docs/mcp.md`; issue 12): which
//! `Host` and `Origin` headers a request may carry.
//!
//! A DNS-rebinding page reaches a loopback server under the attacker's own
//! name, so its requests carry that name in `Host` (and its page's origin in
//! `Origin`). Refusing names we do not answer to closes the hole on every
//! route at once: health, the API, MCP, webhooks, `/metrics` and the board.
//!
//! - Bound to loopback, `Host` must be `localhost`, a `127.0.0.0/8` address or
//!   `[::1]` (any port), a name given with `--allowed-host`, or the host of
//!   `--public-url`.
//! - Bound elsewhere, `Host` is checked only when `--allowed-host` was given:
//!   then the names above, and any IP literal (a rebinding attack always
//!   comes under a DNS name, and probes often address a pod by its IP).
//! - `Origin`, when present, must be the request's own origin (`http(s)://`
//!   and exactly its `Host`), an allowed name, or (bound to loopback) a
//!   loopback origin. `null` and anything unparsable are refused.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

use super::error::ApiError;

/// Which names this server answers to.
#[derive(Debug, Clone, Default)]
pub struct HostPolicy {
    /// Listening on a loopback address.
    loopback: bool,
    /// Whether `Host` is checked at all.
    check_host: bool,
    /// `--allowed-host` names and the public URL's host, lower-case, without
    /// a port. A leading dot (`.example.com`) allows the domain and every
    /// name under it.
    names: Vec<String>,
}

/// An `--allowed-host` value that is not a host name or address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--allowed-host {0:?}: expected a host name or IP address, optionally .domain")]
pub struct BadAllowedHost(pub String);

impl HostPolicy {
    /// The policy of a server listening on a loopback address or not, with
    /// the `--allowed-host` names and the `--public-url` (its host is always
    /// allowed).
    pub fn new(
        loopback: bool,
        allowed_hosts: &[String],
        public_url: Option<&str>,
    ) -> Result<Self, BadAllowedHost> {
        let mut names = Vec::new();
        for given in allowed_hosts {
            names.push(parse_allowed(given).ok_or_else(|| BadAllowedHost(given.clone()))?);
        }
        if let Some(host) = public_url.and_then(url_host) {
            names.push(host);
        }
        Ok(Self {
            loopback,
            check_host: loopback || !allowed_hosts.is_empty(),
            names,
        })
    }

    /// Whether a `Host` header value names this server.
    pub fn host_allowed(&self, host: Option<&str>) -> bool {
        if !self.check_host {
            return true;
        }
        let Some(name) = host.and_then(|h| split_authority(h.trim())).map(|(n, _)| n) else {
            return false;
        };
        if is_loopback_name(&name) || self.named(&name) {
            return true;
        }
        // Off loopback, an IP literal is not what a rebinding page can send.
        !self.loopback && is_ip_literal(&name)
    }

    /// Whether a browser page of `origin` may talk to this server.
    pub fn origin_allowed(&self, origin: &str, host: Option<&str>) -> bool {
        let origin = origin.trim();
        let Some((scheme, authority)) = origin.split_once("://") else {
            return false;
        };
        if !(scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")) {
            return false;
        }
        let Some((name, _)) = split_authority(authority) else {
            return false;
        };
        if host.is_some_and(|h| h.trim().eq_ignore_ascii_case(authority)) {
            return true;
        }
        self.named(&name) || (self.loopback && is_loopback_origin_name(&name))
    }

    fn named(&self, name: &str) -> bool {
        self.names
            .iter()
            .any(|allowed| match allowed.strip_prefix('.') {
                Some(domain) => name == domain || name.ends_with(allowed.as_str()),
                None => name == allowed,
            })
    }

    /// The refusal of a request, if it is refused: which header, and why.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        if !self.host_allowed(host) {
            return Err(ApiError::forbidden(
                "host",
                "this server does not answer to this Host (add it with --allowed-host)",
            ));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let allowed = origin.to_str().is_ok_and(|o| self.origin_allowed(o, host));
            if !allowed {
                return Err(ApiError::forbidden("origin", "this Origin is not allowed"));
            }
        }
        Ok(())
    }
}

/// Whether a browser page of `origin` is this server itself: its
/// authority is exactly the request's `Host` (name and port), or it is the
/// origin of `public_url` (a proxy that rewrites `Host`). Stricter than
/// [`HostPolicy::origin_allowed`], which lets any loopback page talk to a
/// loopback server: the board's sign-in and forms use this (issue 48: a
/// page on another local port signed a browser in as the page's token).
pub fn same_origin(origin: &str, host: Option<&str>, public_url: &str) -> bool {
    let origin = origin.trim();
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    if !(scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https"))
        || split_authority(authority).is_none()
    {
        return false;
    }
    if host.is_some_and(|h| h.trim().eq_ignore_ascii_case(authority)) {
        return true;
    }
    let public = public_url.trim().trim_end_matches('/');
    let public_origin = match public.split_once("://") {
        Some((s, rest)) => format!("{s}://{}", rest.split('/').next().unwrap_or("")),
        None => return false,
    };
    origin.eq_ignore_ascii_case(&public_origin)
}

/// Middleware for the whole router: a refused `Host` or `Origin` is 403 in
/// the error envelope, before any surface sees the request.
pub async fn guard(
    State(policy): State<Arc<HostPolicy>>,
    request: Request,
    next: Next,
) -> Response {
    match policy.check(request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            let mut response = refusal.into_response();
            let headers = response.headers_mut();
            headers.insert(
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            );
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
    }
}

/// `name`, `name:port`, `[v6]` or `[v6]:port` → the lower-case name (an
/// IPv6 address without brackets) and the port text, if the authority is
/// well formed: no user info, path or query, a port of 1–5 digits.
fn split_authority(authority: &str) -> Option<(String, &str)> {
    if authority.is_empty() || authority.contains(['/', '@', '?', '#', ' ']) {
        return None;
    }
    let (name, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (name, port) = rest.split_once(']')?;
        name.parse::<std::net::Ipv6Addr>().ok()?;
        (name, port)
    } else {
        match authority.find(':') {
            Some(i) => (&authority[..i], &authority[i..]),
            None => (authority, ""),
        }
    };
    let port_ok = port.is_empty()
        || port.strip_prefix(':').is_some_and(|p| {
            !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit())
        });
    (port_ok && !name.is_empty()).then(|| (name.to_ascii_lowercase(), port))
}

/// A URL's host naming this machine (`localhost` in any case, `127.0.0.0/8`,
/// `::1` with or without its brackets): where a local file may stand in for
/// a secret (`switchboard login`, the first start's banner).
pub fn is_loopback_host(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    is_loopback_name(&bare.to_ascii_lowercase())
}

/// A `Host` naming the loopback interface: `localhost`, `127.0.0.0/8`, `::1`.
fn is_loopback_name(name: &str) -> bool {
    name == "localhost"
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A loopback origin a local tool's page may have: `localhost`,
/// `127.0.0.1` or `[::1]`.
fn is_loopback_origin_name(name: &str) -> bool {
    name == "localhost" || name == "127.0.0.1" || name == "::1"
}

fn is_ip_literal(name: &str) -> bool {
    name.parse::<std::net::IpAddr>().is_ok()
}

/// An `--allowed-host` value: a DNS name (`.domain` for a whole domain), an
/// IP address, either optionally with a port (ignored: any port is allowed).
fn parse_allowed(given: &str) -> Option<String> {
    let given = given.trim();
    let (wildcard, rest) = match given.strip_prefix('.') {
        Some(rest) => (true, rest),
        None => (false, given),
    };
    let (name, _) = split_authority(rest)?;
    let dns_ok = name.split('.').all(|label| {
        !label.is_empty()
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    });
    if !(dns_ok || (!wildcard && is_ip_literal(&name))) {
        return None;
    }
    Some(if wildcard { format!(".{name}") } else { name })
}

/// The host of `scheme://host[:port][/…]`, lower-case.
fn url_host(url: &str) -> Option<String> {
    let (_, rest) = url.trim().split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    split_authority(authority).map(|(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loopback() -> HostPolicy {
        HostPolicy::new(true, &[], None).unwrap()
    }

    #[test]
    fn the_same_origin_is_exactly_this_host_and_port() {
        let public = "https://queue.example.com/base";
        for ok in [
            ("http://127.0.0.1:8080", "127.0.0.1:8080"),
            ("http://LOCALHOST:8080", "localhost:8080"),
            ("https://queue.example.com", "10.0.0.5:8080"),
            ("https://queue.example.com", "queue.example.com"),
        ] {
            assert!(same_origin(ok.0, Some(ok.1), public), "{ok:?}");
        }
        for refused in [
            ("http://127.0.0.1:3000", "127.0.0.1:8080"),
            ("http://localhost:8080", "127.0.0.1:8080"),
            ("http://127.0.0.1", "127.0.0.1:8080"),
            ("null", "127.0.0.1:8080"),
            ("http://queue.example.com", "10.0.0.5:8080"),
            ("https://queue.example.com:444", "10.0.0.5:8080"),
            ("http://evil.example", "evil.example:80"),
        ] {
            assert!(
                !same_origin(refused.0, Some(refused.1), public),
                "{refused:?}"
            );
        }
        assert!(!same_origin("http://127.0.0.1:8080", None, public));
    }

    #[test]
    fn on_loopback_only_loopback_and_allowed_names_pass() {
        let policy = HostPolicy::new(
            true,
            &["switchboard.test".into(), ".corp.example".into()],
            Some("https://queue.example.com/base"),
        )
        .unwrap();
        for ok in [
            "localhost",
            "localhost:8080",
            "LOCALHOST:1",
            "127.0.0.1",
            "127.0.0.1:8080",
            "127.1.2.3:80",
            "[::1]",
            "[::1]:8080",
            "switchboard.test:8080",
            "corp.example",
            "a.b.corp.example:443",
            "queue.example.com",
        ] {
            assert!(policy.host_allowed(Some(ok)), "{ok}");
        }
        for bad in [
            "evil.example.com",
            "evil.example:8080",
            "10.0.0.1",
            "localhost.evil.example",
            "[::2]",
            "xcorp.example",
            "switchboard.test.evil",
            "user@localhost",
            "localhost:abc",
            "",
        ] {
            assert!(!policy.host_allowed(Some(bad)), "{bad}");
        }
        assert!(!policy.host_allowed(None));
    }

    #[test]
    fn off_loopback_host_is_checked_only_when_names_are_given() {
        let open = HostPolicy::new(false, &[], None).unwrap();
        assert!(open.host_allowed(Some("anything.example")));
        assert!(open.host_allowed(None));
        let named = HostPolicy::new(false, &["queue.example.com".into()], None).unwrap();
        assert!(named.host_allowed(Some("queue.example.com")));
        assert!(named.host_allowed(Some("localhost:8080")));
        assert!(
            named.host_allowed(Some("10.1.2.3:8080")),
            "probes by pod IP"
        );
        assert!(named.host_allowed(Some("[2001:db8::1]:8080")));
        assert!(!named.host_allowed(Some("evil.example.com")));
        assert!(!named.host_allowed(None));
    }

    #[test]
    fn allowed_host_values_are_names_or_addresses() {
        for ok in [
            "a.example",
            "A.Example:8080",
            ".example.com",
            "10.0.0.1",
            "[::1]",
            "node-1",
        ] {
            assert!(HostPolicy::new(true, &[ok.into()], None).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "http://a.example",
            "a..example",
            "a_b.example",
            ".10.0.0.1x/",
            "a b",
            "*.example.com",
        ] {
            assert_eq!(
                HostPolicy::new(true, &[bad.into()], None).unwrap_err(),
                BadAllowedHost(bad.into()),
                "{bad}"
            );
        }
    }

    #[test]
    fn origins_on_loopback() {
        let policy = loopback();
        let host = Some("127.0.0.1:8080");
        for ok in [
            "http://127.0.0.1:8080",
            "https://127.0.0.1:8080",
            "http://localhost:3000",
            "http://LOCALHOST",
            "http://127.0.0.1:1",
            "http://[::1]:6274",
            "https://[::1]",
        ] {
            assert!(policy.origin_allowed(ok, host), "{ok}");
        }
        for bad in [
            "null",
            "",
            "http://evil.example",
            "http://localhost.evil.example:3000",
            "http://127.0.0.2:8080",
            "ftp://127.0.0.1:8080",
            "http://127.0.0.1:8080/path",
            "http://user@127.0.0.1:8080",
            "http://localhost:",
            "http://localhost:abc",
            "http://[::1",
            "127.0.0.1:8080",
        ] {
            assert!(!policy.origin_allowed(bad, host), "{bad}");
        }
    }

    #[test]
    fn origins_off_loopback_are_the_own_origin_or_allowed_names() {
        let policy = HostPolicy::new(false, &[], Some("https://board.example.com")).unwrap();
        let host = Some("queue.example.com");
        assert!(policy.origin_allowed("https://queue.example.com", host));
        assert!(policy.origin_allowed("http://Queue.Example.com", host));
        assert!(policy.origin_allowed("https://board.example.com", host));
        assert!(!policy.origin_allowed("http://localhost:3000", host));
        assert!(!policy.origin_allowed("https://queue.example.com:444", host));
        assert!(!policy.origin_allowed("https://other.example.com", host));
        assert!(!policy.origin_allowed("https://queue.example.com", None));
    }

    #[test]
    fn refusals_name_the_header() {
        let policy = loopback();
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("evil.example.com"));
        let refused = policy.check(&headers).unwrap_err();
        assert_eq!(refused.status(), axum::http::StatusCode::FORBIDDEN);
        assert_eq!(refused.field(), Some("host"));
        headers.insert(header::HOST, HeaderValue::from_static("localhost:1"));
        assert!(policy.check(&headers).is_ok());
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://evil.example"),
        );
        assert_eq!(policy.check(&headers).unwrap_err().field(), Some("origin"));
    }

    #[test]
    fn public_url_hosts_are_parsed() {
        assert_eq!(
            url_host("https://q.example.com:8443/x").as_deref(),
            Some("q.example.com")
        );
        assert_eq!(url_host("http://[::1]:8080").as_deref(), Some("::1"));
        assert_eq!(url_host("http://u@h.example").as_deref(), Some("h.example"));
        assert_eq!(url_host("not a url"), None);
    }
}
