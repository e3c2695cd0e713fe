//! Shared by the in-process doorbell and presence scenarios: a doorbell hub
//! over an in-memory session registry, sessions with (or without) their
//! notification stream, todos pushed the way the API pushes them, and short
//! readers for what arrived.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use switchboard::bus::{InProcessBus, InstanceId};
use switchboard::delivery::sessions::{Hearer, Session, SessionRegistry, StreamGuard};
use switchboard::delivery::{Delivery, Doorbells};
use switchboard::domain::doorbell::METHOD;
use switchboard::mcp::tools;
use switchboard::store::*;
use tokio::sync::mpsc::Receiver;

use crate::support::TestStore;

/// One instance's delivery side: its sessions, its doorbells and its bus.
pub struct Hub {
    pub sessions: Arc<SessionRegistry>,
    pub doorbells: Arc<Doorbells>,
    pub bus: Arc<InProcessBus>,
}

pub fn hub() -> Hub {
    hub_answering_within(switchboard::delivery::hub::DEFAULT_UNANSWERED_AFTER)
}

/// A hub whose sessions must answer a doorbell within `within`.
pub fn hub_answering_within(within: Duration) -> Hub {
    let sessions = Arc::new(SessionRegistry::new().with_unanswered_after(within));
    Hub {
        doorbells: Arc::new(Doorbells::new(sessions.clone())),
        sessions,
        bus: Arc::new(InProcessBus::new(InstanceId(
            switchboard::mint::new_instance_id(),
        ))),
    }
}

/// How many presence transitions were claimed, as a bus subscriber heard
/// them (every message published so far, without waiting).
pub fn transitions_claimed(heard: &mut switchboard::bus::Subscription) -> usize {
    let mut n = 0;
    while let Some(event) = heard.try_next() {
        n += usize::from(matches!(
            event,
            switchboard::bus::BusEvent::Message(switchboard::bus::Envelope {
                message: switchboard::bus::Message::TransitionClaimed { .. },
                ..
            })
        ));
    }
    n
}

/// The reference the retry scheduler hands delivery for a todo.
pub fn todo_ref(todo: &Todo) -> TodoRef {
    TodoRef {
        id: todo.id.clone(),
        endpoint_id: todo.endpoint_id.clone(),
        queue: todo.queue.clone(),
    }
}

/// A session whose notification stream is open (keep both halves alive).
pub struct Stream {
    pub session: Arc<Session>,
    pub guard: StreamGuard,
    pub rx: Receiver<Value>,
}

impl Hub {
    /// This instance's event path over `store` (one of possibly several
    /// handles on the same database, as two instances would have).
    pub fn on(&self, store: &SqlStore) -> Delivery {
        Delivery::new(
            Arc::new(store.clone()),
            self.doorbells.clone(),
            self.bus.clone(),
        )
    }

    /// An attached session of `endpoint` with no stream (yet).
    pub fn attach(&self, endpoint: &Endpoint) -> Arc<Session> {
        self.sessions
            .create(&endpoint.id, &endpoint.slug, Hearer::default())
    }

    /// An attached session of `endpoint` opened by `switchboard work`.
    pub fn attach_runner(&self, endpoint: &Endpoint) -> Arc<Session> {
        let runner = Hearer {
            transport: "mcp",
            client_name: Some(switchboard::domain::doorbell::RUNNER_CLIENT_NAME.to_owned()),
            client_version: None,
            protocol_version: None,
        };
        self.sessions.create(&endpoint.id, &endpoint.slug, runner)
    }

    /// Opens the session's stream.
    pub fn open(&self, session: &Arc<Session>) -> Stream {
        let (guard, rx) = self.sessions.open_stream(session);
        Stream {
            session: session.clone(),
            guard,
            rx,
        }
    }

    /// An attached session of `endpoint` with its stream open.
    pub fn stream(&self, endpoint: &Endpoint) -> Stream {
        let session = self.attach(endpoint);
        self.open(&session)
    }
}

impl Stream {
    /// Everything queued on the stream so far, without waiting.
    pub fn drain(&mut self) -> Vec<Value> {
        drain(&mut self.rx)
    }

    /// Asserts nothing at all is queued on the stream.
    pub fn assert_silent(&mut self, why: &str) {
        let got = self.drain();
        assert!(got.is_empty(), "{why}: got {got:#?}");
    }

    /// Exactly one message is queued; returns it.
    pub fn one(&mut self, why: &str) -> Value {
        let mut got = self.drain();
        assert_eq!(got.len(), 1, "{why}: expected exactly one, got {got:#?}");
        got.remove(0)
    }

    /// Fills the stream's buffer to the brim with filler messages.
    pub fn fill(&self) {
        let mut n = 0;
        while self.session.try_send(json!({"filler": n})).is_ok() {
            n += 1;
        }
    }
}

pub fn drain(rx: &mut Receiver<Value>) -> Vec<Value> {
    let mut out = Vec::new();
    while let Ok(message) = rx.try_recv() {
        out.push(message);
    }
    out
}

/// A notification's `meta`, checked to be a flat map of string values
/// under `[a-z0-9_]+` keys.
pub fn meta(message: &Value) -> &Map<String, Value> {
    assert_eq!(message["jsonrpc"], "2.0", "{message}");
    assert_eq!(message["method"], METHOD, "{message}");
    assert!(message.get("id").is_none(), "a notification has no id");
    let meta = message["params"]["meta"]
        .as_object()
        .unwrap_or_else(|| panic!("no meta in {message}"));
    for (key, value) in meta {
        assert!(
            !key.is_empty()
                && key
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
            "meta key {key:?}"
        );
        assert!(value.is_string(), "meta.{key} is not a string: {value}");
    }
    meta
}

pub fn content(message: &Value) -> &str {
    message["params"]["content"]
        .as_str()
        .unwrap_or_else(|| panic!("no content in {message}"))
}

/// The todo a todo doorbell names (panics on a digest).
pub fn todo_id_of(message: &Value) -> String {
    let meta = meta(message);
    assert_ne!(meta.get("kind"), Some(&json!("digest")), "{message}");
    meta["todo_id"].as_str().expect("todo_id").to_owned()
}

/// Asserts the message is a digest for `reason` counting `pending` todos in
/// `queues`, and carrying no todo id.
pub fn assert_digest(message: &Value, reason: &str, pending: usize, queues: &str) {
    let meta = meta(message);
    assert_eq!(meta["kind"], "digest", "{message}");
    assert_eq!(meta["reason"], reason, "{message}");
    assert_eq!(meta["pending"], pending.to_string(), "{message}");
    assert_eq!(meta["queues"], queues, "{message}");
    assert!(meta.get("todo_id").is_none(), "a digest names no todo");
    let mut keys: Vec<&str> = meta.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["kind", "pending", "queues", "reason"], "{message}");
}

/// What a human-authored todo carries: an authenticated intake event.
pub fn operator_intake() -> NewIntakeEvent {
    NewIntakeEvent {
        trust_mode: TrustMode::Operator,
        actor: "human:test".into(),
        webhook_id: None,
        headers: json!({}),
        content_type: Some("application/json".into()),
        body: b"{}".to_vec(),
    }
}

/// A todo that may ring (created by authenticated intake).
pub fn pushed(endpoint_id: &str, queue: &str, title: &str) -> NewTodo {
    NewTodo {
        priority: 0,
        intake: Some(operator_intake()),
        ..NewTodo::new(endpoint_id, queue, title)
    }
}

/// Creates the todo and rings for it exactly as the API does: only when the
/// store created a new row. Returns the store's answer.
pub async fn create_and_ring(ts: &TestStore, hub: &Hub, new: NewTodo) -> CreatedTodo {
    let created = ts.store.create_todo(new).await.expect("create_todo");
    if created.created {
        hub.on(&ts.store).todo_created(&created.todo).await;
    }
    created
}

/// A new pushed todo, rung for.
pub async fn push(
    ts: &TestStore,
    hub: &Hub,
    endpoint: &Endpoint,
    queue: &str,
    title: &str,
) -> Todo {
    let created = create_and_ring(ts, hub, pushed(&endpoint.id, queue, title)).await;
    assert!(created.created, "expected a new todo");
    created.todo
}

/// A todo as stored now (whoever owns it).
pub async fn todo_row(ts: &TestStore, endpoint: &Endpoint, id: &str) -> Todo {
    ts.store
        .get_todo(&endpoint.caller(), id)
        .await
        .expect("get_todo")
}

/// The endpoint row as stored now.
pub async fn endpoint_row(ts: &TestStore, endpoint: &Endpoint) -> Endpoint {
    ts.store
        .unscoped_get_endpoint(&endpoint.id)
        .await
        .expect("endpoint")
}

pub fn minutes(n: u64) -> Duration {
    Duration::from_secs(n * 60)
}

pub fn hours(n: u64) -> Duration {
    Duration::from_secs(n * 3_600)
}

/// Calls a tool as a session of `endpoint` (its row re-read first, as a
/// request authenticates afresh). Returns the tool result.
pub async fn call_tool(
    ts: &TestStore,
    hub: &Hub,
    endpoint: &Endpoint,
    name: &str,
    args: Value,
) -> Value {
    let endpoint = endpoint_row(ts, endpoint).await;
    tools::call(&hub.on(&ts.store), &endpoint, name, Some(args))
        .await
        .unwrap_or_else(|e| panic!("{name} is not a tool: {e}"))
}

/// A successful tool call's structured result.
pub async fn tool_ok(
    ts: &TestStore,
    hub: &Hub,
    endpoint: &Endpoint,
    name: &str,
    args: Value,
) -> Value {
    let result = call_tool(ts, hub, endpoint, name, args.clone()).await;
    assert!(
        result.get("isError").is_none(),
        "{name} {args} failed: {result}"
    );
    result["structuredContent"].clone()
}

/// A refused tool call: returns (code, message).
pub async fn tool_err(
    ts: &TestStore,
    hub: &Hub,
    endpoint: &Endpoint,
    name: &str,
    args: Value,
) -> (String, String) {
    let result = call_tool(ts, hub, endpoint, name, args.clone()).await;
    assert_eq!(
        result["isError"], true,
        "{name} {args} should have been refused: {result}"
    );
    let error = &result["structuredContent"]["error"];
    (
        error["code"].as_str().unwrap_or_default().to_owned(),
        error["message"].as_str().unwrap_or_default().to_owned(),
    )
}

/// Everything presence stores on the endpoint row (plus its scope), for
/// "this changed nothing" comparisons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresenceRow {
    pub shift: Option<String>,
    pub presence_override: Option<switchboard::domain::presence::Presence>,
    pub override_until: Option<switchboard::domain::Timestamp>,
    pub override_set_at: Option<switchboard::domain::Timestamp>,
    pub override_by: Option<switchboard::domain::presence::OverrideBy>,
    pub presence_seen: switchboard::domain::presence::Presence,
    pub presence_changed_at: Option<switchboard::domain::Timestamp>,
    pub presence_changed_by: Option<String>,
    pub scope_verbs: Vec<String>,
    pub state: EndpointState,
}

impl From<&Endpoint> for PresenceRow {
    fn from(e: &Endpoint) -> Self {
        Self {
            shift: e.shift.clone(),
            presence_override: e.presence_override,
            override_until: e.override_until,
            override_set_at: e.override_set_at,
            override_by: e.override_by.clone(),
            presence_seen: e.presence_seen,
            presence_changed_at: e.presence_changed_at,
            presence_changed_by: e.presence_changed_by.clone(),
            scope_verbs: e.scope_verbs.clone(),
            state: e.state,
        }
    }
}

/// The endpoint's presence row as stored now.
pub async fn presence_row(ts: &TestStore, endpoint: &Endpoint) -> PresenceRow {
    PresenceRow::from(&endpoint_row(ts, endpoint).await)
}
