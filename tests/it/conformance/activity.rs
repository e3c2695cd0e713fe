//! A queue's activity over time (`docs/board.md`, "Queues";
//! `domain::activity`): instances add what they counted to stored buckets,
//! exactly — counts and latency histograms alike, however many add at once
//! — and a chart reads one range of them per endpoint, of one queue or all.

use std::sync::Arc;

use switchboard::clock::Clock;
use switchboard::domain::Timestamp;
use switchboard::domain::activity::{Activity, ActivityRange, LatencyHistogram};
use switchboard::store::*;
use tokio::sync::Barrier;

use crate::common::*;
use crate::exercise_on_both_backends;
use crate::support::{TestStore, endpoint_for, fixture};

fn row(endpoint_id: &str, queue: &str, range: ActivityRange, at: Timestamp) -> QueueActivity {
    let mut claim_latency = LatencyHistogram::default();
    claim_latency.record(1_500);
    let mut complete_latency = LatencyHistogram::default();
    complete_latency.record(60_000);
    QueueActivity {
        endpoint_id: endpoint_id.to_owned(),
        queue: queue.to_owned(),
        range,
        bucket_at: range.bucket_of(at),
        activity: Activity {
            created: 3,
            completed: 2,
            failed: 1,
            dead_lettered: 1,
            claim_latency,
            complete_latency,
        },
    }
}

async fn activity_adds_up_and_reads_by_range_and_queue(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let now = ts.clock.now();
    let hour = ActivityRange::Hour;
    let rows = vec![
        row(&f.endpoint.id, "inbox", hour, now),
        row(&f.endpoint.id, "reviews", hour, now),
        row(&f.endpoint.id, "inbox", ActivityRange::Week, now),
    ];
    store.add_queue_activity(&rows).await.unwrap();
    store.add_queue_activity(&rows[..1]).await.unwrap();

    let since = hour.first_bucket(now);
    let all = store
        .queue_activity(std::slice::from_ref(&f.endpoint.id), None, hour, since)
        .await
        .unwrap();
    assert_eq!(
        all.len(),
        2,
        "one bucket per queue, of this range only: {all:?}"
    );
    let inbox = all.iter().find(|r| r.queue == "inbox").unwrap();
    assert_eq!(inbox.bucket_at, hour.bucket_of(now));
    assert_eq!(inbox.activity.created, 6, "added twice");
    assert_eq!(inbox.activity.completed, 4);
    assert_eq!(inbox.activity.failed, 2);
    assert_eq!(inbox.activity.dead_lettered, 2);
    assert_eq!(inbox.activity.claim_latency.count(), 2, "histograms merge");
    assert_eq!(inbox.activity.complete_latency.percentile(0.5), {
        let mut h = LatencyHistogram::default();
        h.record(60_000);
        h.percentile(0.5)
    });

    let one = store
        .queue_activity(
            std::slice::from_ref(&f.endpoint.id),
            Some("reviews"),
            hour,
            since,
        )
        .await
        .unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].activity.created, 3);

    // Another human's endpoint is not read unless named; a later `since`
    // leaves the bucket out.
    let other = endpoint_for(
        store,
        store.create_human("grace").await.unwrap(),
        "other",
        &["inbox"],
    )
    .await;
    store
        .add_queue_activity(&[row(&other.endpoint.id, "inbox", hour, now)])
        .await
        .unwrap();
    let mine = store
        .queue_activity(
            std::slice::from_ref(&f.endpoint.id),
            Some("inbox"),
            hour,
            since,
        )
        .await
        .unwrap();
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].endpoint_id, f.endpoint.id);
    let later = store
        .queue_activity(
            std::slice::from_ref(&f.endpoint.id),
            None,
            hour,
            hour.bucket_of(now).add_secs(60),
        )
        .await
        .unwrap();
    assert!(later.is_empty());
}

async fn old_buckets_are_pruned_and_a_deleted_endpoints_are_skipped(
    store: &dyn Store,
    ts: &TestStore,
) {
    let f = fixture(store, "ada").await;
    let then = ts.clock.now();
    store
        .add_queue_activity(&[
            row(&f.endpoint.id, "inbox", ActivityRange::Hour, then),
            row(&f.endpoint.id, "inbox", ActivityRange::Week, then),
        ])
        .await
        .unwrap();
    // Two hours on: the minute bucket is past its keep, the hour one not.
    advance_secs(ts, 2 * 3_600);
    assert_eq!(store.unscoped_prune_queue_activity().await.unwrap(), 1);
    let ids = [f.endpoint.id.clone()];
    let since = Timestamp::from_millis(0);
    assert!(
        store
            .queue_activity(&ids, None, ActivityRange::Hour, since)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .queue_activity(&ids, None, ActivityRange::Week, since)
            .await
            .unwrap()
            .len(),
        1
    );

    // Activity counted for an endpoint deleted before the flush is dropped,
    // and does not fail the rest of the flush.
    let gone = endpoint_for(
        store,
        store.create_human("grace").await.unwrap(),
        "gone",
        &["inbox"],
    )
    .await;
    store
        .revoke_endpoint(&gone.human.id, &gone.endpoint.id)
        .await
        .unwrap();
    store
        .delete_endpoint(&gone.human.id, &gone.endpoint.id)
        .await
        .unwrap();
    let now = ts.clock.now();
    store
        .add_queue_activity(&[
            row(&gone.endpoint.id, "inbox", ActivityRange::Hour, now),
            row(&f.endpoint.id, "inbox", ActivityRange::Hour, now),
        ])
        .await
        .unwrap();
    assert!(
        store
            .queue_activity(
                std::slice::from_ref(&gone.endpoint.id),
                None,
                ActivityRange::Hour,
                since
            )
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .queue_activity(&ids, None, ActivityRange::Hour, since)
            .await
            .unwrap()
            .len(),
        1
    );
}

/// Instances flush at the same time into the same buckets: nothing is
/// lost (PostgreSQL locks each bucket in key order; SQLite writes one
/// transaction at a time).
async fn concurrent_flushes_into_the_same_buckets_lose_nothing(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let now = ts.clock.now();
    let (flushers, each) = (6, 5);
    let start = Arc::new(Barrier::new(flushers));
    let tasks: Vec<_> = (0..flushers)
        .map(|n| {
            let (store, start, endpoint) = (ts.store.clone(), start.clone(), f.endpoint.id.clone());
            tokio::spawn(async move {
                start.wait().await;
                for _ in 0..each {
                    // Half of them name the queues in the other order.
                    let mut rows: Vec<QueueActivity> = ["inbox", "reviews"]
                        .iter()
                        .flat_map(|q| ActivityRange::ALL.map(|range| row(&endpoint, q, range, now)))
                        .collect();
                    if n % 2 == 1 {
                        rows.reverse();
                    }
                    store.add_queue_activity(&rows).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    for range in ActivityRange::ALL {
        let read = store
            .queue_activity(
                std::slice::from_ref(&f.endpoint.id),
                None,
                range,
                range.first_bucket(now),
            )
            .await
            .unwrap();
        assert_eq!(read.len(), 2);
        for r in read {
            assert_eq!(
                r.activity.created,
                3 * (flushers * each) as u64,
                "{range:?}"
            );
            assert_eq!(
                r.activity.claim_latency.count(),
                (flushers * each) as u64,
                "{range:?}"
            );
        }
    }
}

async fn dead_letters_are_counted_per_queue(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    for title in ["a", "b"] {
        let t = create(store, capped_todo(&f, title, 1)).await;
        claim_and_fail(store, &f.caller, &t.id).await;
    }
    let retried = create(store, capped_todo(&f, "retried", 3)).await;
    claim_and_fail(store, &f.caller, &retried.id).await;
    add_todo(store, &f, "pending").await;
    assert_eq!(
        store
            .unscoped_dead_letters_by_queue(&f.endpoint.id)
            .await
            .unwrap(),
        vec![("inbox".to_owned(), 2)]
    );
}

exercise_on_both_backends!(
    activity_adds_up_and_reads_by_range_and_queue,
    old_buckets_are_pruned_and_a_deleted_endpoints_are_skipped,
    concurrent_flushes_into_the_same_buckets_lose_nothing,
    dead_letters_are_counted_per_queue,
);
