//! A webhook delivery's decision, recorded (`docs/intake.md`, "Delivery
//! history", "Trusted senders and quarantine", "Replay").
//!
//! The pipeline, one function for a live delivery and a replay alike
//! ([`decide`]): the sender check, a key spent by a drop, then the routing
//! rules (`ops::rules`), then the todo. Whatever decides, the delivery is recorded once, in the
//! todo's transaction when a todo is made.

use std::sync::Arc;

use serde_json::Value;

use crate::delivery::Delivery;
use crate::domain::intake::{Decision, Envelope, todo_payload};
use crate::domain::rules::{Action, Outcome, rule_input};
use crate::store::{
    CreatedTodo, DeliveryFilter, DeliveryRecord, DeliveryWrite, NewDelivery, NewIntakeEvent,
    NewTodo, PageRequest, StoreError, StoreResult, TrustMode, Webhook,
};

/// A verified delivery, parsed: what the pipeline decides on.
#[derive(Debug, Clone)]
pub struct Received {
    pub webhook: Webhook,
    pub trust_mode: TrustMode,
    pub envelope: Envelope,
    /// Sanitized headers.
    pub headers: Value,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
    pub title: String,
    pub kind: String,
    pub source: String,
    pub idempotency_key: String,
    /// The delivery this one replays.
    pub replay_of: Option<String>,
}

/// What became of a delivery: its record, and the todo made or matched.
#[derive(Debug, Clone)]
pub struct Decided {
    pub record: DeliveryRecord,
    pub todo: Option<CreatedTodo>,
}

/// Decides a verified delivery and records it: quarantined when its sender
/// is not trusted; dropped when a dropped delivery spent its key before;
/// then the routing rules drop it, quarantine it or pick its queue; else a
/// todo (accepted, which rings) or the live todo holding its key
/// (duplicate).
pub async fn decide(delivery: &Delivery, received: Received) -> StoreResult<Decided> {
    let store = delivery.store();
    if !received.webhook.senders.admits(&received.envelope) {
        return record_only(delivery, &received, Decision::Quarantined, None, None).await;
    }
    // A dropped delivery spent its key: a redelivery stays dropped.
    if let Some(spent) = store
        .find_dropped_delivery(&received.webhook.id, &received.idempotency_key)
        .await?
    {
        let reason = format!("its key was spent by the dropped delivery {}", spent.id);
        return record_only(
            delivery,
            &received,
            Decision::Dropped,
            spent.rule,
            Some(reason),
        )
        .await;
    }
    let (queue, rule) = match &received.webhook.rules {
        None => (received.webhook.queue.clone(), None),
        Some(rules) => {
            let input = rule_input(&received.envelope, &received.headers, &received.body);
            let evaluation = super::rules::evaluate(Arc::new(rules.clone()), input).await;
            let rule = evaluation.verdict.rule_label();
            let reason = (evaluation.verdict.by == "on_error")
                .then(|| evaluation.trace.iter().rev().find_map(error_text))
                .flatten();
            match evaluation.verdict.action {
                None => (received.webhook.queue.clone(), rule),
                Some(Action::Queue(queue)) => (queue, rule),
                Some(Action::Drop) => {
                    return record_only(delivery, &received, Decision::Dropped, rule, reason).await;
                }
                Some(Action::Quarantine) => {
                    return record_only(delivery, &received, Decision::Quarantined, rule, reason)
                        .await;
                }
            }
        }
    };
    let new = new_todo(&received, &queue);
    let mut accepted = new_delivery(&received, Decision::Accepted, None);
    accepted.rule = rule.clone();
    let write = DeliveryWrite::Record(Box::new(accepted));
    let (created, record) = store.create_todo_with_delivery(new, write).await?;
    let record = match record {
        Some(record) => record,
        None => {
            let mut duplicate = new_delivery(
                &received,
                Decision::Duplicate,
                Some(created.todo.id.clone()),
            );
            duplicate.rule = rule;
            store.record_delivery(duplicate).await?
        }
    };
    delivery.delivery_decided(record.decision);
    super::todos::announce(delivery, &created, Some(received.trust_mode), None).await;
    Ok(Decided {
        record,
        todo: Some(created),
    })
}

/// Records a delivery that makes no todo (quarantined or dropped).
async fn record_only(
    delivery: &Delivery,
    received: &Received,
    decision: Decision,
    rule: Option<String>,
    reason: Option<String>,
) -> StoreResult<Decided> {
    let mut new = new_delivery(received, decision, None);
    new.rule = rule;
    new.reason = reason;
    let record = delivery.store().record_delivery(new).await?;
    delivery.delivery_decided(decision);
    Ok(Decided { record, todo: None })
}

fn error_text(outcome: &Outcome) -> Option<String> {
    match outcome {
        Outcome::Error(text) => Some(format!("rule error: {text}")),
        _ => None,
    }
}

/// The most deliveries one batch replay re-runs.
pub const MAX_BATCH_REPLAY: usize = 1000;

/// What a batch replay did.
#[derive(Debug, Clone)]
pub struct BatchReplay {
    pub decided: Vec<Decided>,
    /// Matching deliveries that cannot be replayed (refused: never verified).
    pub skipped: usize,
}

/// Re-runs the webhook's deliveries that match `filter` (newest first, at
/// most [`MAX_BATCH_REPLAY`]) through its current senders and rules.
pub async fn replay_batch(
    delivery: &Delivery,
    human_id: &str,
    webhook_id: &str,
    filter: &DeliveryFilter,
    new_key: bool,
) -> StoreResult<BatchReplay> {
    let store = delivery.store();
    // Chosen before any is replayed: the replays are new deliveries that
    // may match the filter too.
    let mut chosen = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .list_deliveries(
                human_id,
                webhook_id,
                filter,
                &PageRequest {
                    limit: 200,
                    after: after.take(),
                },
            )
            .await?;
        chosen.extend(page.items);
        match page.next_cursor {
            Some(cursor) if chosen.len() < MAX_BATCH_REPLAY => after = Some(cursor),
            _ => break,
        }
    }
    chosen.truncate(MAX_BATCH_REPLAY);
    let mut decided = Vec::with_capacity(chosen.len());
    let mut skipped = 0;
    for record in chosen {
        if record.decision == Decision::Refused || record.body.is_none() {
            skipped += 1;
            continue;
        }
        decided.push(replay(delivery, human_id, &record.id, new_key).await?);
    }
    Ok(BatchReplay { decided, skipped })
}

/// Records a delivery refused before it could be decided (a bad signature,
/// too large, the endpoint revoked): its size and kept headers, never its
/// body.
pub async fn refused(
    delivery: &Delivery,
    webhook: &Webhook,
    reason: &str,
    envelope: Envelope,
    headers: Value,
) -> StoreResult<DeliveryRecord> {
    let record = delivery
        .store()
        .record_delivery(NewDelivery {
            webhook_id: webhook.id.clone(),
            human_id: webhook.human_id.clone(),
            endpoint_id: webhook.endpoint_id.clone(),
            decision: Decision::Refused,
            reason: Some(reason.to_owned()),
            rule: None,
            envelope,
            headers,
            body: None,
            title: None,
            kind: None,
            source: None,
            idempotency_key: None,
            todo_id: None,
            replay_of: None,
        })
        .await?;
    delivery.delivery_decided(Decision::Refused);
    Ok(record)
}

/// A human releases a quarantined delivery: its todo is created now (and
/// rings), and the delivery becomes `released`, in one transaction.
pub async fn release(delivery: &Delivery, human_id: &str, id: &str) -> StoreResult<Decided> {
    let store = delivery.store();
    let record = store.get_delivery(human_id, id).await?;
    if record.decision != Decision::Quarantined {
        return Err(StoreError::conflict("the delivery is not quarantined"));
    }
    let webhook = store.get_webhook(human_id, &record.webhook_id).await?;
    let received = received_from(&record, webhook, None)?;
    let new = new_todo(&received, &received.webhook.queue);
    let write = DeliveryWrite::Release {
        human_id: human_id.to_owned(),
        id: id.to_owned(),
    };
    let (created, settled) = store.create_todo_with_delivery(new, write).await?;
    let settled = match settled {
        Some(settled) => settled,
        // Its key matched a live todo: released onto that one.
        None => {
            store
                .settle_delivery(human_id, id, Decision::Released, Some(&created.todo.id))
                .await?
        }
    };
    delivery.delivery_decided(Decision::Released);
    super::todos::announce(delivery, &created, Some(received.trust_mode), None).await;
    Ok(Decided {
        record: settled,
        todo: Some(created),
    })
}

/// A human discards a quarantined delivery: it stays in the history, no todo.
pub async fn discard(delivery: &Delivery, human_id: &str, id: &str) -> StoreResult<DeliveryRecord> {
    let record = delivery
        .store()
        .settle_delivery(human_id, id, Decision::Discarded, None)
        .await?;
    delivery.delivery_decided(Decision::Discarded);
    Ok(record)
}

/// Re-runs a stored delivery through the webhook's current senders (and
/// rules) and records the outcome as a new delivery. Its original
/// idempotency key applies unless `new_key`.
pub async fn replay(
    delivery: &Delivery,
    human_id: &str,
    id: &str,
    new_key: bool,
) -> StoreResult<Decided> {
    let store = delivery.store();
    let record = store.get_delivery(human_id, id).await?;
    if record.decision == Decision::Refused || record.body.is_none() {
        return Err(StoreError::conflict(
            "a refused delivery was never verified; there is nothing to replay",
        ));
    }
    let webhook = store.get_webhook(human_id, &record.webhook_id).await?;
    let key = new_key.then(|| format!("{}:replay:{}", webhook.id, crate::mint::new_id("rp")));
    let received = received_from(&record, webhook, key)?;
    decide(delivery, received).await
}

/// A stored delivery as the pipeline takes it.
fn received_from(
    record: &DeliveryRecord,
    webhook: Webhook,
    key: Option<String>,
) -> StoreResult<Received> {
    let trust_mode = match record.envelope.trust_mode.as_str() {
        "signed" => TrustMode::Signed,
        _ => TrustMode::Token,
    };
    let source = record
        .source
        .clone()
        .unwrap_or_else(|| "webhook".to_owned());
    Ok(Received {
        trust_mode,
        envelope: record.envelope.clone(),
        headers: record.headers.clone(),
        content_type: record.envelope.content_type.clone(),
        body: record.body.clone().unwrap_or_default(),
        title: record
            .title
            .clone()
            .unwrap_or_else(|| format!("{source} event")),
        kind: record.kind.clone().unwrap_or_else(|| "webhook".to_owned()),
        source,
        idempotency_key: key
            .or_else(|| record.idempotency_key.clone())
            .unwrap_or_else(|| format!("{}:{}", webhook.id, record.id)),
        replay_of: Some(record.id.clone()),
        webhook,
    })
}

fn new_todo(received: &Received, queue: &str) -> NewTodo {
    let json = serde_json::from_slice(&received.body).ok();
    NewTodo {
        endpoint_id: received.webhook.endpoint_id.clone(),
        queue: queue.to_owned(),
        title: received.title.clone(),
        kind: Some(received.kind.clone()),
        source: Some(received.source.clone()),
        payload: Some(todo_payload(&received.body, json)),
        idempotency_key: Some(received.idempotency_key.clone()),
        max_attempts: None,
        priority: 0,
        run_at: crate::domain::intake::run_at_of(&received.headers),
        intake: Some(NewIntakeEvent {
            trust_mode: received.trust_mode,
            actor: format!("webhook:{}", received.webhook.id),
            webhook_id: Some(received.webhook.id.clone()),
            headers: received.headers.clone(),
            content_type: received.content_type.clone(),
            body: received.body.clone(),
        }),
    }
}

fn new_delivery(received: &Received, decision: Decision, todo_id: Option<String>) -> NewDelivery {
    NewDelivery {
        webhook_id: received.webhook.id.clone(),
        human_id: received.webhook.human_id.clone(),
        endpoint_id: received.webhook.endpoint_id.clone(),
        decision,
        reason: None,
        rule: None,
        envelope: received.envelope.clone(),
        headers: received.headers.clone(),
        body: Some(received.body.clone()),
        title: Some(received.title.clone()),
        kind: Some(received.kind.clone()),
        source: Some(received.source.clone()),
        idempotency_key: Some(received.idempotency_key.clone()),
        todo_id,
        replay_of: received.replay_of.clone(),
    }
}
