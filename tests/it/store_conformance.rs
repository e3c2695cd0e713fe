//! The storage conformance suite: every test runs against SQLite and PostgreSQL.
//! A behaviour that differs between the two is a bug.
//!
//! The rules of `02-queue.md` are covered area by area in `conformance/`; each
//! module generates its own `sqlite::*` and `postgres::*` tests with
//! `on_both_backends!`, and `conformance/common.rs` holds their shared helpers.

use crate::on_both_backends;
use crate::support;

#[path = "conformance/common.rs"]
pub(crate) mod common;

#[path = "conformance/activity.rs"]
mod activity;
#[path = "conformance/admission.rs"]
mod admission;
#[path = "conformance/attempts.rs"]
mod attempts;
#[path = "conformance/backoff.rs"]
mod backoff;
#[path = "conformance/board_reads.rs"]
mod board_reads;
#[path = "conformance/bulk.rs"]
mod bulk;
#[path = "conformance/chained.rs"]
mod chained;
#[path = "conformance/concurrency.rs"]
mod concurrency;
#[path = "conformance/dedup.rs"]
mod dedup;
#[path = "conformance/delayed.rs"]
mod delayed;
#[path = "conformance/deliveries.rs"]
mod deliveries;
#[path = "conformance/fencing.rs"]
mod fencing;
#[path = "conformance/group_commit.rs"]
mod group_commit;
#[path = "conformance/hooks.rs"]
mod hooks;
#[path = "conformance/leases.rs"]
mod leases;
#[path = "conformance/lifecycle.rs"]
mod lifecycle;
#[path = "conformance/migrations.rs"]
mod migrations;
#[path = "conformance/oauth.rs"]
mod oauth;
#[path = "conformance/operator.rs"]
mod operator;
#[path = "conformance/plans.rs"]
mod plans;
#[path = "conformance/presence.rs"]
mod presence;
#[path = "conformance/refusals.rs"]
mod refusals;
#[path = "conformance/retention.rs"]
mod retention;
#[path = "conformance/revoke.rs"]
mod revoke;
#[path = "conformance/rings.rs"]
mod rings;
#[path = "conformance/schedules.rs"]
mod schedules;
#[path = "conformance/stats.rs"]
mod stats;
#[path = "conformance/takeover.rs"]
mod takeover;
#[path = "conformance/tokens.rs"]
mod tokens;
#[path = "conformance/validation.rs"]
mod validation;

use std::time::Duration;

use support::{TestStore, fixture};
use switchboard::clock::Clock;
use switchboard::domain::todo::TodoState;
use switchboard::store::*;

async fn create_claim_complete(ts: &TestStore) {
    let store = &*ts.store;
    let f = fixture(store, "ada").await;
    let created = store
        .create_todo(NewTodo::new(&f.endpoint.id, "inbox", "Review PR 12"))
        .await
        .unwrap();
    assert!(created.created);
    assert_eq!(created.todo.state, TodoState::Pending);

    let claimed = store
        .claim_next(&f.caller, None, ClaimOptions::default())
        .await
        .unwrap()
        .expect("one todo is claimable");
    assert_eq!(claimed.todo.id, created.todo.id);
    assert_eq!(claimed.todo.state, TodoState::Claimed);
    assert_eq!(claimed.todo.attempt, 1);
    assert_eq!(claimed.attempt_seq, 1);
    assert_eq!(
        claimed.todo.lease_expires_at,
        Some(ts.clock.now().add_secs(300))
    );

    ts.clock.advance(Duration::from_secs(10));
    let done = store
        .complete(
            &f.caller,
            &created.todo.id,
            Finish {
                result: Some(serde_json::json!({"ok": true})),
                summary: Some("merged".into()),
                lease_token: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(done.state, TodoState::Done);
    assert_eq!(done.result, Some(serde_json::json!({"ok": true})));
    assert_eq!(done.completed_at, Some(ts.clock.now()));

    let attempts = store
        .list_attempts(&f.caller, &created.todo.id, 10)
        .await
        .unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(
        attempts[0].outcome,
        Some(switchboard::domain::todo::Outcome::Completed)
    );
    assert_eq!(attempts[0].summary.as_deref(), Some("merged"));

    assert!(
        store
            .claim_next(&f.caller, None, ClaimOptions::default())
            .await
            .unwrap()
            .is_none(),
        "nothing left to claim"
    );
}

on_both_backends!(create_claim_complete);
