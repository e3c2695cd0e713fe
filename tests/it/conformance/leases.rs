//! Lease resolution: per call (capped at a day) > endpoint default > 300 s,
//! and a bare heartbeat goes back to the default, not to the claim's value.

use switchboard::clock::Clock;
use switchboard::domain::todo::TodoState;
use switchboard::store::*;

use crate::common::*;
use crate::exercise_on_every_path;
use crate::support::{Fixture, TestStore, endpoint_with, fixture};

/// A fixture whose endpoint has a default lease of `secs`.
async fn fixture_with_default_lease(store: &dyn Store, secs: i64) -> Fixture {
    let human = store.create_human("ada").await.unwrap();
    let f = endpoint_with(store, human, "worker", &["inbox"], |new| {
        new.default_lease_ttl_seconds = Some(secs)
    })
    .await;
    assert_eq!(f.caller.default_lease_ttl_seconds, Some(secs));
    f
}

fn bare_heartbeat() -> HeartbeatOptions {
    HeartbeatOptions::default()
}

async fn per_call_lease_wins_over_the_endpoint_default(store: &dyn Store, ts: &TestStore) {
    let f = fixture_with_default_lease(store, 600).await;
    let todo = add_todo(store, &f, "t").await;
    let claimed = claim_with_ttl(store, &f.caller, &todo.id, 90).await;
    assert_eq!(
        claimed.todo.lease_expires_at,
        Some(ts.clock.now().add_secs(90))
    );
}

async fn the_endpoint_default_applies_without_a_per_call_lease(store: &dyn Store, ts: &TestStore) {
    let f = fixture_with_default_lease(store, 600).await;
    let todo = add_todo(store, &f, "t").await;
    let claimed = claim(store, &f.caller, &todo.id).await;
    assert_eq!(
        claimed.todo.lease_expires_at,
        Some(ts.clock.now().add_secs(600))
    );
}

async fn the_lease_defaults_to_300_seconds(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    assert_eq!(f.caller.default_lease_ttl_seconds, None);
    let todo = add_todo(store, &f, "t").await;
    let claimed = store
        .claim_next(&f.caller, None, ClaimOptions::default())
        .await
        .unwrap()
        .expect("a todo");
    assert_eq!(claimed.todo.id, todo.id);
    assert_eq!(
        claimed.todo.lease_expires_at,
        Some(ts.clock.now().add_secs(300))
    );
}

async fn a_per_call_lease_above_a_day_is_clamped(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    let claimed = claim_with_ttl(store, &f.caller, &todo.id, 86_401).await;
    let day = Some(ts.clock.now().add_secs(86_400));
    assert_eq!(claimed.todo.lease_expires_at, day);

    let beat = store
        .heartbeat(
            &f.caller,
            &todo.id,
            HeartbeatOptions {
                lease_ttl_seconds: Some(10_000_000),
                ..HeartbeatOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(beat.lease_expires_at, day);
}

async fn a_non_positive_lease_is_refused_and_claims_nothing(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    for ttl in [0, -1, -86_400] {
        let opts = ClaimOptions {
            lease_ttl_seconds: Some(ttl),
            ..ClaimOptions::default()
        };
        assert_invalid(
            store.claim(&f.caller, &todo.id, opts.clone()).await,
            "lease_ttl_seconds",
        );
        assert_invalid(
            store.claim_next(&f.caller, None, opts).await,
            "lease_ttl_seconds",
        );
    }
    let untouched = get(store, &f.caller, &todo.id).await;
    assert_eq!(untouched, todo, "nothing was claimed");
    assert_eq!(count_attempt_rows(&ts.store, &todo.id).await, 0);
}

async fn a_non_positive_heartbeat_lease_is_refused(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    claim(store, &f.caller, &todo.id).await;
    advance_secs(ts, 10);
    let before = snapshot(store, &f.caller, &todo.id).await;
    for ttl in [0, -5] {
        let opts = HeartbeatOptions {
            lease_ttl_seconds: Some(ttl),
            ..HeartbeatOptions::default()
        };
        assert_invalid(
            store.heartbeat(&f.caller, &todo.id, opts).await,
            "lease_ttl_seconds",
        );
    }
    assert_eq!(snapshot(store, &f.caller, &todo.id).await, before);
}

async fn a_bare_heartbeat_resets_to_the_endpoint_default(store: &dyn Store, ts: &TestStore) {
    let f = fixture_with_default_lease(store, 600).await;
    let todo = add_todo(store, &f, "t").await;
    claim_with_ttl(store, &f.caller, &todo.id, 3_600).await;
    advance_secs(ts, 100);

    let beat = store
        .heartbeat(&f.caller, &todo.id, bare_heartbeat())
        .await
        .unwrap();
    assert_eq!(beat.lease_expires_at, Some(ts.clock.now().add_secs(600)));
}

async fn a_bare_heartbeat_resets_to_300_without_an_endpoint_default(
    store: &dyn Store,
    ts: &TestStore,
) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    claim_with_ttl(store, &f.caller, &todo.id, 3_600).await;
    advance_secs(ts, 100);

    let beat = store
        .heartbeat(&f.caller, &todo.id, bare_heartbeat())
        .await
        .unwrap();
    assert_eq!(beat.lease_expires_at, Some(ts.clock.now().add_secs(300)));
    assert_eq!(beat.state, TodoState::Claimed);
}

async fn a_heartbeat_with_a_lease_uses_it(store: &dyn Store, ts: &TestStore) {
    let f = fixture_with_default_lease(store, 600).await;
    let todo = add_todo(store, &f, "t").await;
    claim(store, &f.caller, &todo.id).await;
    advance_secs(ts, 100);

    let beat = store
        .heartbeat(
            &f.caller,
            &todo.id,
            HeartbeatOptions {
                lease_ttl_seconds: Some(120),
                ..HeartbeatOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(beat.lease_expires_at, Some(ts.clock.now().add_secs(120)));
}

exercise_on_every_path!(
    per_call_lease_wins_over_the_endpoint_default,
    the_endpoint_default_applies_without_a_per_call_lease,
    the_lease_defaults_to_300_seconds,
    a_per_call_lease_above_a_day_is_clamped,
    a_non_positive_lease_is_refused_and_claims_nothing,
    a_non_positive_heartbeat_lease_is_refused,
    a_bare_heartbeat_resets_to_the_endpoint_default,
    a_bare_heartbeat_resets_to_300_without_an_endpoint_default,
    a_heartbeat_with_a_lease_uses_it,
);
