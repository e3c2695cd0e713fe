//! Todos as humans and senders make and change them.
//!
//! Consequences, decided here for every surface (`docs/decisions.md`,
//! "Operations"): a created todo is counted and rings; a human's retry
//! rings at once, as a scheduled retry does; every retry, release and
//! cancel is counted by action, and a release also as a finished attempt.

use std::sync::Arc;

use serde_json::Value;

use crate::delivery::{AttemptEnd, Delivery, HumanAction};
use crate::domain::Invalid;
use crate::domain::todo::TodoState;
use crate::store::{
    BulkOutcome, BulkTarget, CreatedTodo, Endpoint, NewIntakeEvent, NewTodo, StoreResult, Todo,
    TodoRef, TrustMode,
};

/// A human's push: what they typed.
#[derive(Debug, Clone, Default)]
pub struct Push {
    pub title: String,
    /// May be omitted when the endpoint has exactly one queue.
    pub queue: Option<String>,
    /// Default `operator`.
    pub kind: Option<String>,
    pub payload: Option<Value>,
    /// Idempotency key: a live todo with the same key is returned instead.
    pub key: Option<String>,
    /// Higher is claimed first; default 0.
    pub priority: Option<i64>,
    /// Not claimable or rung before this (RFC 3339), or
    pub run_at: Option<String>,
    /// … before this long from now (`90m`); not both.
    pub delay: Option<String>,
}

/// Pushes a todo for one of the human's endpoints (by slug or id). Returns
/// the endpoint as read and whether a todo was created (a key that matched a
/// live todo returns that one, and nothing rings).
pub async fn push(
    delivery: &Delivery,
    human_id: &str,
    reference: &str,
    push: Push,
) -> StoreResult<(Endpoint, CreatedTodo)> {
    let run_at = crate::domain::todo::resolve_run_at(
        push.run_at.as_deref(),
        push.delay.as_deref(),
        delivery.store().clock().now(),
    )?;
    let endpoint = delivery.store().get_endpoint(human_id, reference).await?;
    if !endpoint.is_active() {
        return Err(crate::store::StoreError::EndpointRevoked);
    }
    let queue = match push.queue {
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
    // The event records what the human sent, as a sender's body would be.
    let body = serde_json::json!({
        "title": push.title,
        "queue": queue,
        "kind": push.kind,
        "payload": push.payload,
        "key": push.key,
    })
    .to_string()
    .into_bytes();
    let new = NewTodo {
        endpoint_id: endpoint.id.clone(),
        queue,
        title: push.title,
        kind: Some(push.kind.unwrap_or_else(|| "operator".to_owned())),
        source: Some("operator".to_owned()),
        payload: push.payload,
        idempotency_key: push.key,
        max_attempts: None,
        priority: push.priority.unwrap_or(0),
        run_at,
        intake: Some(NewIntakeEvent {
            trust_mode: TrustMode::Operator,
            actor: format!("human:{human_id}"),
            webhook_id: None,
            headers: serde_json::json!({}),
            content_type: Some("application/json".to_owned()),
            body,
        }),
    };
    let created = create(delivery, new, Some(&endpoint)).await?;
    Ok((endpoint, created))
}

/// Creates a todo (a human's push, a webhook delivery): writes it, and when
/// a row was made (not a dedup hit) counts it by trust mode and rings it.
/// `endpoint`: the todo's endpoint as the caller read it for this request,
/// if it did (its presence is judged on that read).
pub async fn create(
    delivery: &Delivery,
    new: NewTodo,
    endpoint: Option<&Endpoint>,
) -> StoreResult<CreatedTodo> {
    let mode = new.intake.as_ref().map(|i| i.trust_mode);
    let created = delivery.store().create_todo(new).await?;
    announce(delivery, &created, mode, endpoint).await;
    Ok(created)
}

/// What follows a created todo, whichever write made it: counted by trust
/// mode and rung (nothing for a dedup hit).
pub(crate) async fn announce(
    delivery: &Delivery,
    created: &CreatedTodo,
    mode: Option<TrustMode>,
    endpoint: Option<&Endpoint>,
) {
    if created.created {
        delivery.activity().created(&created.todo);
        if let Some(mode) = mode {
            delivery.todo_counted(mode);
        }
        match endpoint {
            Some(endpoint) => delivery.todo_created_on(&created.todo, endpoint).await,
            None => delivery.todo_created(&created.todo).await,
        }
    }
}

/// Delayed todos promoted per statement.
pub const DUE_PER_BATCH: i64 = 500;

/// Moves every delayed todo whose `run_at` has come to pending and rings
/// each (once in the cluster: the statement moves each todo for one
/// caller). Returns how many moved. A read of the earliest `run_at` comes
/// first, so that the server's once-a-second check writes nothing while
/// nothing is due.
pub async fn promote_due(delivery: &Delivery) -> StoreResult<usize> {
    let store = delivery.store();
    match store.unscoped_next_delayed_at().await? {
        Some(at) if at <= store.clock().now() => {}
        _ => return Ok(0),
    }
    let mut moved = 0;
    loop {
        let due = delivery
            .store()
            .unscoped_promote_due_delayed(DUE_PER_BATCH)
            .await?;
        for todo in &due {
            delivery.todo_due(todo).await;
        }
        moved += due.len();
        if (due.len() as i64) < DUE_PER_BATCH {
            return Ok(moved);
        }
    }
}

/// A human's retry of a failed, dead-lettered or cancelled todo: pending
/// again with `attempt = 0`, and rung at once, as a scheduled retry is.
pub async fn retry(delivery: &Delivery, human_id: &str, id: &str) -> StoreResult<Todo> {
    let todo = delivery.store().human_retry(human_id, id).await?;
    delivery.human_acted(HumanAction::Retry, 1);
    if todo.state == TodoState::Pending {
        delivery.todo_retried(&TodoRef::from(&todo)).await;
    }
    Ok(todo)
}

/// A human's change of a live todo's priority: it takes effect at the next
/// claim (a claimed todo keeps its lease).
pub async fn set_priority(
    delivery: &Delivery,
    human_id: &str,
    id: &str,
    priority: i64,
) -> StoreResult<Todo> {
    delivery
        .store()
        .human_set_priority(human_id, id, priority)
        .await
}

/// A human's release of a claimed todo: pending again; the holder gets
/// `conflict` on its next call.
pub async fn release(delivery: &Delivery, human_id: &str, id: &str) -> StoreResult<Todo> {
    let todo = delivery.store().human_release(human_id, id).await?;
    delivery.attempts_finished(AttemptEnd::Released, 1);
    delivery.human_acted(HumanAction::Release, 1);
    Ok(todo)
}

/// A human's cancel of a pending, claimed or waiting-for-retry todo.
pub async fn cancel(delivery: &Delivery, human_id: &str, id: &str) -> StoreResult<Todo> {
    let todo = delivery.store().human_cancel(human_id, id).await?;
    delivery.human_acted(HumanAction::Cancel, 1);
    Ok(todo)
}

/// A human's delete of a todo that is not claimed: gone for good, with its
/// attempt history (`docs/decisions.md`, "Deleting a todo"); counted as the
/// `delete` action. Nothing rings: a doorbell already sent is a hint, and
/// `claim_next` no longer finds the todo.
pub async fn delete(delivery: &Delivery, human_id: &str, id: &str) -> StoreResult<Todo> {
    let todo = delivery.store().human_delete_todo(human_id, id).await?;
    delivery.human_acted(HumanAction::Delete, 1);
    Ok(todo)
}

/// Retries at most [`crate::domain::todo::MAX_BULK`] of the human's todos
/// in one transaction; each one retried rings as a single retry does, in
/// the background (the answer does not wait for a thousand rings).
pub async fn bulk_retry(
    delivery: &Arc<Delivery>,
    human_id: &str,
    target: &BulkTarget,
) -> StoreResult<BulkOutcome> {
    let outcome = delivery.store().human_bulk_retry(human_id, target).await?;
    delivery.human_acted(HumanAction::Retry, outcome.ids.len() as u64);
    delivery.todos_retried_in_background(outcome.ids.clone());
    Ok(outcome)
}

/// Cancels at most [`crate::domain::todo::MAX_BULK`] of the human's todos
/// in one transaction.
pub async fn bulk_cancel(
    delivery: &Delivery,
    human_id: &str,
    target: &BulkTarget,
) -> StoreResult<BulkOutcome> {
    let outcome = delivery.store().human_bulk_cancel(human_id, target).await?;
    delivery.human_acted(HumanAction::Cancel, outcome.ids.len() as u64);
    Ok(outcome)
}
