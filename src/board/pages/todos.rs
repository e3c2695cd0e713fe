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
    Layout, Messages, When, all_endpoints, back, countdown, dated, exact, zone_of,
};
use crate::delivery::presence::effective_of;
use crate::domain::Timestamp;
use crate::domain::presence::Presence;
use crate::domain::todo::{
    Disposition, KEPT_ATTEMPTS, MAX_BULK, Outcome, TodoState, validate_bulk_ids, validate_search,
};
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
    pub(crate) created: When,
    pub(crate) attempts: String,
    /// When a failed todo is tried again (`retry in 2 min`).
    pub(crate) retry: Option<When>,
    /// Why a dead letter died: its last attempt's outcome and summary, or
    /// its endpoint's revocation.
    pub(crate) reason: Option<String>,
    /// `held until 09:00` for a pending todo of an endpoint that is out.
    pub(crate) held: Option<String>,
    /// The lease's remaining time, for a claimed todo, and its end (which
    /// `board.js` counts down to).
    pub(crate) lease: Option<String>,
    pub(crate) lease_exact: Option<String>,
}

/// Rows for these todos; `endpoints` are the human's (for slugs, holds and
/// zones), `last` the newest finished attempt of each dead letter.
pub(crate) fn rows(
    todos: &[Todo],
    endpoints: &[Endpoint],
    last: &HashMap<String, Attempt>,
    now: Timestamp,
) -> Vec<TodoRow> {
    let by_id: HashMap<&str, &Endpoint> = endpoints.iter().map(|e| (e.id.as_str(), e)).collect();
    todos
        .iter()
        .map(|t| {
            let endpoint = by_id.get(t.endpoint_id.as_str());
            let zone = endpoint
                .map(|e| zone_of(e))
                .unwrap_or(jiff::tz::TimeZone::UTC);
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
                created: When::at(t.created_at, now, &zone),
                attempts: format!("{}/{}", t.attempt, t.max_attempts),
                retry: (t.state == TodoState::Failed)
                    .then_some(t.next_retry_at)
                    .flatten()
                    .map(|at| When::at(at, now, &zone)),
                reason: is_dead(t).then(|| dead_reason(t, last.get(&t.id))),
                held: endpoint.and_then(|e| held(t, e, now)),
                lease: lease_end(t).map(|u| countdown(now, u)),
                lease_exact: lease_end(t).map(exact),
            }
        })
        .collect()
}

/// A dead letter: failed with no retry to come (as the store counts them).
fn is_dead(todo: &Todo) -> bool {
    todo.dead_letter
}

/// The ids of the dead letters among these todos (whose last attempt says why).
pub(crate) fn dead_ids(todos: &[Todo]) -> Vec<String> {
    todos
        .iter()
        .filter(|t| is_dead(t))
        .map(|t| t.id.clone())
        .collect()
}

/// Why a dead letter died, in words: its endpoint's revocation (recorded in
/// its result), else its last attempt's outcome with the holder's summary.
fn dead_reason(todo: &Todo, last: Option<&Attempt>) -> String {
    let result = todo.result.as_ref();
    if result.and_then(|r| r.get("error")).and_then(|e| e.as_str()) == Some("endpoint_revoked") {
        return match result
            .and_then(|r| r.get("reason"))
            .and_then(|r| r.as_str())
        {
            Some("expired") => "endpoint expired".to_owned(),
            _ => "endpoint revoked".to_owned(),
        };
    }
    match last {
        Some(a) => {
            let what = a.outcome.map(outcome_words).unwrap_or("ended").to_owned();
            match a
                .summary
                .as_deref()
                .map(str::trim)
                .filter(|s| !s.is_empty())
            {
                Some(summary) => format!("{what}: {summary}"),
                None => format!("{what}, after {} attempt(s)", todo.attempt),
            }
        }
        None => format!("no attempts left ({}/{})", todo.attempt, todo.max_attempts),
    }
}

/// An attempt's outcome as a person says it.
pub(crate) fn outcome_words(o: Outcome) -> &'static str {
    match o {
        Outcome::Completed => "completed",
        Outcome::Failed => "failed",
        Outcome::Released => "released",
        Outcome::LeaseExpired => "lease expired",
        Outcome::Reaped => "holder vanished",
        Outcome::Revoked => "endpoint revoked",
        Outcome::Cancelled => "cancelled",
    }
}

/// What became of the todo after an attempt, as a person says it.
pub(crate) fn disposition_words(d: Disposition) -> &'static str {
    match d {
        Disposition::Done => "done",
        Disposition::RetryScheduled => "retry scheduled",
        Disposition::Requeued => "back to pending",
        Disposition::DeadLettered => "dead-lettered",
        Disposition::Cancelled => "cancelled",
    }
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

    /// The filters in words, for a confirmation: `state pending, endpoint alpha-x1y2`.
    fn describe(&self) -> String {
        [
            ("state", self.state.as_str()),
            ("endpoint", self.endpoint.as_str()),
            ("queue", self.queue.as_str()),
            ("dead letter", self.dead_letter.as_str()),
            ("kind", self.kind.as_str()),
            ("title contains", self.q.as_str()),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k} {v:?}"))
        .collect::<Vec<_>>()
        .join(", ")
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

/// Live counts of the endpoints the filter names (all the human's without
/// an endpoint filter), labelled with what they count: they follow the
/// endpoint filter, and say so when the other filters do not narrow them.
#[derive(Default)]
pub(crate) struct Counts {
    pub(crate) pending: i64,
    pub(crate) retrying: i64,
    pub(crate) delayed: i64,
    pub(crate) claimed: i64,
    pub(crate) dead_letters: i64,
    pub(crate) oldest_pending: Option<When>,
    /// `endpoint alpha-x1y2` or `all 4 endpoints`.
    pub(crate) scope: String,
    /// Which filters the counts ignore, when any is set.
    pub(crate) not_narrowed_by: Option<String>,
}

impl Counts {
    fn of(
        activity: &HashMap<String, crate::store::EndpointActivity>,
        scope: String,
        filters: &Filters,
        now: Timestamp,
    ) -> Self {
        let mut c = Counts {
            scope,
            ..Counts::default()
        };
        let mut oldest: Option<Timestamp> = None;
        for a in activity.values() {
            c.pending += a.pending;
            c.retrying += a.retrying;
            c.delayed += a.delayed;
            c.claimed += a.claimed;
            c.dead_letters += a.dead_letters;
            if let Some(t) = a.oldest_pending_at {
                oldest = Some(oldest.map_or(t, |o| o.min(t)));
            }
        }
        c.oldest_pending = oldest.map(|t| When::at(t, now, &jiff::tz::TimeZone::UTC));
        let ignored: Vec<&str> = [
            ("queue", &filters.queue),
            ("kind", &filters.kind),
            ("search", &filters.q),
        ]
        .into_iter()
        .filter(|(_, v)| !v.trim().is_empty())
        .map(|(name, _)| name)
        .collect();
        c.not_narrowed_by = (!ignored.is_empty()).then(|| ignored.join(", "));
        c
    }
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
                Ok(page) => {
                    let last = state
                        .store
                        .human_last_attempts(&signed.human.id, &dead_ids(&page.items))
                        .await?;
                    (
                        rows(&page.items, &endpoints, &last, state.store.clock().now()),
                        page.next_cursor,
                    )
                }
                // A stale or foreign cursor is bad input, not an outage.
                Err(crate::store::StoreError::InvalidArgument(e)) => {
                    layout.error = Some(e.to_string());
                    (Vec::new(), None)
                }
                Err(e) => return Err(e.into()),
            }
        }
    };
    // The counts follow the endpoint filter; the label says what they count.
    let counted: Vec<&Endpoint> = match endpoints.iter().find(|e| e.slug == filters.endpoint) {
        Some(e) => vec![e],
        None => endpoints.iter().collect(),
    };
    let scope = match counted.as_slice() {
        [one] if !filters.endpoint.is_empty() => format!("endpoint {}", one.slug),
        all => format!("all {} endpoints", all.len()),
    };
    let ids: Vec<String> = counted.iter().map(|e| e.id.clone()).collect();
    let activity = state.store.endpoint_activity(&ids).await?;
    let counts = Counts::of(&activity, scope, &filters, state.store.clock().now());
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

/// One attempt on the timeline, in words: `#2 by claude-code 2.1 ·
/// claimed 3 min ago · ended 2 min ago · failed → retry scheduled`.
pub(crate) struct AttemptRow {
    pub(crate) attempt: i64,
    /// Who claimed it, when the claimant said.
    pub(crate) claimant: Option<String>,
    pub(crate) claimed: When,
    pub(crate) ended: Option<When>,
    pub(crate) outcome: &'static str,
    /// What became of the todo, unless the outcome already says it.
    pub(crate) disposition: Option<&'static str>,
    pub(crate) note: Option<String>,
    pub(crate) summary: Option<String>,
    pub(crate) died: bool,
}

impl AttemptRow {
    fn of(a: &Attempt, now: Timestamp, zone: &jiff::tz::TimeZone) -> Self {
        let outcome = a.outcome.map(outcome_words).unwrap_or("running");
        Self {
            attempt: a.attempt,
            claimant: a
                .claimant
                .clone()
                .map(|c| c.trim().to_owned())
                .filter(|c| !c.is_empty()),
            claimed: When::at(a.claimed_at, now, zone),
            ended: a.ended_at.map(|t| When::at(t, now, zone)),
            outcome,
            disposition: a
                .disposition
                .map(disposition_words)
                .filter(|d| *d != outcome && !(outcome == "completed" && *d == "done")),
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
    attempts: Vec<AttemptRow>,
    attempts_pruned: i64,
    can_retry: bool,
    can_release: bool,
    can_cancel: bool,
    /// Anything but a claimed todo (cancel or release it first).
    can_delete: bool,
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
        attempts: attempts
            .iter()
            .map(|a| AttemptRow::of(a, now, &zone))
            .collect(),
        attempts_pruned: todo.attempts_pruned,
        can_retry: matches!(todo.state, TodoState::Failed | TodoState::Cancelled)
            || todo.dead_letter,
        can_release: claimed,
        can_cancel: !todo.dead_letter
            && matches!(
                todo.state,
                TodoState::Pending | TodoState::Claimed | TodoState::Failed
            ),
        can_delete: !claimed,
        row: rows(
            std::slice::from_ref(&todo),
            std::slice::from_ref(&endpoint),
            &attempts
                .first()
                .filter(|a| a.ended_at.is_some())
                .map(|a| HashMap::from([(todo.id.clone(), a.clone())]))
                .unwrap_or_default(),
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

/// The confirmation of an "all matching" bulk action: the count it will
/// touch, and a form that sends the same filter back with that count.
#[derive(Template)]
#[template(path = "board/todos_confirm.html")]
struct ConfirmPage {
    layout: Layout,
    /// `retry` or `cancel`.
    action: String,
    bulk: String,
    count: i64,
    more: bool,
    max: usize,
    /// `state = pending, endpoint = alpha-x1y2`.
    described: String,
    back_to: String,
    filters: Filters,
}

/// Deletes a todo for good (the form's `confirm` box must be ticked): back
/// to the table, which no longer lists it.
pub(crate) async fn delete(
    State(state): State<BoardState>,
    Path(id): Path<String>,
    form: CsrfForm,
) -> Result<Response, BoardError> {
    let human = &form.signed.human.id;
    let todo = state.store.human_get_todo(human, &id).await?;
    let here = format!("/board/todos/{}", todo.id);
    if form.fields.text("confirm") != Some("yes") {
        return Ok(back(
            &here,
            Err("confirm: tick the box to delete the todo for good".into()),
        ));
    }
    match ops::todos::delete(&state.delivery, human, &todo.id).await {
        Ok(gone) => Ok(back(
            "/board/todos",
            Ok(format!("deleted {} ({}) for good", gone.id, gone.title)),
        )),
        Err(e) => Ok(back(&here, Err(refusal(e)))),
    }
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
    let (retry, verb) = match action {
        "retry" => (true, "retried"),
        "cancel" => (false, "cancelled"),
        _ => {
            return Ok(back(
                &back_to,
                Err("bulk: must be <retry|cancel>:<selected|matching>".into()),
            ));
        }
    };
    // "All matching" confirms with the count it will touch: the first POST
    // answers with that count, and only a second POST carrying it acts.
    if scope == "matching" {
        let count = match state.store.human_bulk_count(human, &target, retry).await {
            Ok(count) => count,
            Err(e) => return Ok(back(&back_to, Err(refusal(e)))),
        };
        let confirmed = form
            .fields
            .text("confirm")
            .and_then(|c| c.parse::<i64>().ok());
        if count.count == 0 {
            return Ok(back(
                &back_to,
                Err(format!(
                    "nothing to {action}: no todo matching the filter can be {verb}"
                )),
            ));
        }
        if confirmed != Some(count.count) {
            let mut layout = Layout::new(&form.signed, "todos", "Confirm");
            if let Some(before) = confirmed {
                layout.error = Some(format!(
                    "the count changed from {before} to {} since you looked: confirm again",
                    count.count
                ));
            }
            return Ok(crate::board::view::render(&ConfirmPage {
                layout,
                action: action.to_owned(),
                bulk: format!("{action}:matching"),
                count: count.count,
                more: count.more,
                max: MAX_BULK,
                described: filters.describe(),
                back_to,
                filters,
            }));
        }
    }
    let outcome = if retry {
        ops::todos::bulk_retry(&state.delivery, human, &target).await
    } else {
        ops::todos::bulk_cancel(&state.delivery, human, &target).await
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
