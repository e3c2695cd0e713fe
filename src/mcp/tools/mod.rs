//! The agent verbs (`docs/mcp.md`, "Tools"): which a session sees, and what
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
use crate::ops::{self, Answer};
use crate::store::{
    Caller, Endpoint, Finish, HeartbeatOptions, ReleaseOptions, SUMMARY_TOP, StoreError,
};
pub use tool::{ParseError, Tool, ToolName};

/// A tool-level failure: returned as a result with `isError: true`, unless
/// it is an outage (see [`CallFailure::Unavailable`]).
#[derive(Debug, Clone)]
pub struct ToolError {
    pub code: &'static str,
    pub message: String,
    /// The database could not be reached: the call is answered like any
    /// request during an outage (HTTP 503), not as the tool's own failure.
    outage: bool,
}

/// Why a tool call has no result at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallFailure {
    /// A protocol error (an unknown tool): a JSON-RPC error.
    Protocol(String),
    /// The database is unreachable: the same 503 an outage gives any
    /// request, so the client retries rather than reading it as an answer.
    Unavailable,
}

impl std::fmt::Display for CallFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Protocol(message) => f.write_str(message),
            Self::Unavailable => f.write_str("the database is unavailable"),
        }
    }
}

impl ToolError {
    pub fn invalid(argument: &str, message: impl std::fmt::Display) -> Self {
        Self {
            code: "invalid_argument",
            message: format!("{argument}: {message}"),
            outage: false,
        }
    }

    fn forbidden(message: impl Into<String>) -> Self {
        Self {
            code: "forbidden",
            message: message.into(),
            outage: false,
        }
    }

    fn internal() -> Self {
        Self {
            code: "internal",
            message: "internal error".into(),
            outage: false,
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

/// The one error policy's answer as a tool error; an outage is not the
/// tool's own failure but the 503 any request gets then.
impl From<StoreError> for ToolError {
    fn from(err: StoreError) -> Self {
        let answer = Answer::logged(&err, "mcp");
        Self {
            code: answer.code,
            message: answer.text(),
            outage: answer.retryable,
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

/// A claim's result: the JSON as `structuredContent`, and as text a short
/// summary of it, so that the payload (and the prior attempts) are sent
/// once: a claim result costs at most 1.25 x the payload + 4 KiB
/// (`docs/mcp.md`). See [`claim_summary`].
fn ok_claim(value: Value) -> Value {
    ok_claim_of(claim_summary(&value).to_string(), value)
}

fn ok_claim_of(text: String, value: Value) -> Value {
    json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": value
    })
}

/// Room left for the JSON-RPC envelope around a tool result.
const ENVELOPE_BYTES: usize = 256;

/// A claim's result as sent ([`ok_claim`]; `claim` when `by_id`, else
/// `claim_next`): the payload inline up to `inline_max`, and the prior
/// attempts' free text cut by the first [`rows::PriorCut::LEVELS`] that
/// keeps the whole result within 1.25 x the inline payload + 4 KiB; past
/// the last, no prior attempts at all (`attempts_total` still counts them).
/// The summary text measured is the one sent (it was made twice per claim:
/// issue 47).
fn claim_result(
    claimed: &crate::store::Claimed,
    by_id: bool,
    inline_max: usize,
) -> Result<Value, ToolError> {
    let build = |cut| {
        if by_id {
            to_json(rows::ClaimedRow::of(claimed, inline_max, cut))
        } else {
            to_json(rows::NextClaim::of(Some(claimed), inline_max, cut))
        }
    };
    let mut value = Value::Null;
    for cut in rows::PriorCut::LEVELS {
        value = build(cut)?;
        let text = claim_summary(&value).to_string();
        if within_budget(&value, &text) {
            return Ok(ok_claim_of(text, value));
        }
    }
    if let Some(prior) = value.get_mut("prior_attempts") {
        *prior = json!([]);
    }
    Ok(ok_claim(value))
}

/// `claim_next`'s result as sent ([`claim_result`]).
fn next_claim_result(claimed: ops::work::NextClaim, inline_max: usize) -> Result<Value, ToolError> {
    match claimed {
        ops::work::NextClaim::Claimed(claimed) => claim_result(&claimed, false, inline_max),
        ops::work::NextClaim::Empty { held } => {
            to_json(rows::NextClaim::of(None, 0, rows::PriorCut::WHOLE).held(held)).map(ok_claim)
        }
    }
}

/// `complete` with `next`: the short row with `next`, `claim_next`'s result
/// (`next_result`, as sent), in both the structured content and the text —
/// the text's `next` is the claim's short summary, so the payload is sent
/// once, as a claim sends it.
fn completed_then_claimed(
    short: rows::ShortRow<'_>,
    next_result: Value,
) -> Result<Value, ToolError> {
    let mut structured = to_json(&short)?;
    let mut text = structured.clone();
    let Value::Object(mut next_result) = next_result else {
        return Err(ToolError::internal());
    };
    let next = next_result.remove("structuredContent").unwrap_or_default();
    text["next"] = claim_summary(&next);
    structured["next"] = next;
    Ok(ok_claim_of(text.to_string(), structured))
}

/// Whether a claim's result, as sent (see [`ok_claim`]) with the summary
/// `text`, costs at most 1.25 x its inline payload + 4 KiB, leaving
/// [`ENVELOPE_BYTES`] for the JSON-RPC envelope.
fn within_budget(value: &Value, text: &str) -> bool {
    let row = value.get("todo").unwrap_or(value);
    let payload = row
        .get("payload")
        .filter(|p| !p.is_null())
        .map_or(0, json_len);
    claim_result_len(value, text) + ENVELOPE_BYTES <= payload + payload / 4 + 4096
}

/// The length of `ok_claim_of(text, value)`'s JSON text, counted without
/// building it (a claim's result was serialised three times per call: B2's
/// profile).
fn claim_result_len(value: &Value, text: &str) -> usize {
    // The frame's bytes: `ok_claim` around an empty text and a `null`.
    static FRAME: std::sync::LazyLock<usize> = std::sync::LazyLock::new(|| {
        json_len(&ok_claim_of(String::new(), Value::Null)) - json_len("") - json_len(&Value::Null)
    });
    *FRAME + json_len(text) + json_len(value)
}

/// The length of `value`'s JSON text, without allocating it.
fn json_len(value: &(impl Serialize + ?Sized)) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // A counter never fails to write, and JSON values and strings always
    // serialise.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// The row keys a claim's text repeats.
const SUMMARY_ROW_KEYS: [&str; 7] = [
    "id",
    "queue",
    "title",
    "state",
    "attempt",
    "max_attempts",
    "lease_expires_at",
];

/// A claim result in brief, shaped like it: `{empty: true}` as is; else the
/// row's [`SUMMARY_ROW_KEYS`] (under `todo` for `claim_next`) with
/// `payload_size` (and `payload_truncated` when it was left out) and a
/// `note` saying where the rest is, beside `attempt_seq`, `attempts_total`,
/// `prior_attempts_count` and `lease_token` (fenced claims).
pub fn claim_summary(value: &Value) -> Value {
    if value.get("empty") == Some(&Value::Bool(true)) {
        return value.clone();
    }
    let nested = value.get("todo").is_some();
    let row = value.get("todo").unwrap_or(value);
    let mut brief = serde_json::Map::new();
    for key in SUMMARY_ROW_KEYS {
        brief.insert(key.into(), row.get(key).cloned().unwrap_or(Value::Null));
    }
    let truncated = row.get("payload_truncated") == Some(&Value::Bool(true));
    let size = match row.get("payload") {
        _ if truncated => row.get("payload_size").cloned().unwrap_or(json!(0)),
        Some(p) if !p.is_null() => json!(json_len(p)),
        _ => json!(0),
    };
    brief.insert("payload_size".into(), size);
    if truncated {
        brief.insert("payload_truncated".into(), json!(true));
    }
    brief.insert(
        "note".into(),
        json!(if truncated {
            "A summary. The payload is over the inline limit: get_todo returns it whole; \
             structuredContent has a preview and prior_attempts."
        } else {
            "A summary. structuredContent has the whole result (payload, prior_attempts); \
             get_todo returns the todo too."
        }),
    );
    let mut extras = serde_json::Map::new();
    for key in ["attempt_seq", "attempts_total"] {
        extras.insert(key.into(), value.get(key).cloned().unwrap_or(Value::Null));
    }
    let prior = value
        .get("prior_attempts")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    extras.insert("prior_attempts_count".into(), json!(prior));
    if let Some(token) = value.get("lease_token") {
        extras.insert("lease_token".into(), token.clone());
    }
    if nested {
        extras.insert("empty".into(), json!(false));
        extras.insert("todo".into(), Value::Object(brief));
        Value::Object(extras)
    } else {
        brief.extend(extras);
        Value::Object(brief)
    }
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
/// `queue_summary` with `list_todos` and `complete_many` with `complete`,
/// plus the self verbs.
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

/// Runs tool `name`. `Err` is a protocol error (unknown tool) or an outage;
/// a tool's own failure is an `Ok` result with `isError: true`.
///
/// The name is checked first, then the scope (a tool outside it is refused
/// whatever its arguments), then the arguments.
pub async fn call(
    delivery: &Delivery,
    endpoint: &Endpoint,
    name: &str,
    arguments: Option<Value>,
) -> Result<Value, CallFailure> {
    call_with(delivery, endpoint, name, arguments, ToolLimits::default()).await
}

/// [`call`] with the result limits of this server.
pub async fn call_with(
    delivery: &Delivery,
    endpoint: &Endpoint,
    name: &str,
    arguments: Option<Value>,
    limits: ToolLimits,
) -> Result<Value, CallFailure> {
    let Some(name) = ToolName::parse(name) else {
        return Err(CallFailure::Protocol(format!("unknown tool {name:?}")));
    };
    if !name.visible_to(endpoint) {
        return Ok(
            ToolError::forbidden(format!("{name} is not in this endpoint's scope")).into_result(),
        );
    }
    let outcome = match Tool::with_arguments(name, arguments) {
        Ok(tool) => run(delivery, endpoint, tool, limits).await,
        Err(err) => Err(err),
    };
    Ok(match outcome {
        // A claim's result is made whole where its size is checked.
        Ok(value) if matches!(name, ToolName::Claim | ToolName::ClaimNext) => value,
        // So is a completion that claimed the next todo.
        Ok(value) if name == ToolName::Complete && value.get("structuredContent").is_some() => {
            value
        }
        Ok(value) => ok(value),
        Err(err) if err.outage => return Err(CallFailure::Unavailable),
        Err(err) => err.into_result(),
    })
}

/// Runs one parsed call on behalf of `endpoint`.
async fn run(
    delivery: &Delivery,
    endpoint: &Endpoint,
    tool: Tool,
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
        Tool::QueueSummary(a) => {
            if let Some(queue) = a.queue.as_deref() {
                check_queue(caller, queue)?;
            }
            let summary = store
                .queue_summary(caller, a.queue.as_deref(), SUMMARY_TOP)
                .await?;
            to_json(rows::SummaryView::of(&summary, store.clock().now()))
        }
        Tool::Claim(a) => {
            let claimed = ops::work::claim(delivery, caller, &a.id, a.options()).await?;
            claim_result(&claimed, true, limits.claim_payload_inline_max)
        }
        Tool::ClaimNext(a) => {
            let claimed =
                ops::work::claim_next(delivery, caller, a.queue.as_deref(), a.options()).await?;
            next_claim_result(claimed, limits.claim_payload_inline_max)
        }
        Tool::Heartbeat(a) => {
            let options = HeartbeatOptions {
                lease_ttl_seconds: a.lease_ttl_seconds,
                lease_token: a.lease_token,
                note: a.note,
            };
            let todo = ops::work::heartbeat(delivery, caller, &a.id, options).await?;
            to_json(rows::short_row(&todo))
        }
        Tool::Complete(a) => {
            let finish = finish(a.result, a.summary, a.lease_token);
            let Some(next) = a.next else {
                let todo = ops::work::complete(delivery, caller, &a.id, finish).await?;
                return to_json(rows::short_row(&todo));
            };
            if !ToolName::ClaimNext.visible_to(endpoint) {
                return Err(ToolError::forbidden(
                    "next: claim_next is not in this endpoint's scope",
                ));
            }
            let (todo, claimed) = ops::work::complete_then_claim_next(
                delivery,
                caller,
                &a.id,
                finish,
                next.queue.as_deref(),
                next.options(),
            )
            .await?;
            let next = next_claim_result(claimed, limits.claim_payload_inline_max)?;
            completed_then_claimed(rows::short_row(&todo), next)
        }
        Tool::CompleteMany(a) => {
            let finish = finish(a.result, a.summary, None);
            let answers = ops::work::complete_many(delivery, caller, &a.ids, finish).await?;
            to_json(rows::CompletedMany::of(&a.ids, &answers))
        }
        Tool::Fail(a) => {
            let finish = finish(a.result, a.summary, a.lease_token);
            let todo = ops::work::fail(delivery, caller, &a.id, finish).await?;
            to_json(rows::short_row(&todo))
        }
        Tool::Release(a) => {
            let options = ReleaseOptions {
                summary: a.summary,
                lease_token: a.lease_token,
            };
            let todo = ops::work::release(delivery, caller, &a.id, options).await?;
            to_json(rows::short_row(&todo))
        }
        Tool::GetDefaultLease(_) => {
            to_json(rows::LeaseView::of(endpoint.default_lease_ttl_seconds))
        }
        Tool::SetDefaultLease(a) => {
            // Every session of the endpoint, on every instance, is told.
            let updated = ops::endpoints::set_default_lease(
                delivery,
                &endpoint.id,
                a.default_lease_ttl_seconds,
            )
            .await?;
            to_json(rows::LeaseView::of(updated.default_lease_ttl_seconds))
        }
        // The self verbs: idempotent, on the caller's own row only.
        Tool::ClockIn(a) => {
            let endpoint = ops::presence::clock_in(delivery, endpoint, a.duration()).await?;
            presence_of(delivery, &endpoint).await
        }
        Tool::ClockOut(_) => {
            let endpoint = ops::presence::clock_out(delivery, endpoint).await?;
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
    fn a_claim_results_length_is_counted_exactly() {
        for value in [
            json!({"empty": true}),
            json!({"id": "td_1", "title": "quote \" and \\ and \u{1} and é", "payload": {"a": [1, 2.5, null]},
                   "attempt_seq": 1, "prior_attempts": [{"seq": 1, "summary": "line\nbreak"}],
                   "lease_token": "lt_1"}),
            json!({"empty": false, "todo": {"id": "td_2", "payload": "x".repeat(5000)},
                   "attempt_seq": 2, "attempts_total": 2, "prior_attempts": []}),
        ] {
            assert_eq!(
                claim_result_len(&value, &claim_summary(&value).to_string()),
                ok_claim(value.clone()).to_string().len(),
                "{value}"
            );
        }
    }

    #[test]
    fn claim_results_send_the_payload_once() {
        let payload = json!({"blob": "x".repeat(19_000)});
        let size = payload.to_string().len();
        let claim = json!({"id": "td_1", "title": "t", "payload": payload, "attempt_seq": 1,
                           "attempts_total": 2, "prior_attempts": [{"seq": 1}],
                           "lease_token": "lt_1"});
        let next = json!({"empty": false, "todo": claim.clone(), "attempt_seq": 1,
                          "attempts_total": 2, "prior_attempts": [{"seq": 1}]});
        for value in [claim, next] {
            let result = ok_claim(value.clone());
            assert_eq!(result["structuredContent"], value);
            let text = text_of(&result);
            let row = text.get("todo").unwrap_or(&text);
            assert!(row.get("payload").is_none());
            assert_eq!(row["payload_size"], size);
            assert_eq!(row["id"], "td_1");
            assert_eq!(row["title"], "t");
            assert!(row["note"].as_str().unwrap().contains("structuredContent"));
            assert_eq!(text["prior_attempts_count"], 1);
            assert_eq!(text["attempt_seq"], 1);
            assert!(text.get("prior_attempts").is_none());
            let bytes = result.to_string().len();
            assert!(bytes * 4 <= size * 5 + 4 * 4096, "{bytes} for {size}");
        }
        assert_eq!(
            text_of(&ok_claim(json!({"id": "td_1", "lease_token": "lt_1"})))["lease_token"],
            "lt_1"
        );
        // Empty: the same JSON.
        let result = ok_claim(json!({"empty": true}));
        assert_eq!(text_of(&result), json!({"empty": true}));
        // Cut: the preview stays out of the text too.
        let cut = json!({"id": "td_1", "payload": null, "payload_size": 40_000,
                         "payload_preview": "{", "payload_truncated": true});
        let text = text_of(&ok_claim(cut));
        assert!(text.get("payload_preview").is_none());
        assert_eq!(text["payload_size"], 40_000);
        assert_eq!(text["payload_truncated"], true);
        assert!(text["note"].as_str().unwrap().contains("get_todo"));
    }
}
