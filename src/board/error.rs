//! How the board answers when a request cannot be served: a small HTML
//! page with the status, never a store message for `Internal` errors.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};

use super::render::render;
use crate::ops::Answer;
use crate::store::StoreError;

#[derive(Debug)]
pub(crate) enum BoardError {
    /// Not signed in (or the session's token was revoked or expired).
    SignIn,
    /// The same, for an htmx request: 401 with `HX-Redirect`, so that the
    /// browser goes to the sign-in page instead of swapping it in.
    SignInWholePage,
    /// A POST without a valid CSRF token.
    Forbidden(String),
    /// Not found, or not the human's (the same answer).
    NotFound,
    /// Bad input, naming the field.
    BadRequest(String),
    /// The thing is not in a state that allows this.
    Conflict(String),
    /// Too many form posts or page reads: the human's budget is spent for this long.
    RateLimited(std::time::Duration),
    /// The database is unreachable, or something broke (details logged).
    Unavailable,
    Internal,
}

/// The one error policy's answer as a page.
impl From<StoreError> for BoardError {
    fn from(e: StoreError) -> Self {
        let answer = Answer::logged(&e, "board");
        match answer.status {
            400 => Self::BadRequest(answer.text()),
            403 => Self::Forbidden(answer.message),
            404 => Self::NotFound,
            409 => Self::Conflict(answer.message),
            503 => Self::Unavailable,
            _ => Self::Internal,
        }
    }
}

#[derive(askama::Template)]
#[template(path = "board/error.html")]
struct ErrorPage {
    status: u16,
    title: &'static str,
    message: String,
}

impl IntoResponse for BoardError {
    fn into_response(self) -> Response {
        let (status, title, message) = match self {
            Self::SignIn => return Redirect::to("/board/sign-in").into_response(),
            Self::SignInWholePage => {
                return (
                    StatusCode::UNAUTHORIZED,
                    [("hx-redirect", "/board/sign-in")],
                )
                    .into_response();
            }
            Self::Forbidden(m) => (StatusCode::FORBIDDEN, "Forbidden", m),
            Self::NotFound => (
                StatusCode::NOT_FOUND,
                "Not found",
                "There is nothing here, or it is not yours.".to_owned(),
            ),
            Self::BadRequest(m) => (StatusCode::BAD_REQUEST, "Bad request", m),
            Self::Conflict(m) => (StatusCode::CONFLICT, "Conflict", m),
            Self::RateLimited(wait) => {
                let seconds = wait.as_secs_f64().ceil().max(1.0) as u64;
                let mut response = render(&ErrorPage {
                    status: 429,
                    title: "Too many requests",
                    message: format!("Too many requests at once; try again in {seconds} s."),
                });
                *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
                if let Ok(value) = axum::http::HeaderValue::from_str(&seconds.to_string()) {
                    response.headers_mut().insert("retry-after", value);
                }
                return response;
            }
            Self::Unavailable => {
                let mut response = render(&ErrorPage {
                    status: 503,
                    title: "Unavailable",
                    message: "The database is unavailable; try again shortly.".to_owned(),
                });
                *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                response.headers_mut().insert(
                    "retry-after",
                    axum::http::HeaderValue::from(crate::ops::error::RETRY_AFTER_SECS),
                );
                return response;
            }
            Self::Internal => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "Error",
                "Something went wrong; the server log has the details.".to_owned(),
            ),
        };
        let mut response = render(&ErrorPage {
            status: status.as_u16(),
            title,
            message,
        });
        *response.status_mut() = status;
        response
    }
}
