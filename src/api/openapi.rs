//! The OpenAPI 3.1 document, generated from the handlers' annotations and
//! the view types, served at `/api/v1/openapi.json`.

use axum::Json;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::error::{ErrorBody, ErrorDetail};
use super::handlers::{agents, endpoints, me, todos, tokens, webhooks};
use super::views::*;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Switchboard API",
        description = "The human REST API of Switchboard: agents, endpoints, todos, webhooks.",
    ),
    paths(
        me::get_me,
        tokens::list, tokens::create, tokens::revoke,
        agents::list, agents::register, agents::show, agents::edit,
        endpoints::list, endpoints::vend, endpoints::show, endpoints::edit,
        endpoints::revoke, endpoints::remove,
        todos::push, todos::list, todos::show, todos::event, todos::retry, todos::release,
        webhooks::list, webhooks::create, webhooks::rotate, webhooks::remove,
    ),
    components(schemas(
        ErrorBody, ErrorDetail, HumanView, TokenView, NewTokenView, TokenList,
        LivenessView, ScopeView, ActivityView, EndpointView, EndpointList, VendView,
        AgentView, AgentList, TodoView, TodoList, AttemptView, TodoDetail, CreatedTodoView,
        IntakeEventView, WebhookView, NewWebhookView, WebhookList,
        tokens::CreateToken, agents::RegisterAgent, agents::EditAgent,
        endpoints::VendRequest, endpoints::EditEndpoint, todos::PushTodo,
        webhooks::CreateWebhook,
    )),
    modifiers(&BearerAuth),
    tags(
        (name = "humans", description = "The caller and their API tokens"),
        (name = "agents", description = "Named workers"),
        (name = "endpoints", description = "Vended MCP endpoints"),
        (name = "todos", description = "Work items"),
        (name = "webhooks", description = "Intake webhooks"),
    )
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("sbh_ token")
                    .build(),
            ),
        );
    }
}

/// The document as served.
pub fn document() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

pub async fn serve() -> Json<utoipa::openapi::OpenApi> {
    Json(document())
}
