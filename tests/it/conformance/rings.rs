//! Doorbell accounting (`04-doorbells.md`): the re-ring sweep's statement —
//! the schedule, the budget, the sender gate, delivery accounting and
//! round-robin across endpoints.

use std::time::Duration;

use switchboard::store::*;

use crate::common::*;
use crate::exercise_on_both_backends;
use crate::support::{TestStore, endpoint_for, fixture};

/// 5 min, 20 min, 1 h, 6 h, 6 h.
pub(super) fn steps() -> Vec<Duration> {
    [5 * 60, 20 * 60, 3_600, 6 * 3_600, 6 * 3_600]
        .into_iter()
        .map(Duration::from_secs)
        .collect()
}

/// A todo from authenticated intake (only those may ring).
pub(super) fn rung_todo(endpoint_id: &str, title: &str) -> NewTodo {
    NewTodo {
        priority: 0,
        run_at: None,
        intake: Some(NewIntakeEvent {
            trust_mode: TrustMode::Operator,
            actor: "human:test".into(),
            webhook_id: None,
            headers: serde_json::json!({}),
            content_type: None,
            body: Vec::new(),
        }),
        ..NewTodo::new(endpoint_id, "inbox", title)
    }
}

async fn due(ts: &TestStore, endpoints: &[String]) -> Vec<RingCandidate> {
    ts.store
        .unscoped_claim_due_rings(endpoints, &steps(), 100)
        .await
        .expect("claim due rings")
}

async fn a_never_claimed_todo_is_rerung_on_schedule_then_never(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = create(store, rung_todo(&f.endpoint.id, "ring me")).await;
    let hosted = vec![f.endpoint.id.clone()];
    // Minutes after creation at which ring k is due: 5, 25, 85, 445, 805.
    let mut elapsed_min = 0u64;
    for (k, due_at_min) in [5u64, 25, 85, 445, 805].into_iter().enumerate() {
        // One minute early: nothing.
        advance_secs(ts, (due_at_min - 1 - elapsed_min) * 60);
        assert!(
            due(ts, &hosted).await.is_empty(),
            "ring {} is not due yet",
            k + 1
        );
        advance_secs(ts, 60);
        elapsed_min = due_at_min;
        let rung = due(ts, &hosted).await;
        assert_eq!(rung.len(), 1, "ring {} is due at +{due_at_min} min", k + 1);
        assert_eq!(rung[0].id, todo.id);
        assert_eq!(rung[0].ring_attempts, k as i64 + 1);
        let stored = get(store, &f.caller, &todo.id).await;
        assert_eq!(stored.ring_attempts, k as i64 + 1);
        assert_eq!(stored.last_ringed_at, Some(ts.clock_now()));
    }
    advance_secs(ts, 30 * 86_400);
    assert!(
        due(ts, &hosted).await.is_empty(),
        "the budget of 5 is spent"
    );
}

async fn an_unhosted_endpoint_keeps_its_whole_budget(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let other = endpoint_for(store, f.human.clone(), "other", &["inbox"]).await;
    let waiting = create(store, rung_todo(&f.endpoint.id, "waits all night")).await;
    advance_secs(ts, 2 * 86_400);
    // Only `other` is hosted here: `f`'s todo is neither selected nor counted.
    assert!(
        due(ts, std::slice::from_ref(&other.endpoint.id))
            .await
            .is_empty()
    );
    assert_eq!(get(store, &f.caller, &waiting.id).await.ring_attempts, 0);
}

async fn pull_only_and_claimed_todos_never_ring(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let pull_only = add_todo(store, &f, "no intake event").await;
    let claimed = create(store, rung_todo(&f.endpoint.id, "being worked")).await;
    claim(store, &f.caller, &claimed.id).await;
    advance_secs(ts, 3_600);
    assert!(
        due(ts, std::slice::from_ref(&f.endpoint.id))
            .await
            .is_empty()
    );
    assert_eq!(get(store, &f.caller, &pull_only.id).await.ring_attempts, 0);
}

async fn one_sweep_interleaves_endpoints_and_respects_the_cap(store: &dyn Store, ts: &TestStore) {
    let a = fixture(store, "ada").await;
    let b = endpoint_for(store, a.human.clone(), "bee", &["inbox"]).await;
    for i in 0..3 {
        create(store, rung_todo(&a.endpoint.id, &format!("a{i}"))).await;
        advance_secs(ts, 1);
    }
    create(store, rung_todo(&b.endpoint.id, "b0")).await;
    advance_secs(ts, 600);
    let hosted = vec![a.endpoint.id.clone(), b.endpoint.id.clone()];
    let first_two = ts
        .store
        .unscoped_claim_due_rings(&hosted, &steps(), 2)
        .await
        .unwrap();
    let owners: Vec<&str> = first_two.iter().map(|c| c.endpoint_id.as_str()).collect();
    assert_eq!(first_two.len(), 2, "the per-tick cap holds");
    assert!(
        owners.contains(&a.endpoint.id.as_str()) && owners.contains(&b.endpoint.id.as_str()),
        "a busy endpoint cannot starve another: {owners:?}"
    );
    let rest = due(ts, &hosted).await;
    assert_eq!(rest.len(), 2, "the other two of `a` ring next");
    assert!(rest.iter().all(|c| c.endpoint_id == a.endpoint.id));
}

async fn two_sweeps_at_once_count_each_ring_once(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    for i in 0..20 {
        create(store, rung_todo(&f.endpoint.id, &format!("t{i}"))).await;
    }
    advance_secs(ts, 301);
    let hosted = vec![f.endpoint.id.clone()];
    let (x, y) = tokio::join!(due(ts, &hosted), due(ts, &hosted));
    assert_eq!(
        x.len() + y.len(),
        20,
        "every due todo is counted exactly once"
    );
    let mut ids: Vec<&str> = x.iter().chain(y.iter()).map(|c| c.id.as_str()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 20);
}

async fn only_endpoints_with_a_due_ring_are_named(store: &dyn Store, ts: &TestStore) {
    let a = fixture(store, "ada").await;
    let b = endpoint_for(store, a.human.clone(), "bee", &["inbox"]).await;
    let c = endpoint_for(store, a.human.clone(), "cee", &["inbox"]).await;
    create(store, rung_todo(&a.endpoint.id, "due soon")).await;
    add_todo(store, &b, "pull-only never rings").await;
    let hosted = vec![
        a.endpoint.id.clone(),
        b.endpoint.id.clone(),
        c.endpoint.id.clone(),
    ];
    let named = |ts: &TestStore| {
        let hosted = hosted.clone();
        let store = ts.store.clone();
        async move {
            store
                .unscoped_endpoints_with_due_rings(&hosted, &steps(), 100)
                .await
                .unwrap()
        }
    };
    assert!(
        named(ts).await.is_empty(),
        "nothing is due before the first step"
    );
    advance_secs(ts, 301);
    assert_eq!(named(ts).await, vec![a.endpoint.id.clone()]);
    due(ts, &hosted).await;
    assert!(
        named(ts).await.is_empty(),
        "counted: the next ring is 20 min away"
    );
}

/// The due endpoints come in the claim's order, so the first `limit` of
/// them are exactly the endpoints a claim of `limit` rings (the sweep reads
/// presence for those only).
async fn due_endpoints_come_in_the_order_the_claim_rings_them(store: &dyn Store, ts: &TestStore) {
    let a = fixture(store, "ada").await;
    let mut endpoints = vec![a.endpoint.clone()];
    for name in ["bee", "cee", "dee"] {
        endpoints.push(
            endpoint_for(store, a.human.clone(), name, &["inbox"])
                .await
                .endpoint,
        );
    }
    // Created in reverse endpoint order, two each: each endpoint's first
    // due todo decides its place, not the endpoint's id or its count.
    for (i, e) in endpoints.iter().enumerate().rev() {
        for k in 0..2 {
            create(store, rung_todo(&e.id, &format!("{i}-{k}"))).await;
            advance_secs(ts, 1);
        }
    }
    advance_secs(ts, 301);
    let hosted: Vec<String> = endpoints.iter().map(|e| e.id.clone()).collect();
    let named = ts
        .store
        .unscoped_endpoints_with_due_rings(&hosted, &steps(), 100)
        .await
        .unwrap();
    assert_eq!(named.len(), 4, "each endpoint once: {named:?}");
    let first_two = ts
        .store
        .unscoped_endpoints_with_due_rings(&hosted, &steps(), 2)
        .await
        .unwrap();
    assert_eq!(first_two, named[..2], "the limit keeps the order");
    let rung = ts
        .store
        .unscoped_claim_due_rings(&hosted, &steps(), 2)
        .await
        .unwrap();
    let mut rung_endpoints: Vec<String> = rung.iter().map(|c| c.endpoint_id.clone()).collect();
    let mut expected = first_two.clone();
    rung_endpoints.sort();
    expected.sort();
    assert_eq!(
        rung_endpoints, expected,
        "the claim rings the endpoints named first"
    );
}

/// Across endpoints, the ring that has waited longest goes first: by ring
/// clock (the last ring, else creation), not by creation or id, so an
/// endpoint whose ring has waited cannot be passed over tick after tick by
/// newer work elsewhere.
async fn the_longest_waiting_ring_goes_first(store: &dyn Store, ts: &TestStore) {
    let a = fixture(store, "ada").await;
    let b = endpoint_for(store, a.human.clone(), "bee", &["inbox"]).await;
    create(store, rung_todo(&a.endpoint.id, "older, rung since")).await;
    advance_secs(ts, 1);
    let waited = create(store, rung_todo(&b.endpoint.id, "newer, never rung")).await;
    advance_secs(ts, 301);
    // Only `a` is hosted yet: its todo rings, `b`'s keeps waiting.
    assert_eq!(due(ts, std::slice::from_ref(&a.endpoint.id)).await.len(), 1);
    advance_secs(ts, 20 * 60 + 1);
    // Both due now: `a`'s second ring, `b`'s first, which has waited longer.
    let hosted = vec![a.endpoint.id.clone(), b.endpoint.id.clone()];
    let named = ts
        .store
        .unscoped_endpoints_with_due_rings(&hosted, &steps(), 2)
        .await
        .unwrap();
    assert_eq!(named, vec![b.endpoint.id.clone(), a.endpoint.id.clone()]);
    let first = ts
        .store
        .unscoped_claim_due_rings(&hosted, &steps(), 1)
        .await
        .unwrap();
    let first: Vec<&str> = first.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(first, vec![waited.id.as_str()], "the claim agrees");
}

/// The due read names endpoints, not todos: an endpoint with many rings
/// due ahead of another's, and due rings of endpoints not named (hosted
/// elsewhere), do not use up its `limit`.
async fn the_due_read_looks_past_a_busy_endpoint_and_unnamed_ones(
    store: &dyn Store,
    ts: &TestStore,
) {
    let a = fixture(store, "ada").await;
    let elsewhere = endpoint_for(store, a.human.clone(), "far", &["inbox"]).await;
    let b = endpoint_for(store, a.human.clone(), "bee", &["inbox"]).await;
    for i in 0..20 {
        create(store, rung_todo(&a.endpoint.id, &format!("a{i}"))).await;
        create(store, rung_todo(&elsewhere.endpoint.id, &format!("far{i}"))).await;
        advance_secs(ts, 1);
    }
    create(store, rung_todo(&b.endpoint.id, "b0")).await;
    advance_secs(ts, 301);
    let hosted = vec![a.endpoint.id.clone(), b.endpoint.id.clone()];
    for limit in [2, 3] {
        let named = ts
            .store
            .unscoped_endpoints_with_due_rings(&hosted, &steps(), limit)
            .await
            .unwrap();
        assert_eq!(
            named,
            vec![a.endpoint.id.clone(), b.endpoint.id.clone()],
            "limit {limit}"
        );
    }
    let one = ts
        .store
        .unscoped_endpoints_with_due_rings(&hosted, &steps(), 1)
        .await
        .unwrap();
    assert_eq!(one, vec![a.endpoint.id.clone()]);
}

async fn a_ready_todo_is_claimed_for_ringing_once_per_readiness(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = create(store, rung_todo(&f.endpoint.id, "ring once")).await;
    let other = crate::support::second_handle(ts).await;
    // Two instances race for the first ring: exactly one wins.
    let (x, y) = tokio::join!(
        store.unscoped_claim_ready_ring(&todo.id),
        other.unscoped_claim_ready_ring(&todo.id)
    );
    let winners = [x.unwrap(), y.unwrap()]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>();
    assert_eq!(winners.len(), 1, "one instance rings a new todo");
    assert_eq!(winners[0].id, todo.id);
    assert_eq!(winners[0].title, "ring once");
    assert!(
        store
            .unscoped_claim_ready_ring(&todo.id)
            .await
            .unwrap()
            .is_none(),
        "already rung for this readiness"
    );
    // A failed attempt whose retry window elapses is ready again: once more.
    claim_and_fail(store, &f.caller, &todo.id).await;
    advance_secs(ts, 3_600);
    assert_eq!(
        store.unscoped_schedule_due_retries(10).await.unwrap().len(),
        1
    );
    assert!(
        store
            .unscoped_claim_ready_ring(&todo.id)
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        store
            .unscoped_claim_ready_ring(&todo.id)
            .await
            .unwrap()
            .is_none()
    );
    other.close().await;
}

async fn pull_only_claimed_and_revoked_todos_are_never_claimed_for_ringing(
    store: &dyn Store,
    ts: &TestStore,
) {
    let f = fixture(store, "ada").await;
    let pull_only = add_todo(store, &f, "pull only").await;
    assert!(
        store
            .unscoped_claim_ready_ring(&pull_only.id)
            .await
            .unwrap()
            .is_none()
    );
    let taken = create(store, rung_todo(&f.endpoint.id, "taken")).await;
    claim(store, &f.caller, &taken.id).await;
    assert!(
        store
            .unscoped_claim_ready_ring(&taken.id)
            .await
            .unwrap()
            .is_none()
    );
    let pending = create(store, rung_todo(&f.endpoint.id, "on a revoked endpoint")).await;
    store
        .revoke_endpoint(&f.human.id, &f.endpoint.id)
        .await
        .unwrap();
    assert!(
        store
            .unscoped_claim_ready_ring(&pending.id)
            .await
            .unwrap()
            .is_none()
    );
    let _ = ts;
}

async fn the_unrung_read_names_todos_created_since_that_nobody_rang(
    store: &dyn Store,
    ts: &TestStore,
) {
    let f = fixture(store, "ada").await;
    let hosted = vec![f.endpoint.id.clone()];
    let before = create(store, rung_todo(&f.endpoint.id, "before the gap")).await;
    advance_secs(ts, 10);
    let since = ts.clock_now();
    let rung = create(store, rung_todo(&f.endpoint.id, "rung meanwhile")).await;
    store.unscoped_claim_ready_ring(&rung.id).await.unwrap();
    let missed = create(store, rung_todo(&f.endpoint.id, "missed")).await;
    add_todo(store, &f, "pull only").await;
    let unrung = store
        .unscoped_unrung_since(&hosted, since, 100)
        .await
        .unwrap();
    assert_eq!(
        unrung,
        vec![missed.id.clone()],
        "not {} nor the rung one",
        before.id
    );
}

/// What a catch-up rings is decided by the row, not by when it was made: a
/// delayed todo made before `since` that came due after it is named; one a
/// digest summarised, or counted by the sweep, is not.
async fn the_unrung_read_goes_by_readiness_and_the_ledger(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let hosted = vec![f.endpoint.id.clone()];
    let due_at = ts.clock_now().saturating_add(Duration::from_secs(60));
    let delayed = create(
        store,
        NewTodo {
            run_at: Some(due_at),
            ..rung_todo(&f.endpoint.id, "delayed")
        },
    )
    .await;
    let swept = create(store, rung_todo(&f.endpoint.id, "swept")).await;
    advance_secs(ts, 30);
    let since = ts.clock_now();
    let digested = create(store, rung_todo(&f.endpoint.id, "digested")).await;
    store
        .unscoped_mark_rung(std::slice::from_ref(&digested.id), ts.clock_now())
        .await
        .unwrap();
    advance_secs(ts, 31);
    assert_eq!(
        store.unscoped_promote_due_delayed(10).await.unwrap().len(),
        1
    );
    let unrung = store
        .unscoped_unrung_since(&hosted, since, 100)
        .await
        .unwrap();
    assert_eq!(unrung, vec![delayed.id.clone()], "not {}", digested.id);
    advance_secs(ts, 5 * 60);
    let counted = due(ts, &hosted).await;
    assert!(counted.iter().any(|c| c.id == swept.id));
    let later = store
        .unscoped_unrung_since(&hosted, switchboard::domain::Timestamp::from_millis(0), 100)
        .await
        .unwrap();
    assert!(
        !later.contains(&swept.id),
        "a todo the sweep counted was rung: {later:?}"
    );
}

/// A ring the sweep counted and no hearer took is put back: the count and
/// the ring clock it replaced (none, or a digest's), so it is due again at
/// once; only while the row still holds that count.
async fn a_counted_ring_nobody_took_is_put_back(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let hosted = vec![f.endpoint.id.clone()];
    let fresh = create(store, rung_todo(&f.endpoint.id, "never rung")).await;
    let digested = create(store, rung_todo(&f.endpoint.id, "digested")).await;
    advance_secs(ts, 60);
    let digest_at = ts.clock_now();
    store
        .unscoped_mark_rung(std::slice::from_ref(&digested.id), digest_at)
        .await
        .unwrap();
    advance_secs(ts, 5 * 60);
    let counted = due(ts, &hosted).await;
    assert_eq!(counted.len(), 2, "both first rings due");
    let counted_at = ts.clock_now();
    for c in &counted {
        assert_eq!(c.ring_attempts, 1);
        assert_eq!(c.last_ringed_at, Some(counted_at), "the count's instant");
    }
    advance_secs(ts, 1);
    for c in &counted {
        assert!(
            store
                .unscoped_uncount_ring(&c.id, c.ring_attempts, counted_at)
                .await
                .unwrap(),
            "undone"
        );
        assert!(
            !store
                .unscoped_uncount_ring(&c.id, c.ring_attempts, counted_at)
                .await
                .unwrap(),
            "once"
        );
    }
    let row = get(store, &f.caller, &fresh.id).await;
    assert_eq!((row.ring_attempts, row.last_ringed_at), (0, None));
    let row = get(store, &f.caller, &digested.id).await;
    assert_eq!(
        (row.ring_attempts, row.last_ringed_at),
        (0, Some(digest_at))
    );
    // Due again at once: the fresh one by its creation; the digested one
    // a step after its digest, which has passed.
    let again = due(ts, &hosted).await;
    assert_eq!(again.len(), 2, "due again: {again:?}");
    // A digest since the count: that count is no longer the row's to undo.
    let recount_at = ts.clock_now();
    advance_secs(ts, 1);
    store
        .unscoped_mark_rung(std::slice::from_ref(&fresh.id), ts.clock_now())
        .await
        .unwrap();
    assert!(
        !store
            .unscoped_uncount_ring(&fresh.id, 1, recount_at)
            .await
            .unwrap(),
        "a digest since: left alone"
    );
    assert_eq!(get(store, &f.caller, &fresh.id).await.ring_attempts, 1);
}

exercise_on_both_backends!(
    the_longest_waiting_ring_goes_first,
    the_due_read_looks_past_a_busy_endpoint_and_unnamed_ones,
    a_ready_todo_is_claimed_for_ringing_once_per_readiness,
    pull_only_claimed_and_revoked_todos_are_never_claimed_for_ringing,
    the_unrung_read_names_todos_created_since_that_nobody_rang,
    the_unrung_read_goes_by_readiness_and_the_ledger,
    a_counted_ring_nobody_took_is_put_back,
    only_endpoints_with_a_due_ring_are_named,
    due_endpoints_come_in_the_order_the_claim_rings_them,
    a_never_claimed_todo_is_rerung_on_schedule_then_never,
    an_unhosted_endpoint_keeps_its_whole_budget,
    pull_only_and_claimed_todos_never_ring,
    one_sweep_interleaves_endpoints_and_respects_the_cap,
    two_sweeps_at_once_count_each_ring_once,
);
