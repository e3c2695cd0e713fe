//! Routing rules: saving them, and running them off the async runtime
//! (`docs/intake.md`, "Routing rules"; `docs/decisions.md`, "Routing rules
//! run jq in a sandbox").
//!
//! The rules run on one dedicated thread, never on a runtime worker: jq is
//! synchronous and a rule, however budgeted, is code the sender's data
//! drives. The thread keeps the compiled rule sets (compiling the standard
//! library costs about half a millisecond; a set is compiled once). A
//! caller waits at most [`DELIVERY_DEADLINE`] plus a grace; past it, the
//! thread is abandoned (it cannot be killed) and a fresh one takes its
//! place, and the delivery goes to `on_error`. At most [`MAX_ABANDONED`]
//! abandoned threads may still be running: beyond that, every evaluation
//! fails at once (fails closed) until one ends, so a hostile rule can hold
//! at most that many cores and never the intake.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::delivery::Delivery;
use crate::domain::rules::{Compiled, Evaluation, Outcome, RuleInvalid, RuleSet};
use crate::store::{StoreError, Webhook};

/// The wall-clock budget of all the rules of one delivery.
pub const DELIVERY_DEADLINE: Duration = Duration::from_millis(250);
/// How long past the deadline a caller waits before abandoning the thread.
const GRACE: Duration = Duration::from_millis(250);
/// Abandoned evaluation threads allowed to run on before rules fail closed.
pub const MAX_ABANDONED: usize = 2;
/// Compiled sets the thread keeps.
const CACHE_SETS: usize = 256;

/// Why a save was refused: a bad field, or the store's answer.
#[derive(Debug)]
pub enum SaveRulesError {
    Invalid(RuleInvalid),
    Store(StoreError),
}

impl From<StoreError> for SaveRulesError {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

/// Validates a rule set whole (shape, limits, conditions, and every queue
/// within the endpoint's scope) and replaces the webhook's rules with it.
/// Bad input changes nothing.
pub async fn save(
    delivery: &Delivery,
    human_id: &str,
    webhook_id: &str,
    body: &Value,
) -> Result<Webhook, SaveRulesError> {
    let store = delivery.store();
    let webhook = store.get_webhook(human_id, webhook_id).await?;
    let rules = parse_for(delivery, &webhook, body).await?;
    let rules = (!rules.rules.is_empty()
        || rules.default.is_some()
        || rules.on_error != Default::default())
    .then_some(rules);
    Ok(store
        .set_webhook_rules(human_id, webhook_id, rules.as_ref())
        .await?)
}

/// A rule set read from the wire for this webhook: valid, and naming only
/// queues of its endpoint's scope (never wider).
pub async fn parse_for(
    delivery: &Delivery,
    webhook: &Webhook,
    body: &Value,
) -> Result<RuleSet, SaveRulesError> {
    let rules = RuleSet::parse(body).map_err(SaveRulesError::Invalid)?;
    let endpoint = delivery
        .store()
        .get_endpoint(&webhook.human_id, &webhook.endpoint_id)
        .await?;
    for (field, queue) in rules.queues() {
        if !endpoint.scope_queues.iter().any(|q| q == queue) {
            return Err(SaveRulesError::Invalid(RuleInvalid::new(
                field,
                format!(
                    "{queue:?} is not in the endpoint's scope ({})",
                    endpoint.scope_queues.join(", ")
                ),
            )));
        }
    }
    Ok(rules)
}

/// Runs `rules` on `input` off the runtime, within [`DELIVERY_DEADLINE`].
/// Whatever goes wrong (the thread is saturated, abandoned, or the set does
/// not compile) is the first rule's error, so `on_error` decides.
pub async fn evaluate(rules: Arc<RuleSet>, input: Value) -> Evaluation {
    evaluate_within(rules, input, DELIVERY_DEADLINE, GRACE).await
}

/// [`evaluate`] with its deadline and grace given (tests shorten them).
async fn evaluate_within(
    rules: Arc<RuleSet>,
    input: Value,
    deadline_after: Duration,
    grace: Duration,
) -> Evaluation {
    let failed = |why: &str| Evaluation {
        verdict: if rules.on_error == crate::domain::rules::OnError::Skip {
            crate::domain::rules::Verdict {
                action: rules.default.clone(),
                rule: None,
                by: "default",
            }
        } else {
            rules.failed(0)
        },
        trace: vec![Outcome::Error(why.to_owned())],
    };
    if rules.rules.is_empty() {
        return Evaluation {
            verdict: crate::domain::rules::Verdict {
                action: rules.default.clone(),
                rule: None,
                by: "default",
            },
            trace: Vec::new(),
        };
    }
    let runner = runner();
    if runner.abandoned.load(Ordering::Acquire) >= MAX_ABANDONED {
        return failed("the rule sandbox is saturated by runaway rules");
    }
    let (reply, answer) = tokio::sync::oneshot::channel();
    let deadline = Instant::now() + deadline_after;
    let generation = match runner.submit(Job {
        rules: rules.clone(),
        input,
        deadline,
        reply,
    }) {
        Some(generation) => generation,
        None => return failed("the rule sandbox is unavailable"),
    };
    match tokio::time::timeout(deadline_after + grace, answer).await {
        Ok(Ok(evaluation)) => evaluation,
        Ok(Err(_)) => failed("the rule sandbox stopped"),
        Err(_) => {
            runner.abandon(generation);
            failed("time budget exceeded")
        }
    }
}

struct Job {
    rules: Arc<RuleSet>,
    input: Value,
    deadline: Instant,
    reply: tokio::sync::oneshot::Sender<Evaluation>,
}

struct Worker {
    generation: u64,
    jobs: mpsc::Sender<Job>,
}

struct Runner {
    worker: Mutex<Option<Worker>>,
    next_generation: AtomicUsize,
    abandoned: Arc<AtomicUsize>,
}

fn runner() -> &'static Runner {
    static RUNNER: OnceLock<Runner> = OnceLock::new();
    RUNNER.get_or_init(|| Runner {
        worker: Mutex::new(None),
        next_generation: AtomicUsize::new(0),
        abandoned: Arc::new(AtomicUsize::new(0)),
    })
}

impl Runner {
    /// Hands a job to the current thread (starting one when there is none);
    /// the thread's generation, or `None` when no thread could start.
    fn submit(&self, job: Job) -> Option<u64> {
        let mut worker = self.worker.lock().unwrap_or_else(|e| e.into_inner());
        if worker.is_none() {
            *worker = self.start();
        }
        let current = worker.as_ref()?;
        match current.jobs.send(job) {
            Ok(()) => Some(current.generation),
            Err(mpsc::SendError(job)) => {
                // The thread ended (a panic): start another, once.
                *worker = self.start();
                let current = worker.as_ref()?;
                current.jobs.send(job).ok()?;
                Some(current.generation)
            }
        }
    }

    fn start(&self) -> Option<Worker> {
        let generation = self.next_generation.fetch_add(1, Ordering::Relaxed) as u64;
        let (jobs, inbox) = mpsc::channel::<Job>();
        let abandoned = self.abandoned.clone();
        std::thread::Builder::new()
            .name(format!("rules-{generation}"))
            .spawn(move || work(inbox, abandoned))
            .ok()?;
        Some(Worker { generation, jobs })
    }

    /// The thread of `generation` overran: a new one takes the next jobs.
    /// Callers queued behind it time out alike; only the first replaces it.
    fn abandon(&self, generation: u64) {
        let mut worker = self.worker.lock().unwrap_or_else(|e| e.into_inner());
        if worker.as_ref().is_some_and(|w| w.generation == generation) {
            // Counted before the sender drops: the thread uncounts itself
            // when it finishes and finds its inbox closed.
            self.abandoned.fetch_add(1, Ordering::AcqRel);
            *worker = None;
            tracing::warn!(
                generation,
                "a routing rule overran its deadline; its thread is abandoned"
            );
        }
    }
}

/// The evaluation thread: takes jobs until its inbox closes (it was
/// abandoned, or the process ends), keeping compiled sets by their text.
fn work(inbox: mpsc::Receiver<Job>, abandoned: Arc<AtomicUsize>) {
    let mut cache: HashMap<String, Compiled> = HashMap::new();
    while let Ok(job) = inbox.recv() {
        let key = job.rules.to_json().to_string();
        if !cache.contains_key(&key) {
            if cache.len() >= CACHE_SETS {
                cache.clear();
            }
            match job.rules.compile() {
                Ok(compiled) => {
                    cache.insert(key.clone(), compiled);
                }
                Err(e) => {
                    let _ = job.reply.send(Evaluation {
                        verdict: job.rules.failed(0),
                        trace: vec![Outcome::Error(e.to_string())],
                    });
                    continue;
                }
            }
        }
        let Some(compiled) = cache.get(&key) else {
            continue;
        };
        let evaluation = job.rules.evaluate(compiled, &job.input, Some(job.deadline));
        // A caller that gave up no longer listens; nothing to tell it.
        let _ = job.reply.send(evaluation);
    }
    // The inbox closes only when the runner abandoned this thread (counted
    // then): it uncounts itself as it ends.
    abandoned
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
        .ok();
}

/// What a dry run found: the decision the rules would make on a stored
/// delivery, and what each rule that ran did.
#[derive(Debug, Clone)]
pub struct DryRun {
    /// `accepted`, `dropped` or `quarantined`.
    pub decision: crate::domain::intake::Decision,
    /// The queue of an accepted delivery.
    pub queue: Option<String>,
    /// The rule that decided (`rules[2]`), if one did.
    pub rule: Option<String>,
    /// `senders`, `rule`, `on_error` or `default`.
    pub by: &'static str,
    pub trace: Vec<Outcome>,
}

/// Evaluates `candidate` rules (`{"rules", "default"?, "on_error"?}`), or
/// the saved ones, on one of the webhook's stored deliveries, after its
/// current senders. Stores nothing.
pub async fn dry_run(
    delivery: &Delivery,
    human_id: &str,
    webhook_id: &str,
    delivery_id: &str,
    candidate: Option<&Value>,
) -> Result<DryRun, SaveRulesError> {
    use crate::domain::intake::Decision;
    use crate::domain::rules::{Action, rule_input};
    let store = delivery.store();
    let webhook = store.get_webhook(human_id, webhook_id).await?;
    let record = store.get_delivery(human_id, delivery_id).await?;
    if record.webhook_id != webhook.id {
        // Another webhook's delivery is not this one's: as if missing.
        return Err(StoreError::NotFound.into());
    }
    let Some(body) = record.body.as_deref() else {
        return Err(StoreError::conflict(
            "a refused delivery was never verified; there is nothing to evaluate",
        )
        .into());
    };
    if !webhook.senders.admits(&record.envelope) {
        return Ok(DryRun {
            decision: Decision::Quarantined,
            queue: None,
            rule: None,
            by: "senders",
            trace: Vec::new(),
        });
    }
    let rules = match candidate {
        Some(body) => parse_for(delivery, &webhook, body).await?,
        None => webhook.rules.clone().unwrap_or_default(),
    };
    let input = rule_input(&record.envelope, &record.headers, body);
    let evaluation = evaluate(Arc::new(rules), input).await;
    let rule = evaluation.verdict.rule_label();
    let (decision, queue) = match evaluation.verdict.action {
        None => (Decision::Accepted, Some(webhook.queue.clone())),
        Some(Action::Queue(q)) => (Decision::Accepted, Some(q)),
        Some(Action::Drop) => (Decision::Dropped, None),
        Some(Action::Quarantine) => (Decision::Quarantined, None),
    };
    Ok(DryRun {
        decision,
        queue,
        rule,
        by: evaluation.verdict.by,
        trace: evaluation.trace,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::rules::{Action, OnError};

    fn rules(condition: &str) -> Arc<RuleSet> {
        Arc::new(
            RuleSet::parse(&json!({"rules": [{"if": condition, "then": {"drop": true}}]})).unwrap(),
        )
    }

    /// A product over the payload spends no step; the caller's deadline
    /// cuts it, the thread is abandoned, and the next delivery is decided
    /// on a fresh thread.
    #[tokio::test]
    async fn an_evaluation_past_its_deadline_is_abandoned_and_fails_closed() {
        let heavy = rules(".payload[] as $a | .payload[] as $b | .payload[] as $c | select(false)");
        // 8 million iterations: far past 250 ms, and ended within seconds.
        let payload: Vec<u32> = (0..200).collect();
        let started = Instant::now();
        let cut = evaluate_within(
            heavy,
            json!({"payload": payload}),
            Duration::from_millis(200),
            Duration::from_millis(50),
        )
        .await;
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(cut.verdict.action, Some(Action::Quarantine));
        assert_eq!(
            cut.trace,
            vec![Outcome::Error("time budget exceeded".into())]
        );
        assert!(runner().abandoned.load(Ordering::Acquire) >= 1);

        let next = evaluate(rules(".event == \"push\""), json!({"event": "push"})).await;
        assert_eq!(next.verdict.action, Some(Action::Drop), "{next:?}");
        assert_eq!(rules("true").on_error, OnError::Quarantine);
    }
}
