//! Schedules (`docs/queue.md`, "Recurring todos"): added, listed, paused,
//! resumed and deleted by the endpoint's human, and the due-check the
//! maintenance tick runs. Each occurrence's todo is made by one guarded
//! statement (`ScheduleStore::unscoped_fire_schedule`), then counted and rung
//! as a human's push is.

use std::time::Duration;

use serde_json::Value;

use crate::delivery::Delivery;
use crate::domain::schedule::{CatchUp, Cron, parse_tz, render_title};
use crate::domain::todo::{encode_payload, validate_label, validate_queue_name, validate_title};
use crate::domain::{Invalid, Timestamp};
use crate::store::{
    Endpoint, Fired, NewIntakeEvent, NewSchedule, NewTodo, Schedule, StoreError, StoreResult,
    TrustMode,
};

/// What a human asks for.
#[derive(Debug, Clone, Default)]
pub struct AddSchedule {
    /// May be omitted when the endpoint has exactly one queue.
    pub queue: Option<String>,
    pub cron: String,
    pub tz: String,
    /// A title template (`{date}`, `{time}`, `{datetime}`: the occurrence's local time).
    pub title: String,
    /// Default `schedule`.
    pub kind: Option<String>,
    pub payload: Option<Value>,
    /// `one` (default) or `none`.
    pub catch_up: Option<String>,
}

/// Schedules due-checked per maintenance tick at most.
pub const DUE_PER_TICK: i64 = 500;

/// A never: what `next_at` holds for an expression with no further occurrence.
const NEVER: Timestamp = Timestamp::from_millis(i64::MAX);

/// Adds a schedule to an active endpoint of the human; every field is
/// checked first (the error names it) and nothing is written on an error.
pub async fn add(
    delivery: &Delivery,
    human_id: &str,
    endpoint: &Endpoint,
    add: AddSchedule,
) -> StoreResult<Schedule> {
    if !endpoint.is_active() {
        return Err(StoreError::EndpointRevoked);
    }
    let queue = match add.queue {
        Some(q) => q,
        None if endpoint.scope_queues.len() == 1 => endpoint.scope_queues[0].clone(),
        None => {
            return Err(Invalid::new(
                "queue",
                format!(
                    "required: the endpoint has several queues ({})",
                    endpoint.scope_queues.join(", ")
                ),
            )
            .into());
        }
    };
    validate_queue_name(&queue, "queue")?;
    if !endpoint.scope_queues.contains(&queue) {
        return Err(Invalid::new(
            "queue",
            format!(
                "{queue:?} is not in the endpoint's scope ({})",
                endpoint.scope_queues.join(", ")
            ),
        )
        .into());
    }
    let cron = Cron::parse(&add.cron)?;
    let tz = parse_tz(&add.tz)?;
    validate_title(&add.title)?;
    let now = delivery.store().clock().now();
    let next_at = cron.next_occurrence(now, &tz).unwrap_or(NEVER);
    // The longest a rendered title gets is checked now, not at 3 a.m.
    validate_title(&render_title(&add.title, next_at, &tz))?;
    let kind = add.kind.unwrap_or_else(|| "schedule".to_owned());
    validate_label(&kind, "kind")?;
    if let Some(payload) = &add.payload {
        encode_payload(payload)?;
    }
    let catch_up = CatchUp::parse(add.catch_up.as_deref().unwrap_or("one"))?;
    let new = NewSchedule {
        endpoint_id: endpoint.id.clone(),
        queue,
        cron: add.cron.trim().to_owned(),
        tz: add.tz.trim().to_owned(),
        title: add.title,
        kind: Some(kind),
        payload: add.payload,
        catch_up: catch_up.as_str().to_owned(),
        next_at,
    };
    delivery.store().create_schedule(human_id, new).await
}

/// Deletes a schedule; no todo is made for it from now on.
pub async fn delete(delivery: &Delivery, human_id: &str, id: &str) -> StoreResult<()> {
    delivery.store().delete_schedule(human_id, id).await
}

/// Pauses a schedule: no todo is made while paused.
pub async fn pause(delivery: &Delivery, human_id: &str, id: &str) -> StoreResult<Schedule> {
    let store = delivery.store();
    let schedule = store.get_schedule(human_id, id).await?;
    store
        .set_schedule_paused(human_id, id, true, schedule.next_at)
        .await
}

/// Resumes a schedule from its next future occurrence (what fell due while
/// it was paused is not made up for).
pub async fn resume(delivery: &Delivery, human_id: &str, id: &str) -> StoreResult<Schedule> {
    let store = delivery.store();
    let schedule = store.get_schedule(human_id, id).await?;
    let now = store.clock().now();
    let next_at = rule_of(&schedule)
        .and_then(|(cron, tz)| cron.next_occurrence(now, &tz))
        .unwrap_or(NEVER);
    store
        .set_schedule_paused(human_id, id, false, next_at)
        .await
}

fn rule_of(schedule: &Schedule) -> Option<(Cron, jiff::tz::TimeZone)> {
    Some((
        Cron::parse(&schedule.cron).ok()?,
        parse_tz(&schedule.tz).ok()?,
    ))
}

/// What one due-check did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DueReport {
    /// Todos made (each counted and rung).
    pub created: usize,
    /// Occurrences skipped (`catch_up: none`, or a todo its endpoint refused).
    pub skipped: usize,
}

/// Makes the todos of due schedules, at most `limit` schedules: for each,
/// the latest occurrence at or before now; an occurrence more than `grace`
/// late was missed while no instance ran, and a `catch_up: none` schedule
/// skips it. The schedule moves on to its next future occurrence either
/// way, by a guarded statement that one caller alone wins.
pub async fn run_due(delivery: &Delivery, grace: Duration, limit: i64) -> StoreResult<DueReport> {
    let store = delivery.store();
    let now = store.clock().now();
    let mut report = DueReport::default();
    for schedule in store.unscoped_due_schedules(now, limit).await? {
        let Some((cron, tz)) = rule_of(&schedule) else {
            tracing::warn!(schedule = %schedule.id, "a schedule's cron or time zone no longer parses; skipped");
            continue;
        };
        let Some(occurrence) = cron.latest_due(schedule.next_at, now, &tz) else {
            continue;
        };
        let to = cron.next_occurrence(now, &tz).unwrap_or(NEVER);
        let missed = now.as_millis().saturating_sub(occurrence.as_millis())
            > i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
        let make = !(missed && schedule.catch_up == CatchUp::None.as_str());
        let todo = make.then(|| todo_of(&schedule, occurrence, &tz));
        let fired = store
            .unscoped_fire_schedule(&schedule.id, schedule.next_at, to, occurrence, todo)
            .await;
        match fired {
            Ok(Fired::Created(created)) => {
                report.created += 1;
                delivery.todo_counted(TrustMode::Operator);
                delivery.activity().created(&created.todo);
                delivery.todo_created(&created.todo).await;
            }
            Ok(Fired::Advanced) => report.skipped += 1,
            Ok(Fired::Lost) => {}
            Err(e @ (StoreError::Unavailable(_) | StoreError::Internal(_))) => return Err(e),
            Err(StoreError::SchemaMismatch { found, expected }) => {
                return Err(StoreError::SchemaMismatch { found, expected });
            }
            Err(e) => {
                // The endpoint refused the todo (its scope changed, it was
                // revoked): this occurrence is skipped, not retried forever.
                tracing::warn!(schedule = %schedule.id, error = %e, "a schedule's todo was refused; occurrence skipped");
                if let Ok(Fired::Advanced) = store
                    .unscoped_fire_schedule(&schedule.id, schedule.next_at, to, occurrence, None)
                    .await
                {
                    report.skipped += 1;
                }
            }
        }
    }
    if report != DueReport::default() {
        tracing::info!(
            created = report.created,
            skipped = report.skipped,
            "schedules fired"
        );
    }
    Ok(report)
}

/// The occurrence's todo: human-authored (the schedule's human wrote it), so
/// it rings as a push from the API does.
fn todo_of(schedule: &Schedule, occurrence: Timestamp, tz: &jiff::tz::TimeZone) -> NewTodo {
    let title = render_title(&schedule.title, occurrence, tz);
    let body = serde_json::json!({
        "schedule": schedule.id,
        "occurrence": occurrence.to_rfc3339(),
        "title": title,
        "queue": schedule.queue,
        "kind": schedule.kind,
        "payload": schedule.payload,
    })
    .to_string()
    .into_bytes();
    NewTodo {
        endpoint_id: schedule.endpoint_id.clone(),
        queue: schedule.queue.clone(),
        title,
        kind: schedule.kind.clone(),
        source: Some("schedule".to_owned()),
        payload: schedule.payload.clone(),
        idempotency_key: None,
        max_attempts: None,
        priority: 0,
        run_at: None,
        intake: Some(NewIntakeEvent {
            trust_mode: TrustMode::Operator,
            actor: format!("schedule:{}", schedule.id),
            webhook_id: None,
            headers: serde_json::json!({}),
            content_type: Some("application/json".to_owned()),
            body,
        }),
    }
}
