//! The client's address: the TCP peer, or, when the peer is a trusted proxy
//! (`--trusted-proxy`), the client the proxy says it forwards for.
//!
//! Forwarding headers are written by whoever sends the request, so they are
//! read only from a peer inside a trusted block, and then only the hops the
//! trusted proxies appended: walking `Forwarded: for=` (RFC 7239), or else
//! `X-Forwarded-For`, from the right, the first address that is not itself a
//! trusted proxy is the client. An entry that is not an address (`unknown`,
//! an obfuscated `_node`) ends the walk at the last trusted hop.

use std::net::{IpAddr, SocketAddr};

use axum::extract::ConnectInfo;
use axum::http::HeaderMap;
use axum::http::request::Parts;

use super::cidr::{Cidr, canonical};

/// The client address of a request, as [`resolve`] decided it (kept in the
/// request's extensions by the edge layer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub IpAddr);

impl std::fmt::Display for ClientAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl ClientAddr {
    /// The client of a request: what the edge layer decided, else the TCP
    /// peer; `None` only for a router served without connection info (an
    /// in-process test).
    pub fn of(parts: &Parts) -> Option<Self> {
        parts.extensions.get::<ClientAddr>().copied().or_else(|| {
            parts
                .extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|ConnectInfo(peer)| ClientAddr(canonical(peer.ip())))
        })
    }
}

/// The `--trusted-proxy` blocks.
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(pub Vec<Cidr>);

impl TrustedProxies {
    fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|block| block.contains(ip))
    }

    /// The client of a request from `peer` with these headers.
    pub fn resolve(&self, peer: IpAddr, headers: &HeaderMap) -> ClientAddr {
        let peer = canonical(peer);
        if !self.trusts(peer) {
            return ClientAddr(peer);
        }
        let hops = forwarded_for(headers).or_else(|| x_forwarded_for(headers));
        let Some(hops) = hops else {
            return ClientAddr(peer);
        };
        let mut client = peer;
        for hop in hops.iter().rev() {
            let Some(ip) = hop.map(canonical) else {
                break;
            };
            client = ip;
            if !self.trusts(ip) {
                break;
            }
        }
        ClientAddr(client)
    }
}

/// Every `for=` of every `Forwarded` header, in order; `None` when there is
/// no `for=` at all. An entry is `None` when it is not an address.
fn forwarded_for(headers: &HeaderMap) -> Option<Vec<Option<IpAddr>>> {
    let mut hops = Vec::new();
    for value in headers.get_all("forwarded") {
        let Ok(value) = value.to_str() else {
            hops.push(None);
            continue;
        };
        for element in value.split(',') {
            for pair in element.split(';') {
                let Some((name, node)) = pair.trim().split_once('=') else {
                    continue;
                };
                if name.trim().eq_ignore_ascii_case("for") {
                    hops.push(parse_node(node.trim().trim_matches('"')));
                }
            }
        }
    }
    (!hops.is_empty()).then_some(hops)
}

/// Every entry of every `X-Forwarded-For` header, in order.
fn x_forwarded_for(headers: &HeaderMap) -> Option<Vec<Option<IpAddr>>> {
    let mut hops = Vec::new();
    for value in headers.get_all("x-forwarded-for") {
        match value.to_str() {
            Ok(value) => hops.extend(value.split(',').map(|entry| parse_node(entry.trim()))),
            Err(_) => hops.push(None),
        }
    }
    (!hops.is_empty()).then_some(hops)
}

/// `192.0.2.1`, `192.0.2.1:4711`, `2001:db8::1`, `[2001:db8::1]:4711`.
fn parse_node(node: &str) -> Option<IpAddr> {
    if let Ok(ip) = node.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(addr) = node.parse::<SocketAddr>() {
        return Some(addr.ip());
    }
    node.strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .and_then(|v6| v6.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn trusted(blocks: &[&str]) -> TrustedProxies {
        TrustedProxies(blocks.iter().map(|b| b.parse().unwrap()).collect())
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_says() {
        let proxies = trusted(&["10.0.0.0/8"]);
        let spoofed = headers(&[
            ("x-forwarded-for", "198.51.100.1"),
            ("forwarded", "for=198.51.100.2"),
        ]);
        assert_eq!(
            proxies.resolve(ip("203.0.113.5"), &spoofed).0,
            ip("203.0.113.5")
        );
        assert_eq!(
            TrustedProxies::default()
                .resolve(ip("10.0.0.1"), &spoofed)
                .0,
            ip("10.0.0.1")
        );
    }

    #[test]
    fn a_trusted_peer_forwards_the_right_most_untrusted_hop() {
        let proxies = trusted(&["10.0.0.0/8", "fd00::/8"]);
        let peer = ip("10.0.0.1");
        // The client wrote the first entry itself; our proxies appended the rest.
        let xff = headers(&[("x-forwarded-for", "1.1.1.1, 203.0.113.9, 10.0.0.2")]);
        assert_eq!(proxies.resolve(peer, &xff).0, ip("203.0.113.9"));
        let split = headers(&[
            ("x-forwarded-for", "1.1.1.1"),
            ("x-forwarded-for", "203.0.113.9:5555"),
        ]);
        assert_eq!(proxies.resolve(peer, &split).0, ip("203.0.113.9"));
        let all_trusted = headers(&[("x-forwarded-for", "10.0.0.3, 10.0.0.2")]);
        assert_eq!(proxies.resolve(peer, &all_trusted).0, ip("10.0.0.3"));
        let v6 = headers(&[("x-forwarded-for", "[2001:db8::7]:443")]);
        assert_eq!(proxies.resolve(ip("fd00::1"), &v6).0, ip("2001:db8::7"));
        assert_eq!(proxies.resolve(peer, &HeaderMap::new()).0, peer);
    }

    #[test]
    fn forwarded_wins_over_x_forwarded_for() {
        let proxies = trusted(&["127.0.0.0/8"]);
        let peer = ip("127.0.0.1");
        let both = headers(&[
            ("forwarded", "for=192.0.2.60;proto=http;by=203.0.113.43"),
            ("x-forwarded-for", "198.51.100.1"),
        ]);
        assert_eq!(proxies.resolve(peer, &both).0, ip("192.0.2.60"));
        let quoted = headers(&[("forwarded", "for=1.2.3.4, for=\"[2001:db8:cafe::17]:4711\"")]);
        assert_eq!(proxies.resolve(peer, &quoted).0, ip("2001:db8:cafe::17"));
        let no_for = headers(&[
            ("forwarded", "proto=https"),
            ("x-forwarded-for", "198.51.100.1"),
        ]);
        assert_eq!(proxies.resolve(peer, &no_for).0, ip("198.51.100.1"));
    }

    #[test]
    fn an_entry_that_is_no_address_stops_at_the_last_trusted_hop() {
        let proxies = trusted(&["10.0.0.0/8"]);
        let peer = ip("10.0.0.1");
        let unknown = headers(&[("forwarded", "for=198.51.100.1, for=unknown, for=10.0.0.5")]);
        assert_eq!(proxies.resolve(peer, &unknown).0, ip("10.0.0.5"));
        let garbage = headers(&[("x-forwarded-for", "not-an-ip")]);
        assert_eq!(proxies.resolve(peer, &garbage).0, peer);
    }
}
