//! The HTTP side of the CLI: one authenticated client for `/api/v1`, and the
//! API's error envelope turned into an error the CLI prints as
//! `error: <code>: <message>`.

use std::fmt;
use std::time::Duration;

use anyhow::{Context, bail};
use reqwest::{Method, Url};
use serde_json::Value;

use super::credentials::Secret;

const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A PEM file of extra certificate authorities to trust (an internal CA), on
/// top of the compiled-in public roots.
pub(super) const CA_CERT_ENV: &str = "SWITCHBOARD_CA_CERT";
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Parses a server URL as the user typed it: `https://` (rustls, the
/// Mozilla roots compiled in, plus `SWITCHBOARD_CA_CERT`) or `http://`,
/// which a bare `HOST:PORT` means.
pub(super) fn parse_server_url(text: &str) -> anyhow::Result<Url> {
    let text = text.trim();
    let with_scheme = if text.contains("://") {
        text.to_owned()
    } else {
        format!("http://{text}")
    };
    let url = Url::parse(&with_scheme).with_context(|| format!("{text:?} is not a URL"))?;
    match url.scheme() {
        "http" | "https" => {}
        other => {
            bail!("{text}: unsupported scheme {other:?}; use https://HOST or http://HOST:PORT")
        }
    }
    if url.query().is_some() || url.fragment().is_some() {
        bail!("{text}: the server URL takes no query or fragment");
    }
    Ok(url)
}

/// The certificates of `SWITCHBOARD_CA_CERT`, when it names a PEM file.
fn extra_roots() -> anyhow::Result<Vec<reqwest::Certificate>> {
    let Some(path) = std::env::var_os(CA_CERT_ENV).filter(|p| !p.is_empty()) else {
        return Ok(Vec::new());
    };
    let shown = std::path::Path::new(&path).display().to_string();
    let pem = std::fs::read(&path).with_context(|| format!("{CA_CERT_ENV}: reading {shown}"))?;
    let certificates = reqwest::Certificate::from_pem_bundle(&pem)
        .with_context(|| format!("{CA_CERT_ENV}: {shown} is not a PEM certificate bundle"))?;
    if certificates.is_empty() {
        bail!("{CA_CERT_ENV}: {shown} holds no PEM certificate");
    }
    Ok(certificates)
}

/// The canonical text of a server URL, as saved and compared: no trailing slash.
pub(super) fn display_url(url: &Url) -> String {
    url.as_str().trim_end_matches('/').to_owned()
}

/// An answer of the API with a 2xx status. The body is kept as text so that
/// `--json` can print it verbatim.
#[derive(Debug)]
pub struct ApiResponse {
    pub body: String,
}

impl ApiResponse {
    /// The body as `--json` prints it: verbatim, or `{}` for an empty (204) body.
    pub fn verbatim(&self) -> &str {
        match self.body.trim() {
            "" => "{}",
            body => body,
        }
    }

    pub fn json(&self) -> anyhow::Result<Value> {
        serde_json::from_str(self.verbatim()).context("the server answered with malformed JSON")
    }
}

/// A non-2xx answer, from the API's envelope when it has one.
#[derive(Debug)]
pub(super) struct ApiFailure {
    pub code: String,
    pub message: String,
    pub field: Option<String>,
    pub state: Option<String>,
}

impl ApiFailure {
    fn from_body(status: u16, body: &str) -> Self {
        let envelope: Option<Value> = serde_json::from_str(body).ok();
        let error = envelope.as_ref().and_then(|v| v.get("error"));
        let text = |key: &str| {
            error
                .and_then(|e| e.get(key))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        match (text("code"), text("message")) {
            (Some(code), Some(message)) => Self {
                code,
                message,
                field: text("field"),
                state: text("state"),
            },
            // Not our envelope (a proxy, or not a Switchboard server at all).
            _ => Self {
                code: format!("http_{status}"),
                message: body
                    .lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(200)
                    .collect(),
                field: None,
                state: None,
            },
        }
    }
}

impl fmt::Display for ApiFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)?;
        if let Some(field) = &self.field {
            write!(f, " (field: {field})")?;
        }
        if let Some(state) = &self.state {
            write!(f, " (state: {state})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ApiFailure {}

/// A client of one server, with one human API token.
#[derive(Debug)]
pub struct ApiClient {
    http: reqwest::Client,
    base: Url,
    token: Secret,
}

impl ApiClient {
    pub fn new(base: Url, token: Secret) -> anyhow::Result<Self> {
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("switchboard-cli/", env!("CARGO_PKG_VERSION")))
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .https_only(base.scheme() == "https");
        for certificate in extra_roots()? {
            builder = builder.add_root_certificate(certificate);
        }
        let http = builder.build().context("building the HTTP client")?;
        Ok(Self { http, base, token })
    }

    pub fn base_url(&self) -> String {
        display_url(&self.base)
    }

    /// The URL of `segments` under the base, each segment percent-encoded
    /// (a ref or a name can never escape its place in the path).
    fn url(&self, segments: &[&str], query: &[(&str, String)]) -> Url {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .expect("http URLs have a path")
            .pop_if_empty()
            .extend(segments);
        if !query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (key, value) in query {
                pairs.append_pair(key, value);
            }
        }
        url
    }

    pub async fn get(
        &self,
        path: &[&str],
        query: &[(&str, String)],
    ) -> anyhow::Result<ApiResponse> {
        self.send(Method::GET, path, query, None).await
    }

    pub async fn post(&self, path: &[&str], body: &Value) -> anyhow::Result<ApiResponse> {
        self.send(Method::POST, path, &[], Some(body)).await
    }

    /// A POST that carries no body: an action on a resource (revoke, retry…).
    pub async fn post_action(&self, path: &[&str]) -> anyhow::Result<ApiResponse> {
        self.send(Method::POST, path, &[], None).await
    }

    pub async fn put(&self, path: &[&str], body: &Value) -> anyhow::Result<ApiResponse> {
        self.send(Method::PUT, path, &[], Some(body)).await
    }

    pub async fn patch(&self, path: &[&str], body: &Value) -> anyhow::Result<ApiResponse> {
        self.send(Method::PATCH, path, &[], Some(body)).await
    }

    pub async fn delete(&self, path: &[&str]) -> anyhow::Result<ApiResponse> {
        self.send(Method::DELETE, path, &[], None).await
    }

    /// A request under `/api/v1`, authenticated.
    async fn send(
        &self,
        method: Method,
        path: &[&str],
        query: &[(&str, String)],
        body: Option<&Value>,
    ) -> anyhow::Result<ApiResponse> {
        let mut segments = vec!["api", "v1"];
        segments.extend_from_slice(path);
        let mut request = self
            .http
            .request(method, self.url(&segments, query))
            .bearer_auth(self.token.expose());
        if let Some(body) = body {
            request = request.json(body);
        }
        self.finish(request).await
    }

    /// `GET /readyz`, without the token: the probe needs none.
    pub async fn readiness(&self) -> anyhow::Result<ApiResponse> {
        let request = self.http.get(self.url(&["readyz"], &[]));
        self.finish(request).await
    }

    async fn finish(&self, request: reqwest::RequestBuilder) -> anyhow::Result<ApiResponse> {
        let response = request
            .send()
            .await
            .with_context(|| format!("cannot reach {}", self.base_url()))?;
        let status = response.status().as_u16();
        let body = response
            .text()
            .await
            .with_context(|| format!("reading the answer of {}", self.base_url()))?;
        if (200..300).contains(&status) {
            Ok(ApiResponse { body })
        } else {
            Err(ApiFailure::from_body(status, &body).into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(base: &str) -> ApiClient {
        ApiClient::new(parse_server_url(base).unwrap(), Secret::new("sbh_x")).unwrap()
    }

    #[test]
    fn path_segments_are_encoded_under_the_base_path() {
        let c = client("http://h:1/prefix/");
        let url = c.url(
            &["api", "v1", "agents", "../me"],
            &[("state", "a b".into())],
        );
        assert_eq!(
            url.as_str(),
            "http://h:1/prefix/api/v1/agents/..%2Fme?state=a+b"
        );
        assert_eq!(c.base_url(), "http://h:1/prefix");
    }

    #[test]
    fn server_urls_are_http_or_https() {
        assert_eq!(
            display_url(&parse_server_url("127.0.0.1:8080").unwrap()),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            display_url(&parse_server_url("https://h/").unwrap()),
            "https://h"
        );
        assert!(parse_server_url("ftp://h").is_err());
    }

    #[test]
    fn failures_read_the_envelope_or_fall_back_to_the_status() {
        let f = ApiFailure::from_body(
            409,
            r#"{"error":{"code":"conflict","message":"the endpoint is revoked","state":"revoked"}}"#,
        );
        assert_eq!(
            f.to_string(),
            "conflict: the endpoint is revoked (state: revoked)"
        );
        let f = ApiFailure::from_body(502, "<html>Bad gateway</html>");
        assert_eq!(f.to_string(), "http_502: <html>Bad gateway</html>");
    }
}
