//! The HTTP client hooks are POSTed with: no redirects, a 5 s timeout, and
//! (unless private targets are allowed) a resolver that drops every private
//! address at dial time, so a name that resolves to one — now, not when the
//! hook was added — is never dialled.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::domain::hook::is_private_address;

/// How long a target has to answer.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// A target's address is private (and private targets are not allowed).
#[derive(Debug)]
pub struct PrivateAddress(pub String);

impl std::fmt::Display for PrivateAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} resolves only to private, loopback or link-local addresses \
             (allowed with --allow-private-hooks)",
            self.0
        )
    }
}

impl std::error::Error for PrivateAddress {}

/// Resolves with the system resolver and keeps only public addresses.
#[derive(Debug)]
struct PublicOnly;

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> = found
                .into_iter()
                .filter(|a| !is_private_address(a.ip()))
                .collect();
            if public.is_empty() {
                return Err(
                    Box::new(PrivateAddress(host)) as Box<dyn std::error::Error + Send + Sync>
                );
            }
            Ok(Box::new(public.into_iter()) as Addrs)
        })
    }
}

pub fn build(allow_private: bool) -> reqwest::Client {
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        // Dialled directly: through a proxy, the proxy would resolve the
        // name and the address check below would never see it.
        .no_proxy()
        .timeout(TIMEOUT)
        .connect_timeout(TIMEOUT)
        .user_agent(concat!("switchboard-hooks/", env!("CARGO_PKG_VERSION")));
    if !allow_private {
        builder = builder.dns_resolver(Arc::new(PublicOnly));
    }
    builder
        .build()
        .expect("the hook client's TLS backend initialises")
}

/// The reason to refuse a URL before sending: a host that is an IP literal
/// (reqwest does not ask the resolver for those) and private.
pub fn refuse_literal(url: &reqwest::Url) -> Option<PrivateAddress> {
    let host = url.host_str()?;
    let ip: IpAddr = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()?;
    is_private_address(ip).then(|| PrivateAddress(ip.to_string()))
}

/// Whether a send failed because every address was refused.
pub fn is_refusal(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = current {
        if e.is::<PrivateAddress>() {
            return true;
        }
        current = e.source();
    }
    false
}

/// A short description of a failed send, without the URL (which may carry
/// a token in its query) or anything the target said.
pub fn describe(err: &reqwest::Error) -> String {
    if err.is_timeout() {
        return format!("timed out after {}s", TIMEOUT.as_secs());
    }
    let mut text = if err.is_connect() {
        "connect failed".to_owned()
    } else if err.is_request() {
        "request failed".to_owned()
    } else {
        "send failed".to_owned()
    };
    // The innermost cause says the most (refused, reset, no such host).
    let mut source = std::error::Error::source(err);
    let mut last = None;
    while let Some(e) = source {
        last = Some(e.to_string());
        source = e.source();
    }
    if let Some(cause) = last {
        text.push_str(": ");
        text.push_str(&cause.chars().take(200).collect::<String>());
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_ip_literals_are_refused_before_sending_and_names_wait_for_the_dial() {
        for refused in [
            "http://127.0.0.1:8080/x",
            "http://[::1]/x",
            "https://169.254.169.254/latest/meta-data",
            "http://10.0.0.7/",
            "http://[fd00::1]:9/",
        ] {
            let url = reqwest::Url::parse(refused).unwrap();
            assert!(refuse_literal(&url).is_some(), "{refused}");
        }
        for passed in [
            "https://8.8.8.8/x",
            "https://example.com/x",
            "http://localhost/x",
        ] {
            let url = reqwest::Url::parse(passed).unwrap();
            assert!(refuse_literal(&url).is_none(), "{passed}");
        }
    }

    #[test]
    fn a_refusal_is_found_through_the_error_chain() {
        #[derive(Debug)]
        struct Wrapper(PrivateAddress);
        impl std::fmt::Display for Wrapper {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("connect failed")
            }
        }
        impl std::error::Error for Wrapper {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        assert!(is_refusal(&Wrapper(PrivateAddress("localhost".into()))));
        assert!(!is_refusal(&std::io::Error::other("reset")));
    }
}
