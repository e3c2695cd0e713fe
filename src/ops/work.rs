//! The agent's verbs on its endpoint's todos, as one caller (the endpoint's
//! agent) performs them: claims, heartbeats and the three ways an attempt
//! ends. Each finished attempt is counted here, whatever transport asked.

use crate::delivery::{AttemptEnd, Delivery};
use crate::store::{
    Caller, ClaimOptions, Claimed, Finish, HeartbeatOptions, ReleaseOptions, StoreResult, Todo,
};

/// Claims one todo by id.
pub async fn claim(
    delivery: &Delivery,
    caller: &Caller,
    id: &str,
    options: ClaimOptions,
) -> StoreResult<Claimed> {
    delivery.store().claim(caller, id, options).await
}

/// Claims the oldest pending todo of the caller's queues (or of `queue`);
/// `None` when nothing waits.
pub async fn claim_next(
    delivery: &Delivery,
    caller: &Caller,
    queue: Option<&str>,
    options: ClaimOptions,
) -> StoreResult<Option<Claimed>> {
    delivery.store().claim_next(caller, queue, options).await
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
    Ok(todo)
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
