//! The agent's verbs on its endpoint's todos, as one caller (the endpoint's
//! agent) performs them: claims, heartbeats and the three ways an attempt
//! ends. Each finished attempt is counted here, whatever transport asked.

use crate::delivery::{AttemptEnd, Delivery};
use crate::domain::admission::Held;
use crate::domain::todo::TodoState;
use crate::store::{
    Caller, ClaimOptions, Claimed, Finish, HeartbeatOptions, ReleaseOptions, StoreError,
    StoreResult, Todo, TodoRef,
};

/// Claims one todo by id. A todo that admission holds answers `conflict`
/// naming why (`paused`, `in_flight_limit`, `window_budget`) and when it
/// reopens.
pub async fn claim(
    delivery: &Delivery,
    caller: &Caller,
    id: &str,
    options: ClaimOptions,
) -> StoreResult<Claimed> {
    let store = delivery.store();
    match store.claim(caller, id, options).await {
        Ok(claimed) => {
            delivery.activity().claimed(&claimed.todo);
            Ok(claimed)
        }
        Err(StoreError::Conflict(why)) => {
            let todo = store.get_todo(caller, id).await?;
            let held = why_held(delivery, caller, Some(&todo.queue)).await?;
            Err(StoreError::Conflict(match held {
                Some(held) if todo.state == TodoState::Pending => held_sentence(held),
                _ => why,
            }))
        }
        Err(e) => Err(e),
    }
}

/// What `claim_next` found.
#[derive(Debug)]
pub enum NextClaim {
    Claimed(Box<Claimed>),
    /// Nothing it may take; `held` says why when admission holds the work
    /// (the agent should stop asking until `until`, or until resumed).
    Empty {
        held: Option<Held>,
    },
}

/// Claims the first pending todo in claim order (priority, then age) of
/// the caller's queues (or of `queue`) that admission lets through.
pub async fn claim_next(
    delivery: &Delivery,
    caller: &Caller,
    queue: Option<&str>,
    options: ClaimOptions,
) -> StoreResult<NextClaim> {
    let claimed = delivery.store().claim_next(caller, queue, options).await?;
    next_claim(delivery, caller, queue, claimed).await
}

/// What a claim of the next todo found, told: a claim to the queue's
/// charts, a claim held by admission to its counter, with the reason.
async fn next_claim(
    delivery: &Delivery,
    caller: &Caller,
    queue: Option<&str>,
    claimed: Option<Claimed>,
) -> StoreResult<NextClaim> {
    match claimed {
        Some(claimed) => {
            delivery.activity().claimed(&claimed.todo);
            Ok(NextClaim::Claimed(Box::new(claimed)))
        }
        None => {
            let held = why_held(delivery, caller, queue).await?;
            if let Some(held) = held {
                delivery.claim_held(held.reason);
            }
            Ok(NextClaim::Empty { held })
        }
    }
}

/// Whether admission holds the caller's claims (of `queue`, or of all its
/// queues), from the limits and their usage now.
async fn why_held(
    delivery: &Delivery,
    caller: &Caller,
    queue: Option<&str>,
) -> StoreResult<Option<Held>> {
    let store = delivery.store();
    let levels = store.unscoped_admission(&caller.endpoint_id).await?;
    if levels.is_empty() {
        return Ok(None);
    }
    Ok(super::admission::held_for(
        &levels,
        &caller.queues,
        queue,
        store.clock().now(),
    ))
}

/// A held claim's refusal, for people and agents alike.
fn held_sentence(held: Held) -> String {
    match held.until {
        Some(until) => format!(
            "claims are held ({}) until {}",
            held.reason.as_str(),
            until.to_rfc3339()
        ),
        None => format!("claims are held ({})", held.reason.as_str()),
    }
}

/// Extends the caller's lease on a todo it holds.
pub async fn heartbeat(
    delivery: &Delivery,
    caller: &Caller,
    id: &str,
    options: HeartbeatOptions,
) -> StoreResult<Todo> {
    delivery.store().heartbeat(caller, id, options).await
}

/// The todo is done.
pub async fn complete(
    delivery: &Delivery,
    caller: &Caller,
    id: &str,
    finish: Finish,
) -> StoreResult<Todo> {
    let todo = delivery.store().complete(caller, id, finish).await?;
    delivery.attempts_finished(AttemptEnd::Completed, 1);
    completed(delivery, &todo);
    Ok(todo)
}

/// The todo is done, and the caller takes its next one as `claim_next`
/// would (`queue`, `options`): the agent's loop in one call, one commit
/// where the store can. A refused completion claims nothing; an invalid
/// `queue` or lease is refused before the completion.
pub async fn complete_then_claim_next(
    delivery: &Delivery,
    caller: &Caller,
    id: &str,
    finish: Finish,
    queue: Option<&str>,
    options: ClaimOptions,
) -> StoreResult<(Todo, NextClaim)> {
    let (todo, claimed) = delivery
        .store()
        .complete_then_claim_next(caller, id, finish, queue, options)
        .await?;
    delivery.attempts_finished(AttemptEnd::Completed, 1);
    completed(delivery, &todo);
    let next = next_claim(delivery, caller, queue, claimed).await?;
    Ok((todo, next))
}

/// Completes each of `ids` the caller holds, in one transaction; answers
/// per id (`TodoStore::complete_many`). Each todo done counts as a finished
/// attempt, as `complete` counts it.
pub async fn complete_many(
    delivery: &Delivery,
    caller: &Caller,
    ids: &[String],
    finish: Finish,
) -> StoreResult<Vec<StoreResult<Todo>>> {
    let answers = delivery.store().complete_many(caller, ids, finish).await?;
    let done = answers.iter().filter(|answer| answer.is_ok()).count() as u64;
    for todo in answers.iter().flatten() {
        completed(delivery, todo);
    }
    if done > 0 {
        delivery.attempts_finished(AttemptEnd::Completed, done);
    }
    Ok(answers)
}

/// The attempt failed: a retry is scheduled, or the todo is a dead letter.
pub async fn fail(
    delivery: &Delivery,
    caller: &Caller,
    id: &str,
    finish: Finish,
) -> StoreResult<Todo> {
    let todo = delivery.store().fail(caller, id, finish).await?;
    delivery.attempts_finished(AttemptEnd::of_failed(&todo), 1);
    delivery
        .activity()
        .failed(&TodoRef::from(&todo), todo.updated_at, todo.dead_letter);
    Ok(todo)
}

/// The caller gives the todo back: pending again, the attempt not counted
/// against it.
pub async fn release(
    delivery: &Delivery,
    caller: &Caller,
    id: &str,
    options: ReleaseOptions,
) -> StoreResult<Todo> {
    let todo = delivery.store().release(caller, id, options).await?;
    delivery.attempts_finished(AttemptEnd::Released, 1);
    Ok(todo)
}

/// A todo done, for the queue's charts: when, and how long after it was ready.
fn completed(delivery: &Delivery, todo: &Todo) {
    let at = todo.completed_at.unwrap_or(todo.updated_at);
    delivery.activity().completed(todo, at);
}
