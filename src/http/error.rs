//! The one error envelope of the REST API (`docs/api.md`):
//! `{"error":{"code","message","field"?,"state"?}}`.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::Invalid;
use crate::ops::Answer;
use crate::store::StoreError;

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// `invalid_argument`, `unauthenticated`, `forbidden`, `not_found`, `gone`, `conflict`,
    /// `payload_too_large`, `rate_limited`, `unavailable` or `internal`.
    pub code: String,
    pub message: String,
    /// The offending input field, for `invalid_argument`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The endpoint's state, when a conflict is about a revoked endpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    detail: ErrorDetail,
    retry_after_secs: Option<u64>,
    www_authenticate: bool,
}

impl ApiError {
    fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            detail: ErrorDetail {
                code: code.to_owned(),
                message: message.into(),
                field: None,
                state: None,
            },
            retry_after_secs: None,
            www_authenticate: false,
        }
    }

    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        let mut e = Self::new(StatusCode::BAD_REQUEST, "invalid_argument", message);
        e.detail.field = Some(field.to_owned());
        e
    }

    /// Every authentication failure answers the same, whatever went wrong.
    pub fn unauthenticated() -> Self {
        let mut e = Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthenticated",
            "a valid human API token is required (Authorization: Bearer sbh_…)",
        );
        e.www_authenticate = true;
        e
    }

    pub fn not_found() -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", "not found")
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// A conflict because the endpoint is revoked: carries `"state":"revoked"`.
    pub fn revoked() -> Self {
        Self::from(Answer::of(&StoreError::EndpointRevoked))
    }

    /// A webhook delivery without a valid signature. Missing and wrong
    /// signatures answer alike; no `WWW-Authenticate`, as no bearer scheme applies.
    pub fn bad_signature() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthenticated",
            "a valid signature is required (X-Hub-Signature-256: sha256=<hex>)",
        )
    }

    /// What a URL named is gone for good (a webhook whose endpoint is revoked).
    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(StatusCode::GONE, "gone", message)
    }

    pub fn payload_too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("the request body exceeds {limit} bytes"),
        )
    }

    /// The request body did not arrive within `--body-read-timeout`.
    pub fn request_timeout(message: impl Into<String>) -> Self {
        Self::new(StatusCode::REQUEST_TIMEOUT, "request_timeout", message)
    }

    pub fn rate_limited(retry_after_secs: u64) -> Self {
        let mut e = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            "too many requests; slow down",
        );
        e.retry_after_secs = Some(retry_after_secs.max(1));
        e
    }

    pub fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error",
        )
    }

    /// 403 naming the header or field that was refused (`host`, `origin`).
    pub fn forbidden(field: &str, message: impl Into<String>) -> Self {
        let mut e = Self::new(StatusCode::FORBIDDEN, "forbidden", message);
        e.detail.field = Some(field.to_owned());
        e
    }

    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The field the error names, if any.
    pub fn field(&self) -> Option<&str> {
        self.detail.field.as_deref()
    }
}

impl From<Invalid> for ApiError {
    fn from(e: Invalid) -> Self {
        Self::invalid(e.field, e.message)
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        Self::from(Answer::logged(&err, "api"))
    }
}

/// A lookup by endpoint reference: its `NotFound` names the reference
/// ([`Answer::unknown_endpoint`]); every other error answers as usual.
pub trait NamedEndpoint<T> {
    fn or_unknown_endpoint(self, reference: &str) -> Result<T, ApiError>;
}

impl<T> NamedEndpoint<T> for Result<T, StoreError> {
    fn or_unknown_endpoint(self, reference: &str) -> Result<T, ApiError> {
        self.map_err(|e| match e {
            StoreError::NotFound => Answer::unknown_endpoint(reference).into(),
            e => e.into(),
        })
    }
}

/// The one error policy's answer as the API's envelope.
impl From<Answer> for ApiError {
    fn from(answer: Answer) -> Self {
        let status =
            StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut e = Self::new(status, answer.code, answer.message);
        e.detail.field = answer.field.map(str::to_owned);
        e.detail.state = answer.state.map(str::to_owned);
        e.retry_after_secs = answer.retry_after_secs;
        e
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(ErrorBody { error: self.detail })).into_response();
        let headers = response.headers_mut();
        if let Some(secs) = self.retry_after_secs
            && let Ok(value) = HeaderValue::from_str(&secs.to_string())
        {
            headers.insert(header::RETRY_AFTER, value);
        }
        if self.www_authenticate {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"switchboard-api\""),
            );
        }
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Taken;

    fn api(err: StoreError) -> ApiError {
        ApiError::from(err)
    }

    #[test]
    fn a_lost_connection_is_503_unavailable() {
        let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset by peer");
        for err in [
            sqlx::Error::Io(reset),
            sqlx::Error::PoolTimedOut,
            sqlx::Error::PoolClosed,
            sqlx::Error::Protocol("unexpected end of stream".into()),
        ] {
            let e = api(err.into());
            assert_eq!(e.status, StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(e.detail.code, "unavailable");
            let response = e.into_response();
            assert_eq!(response.headers()[header::RETRY_AFTER], "1");
        }
        let e = api(StoreError::SchemaMismatch {
            found: 1,
            expected: 3,
        });
        assert_eq!(e.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(e.detail.code, "unavailable");
    }

    #[test]
    fn conflicts_keep_their_wire_shape() {
        let e = api(StoreError::EndpointRevoked);
        assert_eq!(e.status, StatusCode::CONFLICT);
        assert_eq!(e.detail.code, "conflict");
        assert_eq!(e.detail.state.as_deref(), Some("revoked"));
        assert_eq!(e.detail.message, "the endpoint is revoked");

        let e = api(StoreError::Taken(Taken::AgentName("worker".into())));
        assert_eq!(e.status, StatusCode::CONFLICT);
        assert_eq!(e.detail.message, "an agent named \"worker\" already exists");
        assert_eq!(e.detail.state, None);

        let e = api(StoreError::conflict("the todo is done"));
        assert_eq!(e.status, StatusCode::CONFLICT);
        assert_eq!(e.detail.state, None);

        let e = api(StoreError::internal("boom"));
        assert_eq!(e.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(e.detail.message, "internal error");
    }
}
