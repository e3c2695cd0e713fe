//! Notify hooks as hearers (`docs/doorbells.md`, "Notify hooks"): an
//! endpoint's URLs that get a payload-free, signed POST when it is rung.
//!
//! A ring to a hook is decided like any ring (presence, the one-ring claim,
//! the sweep's budget); [`Hooks`] then delivers it in a task of its own, so
//! the ring path never waits on a target: up to [`TRIES`] tries with
//! backoff, each logged; a final failure counts against the hook, and the
//! [`DISABLE_AFTER`]th in a row disables it.
//!
//! Every instance keeps the set of endpoints with an enabled hook (loaded
//! at start, after a bus gap, and on every `HooksChanged` message): such an
//! endpoint is hosted on every instance, for the ring claim and the sweep.

pub mod client;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use crate::bus::{Bus, Message};
use crate::delivery::sessions::AnswerLabels;
use crate::domain::hook::{DISABLE_AFTER, HookBody, HookEvent, TRIES, sign};
use crate::store::{HookDelivery, HookTarget, RingCandidate, Store};

/// How hooks are delivered (`--allow-private-hooks`, the retry backoff).
#[derive(Debug, Clone)]
pub struct HookConfig {
    /// Whether private, loopback and link-local targets may be reached.
    pub allow_private: bool,
    /// The wait before the second try; each later wait is four times longer.
    pub retry_after: Duration,
}

impl Default for HookConfig {
    fn default() -> Self {
        Self {
            allow_private: false,
            retry_after: Duration::from_secs(1),
        }
    }
}

/// The labels of `switchboard_hook_deliveries_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// `ok`, `failed` or `refused`.
    pub outcome: &'static str,
}

/// Every outcome of a delivery, shown (at zero) from the start.
pub const OUTCOMES: [&str; 3] = ["ok", "failed", "refused"];

/// How one try (or a whole delivery) ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A 2xx: received.
    Ok { status: u16 },
    /// Any other status (a redirect included: none is followed).
    Status { status: u16 },
    /// No answer: connect, TLS, timeout.
    Error { error: String },
    /// The target's address is private (and that is not allowed).
    Refused { error: String },
}

impl Outcome {
    pub fn label(&self) -> &'static str {
        match self {
            Self::Ok { .. } => "ok",
            Self::Status { .. } | Self::Error { .. } => "failed",
            Self::Refused { .. } => "refused",
        }
    }

    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Ok { status } | Self::Status { status } => Some(*status),
            _ => None,
        }
    }

    pub fn error(&self) -> Option<&str> {
        match self {
            Self::Error { error } | Self::Refused { error } => Some(error),
            _ => None,
        }
    }
}

/// A finished delivery: its last try's outcome, how long that try took,
/// and how many tries it made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    pub outcome: Outcome,
    pub duration_ms: i64,
    pub tries: u32,
}

pub struct Hooks {
    store: Arc<dyn Store>,
    bus: Arc<dyn Bus>,
    client: reqwest::Client,
    config: HookConfig,
    /// Active endpoints with at least one enabled hook.
    hooked: RwLock<HashSet<String>>,
    /// Per endpoint: where the next round-robin pick starts.
    cursors: Mutex<HashMap<String, usize>>,
    /// `switchboard_hook_deliveries_total` (the registry holds a clone).
    pub deliveries: Family<OutcomeLabels, Counter>,
    /// `switchboard_rings_answered_total`, shared with the sessions: a
    /// ring's 2xx is `hook`/`acknowledged`, its final failure `unheard`.
    answers: Family<AnswerLabels, Counter>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("config", &self.config)
            .field("hooked", &self.hooked_endpoints().len())
            .finish_non_exhaustive()
    }
}

impl Hooks {
    pub fn new(
        store: Arc<dyn Store>,
        bus: Arc<dyn Bus>,
        config: HookConfig,
        answers: Family<AnswerLabels, Counter>,
    ) -> Self {
        let deliveries = Family::<OutcomeLabels, Counter>::default();
        for outcome in OUTCOMES {
            let _ = deliveries.get_or_create(&OutcomeLabels { outcome });
        }
        Self {
            store,
            bus,
            client: client::build(config.allow_private),
            config,
            hooked: RwLock::new(HashSet::new()),
            cursors: Mutex::new(HashMap::new()),
            deliveries,
            answers,
        }
    }

    pub fn config(&self) -> &HookConfig {
        &self.config
    }

    /// Whether the endpoint has an enabled hook (as this instance knows).
    pub fn hooked(&self, endpoint_id: &str) -> bool {
        self.hooked
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains(endpoint_id)
    }

    /// Endpoints with an enabled hook.
    pub fn hooked_endpoints(&self) -> Vec<String> {
        self.hooked
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// Reads the whole set again (at start, after a bus gap).
    pub async fn reload(&self) {
        match self.store.unscoped_hooked_endpoints().await {
            Ok(ids) => {
                *self.hooked.write().unwrap_or_else(|p| p.into_inner()) = ids.into_iter().collect();
            }
            Err(e) => tracing::warn!(error = %e, "could not read the endpoints with hooks"),
        }
    }

    /// Reads one endpoint's place in the set again (its hooks changed).
    pub async fn refresh(&self, endpoint_id: &str) {
        match self.store.unscoped_enabled_hooks(endpoint_id).await {
            Ok(hooks) => self.set_hooked(endpoint_id, !hooks.is_empty()),
            Err(e) => {
                tracing::warn!(endpoint = %endpoint_id, error = %e, "could not read an endpoint's hooks")
            }
        }
    }

    /// The endpoint was revoked (or deleted): it is hosted here no more.
    pub fn forget(&self, endpoint_id: &str) {
        self.set_hooked(endpoint_id, false);
    }

    fn set_hooked(&self, endpoint_id: &str, hooked: bool) {
        let mut set = self.hooked.write().unwrap_or_else(|p| p.into_inner());
        if hooked {
            set.insert(endpoint_id.to_owned());
        } else {
            set.remove(endpoint_id);
        }
    }

    /// Delivers a todo's ring to one enabled hook of its endpoint
    /// (round-robin), in a task of its own.
    pub fn ring(self: &Arc<Self>, todo: &RingCandidate, rering: bool) {
        let hooks = self.clone();
        let todo = todo.clone();
        tokio::spawn(async move {
            let Some(target) = hooks.pick(&todo.endpoint_id).await else {
                return;
            };
            let event = if rering {
                HookEvent::TodoRering
            } else {
                HookEvent::TodoReady
            };
            let mut body = HookBody::new(event, &target.endpoint_slug);
            body.todo_id = Some(todo.id.clone());
            body.queue = Some(todo.queue.clone());
            body.kind = todo.kind.clone();
            hooks
                .deliver(&target, event, &body, Some(&todo.id), TRIES, true)
                .await;
        });
    }

    /// Delivers a digest (`pending` todos waited; `reason`) to one enabled
    /// hook of the endpoint, in a task of its own.
    pub fn digest(self: &Arc<Self>, endpoint_id: &str, pending: i64, reason: &'static str) {
        let hooks = self.clone();
        let endpoint_id = endpoint_id.to_owned();
        tokio::spawn(async move {
            let Some(target) = hooks.pick(&endpoint_id).await else {
                return;
            };
            let mut body = HookBody::new(HookEvent::Digest, &target.endpoint_slug);
            body.pending = Some(pending);
            body.reason = Some(reason);
            hooks
                .deliver(&target, HookEvent::Digest, &body, None, TRIES, true)
                .await;
        });
    }

    /// A human's test: one try, now, answered; logged, counted in the
    /// metrics, and not counted against the hook.
    pub async fn test(&self, target: &HookTarget) -> Delivered {
        let body = HookBody::new(HookEvent::Test, &target.endpoint_slug);
        self.deliver(target, HookEvent::Test, &body, None, 1, false)
            .await
    }

    /// A test doorbell (`doctor --ring`) to the endpoint's next hook in
    /// turn: which hook, and what its one try got.
    pub async fn test_ring(&self, endpoint_id: &str) -> Option<(HookTarget, Delivered)> {
        let target = self.pick(endpoint_id).await?;
        let delivered = self.test(&target).await;
        Some((target, delivered))
    }

    /// The next enabled hook of the endpoint in turn, if it has any.
    async fn pick(&self, endpoint_id: &str) -> Option<HookTarget> {
        let targets = match self.store.unscoped_enabled_hooks(endpoint_id).await {
            Ok(targets) => targets,
            Err(e) => {
                tracing::warn!(endpoint = %endpoint_id, error = %e, "hook ring skipped: hooks unreadable");
                return None;
            }
        };
        if targets.is_empty() {
            // Disabled or deleted since this instance last heard.
            self.set_hooked(endpoint_id, false);
            tracing::debug!(endpoint = %endpoint_id, "hook ring dropped: no enabled hook");
            return None;
        }
        let start = {
            let mut cursors = self.cursors.lock().unwrap_or_else(|p| p.into_inner());
            let cursor = cursors.entry(endpoint_id.to_owned()).or_insert(0);
            let start = *cursor % targets.len();
            *cursor = cursor.wrapping_add(1);
            start
        };
        targets.into_iter().nth(start)
    }

    /// Up to `tries` tries, each logged; then the hook's failure count.
    async fn deliver(
        &self,
        target: &HookTarget,
        event: HookEvent,
        body: &HookBody,
        todo_id: Option<&str>,
        tries: u32,
        counts: bool,
    ) -> Delivered {
        let bytes = body.to_bytes();
        // One id per delivery, the same on every try (receivers dedup by it).
        let message_id = crate::mint::new_id("msg");
        let mut wait = self.config.retry_after;
        let mut attempt = 0;
        let (outcome, duration_ms) = loop {
            attempt += 1;
            let at = self.store.clock().now();
            let started = Instant::now();
            let outcome = self.post(target, &message_id, &bytes).await;
            let duration_ms = started.elapsed().as_millis() as i64;
            let record = HookDelivery {
                hook_id: target.hook.id.clone(),
                at,
                event: event.as_str().to_owned(),
                todo_id: todo_id.map(str::to_owned),
                outcome: outcome.label().to_owned(),
                status: outcome.status().map(i64::from),
                error: outcome.error().map(str::to_owned),
                duration_ms,
                attempt: i64::from(attempt),
            };
            if let Err(e) = self.store.unscoped_record_hook_delivery(&record).await {
                tracing::warn!(hook = %target.hook.id, error = %e, "could not log a hook delivery");
            }
            let retry = matches!(outcome, Outcome::Status { .. } | Outcome::Error { .. });
            if !retry || attempt >= tries {
                break (outcome, duration_ms);
            }
            tokio::time::sleep(wait).await;
            wait *= 4;
        };
        self.deliveries
            .get_or_create(&OutcomeLabels {
                outcome: outcome.label(),
            })
            .inc();
        tracing::debug!(
            hook = %target.hook.id,
            endpoint = %target.endpoint_slug,
            event = event.as_str(),
            outcome = outcome.label(),
            tries = attempt,
            "hook delivery"
        );
        if counts {
            let answer = if matches!(outcome, Outcome::Ok { .. }) {
                "acknowledged"
            } else {
                "unheard"
            };
            self.answers
                .get_or_create(&AnswerLabels {
                    hearer: "hook",
                    answer,
                })
                .inc();
            self.settle(target, &outcome).await;
        }
        Delivered {
            outcome,
            duration_ms,
            tries: attempt,
        }
    }

    /// A received delivery resets the hook's failures; a failed one counts,
    /// and the one that reaches [`DISABLE_AFTER`] disables the hook.
    async fn settle(&self, target: &HookTarget, outcome: &Outcome) {
        let hook_id = &target.hook.id;
        if let Outcome::Ok { .. } = outcome {
            if target.hook.consecutive_failures > 0
                && let Err(e) = self.store.unscoped_hook_succeeded(hook_id).await
            {
                tracing::warn!(hook = %hook_id, error = %e, "could not reset a hook's failures");
            }
            return;
        }
        let reason = format!("{DISABLE_AFTER} deliveries in a row failed");
        match self
            .store
            .unscoped_hook_failed(hook_id, DISABLE_AFTER, &reason)
            .await
        {
            Ok(failure) if failure.disabled_now => {
                tracing::warn!(
                    hook = %hook_id,
                    endpoint = %target.endpoint_slug,
                    failures = failure.consecutive_failures,
                    "a notify hook failed {DISABLE_AFTER} deliveries in a row; it is disabled until \
                     a human enables it again"
                );
                let endpoint_id = &target.hook.endpoint_id;
                self.refresh(endpoint_id).await;
                self.bus.publish(Message::HooksChanged {
                    endpoint_id: endpoint_id.clone(),
                });
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(hook = %hook_id, error = %e, "could not count a hook's failure")
            }
        }
    }

    /// One signed POST.
    async fn post(&self, target: &HookTarget, message_id: &str, body: &[u8]) -> Outcome {
        let url = match reqwest::Url::parse(&target.hook.url) {
            Ok(url) => url,
            Err(e) => {
                return Outcome::Error {
                    error: format!("invalid url: {e}"),
                };
            }
        };
        if !self.config.allow_private
            && let Some(refused) = client::refuse_literal(&url)
        {
            return Outcome::Refused {
                error: refused.to_string(),
            };
        }
        let timestamp = self.store.clock().now().as_millis().div_euclid(1000);
        let signature = sign(&target.secret, message_id, timestamp, body);
        let sent = self
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("webhook-id", message_id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(body.to_vec())
            .send()
            .await;
        match sent {
            Ok(response) => {
                let status = response.status().as_u16();
                if response.status().is_success() {
                    Outcome::Ok { status }
                } else {
                    Outcome::Status { status }
                }
            }
            Err(e) if client::is_refusal(&e) => Outcome::Refused {
                error: client::PrivateAddress(target_host(&target.hook.url).unwrap_or_default())
                    .to_string(),
            },
            Err(e) => Outcome::Error {
                error: client::describe(&e),
            },
        }
    }
}

fn target_host(url: &str) -> Option<String> {
    reqwest::Url::parse(url).ok()?.host_str().map(str::to_owned)
}
