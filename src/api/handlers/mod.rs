//! One module per resource.

pub(super) mod activity;
pub(super) mod admission;
pub(super) mod agents;
pub(super) mod deliveries;
pub(super) mod endpoints;
pub(super) mod hooks;
pub(super) mod me;
pub(super) mod oauth;
pub(super) mod presence;
pub(super) mod rules;
pub(super) mod schedules;
pub(super) mod todos;
pub(super) mod tokens;
pub(super) mod webhooks;

use super::extract::parse_param;
use crate::http::error::ApiError;
use crate::store::PageRequest;

pub(super) async fn not_found() -> ApiError {
    ApiError::not_found()
}

/// `?limit=&cursor=` of a list route.
pub(super) fn page_request(
    limit: Option<&str>,
    cursor: Option<&str>,
) -> Result<PageRequest, ApiError> {
    let limit: Option<i64> = parse_param(limit, "limit", "a whole number")?;
    if let Some(l) = limit
        && !(1..=200).contains(&l)
    {
        return Err(ApiError::invalid("limit", "must be between 1 and 200"));
    }
    Ok(PageRequest {
        limit: limit.unwrap_or(50),
        after: cursor.map(str::to_owned),
    })
}
