//! What the queue charts count (`domain::activity`): each write's operation
//! counts its todo into the bucket of when it happened, and a flush writes
//! it down — created, claimed after how long, completed after how long,
//! failed, dead-lettered, by `fail` or by a lapsed lease.

use switchboard::clock::Clock;
use switchboard::domain::activity::{ActivityRange, LatencyHistogram};
use switchboard::ops;
use switchboard::ops::work::NextClaim;
use switchboard::server::maintenance::{MaintenanceConfig, count_lapsed, maintenance_tick};
use switchboard::store::*;

use crate::on_both_backends;
use crate::support::delivery::hub;
use crate::support::{TestStore, fixture};

fn new_todo(endpoint_id: &str, title: &str, max_attempts: i64) -> NewTodo {
    NewTodo {
        max_attempts: Some(max_attempts),
        ..NewTodo::new(endpoint_id, "inbox", title)
    }
}

async fn claim_next(delivery: &switchboard::delivery::Delivery, caller: &Caller, ttl: i64) -> Todo {
    let options = ClaimOptions {
        lease_ttl_seconds: Some(ttl),
        ..ClaimOptions::default()
    };
    match ops::work::claim_next(delivery, caller, None, options)
        .await
        .unwrap()
    {
        NextClaim::Claimed(claimed) => claimed.todo,
        NextClaim::Empty { .. } => panic!("nothing to claim"),
    }
}

fn upper_bound_of(ms: i64) -> i64 {
    let mut h = LatencyHistogram::default();
    h.record(ms);
    h.percentile(0.5).unwrap()
}

async fn each_operation_counts_its_todo_into_the_charts(ts: &TestStore) {
    let store = &*ts.store;
    let f = fixture(store, "ada").await;
    let hub = hub();
    let delivery = hub.on(store);
    let start = ts.clock.now();
    for (title, cap) in [("done", 5), ("dead", 1), ("lapses", 1), ("retried", 5)] {
        ops::todos::create(&delivery, new_todo(&f.endpoint.id, title, cap), None)
            .await
            .unwrap();
    }
    // The first claim waited 30 s, the todo is done 90 s after it was made.
    ts.clock.advance(std::time::Duration::from_secs(30));
    let done = claim_next(&delivery, &f.caller, 300).await;
    ts.clock.advance(std::time::Duration::from_secs(60));
    ops::work::complete(&delivery, &f.caller, &done.id, Finish::default())
        .await
        .unwrap();
    let dead = claim_next(&delivery, &f.caller, 300).await;
    ops::work::fail(&delivery, &f.caller, &dead.id, Finish::default())
        .await
        .unwrap();
    // A lease that lapses on its last attempt: reaped into a dead letter.
    claim_next(&delivery, &f.caller, 10).await;
    let retried = claim_next(&delivery, &f.caller, 300).await;
    ops::work::fail(&delivery, &f.caller, &retried.id, Finish::default())
        .await
        .unwrap();
    ts.clock.advance(std::time::Duration::from_secs(11));
    let report = maintenance_tick(store, &MaintenanceConfig::default()).await;
    assert_eq!(report.expired_dead_lettered, 1);
    count_lapsed(&delivery, &report);

    assert!(ops::activity::flush(&delivery).await.unwrap() > 0);
    assert_eq!(ops::activity::flush(&delivery).await.unwrap(), 0, "drained");
    for range in ActivityRange::ALL {
        let rows = store
            .queue_activity(
                std::slice::from_ref(&f.endpoint.id),
                Some("inbox"),
                range,
                range.first_bucket(ts.clock.now()),
            )
            .await
            .unwrap();
        let mut total = switchboard::domain::activity::Activity::default();
        for row in &rows {
            total.merge(&row.activity);
        }
        assert_eq!(total.created, 4, "{range:?}");
        assert_eq!(total.completed, 1, "{range:?}");
        assert_eq!(total.failed, 3, "fail twice, one lapse: {range:?}");
        assert_eq!(total.dead_lettered, 2, "{range:?}");
        assert_eq!(
            total.claim_latency.count(),
            4,
            "every first claim: {range:?}"
        );
        assert_eq!(
            total.claim_latency.percentile(0.0),
            Some(upper_bound_of(30_000)),
            "{range:?}"
        );
        assert_eq!(
            total.complete_latency.percentile(0.5),
            Some(upper_bound_of(90_000)),
            "{range:?}"
        );
        if range == ActivityRange::Hour {
            // Created at the start, done 90 s on: two different minutes.
            let first = rows.iter().find(|r| r.bucket_at == range.bucket_of(start));
            assert_eq!(first.map(|r| r.activity.created), Some(4));
        }
    }
}

/// A flush that cannot write keeps what it counted for the next one.
async fn a_failed_flush_keeps_its_counts(ts: &TestStore) {
    let store = &*ts.store;
    let f = fixture(store, "ada").await;
    let hub = hub();
    let delivery = hub.on(store);
    ops::todos::create(&delivery, new_todo(&f.endpoint.id, "kept", 5), None)
        .await
        .unwrap();
    store.close().await;
    assert!(ops::activity::flush(&delivery).await.is_err());
    let rows = delivery.activity().drain();
    assert_eq!(rows.len(), 3, "one row per range, put back: {rows:?}");
    assert!(rows.iter().all(|r| r.activity.created == 1));
}

on_both_backends!(
    each_operation_counts_its_todo_into_the_charts,
    a_failed_flush_keeps_its_counts,
);
