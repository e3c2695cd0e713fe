//! The agent verbs (`03-mcp.md`, "Tools"): which a session sees, and what
//! each does through the store on behalf of the session's endpoint.
//!
//! A call is parsed into a [`Tool`] (one variant per tool, with typed
//! arguments, see [`tool`]) and run by one `match`.

mod args;
pub mod rows;
mod schema;
pub mod tool;

use serde::Serialize;
use serde_json::{Value, json};

use crate::delivery::Delivery;
use crate::delivery::presence;
use crate::domain::todo::validate_queue_name;
use crate::store::{Caller, Endpoint, Finish, HeartbeatOptions, ReleaseOptions, StoreError};
pub use tool::{ParseError, Tool, ToolName};

/// A tool-level failure: returned as a result with `isError: true`.
#[derive(Debug, Clone)]
pub struct ToolError {
    pub code: &'static str,
    pub message: String,
}

impl ToolError {
    pub fn invalid(argument: &str, message: impl std::fmt::Display) -> Self {
        Self {
            code: "invalid_argument",
            message: format!("{argument}: {message}"),
        }
    }

    fn forbidden(message: impl Into<String>) -> Self {
        Self {
            code: "forbidden",
            message: message.into(),
        }
    }

    fn internal() -> Self {
        Self {
            code: "internal",
            message: "internal error".into(),
        }
    }

    /// The result the client sees: `"<code>: <message>"` as text, and the
    /// same in `structuredContent.error`.
    pub fn into_result(self) -> Value {
        json!({
            "content": [{"type": "text", "text": format!("{}: {}", self.code, self.message)}],
            "structuredContent": {"error": {"code": self.code, "message": self.message}},
            "isError": true
        })
    }
}

impl From<StoreError> for ToolError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::InvalidArgument(invalid) => Self::invalid(invalid.field, invalid.message),
            StoreError::Forbidden(message) => Self::forbidden(message),
            // One fixed text: a foreign id must answer exactly like a missing one.
            StoreError::NotFound => Self {
                code: "not_found",
                message: "no such todo in this endpoint".into(),
            },
            StoreError::Conflict(message) => Self {
                code: "conflict",
                message,
            },
            StoreError::Unavailable(detail) | StoreError::Internal(detail) => {
                tracing::error!(error = %detail, "tool call failed");
                Self {
                    code: "internal",
                    message: "internal error".into(),
                }
            }
        }
    }
}

/// A successful result: the JSON as text and as `structuredContent`.
fn ok(value: Value) -> Value {
    json!({
        "content": [{"type": "text", "text": value.to_string()}],
        "structuredContent": value
    })
}

/// A claim's result: the JSON as `structuredContent`, and as text the same
/// JSON without the payload (in its place `payload_size`, and a `note`
/// saying where it is), so that the payload is sent once: a claim result
/// costs at most 1.25 x the payload + 4 KiB (`03-mcp.md`).
fn ok_claim(value: Value) -> Value {
    let mut text = value.clone();
    // `claim_next`: the row is under `todo` (none when empty); `claim`: the
    // row is the result.
    let row = if text.get("todo").is_some() {
        text.get_mut("todo")
    } else if text.get("id").is_some() {
        Some(&mut text)
    } else {
        None
    };
    if let Some(row) = row.and_then(Value::as_object_mut) {
        let payload = row.remove("payload").unwrap_or(Value::Null);
        row.remove("payload_preview");
        if !payload.is_null() {
            row.insert("payload_size".into(), json!(payload.to_string().len()));
        } else if !row.contains_key("payload_size") {
            row.insert("payload_size".into(), json!(0));
        }
        let note = if row.contains_key("payload_truncated") {
            "payload left out: call get_todo for the whole payload (structuredContent has a preview)"
        } else {
            "payload left out of this text: it is in structuredContent.payload (get_todo returns it too)"
        };
        row.insert("payload_note".into(), json!(note));
    }
    json!({
        "content": [{"type": "text", "text": text.to_string()}],
        "structuredContent": value
    })
}

/// Limits of tool results (`McpConfig`).
#[derive(Debug, Clone, Copy)]
pub struct ToolLimits {
    /// A payload whose JSON text is longer than this many bytes is left out
    /// of claim results (size and preview instead).
    pub claim_payload_inline_max: usize,
}

/// The default inline limit of a claim's payload: 16 KiB.
pub const CLAIM_PAYLOAD_INLINE_MAX: usize = 16 * 1024;

impl Default for ToolLimits {
    fn default() -> Self {
        Self {
            claim_payload_inline_max: CLAIM_PAYLOAD_INLINE_MAX,
        }
    }
}

/// A result row as JSON (objects with sorted keys, as `json!` builds them).
fn to_json(row: impl Serialize) -> Result<Value, ToolError> {
    serde_json::to_value(row).map_err(|e| {
        tracing::error!(error = %e, "a tool result did not serialise");
        ToolError::internal()
    })
}

/// The tools a session of this endpoint may call, in `tools/list` order:
/// its scope's verbs, plus `get_todo` when `list_todos` is granted, plus
/// the self verbs.
pub fn visible_tools(endpoint: &Endpoint) -> Vec<ToolName> {
    ToolName::ALL
        .into_iter()
        .filter(|tool| tool.visible_to(endpoint))
        .collect()
}

pub fn list(endpoint: &Endpoint) -> Value {
    let lease = endpoint.effective_lease_seconds();
    let tools: Vec<Value> = visible_tools(endpoint)
        .into_iter()
        .map(|tool| schema::definition(tool, lease))
        .collect();
    json!({ "tools": tools })
}

/// What a successful call changed that the transport must announce.
#[derive(Debug, Default)]
pub struct SideEffects {
    /// `set_default_lease` changed the endpoint: tell its sessions the tool
    /// list (whose descriptions quote the lease) changed.
    pub tools_changed: bool,
}

/// Runs tool `name`. `Err` is a protocol error (unknown tool); a tool's own
/// failure is an `Ok` result with `isError: true`.
///
/// The name is checked first, then the scope (a tool outside it is refused
/// whatever its arguments), then the arguments.
pub async fn call(
    delivery: &Delivery,
    endpoint: &Endpoint,
    name: &str,
    arguments: Option<Value>,
    effects: &mut SideEffects,
) -> Result<Value, String> {
    call_with(
        delivery,
        endpoint,
        name,
        arguments,
        effects,
        ToolLimits::default(),
    )
    .await
}

/// [`call`] with the result limits of this server.
pub async fn call_with(
    delivery: &Delivery,
    endpoint: &Endpoint,
    name: &str,
    arguments: Option<Value>,
    effects: &mut SideEffects,
    limits: ToolLimits,
) -> Result<Value, String> {
    let Some(name) = ToolName::parse(name) else {
        return Err(format!("unknown tool {name:?}"));
    };
    if !name.visible_to(endpoint) {
        return Ok(
            ToolError::forbidden(format!("{name} is not in this endpoint's scope")).into_result(),
        );
    }
    let outcome = match Tool::with_arguments(name, arguments) {
        Ok(tool) => run(delivery, endpoint, tool, effects, limits).await,
        Err(err) => Err(err),
    };
    Ok(match outcome {
        Ok(value) if matches!(name, ToolName::Claim | ToolName::ClaimNext) => ok_claim(value),
        Ok(value) => ok(value),
        Err(err) => err.into_result(),
    })
}

/// Runs one parsed call on behalf of `endpoint`.
async fn run(
    delivery: &Delivery,
    endpoint: &Endpoint,
    tool: Tool,
    effects: &mut SideEffects,
    limits: ToolLimits,
) -> Result<Value, ToolError> {
    let store = delivery.store();
    let caller = &endpoint.caller();
    match tool {
        Tool::ListTodos(a) => {
            let limit = a.limit.unwrap_or(LIST_LIMIT_DEFAULT);
            if !(1..=LIST_LIMIT_MAX).contains(&limit) {
                return Err(ToolError::invalid(
                    "limit",
                    format!("must be between 1 and {LIST_LIMIT_MAX}"),
                ));
            }
            if let Some(queue) = a.queue.as_deref() {
                check_queue(caller, queue)?;
            }
            let todos = store
                .list_todos(caller, a.queue.as_deref(), a.state, limit)
                .await?;
            to_json(rows::TodoList::of(&todos))
        }
        Tool::GetTodo(a) => {
            let limit = a.attempts_limit.unwrap_or(20);
            let todo = store.get_todo(caller, &a.id).await?;
            let attempts = store.list_attempts(caller, &a.id, limit).await?;
            to_json(rows::TodoDetail::of(&todo, &attempts))
        }
        Tool::Claim(a) => {
            let claimed = store.claim(caller, &a.id, a.options()).await?;
            to_json(rows::ClaimedRow::of(
                &claimed,
                limits.claim_payload_inline_max,
            ))
        }
        Tool::ClaimNext(a) => {
            let claimed = store
                .claim_next(caller, a.queue.as_deref(), a.options())
                .await?;
            to_json(rows::NextClaim::of(
                claimed.as_ref(),
                limits.claim_payload_inline_max,
            ))
        }
        Tool::Heartbeat(a) => {
            let options = HeartbeatOptions {
                lease_ttl_seconds: a.lease_ttl_seconds,
                lease_token: a.lease_token,
                note: a.note,
            };
            let todo = store.heartbeat(caller, &a.id, options).await?;
            to_json(rows::full_row(&todo))
        }
        Tool::Complete(a) => {
            let todo = store
                .complete(caller, &a.id, finish(a.result, a.summary, a.lease_token))
                .await?;
            to_json(rows::full_row(&todo))
        }
        Tool::Fail(a) => {
            let todo = store
                .fail(caller, &a.id, finish(a.result, a.summary, a.lease_token))
                .await?;
            to_json(rows::full_row(&todo))
        }
        Tool::Release(a) => {
            let options = ReleaseOptions {
                summary: a.summary,
                lease_token: a.lease_token,
            };
            let todo = store.release(caller, &a.id, options).await?;
            to_json(rows::full_row(&todo))
        }
        Tool::GetDefaultLease(_) => {
            to_json(rows::LeaseView::of(endpoint.default_lease_ttl_seconds))
        }
        Tool::SetDefaultLease(a) => {
            let updated = store
                .set_default_lease(&endpoint.id, a.default_lease_ttl_seconds)
                .await?;
            effects.tools_changed = true;
            to_json(rows::LeaseView::of(updated.default_lease_ttl_seconds))
        }
        // The self verbs: idempotent, on the caller's own row only.
        Tool::ClockIn(a) => {
            let endpoint = presence::clock_in(delivery, endpoint, a.duration()).await?;
            presence_of(delivery, &endpoint).await
        }
        Tool::ClockOut(_) => {
            let endpoint = presence::clock_out(delivery, endpoint).await?;
            presence_of(delivery, &endpoint).await
        }
        Tool::Presence(_) => presence_of(delivery, endpoint).await,
    }
}

/// `list_todos`' `limit`: default 50, 1 to 200.
const LIST_LIMIT_DEFAULT: i64 = 50;
const LIST_LIMIT_MAX: i64 = 200;

/// A queue argument, checked as `claim_next` checks it (same refusals):
/// a queue name, and one of the endpoint's queues.
fn check_queue(caller: &Caller, queue: &str) -> Result<(), ToolError> {
    validate_queue_name(queue, "queue").map_err(|e| ToolError::invalid(e.field, e.message))?;
    if !caller.queues.iter().any(|q| q == queue) {
        return Err(ToolError::forbidden(format!(
            "queue {queue:?} is not in this endpoint's scope"
        )));
    }
    Ok(())
}

fn finish(result: Option<Value>, summary: Option<String>, lease_token: Option<String>) -> Finish {
    Finish {
        result,
        summary,
        lease_token,
    }
}

/// The endpoint's presence as read back from the store after a self verb.
async fn presence_of(delivery: &Delivery, endpoint: &Endpoint) -> Result<Value, ToolError> {
    let store = delivery.store();
    let endpoint = store.unscoped_get_endpoint(&endpoint.id).await?;
    to_json(presence::view(store, &endpoint, store.clock().now()).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_of(result: &Value) -> Value {
        serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap()
    }

    #[test]
    fn claim_results_send_the_payload_once() {
        let payload = json!({"blob": "x".repeat(19_000)});
        let size = payload.to_string().len();
        let claim = json!({"id": "td_1", "title": "t", "payload": payload, "attempt_seq": 1});
        let next = json!({"empty": false, "todo": claim.clone(), "attempt_seq": 1});
        for value in [claim, next] {
            let result = ok_claim(value.clone());
            assert_eq!(result["structuredContent"], value);
            let text = text_of(&result);
            let row = text.get("todo").unwrap_or(&text);
            assert!(row.get("payload").is_none());
            assert_eq!(row["payload_size"], size);
            assert!(
                row["payload_note"]
                    .as_str()
                    .unwrap()
                    .contains("structuredContent")
            );
            let bytes = result.to_string().len();
            assert!(bytes * 4 <= size * 5 + 4 * 4096, "{bytes} for {size}");
        }
        // Empty: the same JSON.
        let result = ok_claim(json!({"empty": true}));
        assert_eq!(text_of(&result), json!({"empty": true}));
        // Cut: the preview stays out of the text too.
        let cut = json!({"id": "td_1", "payload": null, "payload_size": 40_000,
                         "payload_preview": "{", "payload_truncated": true});
        let text = text_of(&ok_claim(cut));
        assert!(text.get("payload_preview").is_none());
        assert_eq!(text["payload_size"], 40_000);
        assert!(text["payload_note"].as_str().unwrap().contains("get_todo"));
    }
}
