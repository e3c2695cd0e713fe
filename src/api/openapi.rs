//! The OpenAPI 3.1 document, generated from the handlers' annotations and
//! the view types, served at `/api/v1/openapi.json`.

use axum::Json;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::Operation;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, ObjectBuilder, RefOr, ResponseBuilder, Type};
use utoipa::{Modify, OpenApi};

use super::handlers::{
    activity, admission, agents, deliveries, endpoints, hooks, me, oauth, presence, rules,
    schedules, todos, tokens, webhooks,
};
use super::views::*;
use crate::http::error::{ErrorBody, ErrorDetail};

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
        endpoints::revoke, endpoints::remove, endpoints::test_ring,
        oauth::list, oauth::revoke,
        presence::show, presence::set, presence::clear, presence::set_shift,
        todos::push, todos::list, todos::show, todos::edit, todos::event, todos::retry, todos::release,
        todos::cancel, todos::remove, todos::bulk_retry, todos::bulk_cancel,
        webhooks::list, webhooks::create, webhooks::rotate, webhooks::remove,
        deliveries::set_senders, deliveries::list, deliveries::show, deliveries::release,
        deliveries::discard, deliveries::replay,
        rules::show, rules::set, rules::test, rules::replay,
        hooks::list, hooks::add, hooks::remove, hooks::enable, hooks::test,
        schedules::list, schedules::add, schedules::remove, schedules::pause, schedules::resume,
        activity::show, admission::show, admission::set_endpoint, admission::set_queue,
    ),
    components(schemas(
        ErrorBody, ErrorDetail, HumanView, TokenView, NewTokenView, TokenList,
        LivenessView, PresenceSummary, SessionsView, SessionRow, ScopeView, ActivityView, EndpointView, EndpointList, VendView, ClientSetup,
        AgentView, AgentList, TodoView, TodoList, BulkResult, todos::BulkRequest, AttemptView, TodoDetail, CreatedTodoView,
        IntakeEventView, WebhookView, NewWebhookView, WebhookList,
        HookView, HookDeliveryView, NewHookView, HookList, HookTestView, hooks::AddHook,
        ScheduleView, ScheduleList, schedules::AddSchedule,
        activity::QueueActivityView, activity::QueueActivityBucket, activity::QueueActivityNumbers,
        admission::SetAdmission, admission::AdmissionView, admission::AdmissionLevel,
        tokens::CreateToken, agents::RegisterAgent, agents::EditAgent,
        endpoints::VendRequest, endpoints::EditEndpoint, endpoints::TestRingRequest, endpoints::TestRingView, todos::PushTodo, todos::EditTodo,
        webhooks::CreateWebhook, deliveries::SetSenders, deliveries::ReplayDelivery,
        deliveries::DeliveryView, deliveries::DeliveryList, deliveries::DecidedView,
        rules::RulesBody, rules::TestRules, rules::RuleTraceView, rules::DryRunView,
        rules::ReplayBatch, rules::ReplayBatchView,
        presence::PresenceBody, presence::SetPresence, presence::SetShift,
        oauth::OAuthClientView, oauth::OAuthClientList,
    )),
    modifiers(&BearerAuth, &CommonResponses),
    tags(
        (name = "humans", description = "The caller and their API tokens"),
        (name = "agents", description = "Named workers"),
        (name = "endpoints", description = "Vended MCP endpoints"),
        (name = "todos", description = "Work items"),
        (name = "webhooks", description = "Intake webhooks"),
        (name = "hooks", description = "Notify hooks: signed POSTs when an endpoint is rung"),
        (name = "schedules", description = "Recurring todos: a todo at each occurrence of a cron expression"),
        (name = "presence", description = "Clock in, clock out and shifts"),
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

/// What every operation may answer besides its own statuses, and the
/// headers and descriptions of the error statuses, so that the document says
/// what the server does: 401 carries `WWW-Authenticate`, 429 `Retry-After`,
/// and any route may meet a database outage (503) or a bug (500).
struct CommonResponses;

impl Modify for CommonResponses {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for item in openapi.paths.paths.values_mut() {
            let operations = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ];
            for operation in operations.into_iter().flatten() {
                complete_responses(operation);
            }
        }
    }
}

fn error_description(status: &str) -> Option<&'static str> {
    Some(match status {
        "400" => "`invalid_argument`: a malformed or refused input; `field` names it",
        "401" => "`unauthenticated`: no valid `sbh_` token (the same body whatever was wrong)",
        "403" => "`forbidden`",
        "404" => "`not_found`: no such id among the caller's (the same body for another human's)",
        "409" => "`conflict`; `state` is `revoked` when the endpoint is revoked",
        "413" => "`payload_too_large`: the request body exceeds 64 KiB",
        "429" => "`rate_limited`: the caller's request rate is exceeded",
        "500" => "`internal`: an unexpected error (no details)",
        "503" => "`unavailable`: the database is unavailable; try again",
        _ => return None,
    })
}

fn complete_responses(operation: &mut Operation) {
    let responses = &mut operation.responses.responses;
    for status in ["500", "503"] {
        responses.entry(status.to_owned()).or_insert_with(|| {
            RefOr::T(
                ResponseBuilder::new()
                    .content(
                        "application/json",
                        ContentBuilder::new()
                            .schema(Some(RefOr::Ref(utoipa::openapi::Ref::from_schema_name(
                                "ErrorBody",
                            ))))
                            .build(),
                    )
                    .build(),
            )
        });
    }
    for (status, response) in responses.iter_mut() {
        let RefOr::T(response) = response else {
            continue;
        };
        if response.description.is_empty() {
            response.description = error_description(status)
                .map(str::to_owned)
                .unwrap_or_else(|| success_description(status).to_owned());
        }
        let header = match status.as_str() {
            "401" => Some((
                "WWW-Authenticate",
                Type::String,
                "Always `Bearer realm=\"switchboard-api\"`.",
            )),
            "429" => Some((
                "Retry-After",
                Type::Integer,
                "Whole seconds to wait before retrying.",
            )),
            _ => None,
        };
        if let Some((name, kind, description)) = header {
            response.headers.insert(
                name.to_owned(),
                HeaderBuilder::new()
                    .schema(ObjectBuilder::new().schema_type(kind))
                    .description(Some(description))
                    .build(),
            );
        }
    }
}

fn success_description(status: &str) -> &'static str {
    match status {
        "200" => "OK",
        "201" => "Created",
        "204" => "Done; no body",
        _ => "",
    }
}

/// The document as served.
pub fn document() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

pub async fn serve() -> Json<utoipa::openapi::OpenApi> {
    Json(document())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    /// utoipa keys component schemas by the type's bare name, so two types
    /// of one name (`views::ActivityView` and an `activity::ActivityView`
    /// once) silently share one schema, and responses of the one are
    /// documented as the other: every name in `schemas(…)` must be unique.
    #[test]
    fn every_component_schema_has_a_name_of_its_own() {
        let source = include_str!("openapi.rs");
        let start = source
            .find("components(schemas(")
            .expect("the schemas list");
        let list = &source[start + "components(schemas(".len()..];
        let list = &list[..list.find("))").expect("its end")];
        let mut seen: HashMap<&str, &str> = HashMap::new();
        for path in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let name = path.rsplit("::").next().unwrap_or(path);
            if let Some(first) = seen.insert(name, path) {
                panic!("{first} and {path} would share the schema {name}");
            }
        }
        assert!(seen.len() > 50, "the list was read: {}", seen.len());
    }
}
