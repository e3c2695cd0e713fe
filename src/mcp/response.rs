//! What every MCP answer carries: the security headers, and the JSON-RPC
//! body shape. Shared by the extractors (their rejections) and the handlers.

use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// Every response carries these.
pub(super) async fn secure(response: Response) -> Response {
    with_security_headers(response)
}

pub(super) fn with_security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // nginx buffers proxied responses unless told otherwise: a buffered
    // notification stream delivers doorbells late (docs/deploy.md).
    headers.insert(
        HeaderName::from_static("x-accel-buffering"),
        HeaderValue::from_static("no"),
    );
    response
}

pub(super) fn rpc_response(status: StatusCode, body: Value) -> Response {
    with_security_headers((status, axum::Json(body)).into_response())
}
