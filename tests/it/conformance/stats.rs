//! What `/metrics` reads from the store: queue-wide counts by state, dead
//! letters, the oldest pending todo, and the liveness inputs of active
//! endpoints — the same answers on both backends.

use switchboard::clock::Clock;
use switchboard::store::*;
use switchboard::testkit::StorePeek;

use crate::common::*;
use crate::exercise_on_both_backends;
use crate::support::{TestStore, endpoint_for, fixture};

async fn queue_stats_count_every_state_across_endpoints(store: &dyn Store, ts: &TestStore) {
    assert_eq!(
        store.unscoped_queue_stats().await.unwrap(),
        QueueStats::default(),
        "an empty queue is all zeros, nothing pending"
    );

    let f = fixture(store, "ada").await;
    let first = add_todo(store, &f, "first").await;
    advance_secs(ts, 5);
    let second = add_todo(store, &f, "second").await;
    advance_secs(ts, 5);
    let to_retry = create(store, capped_todo(&f, "retried", 5)).await;
    let to_bury = create(store, capped_todo(&f, "buried", 1)).await;
    let to_finish = add_todo(store, &f, "finished").await;
    // Another human's endpoint counts too: the stats are unscoped.
    let other = fixture(store, "grace").await;
    add_todo(store, &other, "elsewhere").await;

    let stats = store.unscoped_queue_stats().await.unwrap();
    assert_eq!(stats.by_state.pending, 6);
    assert_eq!(stats.oldest_pending_created_at, Some(first.created_at));

    claim(store, &f.caller, &first.id).await;
    claim_and_fail(store, &f.caller, &to_retry.id).await;
    claim(store, &f.caller, &to_bury.id).await;
    let buried = store
        .fail(&f.caller, &to_bury.id, Finish::default())
        .await
        .unwrap();
    assert!(buried.next_retry_at.is_none(), "at its cap: a dead letter");
    claim(store, &f.caller, &to_finish.id).await;
    store
        .complete(&f.caller, &to_finish.id, Finish::default())
        .await
        .unwrap();

    let stats = store.unscoped_queue_stats().await.unwrap();
    assert_eq!(
        stats.by_state,
        StateCounts {
            pending: 2,
            claimed: 1,
            done: 1,
            failed: 2,
            cancelled: 0,
            delayed: 0,
        }
    );
    assert_eq!(stats.dead_letters, 1, "a scheduled retry is not dead");
    assert_eq!(
        stats.oldest_pending_created_at,
        Some(second.created_at),
        "the claimed first todo is no longer pending"
    );
}

async fn liveness_inputs_describe_active_endpoints(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let leased = endpoint_with_lease(store, &f, 120).await;
    let gone = endpoint_for(
        store,
        store.get_human(&f.human.id).await.unwrap(),
        "gone",
        &["inbox"],
    )
    .await;
    store
        .revoke_endpoint(&f.human.id, &gone.endpoint.id)
        .await
        .unwrap();

    let inputs = store.unscoped_liveness_inputs(100).await.unwrap();
    let ids: Vec<&str> = inputs.iter().map(|i| i.endpoint_id.as_str()).collect();
    let mut expected = vec![f.endpoint.id.as_str(), leased.id.as_str()];
    expected.sort();
    assert_eq!(ids, expected, "active endpoints only, by id");
    let mine = inputs
        .iter()
        .find(|i| i.endpoint_id == f.endpoint.id)
        .unwrap();
    assert_eq!(
        *mine,
        LivenessInputs {
            endpoint_id: f.endpoint.id.clone(),
            agent_kind: AgentKind::Task,
            agent_expected_interval_seconds: None,
            default_lease_ttl_seconds: None,
            last_seen_at: None,
            presence_out: false,
            holds_claim: false,
        }
    );
    let with_lease = inputs.iter().find(|i| i.endpoint_id == leased.id).unwrap();
    assert_eq!(with_lease.default_lease_ttl_seconds, Some(120));

    // Seen, working, and clocked out as the presence evaluator records it.
    let seen_at = ts.clock.now();
    store
        .stamp_endpoint_seen(&f.endpoint.id, seen_at, None)
        .await
        .unwrap();
    let todo = add_todo(store, &f, "work").await;
    claim(store, &f.caller, &todo.id).await;
    sqlx::query("UPDATE endpoints SET presence_seen = 'out' WHERE id = $1")
        .bind(&f.endpoint.id)
        .execute(ts.store.pool())
        .await
        .unwrap();
    let mine = mine_of(store, &f.endpoint.id).await;
    assert_eq!(mine.last_seen_at, Some(seen_at));
    assert!(mine.holds_claim);
    assert!(mine.presence_out);

    // A lapsed lease is not a live claim, though the todo is still `claimed`.
    advance_secs(ts, 301);
    assert!(!mine_of(store, &f.endpoint.id).await.holds_claim);

    // The limit caps the rows, lowest ids first.
    let capped = store.unscoped_liveness_inputs(1).await.unwrap();
    assert_eq!(capped.len(), 1);
    assert_eq!(capped[0].endpoint_id, expected[0]);
}

async fn endpoint_with_lease(
    store: &dyn Store,
    f: &crate::support::Fixture,
    secs: i64,
) -> Endpoint {
    let mut new = crate::support::new_endpoint(&f.agent, &["inbox"]);
    new.default_lease_ttl_seconds = Some(secs);
    store.create_endpoint(new).await.unwrap()
}

async fn mine_of(store: &dyn Store, endpoint_id: &str) -> LivenessInputs {
    store
        .unscoped_liveness_inputs(100)
        .await
        .unwrap()
        .into_iter()
        .find(|i| i.endpoint_id == endpoint_id)
        .expect("the endpoint is active")
}

/// The board's and the endpoint listings' work counts: per endpoint, its
/// pending, claimed and dead-lettered todos and the oldest one it works on,
/// read from the live states' indexes; finished history and other endpoints
/// count for nothing.
async fn work_counts_follow_each_endpoints_live_todos(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let human = store.get_human(&f.human.id).await.unwrap();
    let quiet = endpoint_for(store, human.clone(), "quiet", &["inbox"]).await;
    let idle = endpoint_for(store, human, "idle", &["inbox"]).await;

    let worked = add_todo(store, &f, "worked on").await;
    advance_secs(ts, 1);
    let also_worked = add_todo(store, &f, "also worked on").await;
    add_todo(store, &f, "waiting").await;
    let retried = create(store, capped_todo(&f, "retried", 5)).await;
    let buried = create(store, capped_todo(&f, "buried", 1)).await;
    let finished = add_todo(store, &f, "finished").await;
    add_todo(store, &quiet, "elsewhere").await;

    claim(store, &f.caller, &worked.id).await;
    claim(store, &f.caller, &also_worked.id).await;
    claim_and_fail(store, &f.caller, &retried.id).await;
    claim_and_fail(store, &f.caller, &buried.id).await;
    claim(store, &f.caller, &finished.id).await;
    store
        .complete(&f.caller, &finished.id, Finish::default())
        .await
        .unwrap();

    let ids = [&f, &quiet, &idle].map(|e| e.endpoint.id.clone());
    let counts = store.endpoint_activity(&ids).await.unwrap();
    let busy = &counts[&f.endpoint.id];
    assert_eq!(
        (busy.pending, busy.claimed, busy.dead_letters),
        (1, 2, 1),
        "a scheduled retry is neither pending nor dead; a done todo is nothing: {busy:?}"
    );
    assert_eq!(
        busy.working_on.as_deref(),
        Some(worked.id.as_str()).min(Some(also_worked.id.as_str())),
        "the lowest id among the live claims"
    );
    let elsewhere = &counts[&quiet.endpoint.id];
    assert_eq!(
        (elsewhere.pending, elsewhere.claimed, elsewhere.dead_letters),
        (1, 0, 0)
    );
    assert_eq!(elsewhere.working_on, None);
    let nothing = &counts[&idle.endpoint.id];
    assert_eq!(
        (nothing.pending, nothing.claimed, nothing.dead_letters),
        (0, 0, 0)
    );

    // A human's retry takes the dead letter out of the count.
    store.human_retry(&f.human.id, &buried.id).await.unwrap();
    let busy = &store.endpoint_activity(&ids[..1]).await.unwrap()[&f.endpoint.id];
    assert_eq!((busy.pending, busy.dead_letters), (2, 0), "{busy:?}");
}

exercise_on_both_backends!(
    work_counts_follow_each_endpoints_live_todos,
    queue_stats_count_every_state_across_endpoints,
    liveness_inputs_describe_active_endpoints,
);
