//! The background loops every instance runs (`docs/cluster.md`):
//! maintenance (lease reaper, retry scheduler, endpoint expiry, schedules) and retention.
//! Each logs and continues on error, and stops promptly on shutdown.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::delivery::sweep::{SweepConfig, sweep_tick};
use crate::delivery::{AttemptEnd, Delivery};
use crate::mcp::McpConfig;
use crate::metrics::Metrics;
use crate::store::{RetentionCursor, Revoked, Store, TodoRef};

/// How often an instance looks for delayed todos that came due.
const DELAYED_CHECK: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct MaintenanceConfig {
    /// Period of the maintenance tick (default 30 s).
    pub interval: Duration,
    /// Period of the presence evaluator (default 30 s); it also runs right
    /// after every presence write.
    pub presence_interval: Duration,
    /// Terminal todos older than this are deleted (default 30 days).
    pub retention: Duration,
    /// Period of the retention pass (default 1 h; also once at start).
    pub retention_interval: Duration,
    /// Period of writing down the queues' activity (default 5 s; also once
    /// at shutdown).
    pub activity_interval: Duration,
    /// Rows one sweep statement handles; a tick repeats until a batch comes back short.
    pub batch: i64,
    /// Upper bound on batches per sweep per tick, so one tick stays bounded.
    pub max_batches: usize,
    /// Upper bound on retention batches per pass (each its own short transaction).
    pub retention_max_batches: usize,
}

impl Default for MaintenanceConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(30),
            presence_interval: Duration::from_secs(30),
            retention: Duration::from_secs(30 * 86_400),
            retention_interval: Duration::from_secs(3_600),
            activity_interval: Duration::from_secs(5),
            batch: 500,
            max_batches: 20,
            retention_max_batches: 2_000,
        }
    }
}

/// What the background loops work with.
pub struct Background {
    pub delivery: Arc<Delivery>,
    pub maintenance: MaintenanceConfig,
    pub mcp: McpConfig,
    pub sweep: SweepConfig,
    pub metrics: Arc<Metrics>,
}

pub fn spawn_loops(bg: Background, stop: watch::Receiver<bool>) -> Vec<JoinHandle<()>> {
    let Background {
        delivery,
        maintenance: config,
        mcp,
        sweep,
        metrics,
    } = bg;
    let maintenance = {
        let (delivery, config, stop) = (delivery.clone(), config.clone(), stop.clone());
        tokio::spawn(async move {
            every(config.interval, stop, || async {
                let report = maintenance_tick(delivery.store(), &config).await;
                metrics.count_lease_expiries(report.lease_expiries);
                count_lapsed(&delivery, &report);
                // An expired endpoint's sessions end with it.
                for revoked in &report.expired {
                    delivery.endpoint_revoked(&revoked.endpoint_id);
                }
                // A todo back from its retry window rings (not counted).
                for todo in &report.retried {
                    delivery.todo_retried(todo).await;
                }
                sweep_tick(&delivery, &sweep).await;
                schedules_tick(&delivery, config.interval).await;
            })
            .await;
        })
    };
    let evaluator = {
        let (delivery, stop) = (delivery.clone(), stop.clone());
        let period = config.presence_interval;
        tokio::spawn(async move {
            every(period, stop, || async {
                use crate::delivery::presence::{EVALUATOR_PAGE, evaluator_tick};
                evaluator_tick(&delivery, EVALUATOR_PAGE).await;
            })
            .await;
        })
    };
    let janitor = {
        let stop = stop.clone();
        let sessions = delivery.sessions().clone();
        tokio::spawn(async move {
            every(mcp.janitor_interval, stop, || async {
                let closed = sessions.close_idle(mcp.idle_limit);
                if !closed.is_empty() {
                    tracing::info!(closed = closed.len(), "closed idle MCP sessions");
                }
                let ghosts = sessions.close_ghosts();
                if !ghosts.is_empty() {
                    tracing::info!(
                        closed = ghosts.len(),
                        "closed MCP sessions whose client left (stream closed, no request since)"
                    );
                }
            })
            .await;
        })
    };
    // Delayed todos come due on the second (`docs/queue.md`, "Delayed
    // todos"): a read of the earliest `run_at` each second, a write only
    // when something is due.
    let delayed = {
        let (delivery, stop) = (delivery.clone(), stop.clone());
        tokio::spawn(async move {
            every(DELAYED_CHECK, stop, || async {
                if let Err(e) = crate::ops::todos::promote_due(&delivery).await {
                    tracing::error!(error = %e, "delayed todos not promoted");
                }
            })
            .await;
        })
    };
    // The queues' activity is written down every few seconds, and once more
    // when the server stops, so a clean restart loses none of a chart.
    let activity = {
        let (delivery, stop) = (delivery.clone(), stop.clone());
        let period = config.activity_interval;
        tokio::spawn(async move {
            every(period, stop, || flush_activity(&delivery)).await;
            flush_activity(&delivery).await;
        })
    };
    let retention = tokio::spawn(async move {
        every(config.retention_interval, stop, || async {
            retention_pass(delivery.store(), &config).await;
            if let Err(e) = crate::ops::activity::prune(&delivery).await {
                tracing::error!(error = %e, "queue activity retention failed");
            }
            if let Err(e) = crate::ops::oauth::prune(&delivery).await {
                tracing::error!(error = %e, "oauth codes and tokens retention failed");
            }
        })
        .await;
    });
    vec![
        maintenance,
        evaluator,
        janitor,
        delayed,
        activity,
        retention,
    ]
}

/// Counts the attempts a tick ended by their lapsed leases: for `/metrics`
/// and for the queues' charts.
pub fn count_lapsed(delivery: &Delivery, report: &TickReport) {
    delivery.attempts_finished(AttemptEnd::Expired, report.expired_requeued);
    delivery.attempts_finished(AttemptEnd::DeadLetter, report.expired_dead_lettered);
    let now = delivery.store().clock().now();
    for (todo, dead) in &report.lapsed {
        delivery.activity().failed(todo, now, *dead);
    }
}

async fn flush_activity(delivery: &Delivery) {
    if let Err(e) = crate::ops::activity::flush(delivery).await {
        tracing::warn!(error = %e, "queue activity not written down; kept for the next try");
    }
}

/// Makes the todos of due schedules (`docs/queue.md`, "Recurring todos"),
/// bounded per tick; an occurrence later than two ticks counts as missed.
pub async fn schedules_tick(delivery: &Delivery, interval: Duration) {
    use crate::domain::schedule::on_time_grace;
    use crate::ops::schedules::{DUE_PER_TICK, run_due};
    if let Err(e) = run_due(delivery, on_time_grace(interval), DUE_PER_TICK).await {
        tracing::error!(error = %e, "schedule due-check failed");
    }
}

/// Resolves once `stop` turns true (or its sender is gone).
pub async fn stopped(stop: &mut watch::Receiver<bool>) {
    while !*stop.borrow_and_update() {
        if stop.changed().await.is_err() {
            return;
        }
    }
}

/// Runs `tick` now and then every `period` until `stop` turns true.
async fn every<F, Fut>(period: Duration, mut stop: watch::Receiver<bool>, mut tick: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => tick().await,
            _ = stopped(&mut stop) => return,
        }
    }
}

/// What one maintenance tick changed that others must act on.
#[derive(Debug, Default)]
pub struct TickReport {
    /// Endpoints that expired (their sessions must close).
    pub expired: Vec<Revoked>,
    /// Todos whose retry window elapsed (they ring again).
    pub retried: Vec<TodoRef>,
    /// Lapsed leases reaped (requeued plus dead-lettered).
    pub lease_expiries: u64,
    /// Of those, requeued and dead-lettered.
    pub expired_requeued: u64,
    pub expired_dead_lettered: u64,
    /// The todos of those leases, and whether each became a dead letter
    /// (for the queues' charts).
    pub lapsed: Vec<(TodoRef, bool)>,
}

/// One maintenance tick: reap lapsed leases, requeue due retries, expire endpoints.
pub async fn maintenance_tick(store: &dyn Store, config: &MaintenanceConfig) -> TickReport {
    let mut report = TickReport::default();
    for _ in 0..config.max_batches {
        match store.unscoped_reap_lapsed_leases(config.batch).await {
            Ok(reaped) => {
                let n = reaped.requeued.len() + reaped.dead_lettered.len();
                report.lease_expiries += n as u64;
                report.expired_requeued += reaped.requeued.len() as u64;
                report.expired_dead_lettered += reaped.dead_lettered.len() as u64;
                let requeued = reaped.requeued.iter().map(|t| (t.clone(), false));
                let dead = reaped.dead_lettered.iter().map(|t| (t.clone(), true));
                report.lapsed.extend(requeued.chain(dead));
                if n > 0 {
                    tracing::info!(
                        requeued = reaped.requeued.len(),
                        dead_lettered = reaped.dead_lettered.len(),
                        "reaped lapsed leases"
                    );
                }
                if (n as i64) < config.batch {
                    break;
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "lease reaper failed");
                break;
            }
        }
    }
    for _ in 0..config.max_batches {
        match store.unscoped_schedule_due_retries(config.batch).await {
            Ok(requeued) => {
                if !requeued.is_empty() {
                    tracing::info!(requeued = requeued.len(), "retry windows elapsed");
                }
                let done = (requeued.len() as i64) < config.batch;
                report.retried.extend(requeued);
                if done {
                    break;
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "retry scheduler failed");
                break;
            }
        }
    }
    match store.unscoped_expire_endpoints(config.batch).await {
        Ok(expired) => {
            for revoked in &expired {
                tracing::info!(
                    endpoint = %revoked.endpoint_id,
                    dead_lettered = revoked.dead_lettered,
                    "endpoint expired"
                );
            }
            report.expired = expired;
        }
        Err(e) => tracing::error!(error = %e, "endpoint expiry failed"),
    }
    report
}

/// Deletes finished history older than the retention age, in batches.
pub async fn retention_pass(store: &dyn Store, config: &MaintenanceConfig) {
    let mut total = 0;
    let mut after = RetentionCursor::start();
    for _ in 0..config.retention_max_batches {
        match store
            .unscoped_prune_terminal_todos(config.retention, config.batch, &after)
            .await
        {
            Ok(pruned) => {
                total += pruned.deleted;
                match pruned.resume_after {
                    Some(next) if (pruned.deleted as i64) >= config.batch => after = next,
                    _ => break,
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "retention pass failed");
                break;
            }
        }
    }
    if total > 0 {
        tracing::info!(deleted = total, "pruned finished todos past retention");
    }
    // Webhook deliveries follow the todos' retention, in batches of their own.
    let mut deliveries = 0;
    for _ in 0..config.retention_max_batches {
        match store
            .unscoped_prune_deliveries(config.retention, config.batch)
            .await
        {
            Ok(deleted) => {
                deliveries += deleted;
                if (deleted as i64) < config.batch {
                    break;
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "delivery retention failed");
                break;
            }
        }
    }
    if deliveries > 0 {
        tracing::info!(
            deleted = deliveries,
            "pruned webhook deliveries past retention"
        );
    }
}
