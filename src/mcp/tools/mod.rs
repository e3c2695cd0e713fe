//! The agent verbs (`03-mcp.md`, "Tools"): which a session sees, and what
//! each does through the store on behalf of the session's endpoint.

mod args;
mod rows;
mod schema;

use serde_json::{Value, json};

use crate::delivery::Doorbells;
use crate::delivery::presence;
use crate::domain::duration::parse_positive_duration;
use crate::domain::lease::{
    DEFAULT_LEASE_SECONDS, MAX_LEASE_SECONDS, MIN_ENDPOINT_DEFAULT_LEASE_SECONDS,
};
use crate::domain::todo::{KEPT_ATTEMPTS, TodoState};
use crate::store::{
    Caller, ClaimOptions, Claimed, Endpoint, Finish, HeartbeatOptions, ReleaseOptions, Store,
    StoreError,
};
use args::Args;

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
            StoreError::EndpointRevoked => Self {
                code: "conflict",
                message: "the endpoint is revoked".into(),
            },
            StoreError::Taken(taken) => Self {
                code: "conflict",
                message: taken.to_string(),
            },
            StoreError::Conflict(message) => Self {
                code: "conflict",
                message,
            },
            err @ StoreError::SchemaMismatch { .. } => {
                tracing::error!(error = %err, "tool call failed");
                Self {
                    code: "internal",
                    message: "internal error".into(),
                }
            }
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

/// Verbs every session has, outside any scope: they touch only the caller's
/// own endpoint row and take no identifier (`05-presence.md`).
pub const SELF_VERBS: [&str; 3] = ["clock_in", "clock_out", "presence"];

/// The tools a session of this endpoint may call: its scope's verbs, plus
/// `get_todo` when `list_todos` is granted, plus the self verbs.
pub fn visible_tools(endpoint: &Endpoint) -> Vec<&'static str> {
    let granted = |v: &str| endpoint.scope_verbs.iter().any(|g| g == v);
    crate::domain::scope::GRANTABLE_VERBS
        .into_iter()
        .filter(|v| granted(v) || (*v == "get_todo" && granted("list_todos")))
        .chain(SELF_VERBS)
        .collect()
}

pub fn list(endpoint: &Endpoint) -> Value {
    let lease = endpoint.effective_lease_seconds();
    let tools: Vec<Value> = visible_tools(endpoint)
        .into_iter()
        .filter_map(|name| schema::definition(name, lease))
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
pub async fn call(
    store: &dyn Store,
    doorbells: &Doorbells,
    endpoint: &Endpoint,
    name: &str,
    arguments: Option<Value>,
    effects: &mut SideEffects,
) -> Result<Value, String> {
    if SELF_VERBS.contains(&name) {
        return Ok(
            match self_verb(store, doorbells, endpoint, name, arguments).await {
                Ok(value) => ok(value),
                Err(err) => err.into_result(),
            },
        );
    }
    if crate::domain::scope::GRANTABLE_VERBS.contains(&name) {
        if !visible_tools(endpoint).contains(&name) {
            return Ok(
                ToolError::forbidden(format!("{name} is not in this endpoint's scope"))
                    .into_result(),
            );
        }
    } else {
        return Err(format!("unknown tool {name:?}"));
    }
    let caller = endpoint.caller();
    let outcome = run(store, endpoint, &caller, name, arguments, effects).await;
    Ok(match outcome {
        Ok(value) => ok(value),
        Err(err) => err.into_result(),
    })
}

async fn run(
    store: &dyn Store,
    endpoint: &Endpoint,
    caller: &Caller,
    name: &str,
    arguments: Option<Value>,
    effects: &mut SideEffects,
) -> Result<Value, ToolError> {
    match name {
        "list_todos" => {
            let a = Args::parse(arguments, &["queue", "state", "limit"])?;
            let state = a
                .string("state")?
                .map(|s| TodoState::parse_field(&s, "state"))
                .transpose()
                .map_err(|e| ToolError::invalid(e.field, e.message))?;
            let limit = a.integer("limit")?.unwrap_or(50).clamp(1, 200);
            let queue = a.string("queue")?;
            let todos = store
                .list_todos(caller, queue.as_deref(), state, limit)
                .await?;
            Ok(json!({"todos": todos.iter().map(rows::compact_row).collect::<Vec<_>>()}))
        }
        "get_todo" => {
            let a = Args::parse(arguments, &["id", "attempts_limit"])?;
            let id = a.required_string("id")?;
            let limit = a.integer("attempts_limit")?.unwrap_or(20);
            if !(1..=KEPT_ATTEMPTS).contains(&limit) {
                return Err(ToolError::invalid(
                    "attempts_limit",
                    format!("must be between 1 and {KEPT_ATTEMPTS}"),
                ));
            }
            let todo = store.get_todo(caller, &id).await?;
            let attempts = store.list_attempts(caller, &id, limit).await?;
            let mut row = rows::full_row(&todo);
            if let Some(obj) = row.as_object_mut() {
                obj.insert("result".into(), todo.result.clone().unwrap_or(Value::Null));
                obj.insert(
                    "attempts".into(),
                    attempts.iter().map(rows::attempt).collect(),
                );
                obj.insert("attempts_total".into(), json!(todo.attempts_total));
                obj.insert("attempts_pruned".into(), json!(todo.attempts_pruned));
            }
            Ok(row)
        }
        "claim" => {
            let a = Args::parse(
                arguments,
                &["id", "lease_ttl_seconds", "require_fence", "claimant"],
            )?;
            let id = a.required_string("id")?;
            let claimed = store.claim(caller, &id, claim_options(&a)?).await?;
            let mut row = rows::full_row(&claimed.todo);
            add_claim_extras(&mut row, &claimed);
            Ok(row)
        }
        "claim_next" => {
            let a = Args::parse(
                arguments,
                &["queue", "lease_ttl_seconds", "require_fence", "claimant"],
            )?;
            let queue = a.string("queue")?;
            match store
                .claim_next(caller, queue.as_deref(), claim_options(&a)?)
                .await?
            {
                None => Ok(json!({"empty": true})),
                Some(claimed) => {
                    let mut out = json!({"empty": false, "todo": rows::full_row(&claimed.todo)});
                    add_claim_extras(&mut out, &claimed);
                    Ok(out)
                }
            }
        }
        "heartbeat" => {
            let a = Args::parse(
                arguments,
                &["id", "lease_ttl_seconds", "lease_token", "note"],
            )?;
            let id = a.required_string("id")?;
            let todo = store
                .heartbeat(
                    caller,
                    &id,
                    HeartbeatOptions {
                        lease_ttl_seconds: a.integer("lease_ttl_seconds")?,
                        lease_token: a.string("lease_token")?,
                        note: a.string("note")?,
                    },
                )
                .await?;
            Ok(rows::full_row(&todo))
        }
        "complete" | "fail" => {
            let a = Args::parse(arguments, &["id", "result", "summary", "lease_token"])?;
            let id = a.required_string("id")?;
            let finish = Finish {
                result: a.json("result"),
                summary: a.string("summary")?,
                lease_token: a.string("lease_token")?,
            };
            let todo = if name == "complete" {
                store.complete(caller, &id, finish).await?
            } else {
                store.fail(caller, &id, finish).await?
            };
            Ok(rows::full_row(&todo))
        }
        "release" => {
            let a = Args::parse(arguments, &["id", "summary", "lease_token"])?;
            let id = a.required_string("id")?;
            let todo = store
                .release(
                    caller,
                    &id,
                    ReleaseOptions {
                        summary: a.string("summary")?,
                        lease_token: a.string("lease_token")?,
                    },
                )
                .await?;
            Ok(rows::full_row(&todo))
        }
        "get_default_lease" => {
            Args::parse(arguments, &[])?;
            Ok(lease_view(endpoint.default_lease_ttl_seconds))
        }
        "set_default_lease" => {
            let a = Args::parse(arguments, &["default_lease_ttl_seconds"])?;
            let seconds = a.nullable_integer("default_lease_ttl_seconds")?;
            let updated = store.set_default_lease(&endpoint.id, seconds).await?;
            effects.tools_changed = true;
            Ok(lease_view(updated.default_lease_ttl_seconds))
        }
        other => Err(ToolError::invalid(
            "name",
            format!("unknown tool {other:?}"),
        )),
    }
}

/// `clock_in`, `clock_out`, `presence`: idempotent, refusing any argument
/// but `for` (so they can never be pointed at another endpoint).
async fn self_verb(
    store: &dyn Store,
    doorbells: &Doorbells,
    endpoint: &Endpoint,
    name: &str,
    arguments: Option<Value>,
) -> Result<Value, ToolError> {
    let endpoint = match name {
        "clock_in" => {
            let a = Args::parse(arguments, &["for"])?;
            // Validated even when it would not be used.
            let for_ = match a.string("for")? {
                None => presence::DEFAULT_CLOCK_IN,
                Some(text) => {
                    let d = parse_positive_duration(&text, "for")
                        .map_err(|e| ToolError::invalid(e.field, e.message))?;
                    if d > presence::MAX_CLOCK_IN {
                        return Err(ToolError::invalid("for", "must be at most 8h"));
                    }
                    d
                }
            };
            presence::clock_in(store, doorbells, endpoint, for_).await?
        }
        "clock_out" => {
            Args::parse(arguments, &[])?;
            presence::clock_out(store, doorbells, endpoint).await?
        }
        _ => {
            Args::parse(arguments, &[])?;
            endpoint.clone()
        }
    };
    let endpoint = store.unscoped_get_endpoint(&endpoint.id).await?;
    let view = presence::view(store, &endpoint, store.clock().now()).await;
    Ok(serde_json::to_value(view).unwrap_or(Value::Null))
}

fn claim_options(a: &Args) -> Result<ClaimOptions, ToolError> {
    Ok(ClaimOptions {
        lease_ttl_seconds: a.integer("lease_ttl_seconds")?,
        require_fence: a.boolean("require_fence")?.unwrap_or(false),
        claimant: a.string("claimant")?,
    })
}

fn add_claim_extras(out: &mut Value, claimed: &Claimed) {
    if let Some(obj) = out.as_object_mut() {
        obj.insert("attempt_seq".into(), json!(claimed.attempt_seq));
        obj.insert("attempts_total".into(), json!(claimed.todo.attempts_total));
        obj.insert(
            "prior_attempts".into(),
            claimed.prior_attempts.iter().map(rows::attempt).collect(),
        );
        if let Some(token) = &claimed.lease_token {
            obj.insert("lease_token".into(), json!(token));
        }
    }
}

fn lease_view(default: Option<i64>) -> Value {
    json!({
        "default_lease_ttl_seconds": default,
        "effective_lease_ttl_seconds": default.unwrap_or(DEFAULT_LEASE_SECONDS),
        "server_default_lease_ttl_seconds": DEFAULT_LEASE_SECONDS,
        "min": MIN_ENDPOINT_DEFAULT_LEASE_SECONDS,
        "max": MAX_LEASE_SECONDS,
    })
}
