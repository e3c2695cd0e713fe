use axum::Json;

use crate::api::extract::HumanAuth;
use crate::api::views::HumanView;
use crate::http::error::ErrorBody;

/// The caller.
#[utoipa::path(get, path = "/api/v1/me", operation_id = "get_me", tag = "humans",
    security(("bearer" = [])),
    responses(
        (status = 200, body = HumanView),
        (status = 401, body = ErrorBody),
        (status = 429, body = ErrorBody),
    ))]
pub(crate) async fn get_me(auth: HumanAuth) -> Json<HumanView> {
    Json(HumanView::from(&auth.human))
}
