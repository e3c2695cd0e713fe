//! Request extractors that answer in the API's error envelope: the human
//! behind a bearer token (with the per-human rate limit), JSON bodies that
//! refuse unknown fields and name the bad one, and query strings.

use axum::extract::{FromRequest, FromRequestParts, MatchedPath, Path, Request};
use axum::http::request::Parts;
use axum::http::{Method, header};
use serde::de::DeserializeOwned;

use crate::api::ApiState;
use crate::domain::Timestamp;
use crate::http::auth::{self, SignedInHuman};
use crate::http::error::ApiError;
use crate::ops::Answer;
use crate::store::{ApiToken, Human};

/// Request bodies of the human API are capped at 64 KiB.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// The authenticated human. Anything but a live `sbh_` token is 401, with
/// the same body whatever was wrong.
pub struct HumanAuth {
    pub human: Human,
    pub token: ApiToken,
    /// When the token expires (`None`: never): what it mints may not outlive it.
    pub authority_expires_at: Option<Timestamp>,
}

impl FromRequestParts<ApiState> for HumanAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, ApiError> {
        let secret = auth::bearer(&parts.headers).ok_or_else(ApiError::unauthenticated)?;
        let signed = auth::human(&*state.store, secret)
            .await?
            .ok_or_else(ApiError::unauthenticated)?;
        // A board session's own token is the board's (its cookie), not a
        // bearer credential of the API: it answers like any other refusal.
        if signed.is_board_session() {
            return Err(ApiError::unauthenticated());
        }
        let SignedInHuman {
            human,
            token,
            authority_expires_at,
        } = signed;
        let limiter = if is_read(&parts.method) {
            &state.api.read_limiter
        } else {
            &state.api.write_limiter
        };
        if let Err(wait) = limiter.check(&human.id) {
            return Err(ApiError::rate_limited(wait.as_secs_f64().ceil() as u64));
        }
        Ok(Self {
            human,
            token,
            authority_expires_at,
        })
    }
}

fn is_read(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// A JSON body: at most 64 KiB, `application/json`, a JSON object (every
/// request body of the API is one), no unknown fields, and a type error
/// names the field it is in.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned> FromRequest<ApiState> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &ApiState) -> Result<Self, ApiError> {
        let is_json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| {
                let mime = ct.split(';').next().unwrap_or("").trim();
                mime.eq_ignore_ascii_case("application/json")
            });
        let bytes = read_capped(req.into_body()).await?;
        if !is_json {
            return Err(ApiError::invalid(
                "body",
                "the request body must be JSON (Content-Type: application/json)",
            ));
        }
        // serde would also fill a struct from an array (`[null, null]`).
        let first = bytes
            .iter()
            .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
        if first != Some(&b'{') {
            return Err(ApiError::invalid(
                "body",
                "the request body must be a JSON object",
            ));
        }
        parse_json(&bytes).map(ApiJson)
    }
}

/// [`ApiJson`] for a route whose body is optional: no body at all (or only
/// whitespace) is `T::default()`, whatever its Content-Type; any other body
/// is read exactly as [`ApiJson`] reads it (capped, JSON, strict).
pub struct ApiJsonOrEmpty<T>(pub T);

impl<T: DeserializeOwned + Default> FromRequest<ApiState> for ApiJsonOrEmpty<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &ApiState) -> Result<Self, ApiError> {
        let (parts, body) = req.into_parts();
        let bytes = read_capped(body).await?;
        if bytes
            .iter()
            .all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        {
            return Ok(ApiJsonOrEmpty(T::default()));
        }
        let req = Request::from_parts(parts, axum::body::Body::from(bytes));
        ApiJson::<T>::from_request(req, state)
            .await
            .map(|ApiJson(v)| ApiJsonOrEmpty(v))
    }
}

/// How much of an oversized body is read and thrown away before the 413 is
/// sent. Answering while the client is still sending would close the
/// connection on unread data, and the client would see a reset instead of
/// the 413; beyond this much, it does.
const DRAIN_LIMIT_BYTES: usize = 1024 * 1024;

/// The body, if it is at most [`MAX_BODY_BYTES`]; else 413, after draining
/// up to [`DRAIN_LIMIT_BYTES`].
async fn read_capped(mut body: axum::body::Body) -> Result<axum::body::Bytes, ApiError> {
    use axum::body::HttpBody;
    use std::pin::Pin;

    let mut kept: Vec<u8> = Vec::new();
    let mut seen = 0usize;
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let Ok(frame) = frame else {
            // The client went away or sent a malformed body.
            return Err(ApiError::invalid(
                "body",
                "the request body could not be read",
            ));
        };
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        seen = seen.saturating_add(data.len());
        if seen <= MAX_BODY_BYTES {
            kept.extend_from_slice(&data);
        } else if seen > DRAIN_LIMIT_BYTES {
            break;
        }
    }
    if seen > MAX_BODY_BYTES {
        return Err(ApiError::payload_too_large(MAX_BODY_BYTES));
    }
    Ok(kept.into())
}

/// Deserialises `bytes`, turning serde's error into one that names the field.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        let field = field_of_error(&path, &inner);
        let message = match backticked_after(&inner.to_string(), "missing field `") {
            Some(_) => "is required".to_owned(),
            None => strip_position(&inner.to_string()),
        };
        ApiError::invalid(&field, message)
    })?;
    de.end()
        .map_err(|e| ApiError::invalid("body", strip_position(&e.to_string())))?;
    Ok(value)
}

/// The field a deserialisation error is about. serde_json classifies its
/// errors: malformed JSON (syntax, EOF, I/O) is about the whole body, where
/// serde_path_to_error's path is only as far as it got (`?`). A data error
/// is at its path — an unknown field's path already ends in its name — but
/// a missing field's path is its parent: serde names the field only in its
/// message (it has no typed form of it).
fn field_of_error(path: &str, error: &serde_json::Error) -> String {
    use serde_json::error::Category;
    if !matches!(error.classify(), Category::Data) {
        return "body".to_owned();
    }
    let parent = match path.trim_start_matches('.') {
        "" | "?" => None,
        p => Some(p.to_owned()),
    };
    let missing = backticked_after(&error.to_string(), "missing field `");
    match (parent, missing) {
        (None, Some(name)) => name,
        (Some(parent), Some(name)) => format!("{parent}.{name}"),
        (Some(path), None) => path,
        (None, None) => "body".to_owned(),
    }
}

/// serde says "unknown field `queues`, expected …": the field is `queues`.
fn backticked_after(message: &str, prefix: &str) -> Option<String> {
    let rest = message.strip_prefix(prefix)?;
    Some(rest.split('`').next()?.to_owned())
}

/// Drops serde_json's " at line 1 column 17" suffix.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

/// Path parameters. A segment that does not decode (invalid UTF-8 after
/// percent-decoding) cannot name anything that exists, so it answers 404 in
/// the envelope, exactly like a missing id, instead of axum's plain-text 400.
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send> FromRequestParts<ApiState> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, ApiError> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(ApiPath(value)),
            Err(_) => Err(undecodable(parts)),
        }
    }
}

/// The 404 for a path that does not decode. On an endpoint's routes, when
/// the reference itself is what does not decode, it names the reference as
/// sent, like any unknown one ([`Answer::unknown_endpoint`]).
fn undecodable(parts: &Parts) -> ApiError {
    let route = parts
        .extensions
        .get::<MatchedPath>()
        .map(MatchedPath::as_str);
    if route.is_some_and(|r| r.contains("/endpoints/{reference}")) {
        let path = parts.uri.path();
        let raw = path
            .strip_prefix("/api/v1")
            .unwrap_or(path)
            .strip_prefix("/endpoints/")
            .and_then(|rest| rest.split('/').next());
        if let Some(raw) = raw
            && std::str::from_utf8(&percent_decoded(raw)).is_err()
        {
            return Answer::unknown_endpoint(raw).into();
        }
    }
    ApiError::not_found()
}

/// `%XX` escapes decoded to their bytes; anything else kept as it is.
fn percent_decoded(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap() * 16 + hex(l).unwrap()) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// A query string, refusing unknown parameters and naming the bad one.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned> FromRequestParts<ApiState> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &ApiState) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or("");
        let de = serde_urlencoded_deserializer(query);
        match de {
            Ok(value) => Ok(ApiQuery(value)),
            Err((field, message)) => Err(ApiError::invalid(&field, message)),
        }
    }
}

fn serde_urlencoded_deserializer<T: DeserializeOwned>(query: &str) -> Result<T, (String, String)> {
    // axum's Query uses serde_urlencoded; we go through a map first so that
    // errors can name the parameter.
    let pairs: Vec<(String, String)> = url_pairs(query);
    let mut map = serde_json::Map::new();
    for (k, v) in pairs {
        if map.contains_key(&k) {
            return Err((k, "is given more than once".into()));
        }
        map.insert(k, serde_json::Value::String(v));
    }
    let value = serde_json::Value::Object(map);
    serde_path_to_error::deserialize(value).map_err(|err| {
        let path = err.path().to_string();
        let message = err.into_inner().to_string();
        let field = backticked_after(&message, "unknown field `")
            .or_else(|| backticked_after(&message, "missing field `"))
            .unwrap_or_else(|| path.trim_start_matches('.').to_owned());
        (
            if field.is_empty() {
                "query".into()
            } else {
                field
            },
            message,
        )
    })
}

fn url_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let decoded = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match decoded {
                    Some(byte) => {
                        out.push(byte);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            other => out.push(other),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Query parameters arrive as text; this parses one, naming it on failure.
pub fn parse_param<T: std::str::FromStr>(
    value: Option<&str>,
    field: &str,
    what: &str,
) -> Result<Option<T>, ApiError> {
    match value {
        None => Ok(None),
        Some(text) => text
            .parse()
            .map(Some)
            .map_err(|_| ApiError::invalid(field, format!("{text:?} is not {what}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Patch {
        default_lease_ttl_seconds: Option<i64>,
    }

    #[test]
    fn unknown_fields_are_named() {
        let err = parse_json::<Patch>(br#"{"queues":["x"]}"#).unwrap_err();
        let body = format!("{err:?}");
        assert!(body.contains("queues"), "{body}");
    }

    #[test]
    fn type_errors_name_the_field() {
        let err = parse_json::<Patch>(br#"{"default_lease_ttl_seconds":"soon"}"#).unwrap_err();
        assert!(format!("{err:?}").contains("default_lease_ttl_seconds"));
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Push {
        title: String,
        inner: Option<Inner>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        name: String,
    }

    /// The `field` of the error `body` gets (from the Debug form, which is
    /// all an ApiError shows outside its module).
    fn field_of(body: &[u8]) -> String {
        let debug = format!("{:?}", parse_json::<Push>(body).unwrap_err());
        let at = debug.find("field: Some(\"").expect("a field") + "field: Some(\"".len();
        debug[at..].split('"').next().unwrap().to_owned()
    }

    #[test]
    fn malformed_json_is_about_the_body_and_a_missing_field_names_itself() {
        assert_eq!(field_of(b"{nope"), "body");
        assert_eq!(field_of(b"{\"title\":"), "body");
        assert_eq!(field_of(b"{}"), "title");
        assert_eq!(field_of(br#"{"title":"x","inner":{}}"#), "inner.name");
        assert_eq!(field_of(br#"{"title":"x","surprise":1}"#), "surprise");
        assert_eq!(field_of(br#"{"title":7}"#), "title");
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%20b+c"), "a b c");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
    }
}
