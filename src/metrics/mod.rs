//! `/metrics`: Prometheus (OpenMetrics text) exposition of one server.
//!
//! One [`Registry`] per server, held in [`Metrics`] in the server state; no
//! global registry. Counters are kept where the events happen (doorbell rings
//! and drops in [`crate::delivery::hub::RingCounters`], lease expiries by the
//! maintenance loop, HTTP requests by a middleware layer); gauges are computed
//! at scrape time from the session registry and the store.
//!
//! No label ever carries an id, a token, a slug or a title: every label value
//! is one of a fixed set, a route template, or a status code. See
//! `docs/metrics.md` for the families.

pub mod http;
pub mod process;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::bus::InstanceId;
use crate::bus::pg::PgBusStats;
use crate::delivery::Doorbells;
use crate::delivery::sessions::{AnswerLabels, Session};
use crate::delivery::{DropLabels, EventCounters, RingLabels};
use crate::domain::Timestamp;
use crate::domain::lease::effective_lease_seconds;
use crate::domain::liveness::{self, Condition, Subject};
use crate::domain::todo::TodoState;
use crate::store::{LivenessInputs, Store, StoreResult};

/// `Content-Type` of a scrape answer.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// At most this many active endpoints are read for `switchboard_endpoints`
/// per scrape (by id); beyond it the counts cover the first ones only.
pub const ENDPOINT_CAP: usize = 10_000;

/// Every drop reason of `docs/doorbells.md`, shown (at zero) before the first drop.
pub const DROP_REASONS: [&str; 4] = ["no_session", "buffer_full", "write_failed", "presence_out"];

/// The `state` labels of `switchboard_sessions`.
const SESSION_STATES: [&str; 3] = ["attached", "streaming", "deaf"];

/// The route label of a request that matched no route.
pub const UNMATCHED: &str = "unmatched";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConditionLabels {
    condition: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    /// A route template (`/api/v1/endpoints/{reference}`) or `unmatched`.
    route: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpDurationLabels {
    /// A route template or `unmatched`, as in `switchboard_http_requests_total`.
    route: String,
    /// `GET`, `POST`, … or `other`.
    method: &'static str,
    /// `1xx` … `5xx`.
    status: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Buckets of `switchboard_http_request_duration_seconds`: 1 ms to 10 s.
fn http_duration_histogram() -> Histogram {
    Histogram::new([
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ])
}

/// A method label from a fixed set (a client can send any token).
pub fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// `2xx` for 204, and so on.
pub fn status_class(status: u16) -> &'static str {
    match status {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    schema: String,
}

/// The conditions `switchboard_endpoints` counts: those of active endpoints
/// (a revoked endpoint is not counted).
const ENDPOINT_CONDITIONS: [Condition; 6] = [
    Condition::Off,
    Condition::Unknown,
    Condition::Stale,
    Condition::Deaf,
    Condition::Working,
    Condition::Idle,
];

/// The optional scrape token, kept only as its SHA-256 digest.
#[derive(Clone)]
pub struct ScrapeToken {
    digest: [u8; 32],
}

impl ScrapeToken {
    /// `None` for an empty token: an empty token protects nothing.
    pub fn new(token: &str) -> Option<Self> {
        let token = token.trim();
        (!token.is_empty()).then(|| Self {
            digest: Sha256::digest(token.as_bytes()).into(),
        })
    }

    /// Whether an `Authorization` header value carries this token as a
    /// bearer credential. The comparison is constant-time over digests, so
    /// neither the token's content nor its length leaks through timing.
    pub fn allows(&self, authorization: Option<&[u8]>) -> bool {
        let Some(presented) = authorization.and_then(bearer) else {
            return false;
        };
        let digest: [u8; 32] = Sha256::digest(presented).into();
        digest.ct_eq(&self.digest).into()
    }
}

/// The credential of `Bearer <credential>` (the scheme is case-insensitive).
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let credential = rest.trim_ascii();
    (!credential.is_empty()).then_some(credential)
}

/// The `route` label of a request: its route template, or [`UNMATCHED`]
/// (no route, or only axum's internal catch-all of a nested fallback).
pub fn route_label(matched: Option<&str>) -> String {
    crate::http::access_log::matched_template(matched)
        .unwrap_or(UNMATCHED)
        .to_owned()
}

/// Sessions on this instance: attached, streaming, deaf.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SessionTally {
    pub attached: i64,
    pub streaming: i64,
    pub deaf: i64,
}

/// Counts sessions by state, and collects the endpoints all of whose
/// sessions here are deaf.
pub fn tally_sessions(
    sessions: &[std::sync::Arc<Session>],
    is_deaf: impl Fn(&Session) -> bool,
) -> (SessionTally, std::collections::HashSet<String>) {
    let mut tally = SessionTally::default();
    // Per endpoint: (attached, deaf).
    let mut per_endpoint: HashMap<&str, (usize, usize)> = HashMap::new();
    for session in sessions {
        let deaf = is_deaf(session);
        tally.attached += 1;
        tally.streaming += i64::from(session.is_streaming());
        tally.deaf += i64::from(deaf);
        let entry = per_endpoint.entry(&session.endpoint_id).or_default();
        entry.0 += 1;
        entry.1 += usize::from(deaf);
    }
    let all_deaf = per_endpoint
        .into_iter()
        .filter(|(_, (attached, deaf))| {
            crate::domain::liveness::every_hearer_deaf(false, *attached, *deaf)
        })
        .map(|(id, _)| id.to_owned())
        .collect();
    (tally, all_deaf)
}

/// The liveness condition of one active endpoint from its stored inputs.
pub fn endpoint_condition(
    inputs: &LivenessInputs,
    all_sessions_deaf: bool,
    now: Timestamp,
) -> Condition {
    liveness::assess(
        &Subject {
            kind: inputs.agent_kind.as_str(),
            expected_interval_seconds: inputs.agent_expected_interval_seconds,
            effective_lease_seconds: effective_lease_seconds(inputs.default_lease_ttl_seconds),
            revoked: false,
            presence_out: inputs.presence_out,
            last_seen: inputs.last_seen_at,
            all_sessions_deaf,
            holds_claim: inputs.holds_claim,
        },
        now,
    )
    .condition
}

/// How many endpoints are in each condition (keyed by its name).
pub fn count_conditions(
    endpoints: &[LivenessInputs],
    all_deaf: impl Fn(&str) -> bool,
    now: Timestamp,
) -> HashMap<&'static str, i64> {
    let mut counts: HashMap<&'static str, i64> = HashMap::new();
    for inputs in endpoints {
        let condition = endpoint_condition(inputs, all_deaf(&inputs.endpoint_id), now);
        *counts.entry(condition.as_str()).or_default() += 1;
    }
    counts
}

/// Seconds from `created` to `now`, never negative (clocks of several
/// instances may differ a little).
pub fn age_seconds(created: Timestamp, now: Timestamp) -> f64 {
    (now.as_millis() - created.as_millis()).max(0) as f64 / 1000.0
}

/// The server's metrics: its registry and the handles that update it.
pub struct Metrics {
    registry: Registry,
    token: Option<ScrapeToken>,
    lease_expiries: Counter,
    http_requests: Family<HttpLabels, Counter>,
    http_duration: HistogramFamily<HttpDurationLabels>,
    /// `process_*`: not under the `switchboard_` prefix.
    process: Registry,
    sessions: Family<StateLabels, Gauge>,
    todos: Family<StateLabels, Gauge>,
    dead_letters: Gauge,
    oldest_pending_age: Gauge<f64, AtomicU64>,
    endpoints: Family<ConditionLabels, Gauge>,
    /// One scrape at a time: gauges are set, then encoded, under it.
    scrape: tokio::sync::Mutex<()>,
    /// Whether the endpoint cap was reported already (once per process).
    cap_reported: AtomicBool,
    clock_offset: Gauge<f64, AtomicU64>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InstanceLabels {
    instance: String,
}

impl Metrics {
    /// Builds the server's registry around the doorbells' counters (and the
    /// PostgreSQL bus's, when there is one). `scrape_token`, when set and
    /// not empty, protects `/metrics`.
    pub fn new(
        doorbells: &Doorbells,
        instance: &InstanceId,
        bus_stats: Option<Arc<PgBusStats>>,
        scrape_token: Option<&str>,
    ) -> Self {
        let mut registry = Registry::with_prefix("switchboard");

        let rung = doorbells.counters.rung.clone();
        for trigger in ["created", "retry", "sweep"] {
            let _ = rung.get_or_create(&RingLabels {
                kind: "todo",
                trigger,
            });
        }
        registry.register(
            "doorbells_rung",
            "Doorbells rung, by kind (todo, digest) and trigger",
            rung,
        );
        let dropped = doorbells.counters.dropped.clone();
        for reason in DROP_REASONS {
            let _ = dropped.get_or_create(&DropLabels { reason });
        }
        registry.register(
            "doorbells_dropped",
            "Doorbells dropped (the todo stays pullable), by reason",
            dropped,
        );
        let answers = doorbells.sessions().answers().clone();
        for hearer in ["session", "runner", "hook"] {
            for answer in ["acknowledged", "unheard"] {
                let _ = answers.get_or_create(&AnswerLabels { hearer, answer });
            }
        }
        registry.register(
            "rings_answered",
            "Rings acknowledged (a request from the rung session or runner, or a hook's 2xx, \
             within --unanswered-after) or unheard, by hearer kind",
            answers,
        );

        // Every family shows all its series from the start (an empty family
        // would be left out of the exposition altogether).
        let sessions = Family::<StateLabels, Gauge>::default();
        for state in SESSION_STATES {
            let _ = sessions.get_or_create(&StateLabels { state });
        }
        registry.register(
            "sessions",
            "MCP sessions on this instance: attached, streaming (GET stream open), deaf",
            sessions.clone(),
        );
        let todos = Family::<StateLabels, Gauge>::default();
        for state in TodoState::ALL {
            let _ = todos.get_or_create(&StateLabels {
                state: state.as_str(),
            });
        }
        registry.register(
            "todos",
            "Todos by state, all endpoints (failed includes dead letters)",
            todos.clone(),
        );
        let dead_letters = Gauge::default();
        registry.register(
            "dead_letters",
            "Dead-lettered todos (failed, no retry scheduled), all endpoints",
            dead_letters.clone(),
        );
        let oldest_pending_age = Gauge::<f64, AtomicU64>::default();
        registry.register_with_unit(
            "oldest_pending_age",
            "Age of the oldest pending todo (0 when none is pending)",
            Unit::Seconds,
            oldest_pending_age.clone(),
        );
        let endpoints = Family::<ConditionLabels, Gauge>::default();
        for condition in ENDPOINT_CONDITIONS {
            let _ = endpoints.get_or_create(&ConditionLabels {
                condition: condition.as_str(),
            });
        }
        registry.register(
            "endpoints",
            "Active endpoints by liveness condition",
            endpoints.clone(),
        );
        let lease_expiries = Counter::default();
        registry.register(
            "lease_expiries",
            "Lapsed leases reaped (requeued or dead-lettered) by this instance",
            lease_expiries.clone(),
        );
        let http_requests = Family::<HttpLabels, Counter>::default();
        // The first scrape is counted once it is answered; until then the
        // family shows this one series at zero.
        let _ = http_requests.get_or_create(&HttpLabels {
            route: "/metrics".to_owned(),
            status: 200,
        });
        registry.register(
            "http_requests",
            "HTTP requests answered, by route template and status",
            http_requests.clone(),
        );

        let info = Family::<InstanceLabels, Gauge>::default();
        info.get_or_create(&InstanceLabels {
            instance: instance.to_string(),
        })
        .set(1);
        registry.register(
            "instance",
            "This instance's id (1 per instance; several share one PostgreSQL database)",
            info,
        );
        let clock_offset = Gauge::<f64, AtomicU64>::default();
        registry.register_with_unit(
            "clock_offset",
            "The database server's clock minus this host's, as last measured (0 on SQLite)",
            Unit::Seconds,
            clock_offset.clone(),
        );
        if let Some(stats) = bus_stats {
            registry.register(
                "bus_connected",
                "1 while the cluster bus listener is connected and listening",
                stats.connected.clone(),
            );
            registry.register(
                "bus_reconnects",
                "Times the bus listener reconnected (each followed by a catch-up pass)",
                stats.reconnects.clone(),
            );
            registry.register(
                "bus_published",
                "Bus messages this instance published",
                stats.published.clone(),
            );
            registry.register(
                "bus_received",
                "Bus messages this instance's listener received",
                stats.received.clone(),
            );
            registry.register(
                "bus_dropped",
                "Bus messages not sent (queue full or NOTIFY failed; the loops catch up)",
                stats.dropped.clone(),
            );
            registry.register(
                "bus_ignored",
                "Bus payloads that did not parse (logged and ignored)",
                stats.ignored.clone(),
            );
        }

        let http_duration = register_http_duration(&mut registry);
        register_doorbell_write(&mut registry, doorbells);
        let mut process = Registry::default();
        process::register(&mut process);

        Self {
            registry,
            token: scrape_token.and_then(ScrapeToken::new),
            lease_expiries,
            http_requests,
            http_duration,
            process,
            sessions,
            todos,
            dead_letters,
            oldest_pending_age,
            endpoints,
            scrape: tokio::sync::Mutex::new(()),
            cap_reported: AtomicBool::new(false),
            clock_offset,
        }
    }

    /// The serving loop's connection counts (`server::listen`): kept apart
    /// from [`Metrics::new`] so each family is registered in one place.
    pub fn register_connections(&mut self, stats: &crate::http::connections::ConnectionStats) {
        self.registry.register(
            "http_connections_open",
            "HTTP connections open now",
            stats.open.clone(),
        );
        self.registry.register(
            "http_connections_closed",
            "HTTP connections the server closed, by reason (header_timeout, body_timeout, \
             idle_timeout, evicted_at_cap, stalled)",
            stats.closed.clone(),
        );
        self.registry.register(
            "http_connections_waited_at_cap",
            "New connections that waited for a free slot at --max-connections",
            stats.waited_at_cap.clone(),
        );
    }

    /// `switchboard_hook_deliveries_total`: the notify hooks' counter
    /// (`delivery::hooks`), kept apart from [`Metrics::new`] like the connections'.
    pub fn register_hooks(
        &mut self,
        deliveries: &prometheus_client::metrics::family::Family<
            crate::delivery::hooks::OutcomeLabels,
            prometheus_client::metrics::counter::Counter,
        >,
    ) {
        self.registry.register(
            "hook_deliveries",
            "Notify hook deliveries by final outcome (ok: a 2xx; failed: after every try; \
             refused: a private target)",
            deliveries.clone(),
        );
    }

    /// Records the last measured offset to the database clock.
    pub fn set_clock_offset_ms(&self, offset_ms: i64) {
        self.clock_offset.set(offset_ms as f64 / 1000.0);
    }

    /// Whether `/metrics` asks for a token.
    pub fn is_protected(&self) -> bool {
        self.token.is_some()
    }

    /// Whether a scrape with this `Authorization` header may read the metrics.
    pub fn allows(&self, authorization: Option<&[u8]>) -> bool {
        self.token
            .as_ref()
            .is_none_or(|token| token.allows(authorization))
    }

    /// Counts lapsed leases the reaper handled.
    pub fn count_lease_expiries(&self, n: u64) {
        if n > 0 {
            self.lease_expiries.inc_by(n);
        }
    }

    pub fn lease_expiries(&self) -> u64 {
        self.lease_expiries.get()
    }

    /// Counts one answered request.
    pub fn count_request(&self, route: String, status: u16) {
        self.http_requests
            .get_or_create(&HttpLabels { route, status })
            .inc();
    }

    /// Counts one answered request and how long it took to answer (to the
    /// response head: a stream's lifetime is not its latency).
    pub fn observe_request(
        &self,
        route: String,
        method: &axum::http::Method,
        status: u16,
        elapsed: Duration,
    ) {
        self.http_duration
            .get_or_create(&HttpDurationLabels {
                route: route.clone(),
                method: method_label(method),
                status: status_class(status),
            })
            .observe(elapsed.as_secs_f64());
        self.count_request(route, status);
    }

    /// Registers the event path's throughput counters and `build_info`
    /// (what `Metrics::new` cannot see: the delivery is built beside it).
    pub fn register_delivery(&mut self, counters: &EventCounters, schema: i64) {
        self.registry.register(
            "attempts_finished",
            "Attempts (claims) that ended, by outcome: completed, failed (retry scheduled), \
             dead_letter, released, expired (lease lapsed, requeued)",
            counters.attempts_finished.clone(),
        );
        self.registry.register(
            "todos_created",
            "Todos created (not deduplicated redeliveries), by the sender's trust mode",
            counters.todos_created.clone(),
        );
        self.registry.register(
            "intake_deliveries",
            "Webhook deliveries by decision: accepted, duplicate, dropped, quarantined, refused, \
             and quarantined ones a human released or discarded",
            counters.intake_deliveries.clone(),
        );
        self.registry.register(
            "todo_actions",
            "Todos a human acted on through the API or the board (one or in bulk), by action: \
             retry, release, cancel",
            counters.todo_actions.clone(),
        );
        self.registry.register(
            "oauth_events",
            "OAuth authorization server events: client_registered, code_issued, tokens_issued, \
             tokens_refreshed, refresh_reused (the grant is revoked), connection_revoked, \
             token_refused",
            counters.oauth_events.clone(),
        );
        self.registry.register(
            "claims_held",
            "claim_next calls that found work held by admission, by reason: paused, \
             in_flight_limit, window_budget",
            counters.claims_held.clone(),
        );
        let info = Family::<BuildLabels, Gauge>::default();
        info.get_or_create(&BuildLabels {
            version: env!("CARGO_PKG_VERSION"),
            schema: schema.to_string(),
        })
        .set(1);
        self.registry.register(
            "build_info",
            "1, labelled with this binary's version and the schema version it expects",
            info,
        );
    }

    /// Sets the scrape-time gauges and encodes the whole registry.
    pub async fn render(
        &self,
        store: &dyn Store,
        doorbells: &Doorbells,
        hooked: impl Fn(&str) -> bool,
    ) -> StoreResult<String> {
        let _one_at_a_time = self.scrape.lock().await;
        let (tally, all_deaf) =
            tally_sessions(&doorbells.sessions().hearers(), |s| doorbells.is_deaf(s));
        for (state, n) in
            SESSION_STATES
                .into_iter()
                .zip([tally.attached, tally.streaming, tally.deaf])
        {
            self.sessions.get_or_create(&StateLabels { state }).set(n);
        }

        let stats = store.unscoped_queue_stats().await?;
        let now = store.clock().now();
        for state in TodoState::ALL {
            self.todos
                .get_or_create(&StateLabels {
                    state: state.as_str(),
                })
                .set(stats.by_state.get(state));
        }
        self.dead_letters.set(stats.dead_letters);
        self.oldest_pending_age.set(
            stats
                .oldest_pending_created_at
                .map_or(0.0, |created| age_seconds(created, now)),
        );

        let mut endpoints = store
            .unscoped_liveness_inputs(ENDPOINT_CAP as i64 + 1)
            .await?;
        if endpoints.len() > ENDPOINT_CAP {
            endpoints.truncate(ENDPOINT_CAP);
            if !self
                .cap_reported
                .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                tracing::warn!(
                    cap = ENDPOINT_CAP,
                    "more active endpoints than /metrics reads per scrape; \
                     switchboard_endpoints counts the first {ENDPOINT_CAP} only"
                );
            }
        }
        // An endpoint heard by a hook is not deaf, whatever its sessions.
        let counts = count_conditions(&endpoints, |id| all_deaf.contains(id) && !hooked(id), now);
        for condition in ENDPOINT_CONDITIONS {
            self.endpoints
                .get_or_create(&ConditionLabels {
                    condition: condition.as_str(),
                })
                .set(counts.get(condition.as_str()).copied().unwrap_or(0));
        }

        Ok(self.encode())
    }

    /// The whole exposition: our families, then `process_*`, then `# EOF`.
    fn encode(&self) -> String {
        use prometheus_client::encoding::text::{encode_eof, encode_registry};
        let mut out = String::new();
        encode_registry(&mut out, &self.registry)
            .and_then(|()| encode_registry(&mut out, &self.process))
            .and_then(|()| encode_eof(&mut out))
            .expect("writing to a String cannot fail");
        out
    }
}

/// `switchboard_http_request_duration_seconds{route,method,status}`.
fn register_http_duration(registry: &mut Registry) -> HistogramFamily<HttpDurationLabels> {
    let family: HistogramFamily<HttpDurationLabels> =
        Family::new_with_constructor(http_duration_histogram);
    registry.register_with_unit(
        "http_request_duration",
        "Time to answer an HTTP request (to the response head), by route template, \
         method and status class",
        Unit::Seconds,
        family.clone(),
    );
    family
}

/// `switchboard_doorbell_write_seconds`.
fn register_doorbell_write(registry: &mut Registry, doorbells: &Doorbells) {
    registry.register_with_unit(
        "doorbell_write",
        "From the decision to ring to the doorbell queued on a session's stream",
        Unit::Seconds,
        doorbells.counters.write_seconds.clone(),
    );
}

/// How long a scrape may wait for the database before it answers 503.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::sessions::SessionRegistry;
    use crate::store::AgentKind;

    #[test]
    fn route_labels_are_templates_or_unmatched() {
        assert_eq!(
            route_label(Some("/api/v1/endpoints/{reference}")),
            "/api/v1/endpoints/{reference}"
        );
        assert_eq!(route_label(None), UNMATCHED);
        assert_eq!(
            route_label(Some("/api/v1/{*__private__axum_fallback}")),
            UNMATCHED
        );
        assert_eq!(
            route_label(Some("/api/v1/{*__private__axum_nest_tail_param}")),
            UNMATCHED
        );
    }

    #[test]
    fn scrape_token_needs_the_exact_bearer_credential() {
        let token = ScrapeToken::new("s3cret-token").unwrap();
        assert!(token.allows(Some(b"Bearer s3cret-token")));
        assert!(token.allows(Some(b"bearer s3cret-token")));
        assert!(token.allows(Some(b"BEARER   s3cret-token ")));
        assert!(!token.allows(None));
        assert!(!token.allows(Some(b"s3cret-token")));
        assert!(!token.allows(Some(b"Basic s3cret-token")));
        assert!(!token.allows(Some(b"Bearer s3cret-toke")));
        assert!(!token.allows(Some(b"Bearer s3cret-token2")));
        assert!(!token.allows(Some(b"Bearer ")));
        assert!(!token.allows(Some(b"Bear")));
        assert!(ScrapeToken::new("").is_none());
        assert!(ScrapeToken::new("  ").is_none());
    }

    #[test]
    fn an_unset_token_leaves_metrics_open() {
        let doorbells = Doorbells::new(std::sync::Arc::new(SessionRegistry::new()));
        let open = Metrics::new(&doorbells, &InstanceId("i".into()), None, None);
        assert!(!open.is_protected());
        assert!(open.allows(None));
        let empty = Metrics::new(&doorbells, &InstanceId("i".into()), None, Some(""));
        assert!(!empty.is_protected(), "an empty token protects nothing");
        let closed = Metrics::new(&doorbells, &InstanceId("i".into()), None, Some("t"));
        assert!(closed.is_protected());
        assert!(!closed.allows(None));
        assert!(closed.allows(Some(b"Bearer t")));
    }

    #[tokio::test]
    async fn sessions_are_tallied_and_all_deaf_endpoints_found() {
        let reg = SessionRegistry::new();
        let a1 = reg.create("ep_a", "a", crate::delivery::sessions::Hearer::default());
        let a2 = reg.create("ep_a", "a", crate::delivery::sessions::Hearer::default());
        let b1 = reg.create("ep_b", "b", crate::delivery::sessions::Hearer::default());
        let _stream = reg.open_stream(&a1);
        let deaf = [a2.id.clone(), b1.id.clone()];
        let (tally, all_deaf) = tally_sessions(&reg.all(), |s| deaf.contains(&s.id));
        assert_eq!(
            tally,
            SessionTally {
                attached: 3,
                streaming: 1,
                deaf: 2
            }
        );
        assert!(all_deaf.contains("ep_b"));
        assert!(!all_deaf.contains("ep_a"), "one of ep_a's sessions hears");
    }

    fn inputs(id: &str) -> LivenessInputs {
        LivenessInputs {
            endpoint_id: id.to_owned(),
            agent_kind: AgentKind::Session,
            agent_expected_interval_seconds: None,
            default_lease_ttl_seconds: None,
            last_seen_at: None,
            presence_out: false,
            holds_claim: false,
        }
    }

    #[test]
    fn conditions_are_counted_by_the_liveness_rules() {
        let now = Timestamp::from_millis(100_000_000);
        let recent = Some(now.add_secs(-60));
        let endpoints = vec![
            inputs("ep_unknown"),
            LivenessInputs {
                last_seen_at: recent,
                ..inputs("ep_idle")
            },
            LivenessInputs {
                last_seen_at: recent,
                holds_claim: true,
                ..inputs("ep_working")
            },
            LivenessInputs {
                last_seen_at: recent,
                ..inputs("ep_deaf")
            },
            LivenessInputs {
                last_seen_at: recent,
                presence_out: true,
                ..inputs("ep_deaf_but_off")
            },
            // A task agent is expected within its lease: 60 s here, so
            // 3 minutes of silence is stale.
            LivenessInputs {
                agent_kind: AgentKind::Task,
                default_lease_ttl_seconds: Some(60),
                last_seen_at: Some(now.add_secs(-180)),
                ..inputs("ep_stale")
            },
        ];
        let deaf = ["ep_deaf", "ep_deaf_but_off"];
        let counts = count_conditions(&endpoints, |id| deaf.contains(&id), now);
        let get = |c: Condition| counts.get(c.as_str()).copied().unwrap_or(0);
        assert_eq!(get(Condition::Unknown), 1);
        assert_eq!(get(Condition::Idle), 1);
        assert_eq!(get(Condition::Working), 1);
        assert_eq!(get(Condition::Deaf), 1);
        assert_eq!(get(Condition::Off), 1, "clocked out is never deaf");
        assert_eq!(get(Condition::Stale), 1);
        assert_eq!(get(Condition::Revoked), 0);
    }

    #[test]
    fn ages_are_seconds_and_never_negative() {
        let t = Timestamp::from_millis(10_000);
        assert_eq!(age_seconds(t, Timestamp::from_millis(12_500)), 2.5);
        assert_eq!(age_seconds(t, Timestamp::from_millis(9_000)), 0.0);
    }

    #[test]
    fn every_family_is_exposed_before_anything_happens() {
        let doorbells = Doorbells::new(std::sync::Arc::new(SessionRegistry::new()));
        let metrics = Metrics::new(&doorbells, &InstanceId("i".into()), None, None);
        doorbells
            .counters
            .count_drop(crate::delivery::DropReason::NoSession);
        metrics.count_request("/healthz".into(), 200);
        metrics.count_lease_expiries(2);
        let out = metrics.encode();
        for family in [
            "# TYPE switchboard_doorbells_rung counter",
            "# TYPE switchboard_doorbells_dropped counter",
            "# TYPE switchboard_sessions gauge",
            "# TYPE switchboard_todos gauge",
            "# TYPE switchboard_dead_letters gauge",
            "# TYPE switchboard_oldest_pending_age_seconds gauge",
            "# TYPE switchboard_endpoints gauge",
            "# TYPE switchboard_lease_expiries counter",
            "# TYPE switchboard_http_requests counter",
        ] {
            assert!(out.contains(family), "{family} missing from:\n{out}");
        }
        assert!(out.contains("switchboard_doorbells_dropped_total{reason=\"no_session\"} 1"));
        assert!(out.contains("switchboard_doorbells_dropped_total{reason=\"write_failed\"} 0"));
        assert!(
            out.contains("switchboard_doorbells_rung_total{kind=\"todo\",trigger=\"created\"} 0")
        );
        assert!(out.contains("switchboard_lease_expiries_total 2"));
        assert!(
            out.contains("switchboard_http_requests_total{route=\"/healthz\",status=\"200\"} 1")
        );
        assert!(out.ends_with("# EOF\n"));
    }
}
