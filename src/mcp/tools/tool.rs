//! The closed set of tools: their names ([`ToolName`], the one place a tool
//! name is spelt), their typed arguments, and [`Tool`], a parsed call.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::ToolError;
use super::args::{self, ToolArgs, de};
use crate::domain::duration::parse_positive_duration;
use crate::domain::todo::{KEPT_ATTEMPTS, TodoState, validate_complete_many_ids};
use crate::ops::presence;
use crate::store::{ClaimOptions, Endpoint};

macro_rules! tool_names {
    ($($variant:ident => $name:literal,)*) => {
        /// Every tool, by name, in the order of `tools/list`: the grantable
        /// verbs in the order of `domain::scope::GRANTABLE_VERBS`, each bulk
        /// tool after the verb that grants it, then the self verbs.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ToolName {
            $($variant,)*
        }

        impl ToolName {
            pub const ALL: [ToolName; [$($name),*].len()] = [$(ToolName::$variant),*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(ToolName::$variant => $name,)*
                }
            }

            /// `None` for a name that is no tool of ours.
            pub fn parse(name: &str) -> Option<Self> {
                match name {
                    $($name => Some(ToolName::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

tool_names! {
    ListTodos => "list_todos",
    GetTodo => "get_todo",
    QueueSummary => "queue_summary",
    Claim => "claim",
    ClaimNext => "claim_next",
    Heartbeat => "heartbeat",
    Complete => "complete",
    CompleteMany => "complete_many",
    Fail => "fail",
    Release => "release",
    GetDefaultLease => "get_default_lease",
    SetDefaultLease => "set_default_lease",
    ClockIn => "clock_in",
    ClockOut => "clock_out",
    Presence => "presence",
}

impl std::fmt::Display for ToolName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ToolName {
    /// A self verb (`docs/presence.md`): every session has it, outside any
    /// scope; it touches only the caller's own endpoint row and takes no
    /// identifier.
    pub fn is_self_verb(self) -> bool {
        matches!(
            self,
            ToolName::ClockIn | ToolName::ClockOut | ToolName::Presence
        )
    }

    /// The scope verb (`domain::scope::GRANTABLE_VERBS`) that grants this
    /// tool; `None` for a self verb. The bulk tools have no verb of their
    /// own: `queue_summary` comes with `list_todos`, `complete_many` with
    /// `complete`.
    pub fn grantable_verb(self) -> Option<&'static str> {
        match self {
            ToolName::QueueSummary => Some(ToolName::ListTodos.as_str()),
            ToolName::CompleteMany => Some(ToolName::Complete.as_str()),
            _ if self.is_self_verb() => None,
            _ => Some(self.as_str()),
        }
    }

    /// Whether a session of `endpoint` sees (and may call) this tool: its
    /// scope's verbs, `get_todo` also when `list_todos` is granted, the bulk
    /// tools with the verb that grants them, and the self verbs always.
    pub fn visible_to(self, endpoint: &Endpoint) -> bool {
        self.visible_with(&endpoint.scope_verbs)
    }

    /// [`Self::visible_to`] for a scope's verbs (what vend printed).
    pub fn visible_with(self, scope_verbs: &[String]) -> bool {
        let granted = |v: &str| scope_verbs.iter().any(|g| g == v);
        match self.grantable_verb() {
            None => true,
            Some(verb) => {
                granted(verb)
                    || (self == ToolName::GetTodo && granted(ToolName::ListTodos.as_str()))
            }
        }
    }
}

/// What a tool does, as MCP tool annotations say it (`docs/mcp.md`: "as they
/// truly are"; Claude Code runs read-only tools concurrently and offers them
/// in read-only modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hints {
    /// Changes nothing.
    pub read_only: bool,
    /// Calling it again with the same arguments changes nothing more.
    pub idempotent: bool,
    /// May end or undo something for good (only meaningful when not read-only).
    pub destructive: bool,
    /// Reaches beyond this server (none do: they only touch our queue).
    pub open_world: bool,
}

impl ToolName {
    /// The human title shown by clients.
    pub fn title(self) -> &'static str {
        match self {
            ToolName::ListTodos => "List todos",
            ToolName::GetTodo => "Read a todo",
            ToolName::QueueSummary => "Summarise the queues",
            ToolName::Claim => "Claim a todo",
            ToolName::ClaimNext => "Claim the next todo",
            ToolName::Heartbeat => "Extend a lease",
            ToolName::Complete => "Complete a todo",
            ToolName::CompleteMany => "Complete several todos",
            ToolName::Fail => "Fail a todo",
            ToolName::Release => "Release a todo",
            ToolName::GetDefaultLease => "Read the default lease",
            ToolName::SetDefaultLease => "Set the default lease",
            ToolName::ClockIn => "Clock in",
            ToolName::ClockOut => "Clock out",
            ToolName::Presence => "Read presence",
        }
    }

    /// The tool's annotations.
    ///
    /// - read-only: the reads (`list_todos`, `get_todo`, `queue_summary`,
    ///   `get_default_lease`, `presence`);
    /// - idempotent: `heartbeat` (the lease runs to now + TTL whichever call
    ///   set it), `set_default_lease`, `clock_in`, `clock_out`, and the
    ///   finishing verbs `complete`, `complete_many`, `fail`, `release` (a
    ///   repeat is refused
    ///   with `conflict`, never applied twice); not `claim`/`claim_next`
    ///   (another call may take another todo, or a new attempt);
    /// - destructive: none. `complete`, `fail` and `release` record an
    ///   outcome on a todo the caller holds; nothing is destroyed (the row,
    ///   its payload and its history stay). Codex asks approval before any
    ///   destructive tool and `codex exec` never approves, so the old hint
    ///   left every Codex claim stuck until its lease lapsed (issue 42);
    /// - open world: none (they only touch this server's queue).
    pub fn hints(self) -> Hints {
        let (read_only, idempotent, destructive) = match self {
            ToolName::ListTodos
            | ToolName::GetTodo
            | ToolName::QueueSummary
            | ToolName::GetDefaultLease
            | ToolName::Presence => (true, true, false),
            ToolName::Heartbeat
            | ToolName::SetDefaultLease
            | ToolName::ClockIn
            | ToolName::ClockOut
            | ToolName::Release
            | ToolName::Complete
            | ToolName::CompleteMany
            | ToolName::Fail => (false, true, false),
            ToolName::Claim | ToolName::ClaimNext => (false, false, false),
        };
        Hints {
            read_only,
            idempotent,
            destructive,
            open_world: false,
        }
    }
}

/// One parsed tool call: which tool, with its arguments read and checked.
#[derive(Debug)]
pub enum Tool {
    ListTodos(ListTodosArgs),
    GetTodo(GetTodoArgs),
    QueueSummary(QueueSummaryArgs),
    Claim(ClaimArgs),
    ClaimNext(ClaimNextArgs),
    Heartbeat(HeartbeatArgs),
    Complete(CompleteArgs),
    CompleteMany(CompleteManyArgs),
    Fail(FinishArgs),
    Release(ReleaseArgs),
    GetDefaultLease(NoArgs),
    SetDefaultLease(SetDefaultLeaseArgs),
    ClockIn(ClockInArgs),
    ClockOut(NoArgs),
    Presence(NoArgs),
}

/// Why `{name, arguments}` is not a [`Tool`].
#[derive(Debug)]
pub enum ParseError {
    /// No tool has this name: a JSON-RPC protocol error.
    UnknownTool(String),
    /// The arguments are refused: a tool result with `isError: true`.
    Arguments(ToolError),
}

impl Tool {
    /// `{name, arguments}` as a tool call.
    pub fn parse(name: &str, arguments: Option<Value>) -> Result<Tool, ParseError> {
        let name = ToolName::parse(name).ok_or_else(|| ParseError::UnknownTool(name.to_owned()))?;
        Tool::with_arguments(name, arguments).map_err(ParseError::Arguments)
    }

    /// The call of tool `name` with `arguments`, or which argument is refused.
    pub fn with_arguments(name: ToolName, arguments: Option<Value>) -> Result<Tool, ToolError> {
        let a = arguments;
        Ok(match name {
            ToolName::ListTodos => Tool::ListTodos(args::parse(a)?),
            ToolName::GetTodo => Tool::GetTodo(args::parse(a)?),
            ToolName::QueueSummary => Tool::QueueSummary(args::parse(a)?),
            ToolName::Claim => Tool::Claim(args::parse(a)?),
            ToolName::ClaimNext => Tool::ClaimNext(args::parse(a)?),
            ToolName::Heartbeat => Tool::Heartbeat(args::parse(a)?),
            ToolName::Complete => Tool::Complete(args::parse(a)?),
            ToolName::CompleteMany => Tool::CompleteMany(args::parse(a)?),
            ToolName::Fail => Tool::Fail(args::parse(a)?),
            ToolName::Release => Tool::Release(args::parse(a)?),
            ToolName::GetDefaultLease => Tool::GetDefaultLease(args::parse(a)?),
            ToolName::SetDefaultLease => Tool::SetDefaultLease(args::parse(a)?),
            ToolName::ClockIn => Tool::ClockIn(args::parse(a)?),
            ToolName::ClockOut => Tool::ClockOut(args::parse(a)?),
            ToolName::Presence => Tool::Presence(args::parse(a)?),
        })
    }

    pub fn name(&self) -> ToolName {
        match self {
            Tool::ListTodos(_) => ToolName::ListTodos,
            Tool::GetTodo(_) => ToolName::GetTodo,
            Tool::QueueSummary(_) => ToolName::QueueSummary,
            Tool::Claim(_) => ToolName::Claim,
            Tool::ClaimNext(_) => ToolName::ClaimNext,
            Tool::Heartbeat(_) => ToolName::Heartbeat,
            Tool::Complete(_) => ToolName::Complete,
            Tool::CompleteMany(_) => ToolName::CompleteMany,
            Tool::Fail(_) => ToolName::Fail,
            Tool::Release(_) => ToolName::Release,
            Tool::GetDefaultLease(_) => ToolName::GetDefaultLease,
            Tool::SetDefaultLease(_) => ToolName::SetDefaultLease,
            Tool::ClockIn(_) => ToolName::ClockIn,
            Tool::ClockOut(_) => ToolName::ClockOut,
            Tool::Presence(_) => ToolName::Presence,
        }
    }
}

/// `get_default_lease`, `clock_out`, `presence`: no argument at all.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

impl ToolArgs for NoArgs {}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListTodosArgs {
    #[serde(deserialize_with = "todo_state")]
    pub state: Option<TodoState>,
    /// As given; the call clamps it to 1..=200 (default 50).
    #[serde(deserialize_with = "de::integer")]
    pub limit: Option<i64>,
    #[serde(deserialize_with = "de::string")]
    pub queue: Option<String>,
}

impl ToolArgs for ListTodosArgs {
    // Read state, limit, queue (the order they always were); listed as the
    // schema lists them.
    const LISTED: Option<&'static [&'static str]> = Some(&["queue", "state", "limit"]);
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetTodoArgs {
    #[serde(deserialize_with = "de::required_string")]
    pub id: String,
    /// 1..=`KEPT_ATTEMPTS` (default 20).
    #[serde(deserialize_with = "attempts_limit")]
    pub attempts_limit: Option<i64>,
}

impl ToolArgs for GetTodoArgs {}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimArgs {
    #[serde(deserialize_with = "de::required_string")]
    pub id: String,
    #[serde(deserialize_with = "de::integer")]
    pub lease_ttl_seconds: Option<i64>,
    #[serde(deserialize_with = "de::boolean")]
    pub require_fence: Option<bool>,
    #[serde(deserialize_with = "de::string")]
    pub claimant: Option<String>,
}

impl ToolArgs for ClaimArgs {}

impl ClaimArgs {
    pub fn options(&self) -> ClaimOptions {
        claim_options(self.lease_ttl_seconds, self.require_fence, &self.claimant)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimNextArgs {
    #[serde(deserialize_with = "de::string")]
    pub queue: Option<String>,
    #[serde(deserialize_with = "de::integer")]
    pub lease_ttl_seconds: Option<i64>,
    #[serde(deserialize_with = "de::boolean")]
    pub require_fence: Option<bool>,
    #[serde(deserialize_with = "de::string")]
    pub claimant: Option<String>,
}

impl ToolArgs for ClaimNextArgs {}

impl ClaimNextArgs {
    pub fn options(&self) -> ClaimOptions {
        claim_options(self.lease_ttl_seconds, self.require_fence, &self.claimant)
    }
}

fn claim_options(
    lease_ttl_seconds: Option<i64>,
    require_fence: Option<bool>,
    claimant: &Option<String>,
) -> ClaimOptions {
    ClaimOptions {
        lease_ttl_seconds,
        require_fence: require_fence.unwrap_or(false),
        claimant: claimant.clone(),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatArgs {
    #[serde(deserialize_with = "de::required_string")]
    pub id: String,
    #[serde(deserialize_with = "de::integer")]
    pub lease_ttl_seconds: Option<i64>,
    #[serde(deserialize_with = "de::string")]
    pub lease_token: Option<String>,
    #[serde(deserialize_with = "de::string")]
    pub note: Option<String>,
}

impl ToolArgs for HeartbeatArgs {}

/// `complete` and `fail`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FinishArgs {
    #[serde(deserialize_with = "de::required_string")]
    pub id: String,
    /// Any JSON (`null` is none).
    pub result: Option<Value>,
    #[serde(deserialize_with = "de::string")]
    pub summary: Option<String>,
    #[serde(deserialize_with = "de::string")]
    pub lease_token: Option<String>,
}

impl ToolArgs for FinishArgs {}

/// `complete`: [`FinishArgs`]' arguments, and `next`: `claim_next`'s
/// arguments (an object, `{}` for its defaults) to claim the caller's next
/// todo in the same call.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompleteArgs {
    #[serde(deserialize_with = "de::required_string")]
    pub id: String,
    /// Any JSON (`null` is none).
    pub result: Option<Value>,
    #[serde(deserialize_with = "de::string")]
    pub summary: Option<String>,
    #[serde(deserialize_with = "de::string")]
    pub lease_token: Option<String>,
    #[serde(deserialize_with = "next_claim")]
    pub next: Option<ClaimNextArgs>,
}

impl ToolArgs for CompleteArgs {}

/// `complete`'s `next`: `null` is none, an object is `claim_next`'s
/// arguments, each refusal naming its argument inside `next`.
fn next_claim<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<ClaimNextArgs>, D::Error> {
    use serde::de::Error;
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(value @ Value::Object(_)) => args::parse::<ClaimNextArgs>(Some(value))
            .map(Some)
            .map_err(|e| D::Error::custom(e.message)),
        Some(_) => Err(D::Error::custom(
            "must be an object of claim_next's arguments ({} for its defaults)",
        )),
    }
}

/// `complete_many`: no `lease_token` (a fenced claim is completed with
/// `complete`, its token in hand).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompleteManyArgs {
    /// 1 to `MAX_COMPLETE_MANY` todo ids, none twice.
    #[serde(deserialize_with = "todo_ids")]
    pub ids: Vec<String>,
    /// Any JSON (`null` is none), the result of every todo completed.
    pub result: Option<Value>,
    #[serde(deserialize_with = "de::string")]
    pub summary: Option<String>,
}

impl ToolArgs for CompleteManyArgs {}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueSummaryArgs {
    #[serde(deserialize_with = "de::string")]
    pub queue: Option<String>,
}

impl ToolArgs for QueueSummaryArgs {}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReleaseArgs {
    #[serde(deserialize_with = "de::required_string")]
    pub id: String,
    #[serde(deserialize_with = "de::string")]
    pub summary: Option<String>,
    #[serde(deserialize_with = "de::string")]
    pub lease_token: Option<String>,
}

impl ToolArgs for ReleaseArgs {}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetDefaultLeaseArgs {
    /// Must be given; `null` clears the endpoint's default.
    #[serde(deserialize_with = "de::nullable_integer")]
    pub default_lease_ttl_seconds: Option<i64>,
}

impl ToolArgs for SetDefaultLeaseArgs {
    const ABSENT_IS_NULL: bool = false;
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClockInArgs {
    /// A Go duration, at most 8h; checked even when it would not be used.
    #[serde(rename = "for", deserialize_with = "clock_in_for")]
    pub for_: Option<Duration>,
}

impl ToolArgs for ClockInArgs {}

impl ClockInArgs {
    pub fn duration(&self) -> Duration {
        self.for_.unwrap_or(presence::DEFAULT_CLOCK_IN)
    }
}

fn todo_state<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<TodoState>, D::Error> {
    de::string(d)?
        .map(|s| TodoState::parse_field(&s, "state"))
        .transpose()
        .map_err(|e| serde::de::Error::custom(e.message))
}

fn todo_ids<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let ids = match Value::deserialize(d)? {
        Value::Null => return Err(serde::de::Error::custom("is required")),
        Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Value::String(id) => Ok(id),
                _ => Err(serde::de::Error::custom(
                    "must be an array of todo ids (strings)",
                )),
            })
            .collect::<Result<Vec<String>, D::Error>>()?,
        _ => {
            return Err(serde::de::Error::custom(
                "must be an array of todo ids (strings)",
            ));
        }
    };
    validate_complete_many_ids(&ids).map_err(|e| serde::de::Error::custom(e.message))?;
    Ok(ids)
}

fn attempts_limit<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    match de::integer(d)? {
        Some(n) if !(1..=KEPT_ATTEMPTS).contains(&n) => Err(serde::de::Error::custom(format!(
            "must be between 1 and {KEPT_ATTEMPTS}"
        ))),
        n => Ok(n),
    }
}

fn clock_in_for<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let Some(text) = de::string(d)? else {
        return Ok(None);
    };
    let d =
        parse_positive_duration(&text, "for").map_err(|e| serde::de::Error::custom(e.message))?;
    if d > presence::MAX_CLOCK_IN {
        return Err(serde::de::Error::custom("must be at most 8h"));
    }
    Ok(Some(d))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn refusal(name: &str, arguments: Value) -> String {
        match Tool::parse(name, Some(arguments)) {
            Err(ParseError::Arguments(e)) => {
                assert_eq!(e.code, "invalid_argument");
                e.message
            }
            other => panic!("{name}: expected an argument refusal, got {other:?}"),
        }
    }

    #[test]
    fn every_tool_name_round_trips() {
        for name in ToolName::ALL {
            assert_eq!(ToolName::parse(name.as_str()), Some(name));
            assert_eq!(name.to_string(), name.as_str());
        }
        assert_eq!(ToolName::parse("no_such_tool"), None);
        assert_eq!(ToolName::parse("Claim"), None);
    }

    #[test]
    fn every_tool_parses_with_no_arguments_or_names_what_it_needs() {
        for name in ToolName::ALL {
            match Tool::parse(name.as_str(), None) {
                Ok(tool) => assert_eq!(tool.name(), name),
                Err(ParseError::Arguments(e)) => {
                    let needs = match name {
                        ToolName::SetDefaultLease => {
                            "default_lease_ttl_seconds: is required (a number or null)"
                        }
                        ToolName::CompleteMany => "ids: is required",
                        _ => "id: is required",
                    };
                    assert_eq!(e.message, needs, "{name}");
                }
                Err(e) => panic!("{name}: {e:?}"),
            }
        }
        let id = json!({"id": "td_1", "ids": ["td_1"], "default_lease_ttl_seconds": null});
        for name in ToolName::ALL {
            // Only the keys each tool declares.
            let fields = fields_for(name);
            let arguments: serde_json::Map<String, Value> = id
                .as_object()
                .unwrap()
                .iter()
                .filter(|(k, _)| fields.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let tool = Tool::parse(name.as_str(), Some(Value::Object(arguments))).unwrap();
            assert_eq!(tool.name(), name);
        }
    }

    fn fields_for(name: ToolName) -> &'static [&'static str] {
        use args::fields_of;
        match name {
            ToolName::ListTodos => fields_of::<ListTodosArgs>(),
            ToolName::QueueSummary => fields_of::<QueueSummaryArgs>(),
            ToolName::CompleteMany => fields_of::<CompleteManyArgs>(),
            ToolName::GetTodo => fields_of::<GetTodoArgs>(),
            ToolName::Claim => fields_of::<ClaimArgs>(),
            ToolName::ClaimNext => fields_of::<ClaimNextArgs>(),
            ToolName::Heartbeat => fields_of::<HeartbeatArgs>(),
            ToolName::Complete => fields_of::<CompleteArgs>(),
            ToolName::Fail => fields_of::<FinishArgs>(),
            ToolName::Release => fields_of::<ReleaseArgs>(),
            ToolName::SetDefaultLease => fields_of::<SetDefaultLeaseArgs>(),
            ToolName::ClockIn => fields_of::<ClockInArgs>(),
            ToolName::GetDefaultLease | ToolName::ClockOut | ToolName::Presence => {
                fields_of::<NoArgs>()
            }
        }
    }

    #[test]
    fn listings_are_permutations_of_the_fields() {
        let mut listed = ListTodosArgs::LISTED.unwrap().to_vec();
        let mut fields = args::fields_of::<ListTodosArgs>().to_vec();
        listed.sort_unstable();
        fields.sort_unstable();
        assert_eq!(listed, fields);
        assert_eq!(
            refusal("list_todos", json!({"human": "bob"})),
            "human: is not an argument of this tool (expected queue, state, limit)"
        );
    }

    #[test]
    fn fields_are_read_off_the_structs() {
        assert_eq!(
            args::fields_of::<ClaimNextArgs>(),
            ["queue", "lease_ttl_seconds", "require_fence", "claimant"]
        );
        assert_eq!(args::fields_of::<ClockInArgs>(), ["for"]);
        assert!(args::fields_of::<NoArgs>().is_empty());
    }

    #[test]
    fn grantable_names_are_the_domain_verbs() {
        // Each grantable verb is a tool of its own name; the bulk tools come
        // with another's.
        let own: Vec<&str> = ToolName::ALL
            .into_iter()
            .filter(|t| t.grantable_verb() == Some(t.as_str()))
            .map(ToolName::as_str)
            .collect();
        assert_eq!(own, crate::domain::scope::GRANTABLE_VERBS);
        assert_eq!(ToolName::QueueSummary.grantable_verb(), Some("list_todos"));
        assert_eq!(ToolName::CompleteMany.grantable_verb(), Some("complete"));
        let selves: Vec<&str> = ToolName::ALL
            .into_iter()
            .filter(|t| t.is_self_verb())
            .map(ToolName::as_str)
            .collect();
        assert_eq!(selves, ["clock_in", "clock_out", "presence"]);
    }

    #[test]
    fn unknown_tools_are_protocol_errors() {
        assert!(matches!(
            Tool::parse("clock_in_elsewhere", None),
            Err(ParseError::UnknownTool(name)) if name == "clock_in_elsewhere"
        ));
    }

    #[test]
    fn unknown_arguments_are_refused_by_name() {
        assert_eq!(
            refusal("claim_next", json!({"endpoint": "x"})),
            "endpoint: is not an argument of this tool \
             (expected queue, lease_ttl_seconds, require_fence, claimant)"
        );
        assert_eq!(
            refusal("presence", json!({"endpoint_id": "ep_x"})),
            "endpoint_id: is not an argument of this tool (it takes none)"
        );
        assert_eq!(
            refusal("clock_in", json!({"for": "1h", "slug": "x"})),
            "slug: is not an argument of this tool (expected for)"
        );
        // Before any type error.
        assert_eq!(
            refusal("claim", json!({"id": 7, "zzz": 1})),
            "zzz: is not an argument of this tool \
             (expected id, lease_ttl_seconds, require_fence, claimant)"
        );
    }

    #[test]
    fn wrong_types_name_the_field() {
        for (name, arguments, message) in [
            ("claim_next", json!({"queue": 1}), "queue: must be a string"),
            ("claim", json!({"id": 7}), "id: must be a string"),
            ("claim", json!({"id": ""}), "id: is required"),
            ("claim", json!({"id": null}), "id: is required"),
            (
                "claim",
                json!({"id": "t", "lease_ttl_seconds": "soon"}),
                "lease_ttl_seconds: must be a whole number",
            ),
            (
                "claim",
                json!({"id": "t", "lease_ttl_seconds": 1.5}),
                "lease_ttl_seconds: must be a whole number",
            ),
            (
                "claim_next",
                json!({"require_fence": "yes"}),
                "require_fence: must be true or false",
            ),
            (
                "set_default_lease",
                json!({"default_lease_ttl_seconds": "x"}),
                "default_lease_ttl_seconds: must be a whole number or null",
            ),
            (
                "get_todo",
                json!({"id": "t", "attempts_limit": 0}),
                "attempts_limit: must be between 1 and 50",
            ),
            ("clock_in", json!({"for": 3600}), "for: must be a string"),
            ("clock_in", json!({"for": "9h"}), "for: must be at most 8h"),
            (
                "list_todos",
                json!({"limit": true}),
                "limit: must be a whole number",
            ),
            ("complete", json!([1]), "arguments: must be an object"),
            // The first declared argument is refused first.
            (
                "heartbeat",
                json!({"note": 1, "lease_ttl_seconds": "x"}),
                "id: is required",
            ),
            (
                "heartbeat",
                json!({"id": "t", "note": 1, "lease_ttl_seconds": "x"}),
                "lease_ttl_seconds: must be a whole number",
            ),
        ] {
            assert_eq!(
                refusal(name, arguments.clone()),
                message,
                "{name} {arguments}"
            );
        }
        assert!(refusal("list_todos", json!({"state": "lost"})).starts_with("state: "));
        assert!(refusal("clock_in", json!({"for": "soon"})).starts_with("for: "));
    }

    #[test]
    fn complete_many_ids_are_checked_whole() {
        let many: Vec<String> = (0..101).map(|i| format!("td_{i}")).collect();
        for (arguments, message) in [
            (json!({}), "ids: is required"),
            (
                json!({"ids": "td_1"}),
                "ids: must be an array of todo ids (strings)",
            ),
            (
                json!({"ids": ["td_1", 2]}),
                "ids: must be an array of todo ids (strings)",
            ),
            (
                json!({"ids": []}),
                "ids: must hold 1 to 100 todo ids (it holds 0)",
            ),
            (
                json!({"ids": many}),
                "ids: must hold 1 to 100 todo ids (it holds 101)",
            ),
            (
                json!({"ids": ["td_1", "td_1"]}),
                "ids: holds \"td_1\" twice",
            ),
            (
                json!({"ids": ["td_1", ""]}),
                "ids: must not hold an empty id",
            ),
            (
                json!({"ids": ["td_1"], "summary": 1}),
                "summary: must be a string",
            ),
        ] {
            assert_eq!(
                refusal("complete_many", arguments.clone()),
                message,
                "{arguments}"
            );
        }
        let Ok(Tool::CompleteMany(a)) = Tool::parse(
            "complete_many",
            Some(json!({"ids": ["td_1", "td_2"], "result": {"ok": 1}})),
        ) else {
            panic!()
        };
        assert_eq!(a.ids, ["td_1", "td_2"]);
        assert_eq!(a.result, Some(json!({"ok": 1})));
        assert_eq!(
            refusal("queue_summary", json!({"queue": 1})),
            "queue: must be a string"
        );
    }

    #[test]
    fn arguments_are_typed() {
        let Ok(Tool::ClaimNext(a)) = Tool::parse(
            "claim_next",
            Some(json!({"queue": "inbox", "lease_ttl_seconds": 90, "require_fence": true})),
        ) else {
            panic!()
        };
        assert_eq!(a.queue.as_deref(), Some("inbox"));
        assert_eq!(a.options().lease_ttl_seconds, Some(90));
        assert!(a.options().require_fence);
        let Ok(Tool::SetDefaultLease(a)) = Tool::parse(
            "set_default_lease",
            Some(json!({"default_lease_ttl_seconds": null})),
        ) else {
            panic!()
        };
        assert_eq!(a.default_lease_ttl_seconds, None);
        let Ok(Tool::ClockIn(a)) = Tool::parse("clock_in", Some(json!({"for": "90m"}))) else {
            panic!()
        };
        assert_eq!(a.duration(), Duration::from_secs(90 * 60));
        let Ok(Tool::Complete(a)) =
            Tool::parse("complete", Some(json!({"id": "t", "result": {"ok": 1}})))
        else {
            panic!()
        };
        assert_eq!(a.result, Some(json!({"ok": 1})));
    }

    /// The argument reading this parser replaced (`Args`, as it was), and the
    /// order each tool read its arguments in, to compare refusals against.
    mod old {
        #![allow(dead_code)]
        use serde_json::{Map, Value};

        use super::super::ToolError;
        use crate::domain::duration::parse_positive_duration;
        use crate::domain::todo::{KEPT_ATTEMPTS, TodoState};
        use crate::ops::presence;

        pub(super) struct Args {
            map: Map<String, Value>,
        }

        impl Args {
            /// Accepts a missing or `{}`-shaped argument object with only `allowed` keys.
            pub(super) fn parse(value: Option<Value>, allowed: &[&str]) -> Result<Self, ToolError> {
                let map = match value {
                    None | Some(Value::Null) => Map::new(),
                    Some(Value::Object(map)) => map,
                    Some(_) => return Err(ToolError::invalid("arguments", "must be an object")),
                };
                if let Some(unknown) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
                    return Err(ToolError::invalid(
                        unknown,
                        if allowed.is_empty() {
                            "is not an argument of this tool (it takes none)".to_owned()
                        } else {
                            format!(
                                "is not an argument of this tool (expected {})",
                                allowed.join(", ")
                            )
                        },
                    ));
                }
                Ok(Self { map })
            }

            fn get(&self, key: &str) -> Option<&Value> {
                self.map.get(key).filter(|v| !v.is_null())
            }

            pub(super) fn string(&self, key: &str) -> Result<Option<String>, ToolError> {
                match self.get(key) {
                    None => Ok(None),
                    Some(Value::String(s)) => Ok(Some(s.clone())),
                    Some(_) => Err(ToolError::invalid(key, "must be a string")),
                }
            }

            pub(super) fn required_string(&self, key: &str) -> Result<String, ToolError> {
                self.string(key)?
                    .filter(|s| !s.is_empty())
                    .ok_or_else(|| ToolError::invalid(key, "is required"))
            }

            pub(super) fn integer(&self, key: &str) -> Result<Option<i64>, ToolError> {
                match self.get(key) {
                    None => Ok(None),
                    Some(v) => v
                        .as_i64()
                        .map(Some)
                        .ok_or_else(|| ToolError::invalid(key, "must be a whole number")),
                }
            }

            pub(super) fn boolean(&self, key: &str) -> Result<Option<bool>, ToolError> {
                match self.get(key) {
                    None => Ok(None),
                    Some(Value::Bool(b)) => Ok(Some(*b)),
                    Some(_) => Err(ToolError::invalid(key, "must be true or false")),
                }
            }

            /// Any JSON value, as given.
            pub(super) fn json(&self, key: &str) -> Option<Value> {
                self.get(key).cloned()
            }

            /// A key that must be present and may be `null` (e.g. "clear the default").
            pub(super) fn nullable_integer(&self, key: &str) -> Result<Option<i64>, ToolError> {
                match self.map.get(key) {
                    None => Err(ToolError::invalid(key, "is required (a number or null)")),
                    Some(Value::Null) => Ok(None),
                    Some(v) => v
                        .as_i64()
                        .map(Some)
                        .ok_or_else(|| ToolError::invalid(key, "must be a whole number or null")),
                }
            }
        }

        pub(super) fn check(name: &str, arguments: Option<Value>) -> Result<(), ToolError> {
            match name {
                "list_todos" => {
                    let a = Args::parse(arguments, &["queue", "state", "limit"])?;
                    a.string("state")?
                        .map(|s| TodoState::parse_field(&s, "state"))
                        .transpose()
                        .map_err(|e| ToolError::invalid(e.field, e.message))?;
                    a.integer("limit")?;
                    a.string("queue")?;
                }
                "get_todo" => {
                    let a = Args::parse(arguments, &["id", "attempts_limit"])?;
                    a.required_string("id")?;
                    let limit = a.integer("attempts_limit")?.unwrap_or(20);
                    if !(1..=KEPT_ATTEMPTS).contains(&limit) {
                        return Err(ToolError::invalid(
                            "attempts_limit",
                            format!("must be between 1 and {KEPT_ATTEMPTS}"),
                        ));
                    }
                }
                "claim" | "claim_next" => {
                    let first = if name == "claim" { "id" } else { "queue" };
                    let a = Args::parse(
                        arguments,
                        &[first, "lease_ttl_seconds", "require_fence", "claimant"],
                    )?;
                    if name == "claim" {
                        a.required_string("id")?;
                    } else {
                        a.string("queue")?;
                    }
                    a.integer("lease_ttl_seconds")?;
                    a.boolean("require_fence")?;
                    a.string("claimant")?;
                }
                "heartbeat" => {
                    let a = Args::parse(
                        arguments,
                        &["id", "lease_ttl_seconds", "lease_token", "note"],
                    )?;
                    a.required_string("id")?;
                    a.integer("lease_ttl_seconds")?;
                    a.string("lease_token")?;
                    a.string("note")?;
                }
                "complete" | "fail" => {
                    let a = Args::parse(arguments, &["id", "result", "summary", "lease_token"])?;
                    a.required_string("id")?;
                    a.json("result");
                    a.string("summary")?;
                    a.string("lease_token")?;
                }
                "release" => {
                    let a = Args::parse(arguments, &["id", "summary", "lease_token"])?;
                    a.required_string("id")?;
                    a.string("summary")?;
                    a.string("lease_token")?;
                }
                "set_default_lease" => {
                    let a = Args::parse(arguments, &["default_lease_ttl_seconds"])?;
                    a.nullable_integer("default_lease_ttl_seconds")?;
                }
                "clock_in" => {
                    let a = Args::parse(arguments, &["for"])?;
                    if let Some(text) = a.string("for")? {
                        let d = parse_positive_duration(&text, "for")
                            .map_err(|e| ToolError::invalid(e.field, e.message))?;
                        if d > presence::MAX_CLOCK_IN {
                            return Err(ToolError::invalid("for", "must be at most 8h"));
                        }
                    }
                }
                _ => {
                    Args::parse(arguments, &[])?;
                }
            }
            Ok(())
        }
    }

    /// Every combination of a few telling values for each tool's arguments
    /// (plus an unknown key before and after them) is refused, or accepted,
    /// exactly as before.
    #[test]
    fn refusals_are_the_old_ones_word_for_word() {
        let values = [
            None,
            Some(Value::Null),
            Some(json!("")),
            Some(json!("x")),
            Some(json!("pending")),
            Some(json!("90m")),
            Some(json!("9h")),
            Some(json!(0)),
            Some(json!(60)),
            Some(json!(-3)),
            Some(json!(1.5)),
            Some(json!(u64::MAX)),
            Some(json!(true)),
            Some(json!([])),
            Some(json!({})),
        ];
        let mut compared = 0;
        for name in ToolName::ALL {
            if matches!(name, ToolName::QueueSummary | ToolName::CompleteMany) {
                continue; // newer than the old reader
            }
            // `complete`'s `next` is newer than the old reader: its other
            // arguments are compared, and its listing names `next` too.
            let fields = match name {
                ToolName::Complete => args::fields_of::<FinishArgs>(),
                _ => fields_for(name),
            };
            let mut keys: Vec<&str> = fields.to_vec();
            keys.push("aa_unknown");
            keys.push("zz_unknown");
            // Mixed-radix count over the keys.
            let radix = values.len();
            let total = radix.pow(keys.len().min(4) as u32);
            let step = if keys.len() > 4 { 13 } else { 1 };
            for n in (0..total * step).step_by(step) {
                let mut map = serde_json::Map::new();
                let mut rest = n;
                for (i, key) in keys.iter().enumerate() {
                    let pick = if i < 4 {
                        rest % radix
                    } else {
                        (n / 3 + i) % radix
                    };
                    rest /= radix;
                    // The unknown keys are rarely given, so the known ones get compared.
                    let pick = if key.ends_with("_unknown") && n % 11 != 0 {
                        0
                    } else {
                        pick
                    };
                    if let Some(v) = &values[pick] {
                        map.insert((*key).to_owned(), v.clone());
                    }
                }
                let arguments = Value::Object(map);
                let old =
                    old::check(name.as_str(), Some(arguments.clone())).map_err(|e| match name {
                        ToolName::Complete => {
                            e.message.replace("lease_token)", "lease_token, next)")
                        }
                        _ => e.message,
                    });
                let new = Tool::with_arguments(name, Some(arguments.clone()))
                    .map(|_| ())
                    .map_err(|e| e.message);
                assert_eq!(new, old, "{name} {arguments}");
                compared += 1;
            }
        }
        assert!(compared > 5_000, "{compared}");
        for bad in [json!([]), json!("x"), json!(1)] {
            for name in ToolName::ALL {
                if matches!(name, ToolName::QueueSummary | ToolName::CompleteMany) {
                    continue;
                }
                let old = old::check(name.as_str(), Some(bad.clone())).map_err(|e| e.message);
                let new = Tool::with_arguments(name, Some(bad.clone()))
                    .map(|_| ())
                    .map_err(|e| e.message);
                assert_eq!(new, old);
            }
        }
    }
}
