//! The server's maintenance and retention passes, driven with the manual clock.

use crate::on_both_backends;
use crate::support;

use std::time::Duration;

use support::{TestStore, fixture};
use switchboard::domain::todo::TodoState;
use switchboard::server::maintenance::{MaintenanceConfig, maintenance_tick, retention_pass};
use switchboard::store::*;

async fn one_tick_reaps_requeues_and_expires(ts: &TestStore) {
    let store = &*ts.store;
    let f = fixture(store, "ada").await;
    let lapsing = store
        .create_todo(NewTodo::new(&f.endpoint.id, "inbox", "will lapse"))
        .await
        .unwrap()
        .todo;
    let failing = store
        .create_todo(NewTodo::new(&f.endpoint.id, "inbox", "will fail"))
        .await
        .unwrap()
        .todo;
    let opts = ClaimOptions {
        lease_ttl_seconds: Some(60),
        ..ClaimOptions::default()
    };
    store
        .claim(&f.caller, &lapsing.id, opts.clone())
        .await
        .unwrap();
    store.claim(&f.caller, &failing.id, opts).await.unwrap();
    store
        .fail(&f.caller, &failing.id, Finish::default())
        .await
        .unwrap();

    // An endpoint that expires in 90 s, with a pending todo.
    let agent = store
        .create_agent(&f.human.id, "short-lived", AgentKind::Session)
        .await
        .unwrap();
    let mut new = support::new_endpoint(&agent, &["inbox"]);
    new.expires_at = Some(ts.clock_now().add_secs(90));
    let expiring = store.create_endpoint(new).await.unwrap();
    let doomed = store
        .create_todo(NewTodo::new(&expiring.id, "inbox", "doomed"))
        .await
        .unwrap()
        .todo;

    let config = MaintenanceConfig::default();
    let report = maintenance_tick(store, &config).await;
    assert_eq!(report.lease_expiries, 0);
    assert_eq!(
        store.get_todo(&f.caller, &lapsing.id).await.unwrap().state,
        TodoState::Claimed,
        "nothing is due yet"
    );

    ts.clock.advance(Duration::from_secs(91));
    let report = maintenance_tick(store, &config).await;
    assert_eq!(
        report.lease_expiries, 1,
        "one lapsed lease reaped (what switchboard_lease_expiries_total adds)"
    );
    assert_eq!(
        (report.expired_requeued, report.expired_dead_lettered),
        (1, 0),
        "requeued: switchboard_attempts_finished_total{{outcome=\"expired\"}} adds 1"
    );
    let reaped = store.get_todo(&f.caller, &lapsing.id).await.unwrap();
    assert_eq!(reaped.state, TodoState::Pending, "lapsed lease reaped");
    assert_eq!(reaped.owner, None);
    let retried = store.get_todo(&f.caller, &failing.id).await.unwrap();
    assert_eq!(
        retried.state,
        TodoState::Pending,
        "30 s retry window elapsed"
    );
    let dead = store
        .get_todo(&expiring.caller(), &doomed.id)
        .await
        .unwrap();
    assert!(dead.dead_letter, "expired endpoint dead-letters its todos");
    assert_eq!(dead.result.unwrap()["error"], "endpoint_revoked");
    assert_eq!(
        store
            .unscoped_get_endpoint(&expiring.id)
            .await
            .unwrap()
            .state,
        EndpointState::Revoked
    );
}

async fn retention_pass_prunes_only_old_finished_todos(ts: &TestStore) {
    let store = &*ts.store;
    let f = fixture(store, "ada").await;
    let old_done = store
        .create_todo(NewTodo::new(&f.endpoint.id, "inbox", "old"))
        .await
        .unwrap()
        .todo;
    store
        .claim(&f.caller, &old_done.id, ClaimOptions::default())
        .await
        .unwrap();
    store
        .complete(&f.caller, &old_done.id, Finish::default())
        .await
        .unwrap();
    let old_pending = store
        .create_todo(NewTodo::new(&f.endpoint.id, "inbox", "old but pending"))
        .await
        .unwrap()
        .todo;

    let config = MaintenanceConfig {
        retention: Duration::from_secs(3_600),
        batch: 1,
        ..MaintenanceConfig::default()
    };
    retention_pass(store, &config).await;
    assert!(
        store.get_todo(&f.caller, &old_done.id).await.is_ok(),
        "not old yet"
    );

    ts.clock.advance(Duration::from_secs(3_601));
    retention_pass(store, &config).await;
    assert!(matches!(
        store.get_todo(&f.caller, &old_done.id).await,
        Err(StoreError::NotFound)
    ));
    assert_eq!(
        store
            .get_todo(&f.caller, &old_pending.id)
            .await
            .unwrap()
            .state,
        TodoState::Pending
    );
}

on_both_backends!(
    one_tick_reaps_requeues_and_expires,
    retention_pass_prunes_only_old_finished_todos
);
