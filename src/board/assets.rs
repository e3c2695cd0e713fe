//! The board's static files, embedded in the binary. htmx and its SSE
//! extension are vendored as published on npm (versions in the names,
//! licences in `src/board/static/README.md`); the names change with the
//! version, so they are cached for a year.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

pub(crate) const HTMX: &str = "htmx-2.0.11.min.js";
pub(crate) const HTMX_SSE: &str = "htmx-ext-sse-2.2.4.min.js";
/// The stylesheet's name carries a version too: bump it when it changes.
pub(crate) const CSS: &str = "board-1.css";
pub(crate) const JS: &str = "board-1.js";

const FILES: &[(&str, &str, &[u8])] = &[
    (
        HTMX,
        "text/javascript; charset=utf-8",
        include_bytes!("static/htmx-2.0.11.min.js"),
    ),
    (
        HTMX_SSE,
        "text/javascript; charset=utf-8",
        include_bytes!("static/htmx-ext-sse-2.2.4.min.js"),
    ),
    (
        JS,
        "text/javascript; charset=utf-8",
        include_bytes!("static/board.js"),
    ),
    (
        CSS,
        "text/css; charset=utf-8",
        include_bytes!("static/board.css"),
    ),
];

pub(crate) async fn serve(Path(file): Path<String>) -> Response {
    match FILES.iter().find(|(name, _, _)| *name == file) {
        Some((_, content_type, bytes)) => (
            [
                (header::CONTENT_TYPE, *content_type),
                (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            *bytes,
        )
            .into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}
