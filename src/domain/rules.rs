//! Routing rules per webhook (`docs/intake.md`, "Routing rules"): their
//! wire shape, their validation, and their evaluation by jq in a sandbox.
//!
//! The sandbox (`docs/decisions.md`, "Routing rules run jq in a sandbox"):
//! a condition may not define functions (`def`: user recursion could
//! overflow the stack and abort the process) nor import modules; the
//! functions that reach outside (`env`, `$ENV`, `input`, `inputs`, `now`,
//! `halt`, `halt_error`, `input_filename`, `debug`, `stderr`) are not
//! defined at all; and every generator that can run unbounded (`range`,
//! `repeat`, `recurse`, `..`-style recursion, `while`, `until`) is
//! redefined to spend a step from a budget per rule and per delivery,
//! checking a wall-clock deadline as it goes. What the steps cannot see
//! (a product of `.[]` over a large payload) is bounded by the caller,
//! which abandons an evaluation past its deadline (`ops::rules`).
//!
//! Evaluation reads the monotonic clock only to enforce that deadline,
//! never to decide: the same rules on the same envelope give the same
//! answer.

use std::cell::Cell;
use std::time::Instant;

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Compiler, Ctx, DataT, Native, ValT as _, Vars, data, unwrap_valr};
use jaq_json::Val;
use serde_json::{Map, Value, json};

use super::intake::Envelope;

/// The most rules one webhook holds.
pub const MAX_RULES: usize = 32;
/// The longest condition, in bytes.
pub const MAX_CONDITION_BYTES: usize = 4096;
/// Steps (generator outputs) one rule may spend.
pub const STEPS_PER_RULE: u64 = 100_000;
/// Steps all the rules of one delivery may spend together.
pub const STEPS_PER_DELIVERY: u64 = 400_000;

/// What a rule (or the default) does with a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// A todo on this queue (of the endpoint's scope).
    Queue(String),
    /// Recorded, no todo, no ring; its idempotency key is spent.
    Drop,
    /// Recorded, no todo, waiting for a human.
    Quarantine,
}

impl Action {
    pub fn to_json(&self) -> Value {
        match self {
            Self::Queue(q) => json!({"queue": q}),
            Self::Drop => json!({"drop": true}),
            Self::Quarantine => json!({"quarantine": true}),
        }
    }

    fn parse(value: &Value, field: &str) -> Result<Self, RuleInvalid> {
        let bad = || {
            RuleInvalid::new(
                field,
                "must be {\"queue\": \"<name>\"}, {\"drop\": true} or {\"quarantine\": true}",
            )
        };
        let Some(object) = value.as_object() else {
            return Err(bad());
        };
        if object.len() != 1 {
            return Err(bad());
        }
        match object.iter().next() {
            Some((key, Value::String(q))) if key == "queue" => {
                if q.is_empty() {
                    Err(RuleInvalid::new(
                        format!("{field}.queue"),
                        "must not be empty",
                    ))
                } else {
                    Ok(Self::Queue(q.clone()))
                }
            }
            Some((key, Value::Bool(true))) if key == "drop" => Ok(Self::Drop),
            Some((key, Value::Bool(true))) if key == "quarantine" => Ok(Self::Quarantine),
            _ => Err(bad()),
        }
    }
}

/// What a rule that fails to evaluate does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    /// Fail closed: the delivery is quarantined.
    #[default]
    Quarantine,
    /// The rule is passed over; the next one decides.
    Skip,
}

impl OnError {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Quarantine => "quarantine",
            Self::Skip => "skip",
        }
    }
}

/// One rule: a jq condition and what to do when its first output is truthy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub condition: String,
    pub then: Action,
}

/// A webhook's rules: in order, first match wins, then the default.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuleSet {
    pub rules: Vec<Rule>,
    /// `None`: the webhook's own queue.
    pub default: Option<Action>,
    pub on_error: OnError,
}

/// A bad rule set, naming the field (`rules[3].if`) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleInvalid {
    pub field: String,
    pub message: String,
}

impl RuleInvalid {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for RuleInvalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for RuleInvalid {}

impl RuleSet {
    /// The wire (and stored) shape.
    pub fn to_json(&self) -> Value {
        json!({
            "rules": self.rules.iter().map(|r| json!({"if": r.condition, "then": r.then.to_json()})).collect::<Vec<_>>(),
            "default": self.default.as_ref().map(Action::to_json),
            "on_error": self.on_error.as_str(),
        })
    }

    /// Reads and validates a rule set whole: its shape, its limits, and
    /// that every condition compiles in the sandbox. Queue names are
    /// checked against the endpoint's scope by the caller ([`Self::queues`]).
    pub fn parse(value: &Value) -> Result<Self, RuleInvalid> {
        Self::read(value, true)
    }

    /// A rule set as stored: its shape only. It was validated when saved,
    /// and compiling every condition on each read would cost about half a
    /// millisecond per rule on every delivery; the evaluation compiles it
    /// once, and a set that no longer compiles fails closed there.
    pub fn from_stored(value: &Value) -> Result<Self, RuleInvalid> {
        Self::read(value, false)
    }

    fn read(value: &Value, check_conditions: bool) -> Result<Self, RuleInvalid> {
        let object = value
            .as_object()
            .ok_or_else(|| RuleInvalid::new("rules", "the body must be an object"))?;
        for key in object.keys() {
            if !matches!(key.as_str(), "rules" | "default" | "on_error") {
                return Err(RuleInvalid::new(key.as_str(), "unknown field"));
            }
        }
        let list = match object.get("rules") {
            Some(Value::Array(list)) => list,
            None => &Vec::new(),
            Some(_) => return Err(RuleInvalid::new("rules", "must be a list")),
        };
        if list.len() > MAX_RULES {
            return Err(RuleInvalid::new(
                "rules",
                format!("at most {MAX_RULES} rules"),
            ));
        }
        let mut rules = Vec::with_capacity(list.len());
        for (i, item) in list.iter().enumerate() {
            let field = format!("rules[{i}]");
            let rule = item
                .as_object()
                .ok_or_else(|| RuleInvalid::new(&field, "must be {\"if\": …, \"then\": …}"))?;
            if let Some(key) = rule.keys().find(|k| !matches!(k.as_str(), "if" | "then")) {
                return Err(RuleInvalid::new(format!("{field}.{key}"), "unknown field"));
            }
            let condition = match rule.get("if") {
                Some(Value::String(c)) => c.clone(),
                _ => {
                    return Err(RuleInvalid::new(
                        format!("{field}.if"),
                        "must be a jq condition (a string)",
                    ));
                }
            };
            if check_conditions {
                check_condition(&condition)
                    .map_err(|why| RuleInvalid::new(format!("{field}.if"), why))?;
            }
            let then = Action::parse(
                rule.get("then").unwrap_or(&Value::Null),
                &format!("{field}.then"),
            )?;
            rules.push(Rule { condition, then });
        }
        let default = match object.get("default") {
            None | Some(Value::Null) => None,
            Some(v) => Some(Action::parse(v, "default")?),
        };
        let on_error = match object.get("on_error") {
            None | Some(Value::Null) => OnError::Quarantine,
            Some(Value::String(s)) if s == "quarantine" => OnError::Quarantine,
            Some(Value::String(s)) if s == "skip" => OnError::Skip,
            Some(_) => return Err(RuleInvalid::new("on_error", "must be quarantine or skip")),
        };
        Ok(Self {
            rules,
            default,
            on_error,
        })
    }

    /// Every queue the rules name, with the field that names it.
    pub fn queues(&self) -> Vec<(String, &str)> {
        let mut named: Vec<(String, &str)> = self
            .rules
            .iter()
            .enumerate()
            .filter_map(|(i, r)| match &r.then {
                Action::Queue(q) => Some((format!("rules[{i}].then.queue"), q.as_str())),
                _ => None,
            })
            .collect();
        if let Some(Action::Queue(q)) = &self.default {
            named.push(("default.queue".to_owned(), q.as_str()));
        }
        named
    }
}

/// What a rule (the default, or a rule's error) makes of a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// `None`: the default queue of the webhook.
    pub action: Option<Action>,
    /// The rule that decided, when one did (matched, or failed closed).
    pub rule: Option<usize>,
    /// `rule`, `default` or `on_error`.
    pub by: &'static str,
}

impl Verdict {
    /// How the delivery history names the rule that decided: `rules[2]`,
    /// `rules[2] (error)`, or none.
    pub fn rule_label(&self) -> Option<String> {
        self.rule.map(|i| match self.by {
            "on_error" => format!("rules[{i}] (error)"),
            _ => format!("rules[{i}]"),
        })
    }
}

/// What one rule did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Matched,
    NotMatched,
    Error(String),
}

/// The verdict and a trace of the rules that ran, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluation {
    pub verdict: Verdict,
    pub trace: Vec<Outcome>,
}

/// The input a rule sees: the server's verified envelope with the sender's
/// headers and payload beneath it. A non-JSON body is `{"raw": "<base64>"}`.
pub fn rule_input(envelope: &Envelope, headers: &Value, body: &[u8]) -> Value {
    let mut input = match serde_json::to_value(envelope) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    let payload = serde_json::from_slice::<Value>(body).unwrap_or_else(|_| {
        use base64::Engine;
        json!({"raw": base64::engine::general_purpose::STANDARD.encode(body)})
    });
    input.insert("headers".to_owned(), headers.clone());
    input.insert("payload".to_owned(), payload);
    Value::Object(input)
}

// ---- the sandbox -------------------------------------------------------

type D = data::JustLut<Val>;

/// Names a condition may not use as words: definitions (recursion) and
/// modules. Everything that reaches outside is simply not defined.
const FORBIDDEN_WORDS: &[&str] = &["def", "import", "include"];
/// Definitions and natives left out of the sandbox.
const LEFT_OUT: &[&str] = &[
    "env",
    "now",
    "halt",
    "halt_error",
    "input",
    "inputs",
    "input_filename",
    "input_line_number",
    "get_search_list",
    "debug",
    "debug_empty",
    "stderr",
    "stderr_empty",
    "error_empty_debug",
];
/// The budgeted generators, defined before the standard library so that
/// every definition built on them spends steps too. `_sb_range3` is jq's
/// native `range/3`, renamed so that only these definitions reach it.
const BUDGETED: &str = r#"
def range($from; $upto; $by): _sb_range3($from; $upto; $by) | _sb_tick;
def range($from; $upto): range($from; $upto; 1);
def range($upto): range(0; $upto; 1);
def repeat(f): def rec: _sb_tick | f, rec; rec;
def recurse(f): def rec: _sb_tick | ., (f | rec); rec;
def recurse(f; cond): recurse(f | if cond then . else {}[] end);
def recurse: recurse(.[]?);
def while(cond; update): def rec: _sb_tick | if cond then ., (update | rec) else {}[] end; rec;
def until(cond; update): def rec: _sb_tick | if cond then . else update | rec end; rec;
"#;

struct Budget {
    rule_left: Cell<u64>,
    delivery_left: Cell<u64>,
    deadline: Cell<Option<Instant>>,
    over: Cell<Option<&'static str>>,
}

thread_local! {
    static BUDGET: Budget = const { Budget {
        rule_left: Cell::new(STEPS_PER_RULE),
        delivery_left: Cell::new(STEPS_PER_DELIVERY),
        deadline: Cell::new(None),
        over: Cell::new(None),
    } };
}

/// Spends one step; an error once a budget is spent or the deadline passed.
fn spend() -> Result<(), &'static str> {
    BUDGET.with(|b| {
        let (rule, all) = (b.rule_left.get(), b.delivery_left.get());
        let why = if rule == 0 {
            Some("step budget of the rule exceeded")
        } else if all == 0 {
            Some("step budget of the delivery exceeded")
        } else if rule % 1024 == 0 && b.deadline.get().is_some_and(|d| Instant::now() >= d) {
            Some("time budget exceeded")
        } else {
            None
        };
        if let Some(why) = why {
            b.over.set(Some(why));
            return Err(why);
        }
        b.rule_left.set(rule - 1);
        b.delivery_left.set(all - 1);
        Ok(())
    })
}

fn tick<'a>(cv: jaq_core::Cv<'a, D>) -> jaq_core::ValXs<'a, <D as DataT>::V<'a>> {
    jaq_core::native::bome(spend().map(|()| cv.1).map_err(jaq_core::Error::str))
}

fn natives() -> impl Iterator<Item = jaq_core::native::Fun<D>> {
    let tick: jaq_core::native::Fun<D> = ("_sb_tick", Box::from([]), Native::<D>::new(tick));
    jaq_core::funs::<D>()
        .chain(jaq_std::funs())
        .chain(jaq_json::funs())
        .filter(|(name, _, _)| !LEFT_OUT.contains(name))
        .map(|(name, args, native)| match (name, args.len()) {
            ("range", 3) => ("_sb_range3", args, native),
            _ => (name, args, native),
        })
        .chain([tick])
}

fn definitions() -> impl Iterator<Item = jaq_core::load::parse::Def<&'static str>> {
    let budgeted = jaq_core::load::parse(BUDGETED, |p| p.defs()).unwrap_or_default();
    let shadowed: Vec<(&str, usize)> = budgeted.iter().map(|d| (d.name, d.args.len())).collect();
    let keep = move |d: &jaq_core::load::parse::Def<&'static str>| {
        !shadowed.contains(&(d.name, d.args.len())) && !LEFT_OUT.contains(&d.name)
    };
    let keep2 = keep.clone();
    budgeted
        .into_iter()
        .chain(jaq_core::defs().filter(keep))
        .chain(jaq_std::defs().chain(jaq_json::defs()).filter(keep2))
}

/// The words a condition may not contain, outside strings and after no `.`
/// (`.def` is a field).
fn forbidden_word(tokens: &[jaq_core::load::lex::Token<&str>]) -> Option<String> {
    use jaq_core::load::lex::{StrPart, Tok};
    let mut after_dot = false;
    for jaq_core::load::lex::Token(text, tok) in tokens {
        match tok {
            Tok::Word if !after_dot && FORBIDDEN_WORDS.contains(text) => {
                return Some(format!("`{text}` is not allowed in a rule"));
            }
            Tok::Word if text.starts_with("_sb_") => {
                return Some(format!("`{text}` is not defined"));
            }
            Tok::Block(inner) => {
                if let Some(found) = forbidden_word(inner) {
                    return Some(found);
                }
            }
            Tok::Str(parts) => {
                for part in parts {
                    if let StrPart::Term(t) = part
                        && let Some(found) = forbidden_word(std::slice::from_ref(t))
                    {
                        return Some(found);
                    }
                }
            }
            _ => {}
        }
        after_dot = matches!(tok, Tok::Sym) && *text == ".";
    }
    None
}

/// Checks one condition: its size, its words, and that it compiles in the
/// sandbox. The error says why, for `rules[i].if`.
pub fn check_condition(condition: &str) -> Result<(), String> {
    if condition.trim().is_empty() {
        return Err("must not be empty".to_owned());
    }
    if condition.len() > MAX_CONDITION_BYTES {
        return Err(format!("at most {MAX_CONDITION_BYTES} bytes"));
    }
    let tokens = jaq_core::load::Lexer::new(condition)
        .lex()
        .map_err(|_| "does not parse as jq".to_owned())?;
    if let Some(why) = forbidden_word(&tokens) {
        return Err(why);
    }
    compile_program(condition, false).map(|_| ())
}

fn compile_program(code: &str, with_rule_var: bool) -> Result<jaq_core::Filter<D>, String> {
    let arena = Arena::default();
    let modules = Loader::new(definitions())
        .load(&arena, File { code, path: () })
        .map_err(|errors| {
            let _ = errors;
            "does not parse as jq".to_owned()
        })?;
    let compiler = Compiler::default().with_funs(natives());
    let compiler = if with_rule_var {
        compiler.with_global_vars(["$rule"])
    } else {
        compiler
    };
    compiler.compile(modules).map_err(|errors| {
        let undefined: Vec<String> = errors
            .iter()
            .flat_map(|(_, es)| es.iter().map(|(name, _)| (*name).to_owned()))
            .collect();
        if undefined.is_empty() {
            "does not compile".to_owned()
        } else {
            format!("not defined in a rule: {}", undefined.join(", "))
        }
    })
}

/// A rule set compiled once: all its conditions in one jq program, chosen
/// by `$rule`, so the standard library is compiled once per set.
pub struct Compiled {
    filter: jaq_core::Filter<D>,
    rules: usize,
}

impl RuleSet {
    /// Compiles the conditions (each already checked by [`RuleSet::parse`]).
    pub fn compile(&self) -> Result<Compiled, RuleInvalid> {
        for (i, rule) in self.rules.iter().enumerate() {
            check_condition(&rule.condition)
                .map_err(|why| RuleInvalid::new(format!("rules[{i}].if"), why))?;
        }
        let mut program = String::from("if false then null\n");
        for (i, rule) in self.rules.iter().enumerate() {
            // Newlines around the condition: a comment in it ends there.
            program.push_str(&format!(
                "elif $rule == {i} then (\n{}\n)\n",
                rule.condition
            ));
        }
        program.push_str("else null end\n");
        let filter =
            compile_program(&program, true).map_err(|why| RuleInvalid::new("rules", why))?;
        Ok(Compiled {
            filter,
            rules: self.rules.len(),
        })
    }

    /// Runs the rules on `input` (see [`rule_input`]) within the step budgets
    /// and, when given, a wall-clock `deadline`.
    pub fn evaluate(
        &self,
        compiled: &Compiled,
        input: &Value,
        deadline: Option<Instant>,
    ) -> Evaluation {
        let mut trace = Vec::new();
        if compiled.rules != self.rules.len() {
            return Evaluation {
                verdict: self.failed(0),
                trace: vec![Outcome::Error("the compiled rules are stale".to_owned())],
            };
        }
        let text = input.to_string();
        let Ok(value) = jaq_json::read::parse_single(text.as_bytes()) else {
            return Evaluation {
                verdict: self.failed(0),
                trace: vec![Outcome::Error("the envelope is not JSON".to_owned())],
            };
        };
        BUDGET.with(|b| {
            b.delivery_left.set(STEPS_PER_DELIVERY);
            b.deadline.set(deadline);
        });
        for (i, rule) in self.rules.iter().enumerate() {
            BUDGET.with(|b| {
                b.rule_left.set(STEPS_PER_RULE);
                b.over.set(None);
            });
            let outcome = if deadline.is_some_and(|d| Instant::now() >= d) {
                Outcome::Error("time budget exceeded".to_owned())
            } else {
                let ctx = Ctx::<D>::new(&compiled.filter.lut, Vars::new([Val::from(i)]));
                let first = compiled
                    .filter
                    .id
                    .run((ctx, value.clone()))
                    .map(unwrap_valr)
                    .next();
                match first {
                    Some(Ok(v)) if v.as_bool() => Outcome::Matched,
                    Some(Ok(_)) | None => Outcome::NotMatched,
                    Some(Err(e)) => {
                        // A budget cut is reported as such, whatever jq made of it.
                        let over = BUDGET.with(|b| b.over.get());
                        Outcome::Error(over.map_or_else(|| cut(&e.to_string()), str::to_owned))
                    }
                }
            };
            let decided = match &outcome {
                Outcome::Matched => Some(Verdict {
                    action: Some(rule.then.clone()),
                    rule: Some(i),
                    by: "rule",
                }),
                Outcome::Error(_) if self.on_error == OnError::Quarantine => Some(self.failed(i)),
                _ => None,
            };
            trace.push(outcome);
            if let Some(verdict) = decided {
                return Evaluation { verdict, trace };
            }
        }
        Evaluation {
            verdict: Verdict {
                action: self.default.clone(),
                rule: None,
                by: "default",
            },
            trace,
        }
    }

    /// The verdict when rule `i` failed and the set fails closed.
    pub fn failed(&self, i: usize) -> Verdict {
        Verdict {
            action: Some(Action::Quarantine),
            rule: Some(i),
            by: "on_error",
        }
    }
}

/// An error message kept short: a runaway error can carry a huge value.
fn cut(text: &str) -> String {
    const MAX: usize = 300;
    if text.len() <= MAX {
        return text.to_owned();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(rules: Value) -> Result<RuleSet, RuleInvalid> {
        RuleSet::parse(&rules)
    }

    fn run(set: &RuleSet, input: Value) -> Evaluation {
        let compiled = set.compile().unwrap();
        set.evaluate(&compiled, &input, None)
    }

    #[test]
    fn first_truthy_rule_wins_then_the_default() {
        let s = set(json!({"rules": [
            {"if": ".event == \"workflow_run\"", "then": {"drop": true}},
            {"if": ".labels | index(\"agent\")", "then": {"queue": "agent"}},
        ], "default": {"quarantine": true}}))
        .unwrap();
        let e = run(&s, json!({"event": "workflow_run", "labels": []}));
        assert_eq!(e.verdict.action, Some(Action::Drop));
        assert_eq!(e.verdict.rule_label().as_deref(), Some("rules[0]"));
        let e = run(&s, json!({"event": "issues", "labels": ["x", "agent"]}));
        assert_eq!(e.verdict.action, Some(Action::Queue("agent".into())));
        assert_eq!(e.trace, vec![Outcome::NotMatched, Outcome::Matched]);
        let e = run(&s, json!({"event": "issues", "labels": []}));
        assert_eq!(e.verdict.by, "default");
        assert_eq!(e.verdict.action, Some(Action::Quarantine));
    }

    #[test]
    fn errors_fail_closed_or_skip() {
        let rules = json!([{"if": ".x | ltrimstr(1) | error", "then": {"drop": true}},
                           {"if": "true", "then": {"queue": "q"}}]);
        let closed = set(json!({"rules": rules})).unwrap();
        let e = run(&closed, json!({}));
        assert_eq!(e.verdict.action, Some(Action::Quarantine));
        assert_eq!(e.verdict.rule_label().as_deref(), Some("rules[0] (error)"));
        let skip = set(json!({"rules": rules, "on_error": "skip"})).unwrap();
        let e = run(&skip, json!({}));
        assert_eq!(e.verdict.action, Some(Action::Queue("q".into())));
        assert!(matches!(e.trace[0], Outcome::Error(_)));
    }

    #[test]
    fn validation_names_the_field() {
        let bad = |rules: Value| set(json!({"rules": rules})).unwrap_err();
        assert_eq!(
            bad(json!([{"if": ".a ==", "then": {"drop": true}}])).field,
            "rules[0].if"
        );
        let e = bad(
            json!([{"if": "true", "then": {"drop": true}}, {"if": "env", "then": {"drop": true}}]),
        );
        assert_eq!(e.field, "rules[1].if");
        assert!(e.message.contains("env"), "{e}");
        assert_eq!(
            bad(json!([{"if": "def f: f; f", "then": {"drop": true}}])).field,
            "rules[0].if"
        );
        assert_eq!(
            bad(json!([{"if": "true", "then": {"drop": false}}])).field,
            "rules[0].then"
        );
        assert_eq!(
            bad(json!([{"if": "x".repeat(5000), "then": {"drop": true}}])).field,
            "rules[0].if"
        );
        let many: Vec<Value> = (0..33)
            .map(|_| json!({"if": "true", "then": {"drop": true}}))
            .collect();
        assert_eq!(bad(Value::Array(many)).field, "rules");
        for word in [
            "$ENV",
            "input",
            "inputs",
            "now",
            "halt",
            "halt_error",
            "input_filename",
            "debug",
            "stderr",
            "import \"a\" as a; 1",
            "include \"a\"; 1",
            "_sb_range3(0;1;1)",
        ] {
            assert!(
                set(json!({"rules": [{"if": word, "then": {"drop": true}}]})).is_err(),
                "{word}"
            );
        }
        // A field named like a keyword is a field.
        assert!(
            set(json!({"rules": [{"if": ".payload.def == 1", "then": {"drop": true}}]})).is_ok()
        );
    }

    #[test]
    fn runaway_generators_are_cut_by_the_step_budget() {
        for hostile in [
            "[range(1e8)] | length > 0",
            "[repeat(1)] | length > 0",
            "last(range(1e12)) > 0",
            "until(false; .)",
            "[recurse(. + 1)] | length > 0",
            "[range(0; 1e9; 1)] | length > 0",
            "[limit(1e9; repeat(1))] | length > 0",
        ] {
            let s = set(json!({"rules": [{"if": hostile, "then": {"drop": true}}]})).unwrap();
            let started = Instant::now();
            let e = run(&s, json!(0));
            assert_eq!(e.verdict.by, "on_error", "{hostile}");
            assert!(
                matches!(&e.trace[0], Outcome::Error(m) if m.contains("budget")),
                "{hostile}: {:?}",
                e.trace
            );
            assert!(started.elapsed().as_secs() < 2, "{hostile}");
        }
    }

    #[test]
    fn a_deadline_cuts_the_rules() {
        let s =
            set(json!({"rules": [{"if": "[range(1e5)] | length > 1e9", "then": {"drop": true}}]}))
                .unwrap();
        let compiled = s.compile().unwrap();
        let e = s.evaluate(&compiled, &json!(0), Some(Instant::now()));
        assert_eq!(e.verdict.by, "on_error");
    }

    #[test]
    fn the_input_carries_envelope_headers_and_payload() {
        let envelope = Envelope {
            source: "github".into(),
            event: Some("issues".into()),
            ..Envelope::default()
        };
        let input = rule_input(
            &envelope,
            &json!({"x-github-event": "issues"}),
            br#"{"action":"opened"}"#,
        );
        assert_eq!(input["event"], "issues");
        assert_eq!(input["payload"]["action"], "opened");
        assert_eq!(input["headers"]["x-github-event"], "issues");
        let raw = rule_input(&envelope, &json!({}), b"not json");
        assert!(raw["payload"]["raw"].is_string());
    }

    /// The ready-made rules of `docs/intake.md` save and decide as they say.
    #[test]
    fn the_documented_examples_work() {
        let doc = include_str!("../../docs/intake.md");
        let section = &doc[doc.find("### Ready-made rules").unwrap()..];
        let section = &section[..section.find("\n## ").unwrap()];
        let sets: Vec<RuleSet> = section
            .split("```json")
            .skip(1)
            .map(|block| {
                let text = &block[..block.find("```").unwrap()];
                let value: Value = serde_json::from_str(text).unwrap();
                set(value).unwrap_or_else(|e| panic!("{e}: {text}"))
            })
            .collect();
        assert_eq!(sets.len(), 2, "GitHub and Gitea");
        let github = &sets[0];
        let decide = |s: &RuleSet, input: Value| run(s, input).verdict.action;
        assert_eq!(
            decide(github, json!({"event": "workflow_run", "labels": []})),
            Some(Action::Drop)
        );
        assert_eq!(
            decide(github, json!({"event": "status", "labels": []})),
            Some(Action::Drop)
        );
        let mention = json!({"event": "issue_comment", "labels": [],
                             "payload": {"comment": {"body": "hey @triage-bot, look"}}});
        assert_eq!(decide(github, mention), Some(Action::Queue("agent".into())));
        let review = json!({"event": "pull_request", "action": "review_requested", "labels": [],
                            "payload": {"requested_reviewer": {"login": "triage-bot"}}});
        assert_eq!(decide(github, review), Some(Action::Queue("agent".into())));
        let chatter =
            json!({"event": "issue_comment", "labels": [], "payload": {"comment": {"body": "+1"}}});
        assert_eq!(decide(github, chatter), Some(Action::Quarantine));
        let gitea = &sets[1];
        assert_eq!(
            decide(gitea, json!({"event": "status"})),
            Some(Action::Drop)
        );
        assert_eq!(
            decide(gitea, json!({"event": "issues", "payload": {}})),
            Some(Action::Drop)
        );
    }

    #[test]
    fn rule_sets_round_trip() {
        let wire = json!({"rules": [{"if": "true", "then": {"queue": "q"}}], "default": {"drop": true}, "on_error": "skip"});
        let s = set(wire.clone()).unwrap();
        assert_eq!(s.to_json(), wire);
        assert_eq!(set(s.to_json()).unwrap(), s);
    }
}
