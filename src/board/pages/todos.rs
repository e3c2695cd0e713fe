//! `/board/todos`: the filterable table with live counts, and
//! `/board/todos/{id}`: one todo with its payload, lease and attempts.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::response::Response;

use super::refusal;
use crate::board::BoardState;
use crate::board::auth::Signed;
use crate::board::error::BoardError;
use crate::board::form::{CsrfForm, Fields};
use crate::board::view::{
    Layout, Messages, all_endpoints, back, countdown, dated, exact, relative, zone_of,
};
use crate::delivery::presence::effective_of;
use crate::domain::Timestamp;
use crate::domain::presence::Presence;
use crate::domain::todo::{KEPT_ATTEMPTS, MAX_BULK, TodoState, validate_bulk_ids, validate_search};
use crate::ops;
use crate::store::{Attempt, BulkTarget, Endpoint, PageRequest, Todo, TodoFilter};

/// One row of a todo table.
pub(crate) struct TodoRow {
    pub(crate) id: String,
    pub(crate) title: String,
    pub(crate) state: &'static str,
    pub(crate) dead_letter: bool,
    pub(crate) queue: String,
    pub(crate) endpoint: String,
    pub(crate) agent: String,
    pub(crate) kind: String,
    pub(crate) source: String,
    pub(crate) created: String,
    pub(crate) created_exact: String,
    pub(crate) attempts: String,
    /// `held until 09:00` for a pending todo of an endpoint that is out.
    pub(crate) held: Option<String>,
    /// The lease's remaining time, for a claimed todo, and its end (which
    /// `board.js` counts down to).
    pub(crate) lease: Option<String>,
    pub(crate) lease_exact: Option<String>,
}

/// Rows for these todos; `endpoints` are the human's (for slugs and holds).
pub(crate) fn rows(todos: &[Todo], endpoints: &[Endpoint], now: Timestamp) -> Vec<TodoRow> {
    let by_id: HashMap<&str, &Endpoint> = endpoints.iter().map(|e| (e.id.as_str(), e)).collect();
    todos
        .iter()
        .map(|t| {
            let endpoint = by_id.get(t.endpoint_id.as_str());
            TodoRow {
                id: t.id.clone(),
                title: t.title.clone(),
                state: t.state.as_str(),
                dead_letter: t.dead_letter,
                queue: t.queue.clone(),
                endpoint: endpoint.map(|e| e.slug.clone()).unwrap_or_default(),
                agent: endpoint.map(|e| e.agent_name.clone()).unwrap_or_default(),
                kind: t.kind.clone().unwrap_or_default(),
                source: t.source.clone().unwrap_or_default(),
                created: relative(now, t.created_at),
                created_exact: exact(t.created_at),
                attempts: format!("{}/{}", t.attempt, t.max_attempts),
                held: endpoint.and_then(|e| held(t, e, now)),
                lease: lease_end(t).map(|u| countdown(now, u)),
                lease_exact: lease_end(t).map(exact),
            }
        })
        .collect()
}

fn lease_end(todo: &Todo) -> Option<Timestamp> {
    (todo.state == TodoState::Claimed)
        .then_some(todo.lease_expires_at)
        .flatten()
}

/// A pending todo's doorbell waits while its endpoint is out.
fn held(todo: &Todo, endpoint: &Endpoint, now: Timestamp) -> Option<String> {
    if todo.state != TodoState::Pending || !endpoint.is_active() {
        return None;
    }
    let presence = effective_of(endpoint, now);
    if presence.presence != Presence::Out {
        return None;
    }
    Some(match presence.until {
        Some(until) => format!(
            "held until {}",
            crate::board::view::wall_clock(until, now, &zone_of(endpoint))
        ),
        None => "held".to_owned(),
    })
}

/// The table's filters, as the query string carries them.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct Filters {
    #[serde(default)]
    pub(crate) state: String,
    #[serde(default)]
    pub(crate) queue: String,
    #[serde(default)]
    pub(crate) endpoint: String,
    /// `yes`, `no` or empty (either).
    #[serde(default)]
    pub(crate) dead_letter: String,
    #[serde(default)]
    pub(crate) kind: String,
    /// A title substring.
    #[serde(default)]
    pub(crate) q: String,
    #[serde(default)]
    pub(crate) cursor: String,
    pub(crate) error: Option<String>,
    pub(crate) notice: Option<String>,
}

impl Filters {
    /// The store's filter, or the field that is wrong.
    fn to_filter(&self, endpoints: &[Endpoint]) -> Result<TodoFilter, String> {
        let state = match self.state.as_str() {
            "" => None,
            s => Some(TodoState::parse_field(s, "state").map_err(|e| e.to_string())?),
        };
        let dead_letter = match self.dead_letter.as_str() {
            "" => None,
            "yes" => Some(true),
            "no" => Some(false),
            _ => return Err("dead_letter: must be yes, no or empty".into()),
        };
        let endpoint_id = match self.endpoint.as_str() {
            "" => None,
            slug => Some(
                endpoints
                    .iter()
                    .find(|e| e.slug == slug)
                    .map(|e| e.id.clone())
                    .ok_or_else(|| format!("endpoint: you have no endpoint {slug:?}"))?,
            ),
        };
        let q = Some(self.q.trim().to_owned()).filter(|q| !q.is_empty());
        if let Some(q) = &q {
            validate_search(q, "q").map_err(|e| e.to_string())?;
        }
        Ok(TodoFilter {
            endpoint_id,
            queue: Some(self.queue.trim().to_owned()).filter(|q| !q.is_empty()),
            state,
            dead_letter,
            kind: Some(self.kind.trim().to_owned()).filter(|k| !k.is_empty()),
            source: None,
            q,
        })
    }

    /// The filters a bulk form carries (hidden fields, the same names).
    fn of_form(fields: &Fields) -> Self {
        let text = |name| fields.text(name).unwrap_or("").to_owned();
        Self {
            state: text("state"),
            queue: text("queue"),
            endpoint: text("endpoint"),
            dead_letter: text("dead_letter"),
            kind: text("kind"),
            q: text("q"),
            ..Self::default()
        }
    }

    fn is_empty(&self) -> bool {
        self.query().is_empty()
    }

    /// The query string of these filters (no cursor), for links and refreshes.
    pub(crate) fn query(&self) -> String {
        let pairs: Vec<(&str, &str)> = [
            ("state", self.state.as_str()),
            ("queue", self.queue.as_str()),
            ("endpoint", self.endpoint.as_str()),
            ("dead_letter", self.dead_letter.as_str()),
            ("kind", self.kind.as_str()),
            ("q", self.q.as_str()),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .collect();
        serde_urlencoded::to_string(pairs).unwrap_or_default()
    }
}

/// Live counts over all the human's endpoints.
#[derive(Default)]
pub(crate) struct Counts {
    pub(crate) pending: i64,
    pub(crate) claimed: i64,
    pub(crate) dead_letters: i64,
}

#[derive(Template)]
#[template(path = "board/todos.html")]
struct TodosPage {
    layout: Layout,
    filters: Filters,
    query: String,
    states: Vec<&'static str>,
    endpoints: Vec<String>,
    counts: Counts,
    rows: Vec<TodoRow>,
    next_cursor: Option<String>,
}

pub(crate) async fn page(
    State(state): State<BoardState>,
    signed: Signed,
    Query(filters): Query<Filters>,
) -> Result<Response, BoardError> {
    let endpoints = all_endpoints(&state, &signed.human.id).await?;
    let messages = Messages {
        error: filters.error.clone(),
        notice: filters.notice.clone(),
    };
    let mut layout = Layout::new(&signed, "todos", "Todos").with_messages(&messages);
    let (rows, next_cursor) = match filters.to_filter(&endpoints) {
        Err(e) => {
            layout.error = Some(e);
            (Vec::new(), None)
        }
        Ok(filter) => {
            let page = state
                .store
                .human_list_todos(
                    &signed.human.id,
                    &filter,
                    &PageRequest {
                        limit: 100,
                        after: Some(filters.cursor.clone()).filter(|c| !c.is_empty()),
                    },
                )
                .await;
            match page {
                Ok(page) => (
                    rows(&page.items, &endpoints, state.store.clock().now()),
                    page.next_cursor,
                ),
                // A stale or foreign cursor is bad input, not an outage.
                Err(crate::store::StoreError::InvalidArgument(e)) => {
                    layout.error = Some(e.to_string());
                    (Vec::new(), None)
                }
                Err(e) => return Err(e.into()),
            }
        }
    };
    let ids: Vec<String> = endpoints.iter().map(|e| e.id.clone()).collect();
    let activity = state.store.endpoint_activity(&ids).await?;
    let counts = activity.values().fold(Counts::default(), |mut c, a| {
        c.pending += a.pending;
        c.claimed += a.claimed;
        c.dead_letters += a.dead_letters;
        c
    });
    Ok(crate::board::view::render(&TodosPage {
        layout,
        query: filters.query(),
        filters,
        states: TodoState::ALL.iter().map(|s| s.as_str()).collect(),
        endpoints: endpoints.iter().map(|e| e.slug.clone()).collect(),
        counts,
        rows,
        next_cursor,
    }))
}

/// One attempt on the timeline.
pub(crate) struct AttemptRow {
    pub(crate) attempt: i64,
    pub(crate) claimant: String,
    pub(crate) claimed: String,
    pub(crate) claimed_exact: String,
    pub(crate) ended: Option<String>,
    pub(crate) outcome: String,
    pub(crate) disposition: String,
    pub(crate) note: Option<String>,
    pub(crate) summary: Option<String>,
    pub(crate) died: bool,
}

impl AttemptRow {
    fn of(a: &Attempt, now: Timestamp) -> Self {
        Self {
            attempt: a.attempt,
            claimant: a.claimant.clone().unwrap_or_else(|| "—".to_owned()),
            claimed: relative(now, a.claimed_at),
            claimed_exact: exact(a.claimed_at),
            ended: a.ended_at.map(|t| relative(now, t)),
            outcome: a
                .outcome
                .map(|o| o.as_str().to_owned())
                .unwrap_or_else(|| "running".to_owned()),
            disposition: a
                .disposition
                .map(|d| d.as_str().to_owned())
                .unwrap_or_default(),
            note: a.note.clone(),
            summary: a.summary.clone(),
            died: a.died,
        }
    }
}

#[derive(Template)]
#[template(path = "board/todo.html")]
struct TodoPage {
    layout: Layout,
    row: TodoRow,
    payload: Option<String>,
    result: Option<String>,
    note: Option<String>,
    lease_until: Option<String>,
    next_retry: Option<String>,
    attempts: Vec<AttemptRow>,
    attempts_pruned: i64,
    can_retry: bool,
    can_release: bool,
    can_cancel: bool,
}

pub(crate) async fn detail(
    State(state): State<BoardState>,
    signed: Signed,
    Path(id): Path<String>,
    Query(messages): Query<Messages>,
) -> Result<Response, BoardError> {
    let human = &signed.human.id;
    let todo = state.store.human_get_todo(human, &id).await?;
    let attempts = state
        .store
        .human_list_attempts(human, &id, KEPT_ATTEMPTS)
        .await?;
    let endpoint = state.store.get_endpoint(human, &todo.endpoint_id).await?;
    let now = state.store.clock().now();
    let zone = zone_of(&endpoint);
    let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default();
    let claimed = todo.state == TodoState::Claimed;
    Ok(crate::board::view::render(&TodoPage {
        layout: Layout::new(&signed, "todos", format!("Todo {}", todo.id)).with_messages(&messages),
        payload: todo.payload.as_ref().map(pretty),
        result: todo.result.as_ref().map(pretty),
        note: todo.last_note.clone(),
        lease_until: claimed
            .then_some(todo.lease_expires_at)
            .flatten()
            .map(|t| dated(t, &zone)),
        next_retry: todo.next_retry_at.map(|t| relative(now, t)),
        attempts: attempts.iter().map(|a| AttemptRow::of(a, now)).collect(),
        attempts_pruned: todo.attempts_pruned,
        can_retry: matches!(todo.state, TodoState::Failed | TodoState::Cancelled)
            || todo.dead_letter,
        can_release: claimed,
        can_cancel: !todo.dead_letter
            && matches!(
                todo.state,
                TodoState::Pending | TodoState::Claimed | TodoState::Failed
            ),
        row: rows(
            std::slice::from_ref(&todo),
            std::slice::from_ref(&endpoint),
            now,
        )
        .remove(0),
    }))
}

pub(crate) async fn retry(
    State(state): State<BoardState>,
    Path(id): Path<String>,
    form: CsrfForm,
) -> Result<Response, BoardError> {
    let todo = state
        .store
        .human_get_todo(&form.signed.human.id, &id)
        .await?;
    let outcome = ops::todos::retry(&state.delivery, &form.signed.human.id, &todo.id)
        .await
        .map(|_| "retried: pending again with attempt 0".to_owned())
        .map_err(refusal);
    Ok(back(&format!("/board/todos/{}", todo.id), outcome))
}

pub(crate) async fn release(
    State(state): State<BoardState>,
    Path(id): Path<String>,
    form: CsrfForm,
) -> Result<Response, BoardError> {
    let todo = state
        .store
        .human_get_todo(&form.signed.human.id, &id)
        .await?;
    let outcome = ops::todos::release(&state.delivery, &form.signed.human.id, &todo.id)
        .await
        .map(|_| "released: pending again".to_owned())
        .map_err(refusal);
    Ok(back(&format!("/board/todos/{}", todo.id), outcome))
}

pub(crate) async fn cancel(
    State(state): State<BoardState>,
    Path(id): Path<String>,
    form: CsrfForm,
) -> Result<Response, BoardError> {
    let todo = state
        .store
        .human_get_todo(&form.signed.human.id, &id)
        .await?;
    let outcome = ops::todos::cancel(&state.delivery, &form.signed.human.id, &todo.id)
        .await
        .map(|_| "cancelled".to_owned())
        .map_err(refusal);
    Ok(back(&format!("/board/todos/{}", todo.id), outcome))
}

/// The Todos page's bulk form: the button pressed sends `bulk` =
/// `<retry|cancel>:<selected|matching>`; `selected` acts on the ticked
/// `ids`, `matching` on everything the hidden filter fields match (at most
/// [`MAX_BULK`] per click).
pub(crate) async fn bulk(
    State(state): State<BoardState>,
    form: CsrfForm,
) -> Result<Response, BoardError> {
    let human = &form.signed.human.id;
    let filters = Filters::of_form(&form.fields);
    let back_to = format!("/board/todos?{}", filters.query());
    let (action, scope) = form
        .fields
        .text("bulk")
        .and_then(|b| b.split_once(':'))
        .unwrap_or(("", ""));
    let target = match scope {
        "selected" => {
            let ids: Vec<String> = form
                .fields
                .all("ids")
                .into_iter()
                .map(str::to_owned)
                .collect();
            if let Err(e) = validate_bulk_ids(&ids, "ids") {
                return Ok(back(&back_to, Err(format!("{e} (tick some todos first)"))));
            }
            BulkTarget::Ids(ids)
        }
        "matching" => {
            // Everything of every endpoint is one click too far: a filter first.
            if filters.is_empty() {
                return Ok(back(&back_to, Err("filter: choose a filter first; \"all matching\" acts on what the filter shows".into())));
            }
            let endpoints = all_endpoints(&state, human).await?;
            match filters.to_filter(&endpoints) {
                Ok(filter) => BulkTarget::Filter(filter),
                Err(e) => return Ok(back(&back_to, Err(e))),
            }
        }
        _ => {
            return Ok(back(
                &back_to,
                Err("bulk: must be <retry|cancel>:<selected|matching>".into()),
            ));
        }
    };
    let (verb, outcome) = match action {
        "retry" => (
            "retried",
            ops::todos::bulk_retry(&state.delivery, human, &target).await,
        ),
        "cancel" => (
            "cancelled",
            ops::todos::bulk_cancel(&state.delivery, human, &target).await,
        ),
        _ => {
            return Ok(back(
                &back_to,
                Err("bulk: must be <retry|cancel>:<selected|matching>".into()),
            ));
        }
    };
    let message = outcome.map_err(refusal).map(|o| {
        let more = if o.more {
            format!("; more match (at most {MAX_BULK} per click): run it again")
        } else {
            String::new()
        };
        format!("{verb} {} todo(s){more}", o.ids.len())
    });
    Ok(back(&back_to, message))
}
