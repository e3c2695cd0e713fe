//! The PostgreSQL bus: `LISTEN/NOTIFY` on one channel of the database.
//!
//! - One dedicated listening connection, opened from the database URL (not
//!   the store's pool, whose connections come and go).
//! - Publishing never waits: messages go through a bounded queue to a
//!   publisher task with a connection of its own; a full queue or a failed
//!   `NOTIFY` drops the message (a lost message only costs latency).
//! - Keepalive: every `keepalive` period the listener publishes a probe to
//!   itself; when nothing at all has been heard for three periods the
//!   connection is taken for dead and replaced. A silently dropped TCP
//!   connection is therefore noticed within seconds, not hours.
//! - Every (re)connect is followed by a [`BusEvent::Gap`]: a notification sent
//!   while the listener was down is gone, so subscribers catch up from the
//!   database.
//! - A payload that does not parse is logged and ignored.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use std::time::{Duration, Instant};

use std::str::FromStr;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use sqlx::{PgPool, Postgres};
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinHandle;

use super::{Bus, BusEvent, Envelope, InstanceId, Message, Subscription};

/// The one channel every instance of a database listens on.
pub const CHANNEL: &str = "switchboard_bus";

/// Messages waiting to be published before new ones are dropped.
const PUBLISH_QUEUE: usize = 4096;
/// Events a subscriber may fall behind by (then it gets a gap).
const SUBSCRIBER_BUFFER: usize = 4096;
/// PostgreSQL refuses a payload of 8000 bytes or more; ours are ids only.
const MAX_PAYLOAD: usize = 7_999;

#[derive(Debug, Clone)]
pub struct PgBusConfig {
    /// How often the listener probes its own connection.
    pub keepalive: Duration,
    /// First and longest wait between reconnect attempts.
    pub reconnect_min: Duration,
    pub reconnect_max: Duration,
}

impl Default for PgBusConfig {
    fn default() -> Self {
        Self {
            keepalive: Duration::from_secs(5),
            reconnect_min: Duration::from_millis(200),
            reconnect_max: Duration::from_secs(10),
        }
    }
}

/// What the bus reports of itself, kept as the `/metrics` families
/// themselves (the server's registry holds clones).
#[derive(Debug, Default)]
pub struct PgBusStats {
    /// 1 while the listener is connected and listening.
    pub connected: Gauge,
    pub reconnects: Counter,
    pub published: Counter,
    /// Not sent: the queue was full or `NOTIFY` failed.
    pub dropped: Counter,
    /// From other instances and this one (keepalives aside).
    pub received: Counter,
    /// Payloads that did not parse.
    pub ignored: Counter,
}

impl PgBusStats {
    pub fn is_connected(&self) -> bool {
        self.connected.get() == 1
    }
}

#[derive(Debug)]
pub struct PgBus {
    instance: InstanceId,
    outbox: mpsc::Sender<String>,
    events: broadcast::Sender<BusEvent>,
    stats: Arc<PgBusStats>,
}

impl PgBus {
    /// Starts the publisher and the listener; both stop when `stop` turns
    /// true. Never fails on an unreachable database: the listener keeps
    /// retrying with backoff while the instance serves.
    pub fn start(
        url: &str,
        instance: InstanceId,
        config: PgBusConfig,
        stop: watch::Receiver<bool>,
    ) -> (Arc<Self>, Vec<JoinHandle<()>>) {
        let (outbox, inbox) = mpsc::channel(PUBLISH_QUEUE);
        let (events, _) = broadcast::channel(SUBSCRIBER_BUFFER);
        let stats = Arc::new(PgBusStats::default());
        let bus = Arc::new(Self {
            instance,
            outbox,
            events,
            stats,
        });
        let publisher = tokio::spawn(publish_loop(
            url.to_owned(),
            inbox,
            bus.stats.clone(),
            stop.clone(),
        ));
        let listener = tokio::spawn(listen_loop(url.to_owned(), bus.clone(), config, stop));
        (bus, vec![publisher, listener])
    }

    pub fn stats(&self) -> &Arc<PgBusStats> {
        &self.stats
    }

    fn enqueue(&self, envelope: &Envelope) {
        let payload = match encode(envelope) {
            Some(p) => p,
            None => {
                tracing::error!(message = ?envelope.message, "bus payload too large; not sent");
                self.stats.dropped.inc();
                return;
            }
        };
        match self.outbox.try_send(payload) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.stats.dropped.inc();
                tracing::warn!("bus publish queue full; message dropped (the loops catch up)");
            }
            // The publisher has stopped: the server is shutting down (a
            // message then is not lost to a full queue, and says so).
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.stats.dropped.inc();
                tracing::debug!("bus publisher stopped (shutting down); message not sent");
            }
        }
    }
}

impl Bus for PgBus {
    fn instance(&self) -> &InstanceId {
        &self.instance
    }

    fn spans_instances(&self) -> bool {
        true
    }

    fn publish(&self, message: Message) {
        self.enqueue(&Envelope {
            origin: self.instance.clone(),
            message,
        });
    }

    fn subscribe(&self) -> Subscription {
        Subscription::new(self.events.subscribe())
    }
}

/// The wire form: `{"origin": "<instance>", "kind": …, <ids>}`.
#[derive(serde::Serialize, serde::Deserialize)]
struct Wire {
    origin: InstanceId,
    #[serde(flatten)]
    message: Message,
}

fn encode(envelope: &Envelope) -> Option<String> {
    let text = serde_json::to_string(&Wire {
        origin: envelope.origin.clone(),
        message: envelope.message.clone(),
    })
    .ok()?;
    (text.len() <= MAX_PAYLOAD).then_some(text)
}

/// A payload as received; `None` (logged by the caller) when malformed.
pub fn decode(payload: &str) -> Option<Envelope> {
    let wire: Wire = serde_json::from_str(payload).ok()?;
    Some(Envelope {
        origin: wire.origin,
        message: wire.message,
    })
}

async fn publish_loop(
    url: String,
    mut inbox: mpsc::Receiver<String>,
    stats: Arc<PgBusStats>,
    mut stop: watch::Receiver<bool>,
) {
    // Lazily connected and re-connected by the pool itself.
    let pool: PgPool = match PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(2))
        .connect_lazy(&url)
    {
        Ok(pool) => pool,
        Err(e) => {
            tracing::error!(error = %e, "bus publisher cannot use the database URL");
            return;
        }
    };
    loop {
        let payload = tokio::select! {
            p = inbox.recv() => match p { Some(p) => p, None => break },
            _ = stop.changed() => break,
        };
        let sent = sqlx::query::<Postgres>("SELECT pg_notify($1, $2)")
            .bind(CHANNEL)
            .bind(&payload)
            .execute(&pool)
            .await;
        match sent {
            Ok(_) => {
                stats.published.inc();
            }
            Err(e) => {
                stats.dropped.inc();
                tracing::warn!(error = %e, "bus publish failed; message dropped (the loops catch up)");
            }
        }
    }
    pool.close().await;
}

async fn listen_loop(
    url: String,
    bus: Arc<PgBus>,
    config: PgBusConfig,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = config.reconnect_min;
    let mut first = true;
    loop {
        if *stop.borrow() {
            return;
        }
        let listener = tokio::select! {
            l = connect(&url, &bus.instance) => l,
            _ = stop.changed() => return,
        };
        let mut listener = match listener {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?backoff, "bus listener cannot connect; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = stop.changed() => return,
                }
                backoff = (backoff * 2).min(config.reconnect_max);
                continue;
            }
        };
        backoff = config.reconnect_min;
        bus.stats.connected.set(1);
        if first {
            tracing::info!(instance = %bus.instance, "bus listener connected");
        } else {
            bus.stats.reconnects.inc();
            tracing::info!(instance = %bus.instance, "bus listener reconnected; catching up");
        }
        first = false;
        // Whatever was sent while nobody listened is gone: catch up.
        let _ = bus.events.send(BusEvent::Gap);
        let lost = listen(&mut listener, &bus, &config, &mut stop).await;
        bus.stats.connected.set(0);
        match lost {
            Lost::Stopped => return,
            Lost::Connection(why) => {
                tracing::warn!(reason = %why, "bus listener lost its connection; reconnecting")
            }
        }
    }
}

/// The listening connection, named `switchboard-bus-<instance>` in
/// `pg_stat_activity` so an operator can tell whose it is.
async fn connect(url: &str, instance: &InstanceId) -> Result<PgListener, sqlx::Error> {
    let options =
        PgConnectOptions::from_str(url)?.application_name(&format!("switchboard-bus-{instance}"));
    // A pool of one, without timeouts: it only serves to (re)connect.
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .max_lifetime(None)
        .idle_timeout(None)
        .connect_with(options)
        .await?;
    let mut listener = PgListener::connect_with(&pool).await?;
    // A lost connection must come back as `Ok(None)` from `try_recv` at
    // once, for `listen_loop` to reconnect, count it and catch up. With
    // sqlx's eager reconnect, `try_recv` reconnects before returning; when
    // the keepalive tick cancels it meanwhile (`select!`), the next call
    // reconnects silently and the gap is never caught up (seen when
    // PostgreSQL restarts: tests/it/cluster_faults.rs).
    listener.eager_reconnect(false);
    listener.listen(CHANNEL).await?;
    Ok(listener)
}

enum Lost {
    Stopped,
    Connection(String),
}

/// Receives until the connection is lost (or the server stops).
async fn listen(
    listener: &mut PgListener,
    bus: &PgBus,
    config: &PgBusConfig,
    stop: &mut watch::Receiver<bool>,
) -> Lost {
    let started = Instant::now();
    let heard = AtomicI64::new(0); // ms since `started` when last heard from
    let mut probe = tokio::time::interval(config.keepalive);
    probe.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let deadline = config.keepalive * 3;
    loop {
        tokio::select! {
            received = listener.try_recv() => match received {
                Ok(Some(notification)) => {
                    heard.store(started.elapsed().as_millis() as i64, Ordering::Relaxed);
                    deliver(bus, notification.payload());
                }
                // sqlx reconnected underneath: notifications were lost.
                Ok(None) => return Lost::Connection("connection reset".into()),
                Err(e) => return Lost::Connection(e.to_string()),
            },
            _ = probe.tick() => {
                let silent = started.elapsed().saturating_sub(Duration::from_millis(
                    heard.load(Ordering::Relaxed) as u64,
                ));
                if silent > deadline {
                    return Lost::Connection(format!("nothing heard for {silent:?}"));
                }
                bus.publish(Message::Keepalive);
            }
            _ = stop.changed() => return Lost::Stopped,
        }
    }
}

fn deliver(bus: &PgBus, payload: &str) {
    let Some(envelope) = decode(payload) else {
        bus.stats.ignored.inc();
        // The payload may be anything anyone NOTIFYed: log its size only.
        tracing::warn!(bytes = payload.len(), "ignored a malformed bus payload");
        return;
    };
    if envelope.message == Message::Keepalive {
        return;
    }
    bus.stats.received.inc();
    let _ = bus.events.send(BusEvent::Message(envelope));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_round_trips_and_is_small() {
        let envelope = Envelope {
            origin: InstanceId("0192f0c4c0a87b3e9d1c2b3a4f5e6d7c".into()),
            message: Message::TodoReady {
                endpoint_id: "ep_0192f0c4c0a87b3e9d1c2b3a4f5e6d7c".into(),
                todo_id: "td_0192f0c4c0a87b3e9d1c2b3a4f5e6d7c".into(),
                retried: false,
            },
        };
        let text = encode(&envelope).unwrap();
        assert!(text.len() < 200, "{text}");
        assert_eq!(decode(&text), Some(envelope));
    }

    #[test]
    fn malformed_payloads_decode_to_nothing() {
        for bad in [
            "",
            "not json",
            "{}",
            r#"{"origin":"a","kind":"unknown_kind"}"#,
            r#"{"origin":"a","kind":"todo_ready"}"#,
            r#"{"kind":"endpoint_revoked","endpoint_id":"ep_1"}"#,
        ] {
            assert_eq!(decode(bad), None, "{bad:?}");
        }
    }
}
