//! The revoke cascade: revoking (or expiring) an endpoint dead-letters its
//! live todos in the same transaction and leaves finished ones alone; and a
//! revoked credential stops authenticating although it was cached.

use switchboard::clock::Clock;
use switchboard::domain::todo::{Disposition, Outcome, TodoState};
use switchboard::store::*;
use switchboard::testkit::StorePeek;

use crate::common::*;
use crate::exercise_on_both_backends;
use crate::support::{Fixture, TestStore, endpoint_with, fixture, new_endpoint, sqlite_store};

/// One todo in each state that matters to the cascade.
struct Board {
    pending: Todo,
    claimed: Todo,
    waiting_retry: Todo,
    done: Todo,
}

async fn one_todo_in_each_state(store: &dyn Store, f: &Fixture) -> Board {
    let pending = add_todo(store, f, "pending").await;
    let claimed = add_todo(store, f, "claimed").await;
    claim(store, &f.caller, &claimed.id).await;
    let waiting_retry = add_todo(store, f, "waiting").await;
    claim_and_fail(store, &f.caller, &waiting_retry.id).await;
    let done = add_todo(store, f, "done").await;
    claim(store, &f.caller, &done.id).await;
    store
        .complete(&f.caller, &done.id, Finish::default())
        .await
        .unwrap();
    Board {
        pending,
        claimed,
        waiting_retry,
        done,
    }
}

/// A todo the cascade reached: a dead letter that says why.
fn assert_dead_lettered_by_revoke(todo: &Todo, at: switchboard::domain::Timestamp) {
    assert_eq!(todo.state, TodoState::Failed, "{todo:?}");
    assert!(todo.dead_letter, "{todo:?}");
    assert_eq!(todo.next_retry_at, None);
    assert_eq!(todo.lease_expires_at, None);
    assert_eq!(todo.completed_at, Some(at));
    let result = todo.result.as_ref().expect("a revoke records why");
    assert_eq!(result["error"], "endpoint_revoked", "{result}");
}

async fn revoke_dead_letters_every_live_todo(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let board = one_todo_in_each_state(store, &f).await;
    let done_before = snapshot(store, &f.caller, &board.done.id).await;
    advance_secs(ts, 5);

    let revoked = store
        .revoke_endpoint(&f.human.id, &f.endpoint.id)
        .await
        .unwrap();
    let now = ts.clock.now();
    assert_eq!(revoked.endpoint_id, f.endpoint.id);
    assert_eq!(revoked.revoked_at, now);
    assert_eq!(revoked.dead_lettered, 3);

    for live in [&board.pending, &board.claimed, &board.waiting_retry] {
        assert_dead_lettered_by_revoke(&get(store, &f.caller, &live.id).await, now);
    }
    let holder_attempt = last_attempt(store, &f.caller, &board.claimed.id).await;
    assert_closed_as(&holder_attempt, Outcome::Revoked, Disposition::DeadLettered);
    assert_eq!(holder_attempt.ended_at, Some(now));
    assert_eq!(count_open_attempts(&ts.store, &board.claimed.id).await, 0);
    assert_eq!(
        snapshot(store, &f.caller, &board.done.id).await,
        done_before,
        "done todos are left alone"
    );

    let endpoint = store.unscoped_get_endpoint(&f.endpoint.id).await.unwrap();
    assert_eq!(endpoint.state, EndpointState::Revoked);
    assert_eq!(endpoint.revoked_at, Some(now));
}

/// Deleting a revoked endpoint deletes its todos and their attempt history
/// with them (a foreign key's cascade on SQLite, a trigger on PostgreSQL
/// since its migration 0009), and nothing of another endpoint's.
async fn deleting_a_revoked_endpoint_takes_its_history_along(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let board = one_todo_in_each_state(store, &f).await;
    let other = fixture(store, "bob").await;
    let kept = add_todo(store, &other, "kept").await;
    claim(store, &other.caller, &kept.id).await;
    store
        .revoke_endpoint(&f.human.id, &f.endpoint.id)
        .await
        .unwrap();
    let with_history = [&board.claimed, &board.waiting_retry, &board.done];
    for todo in with_history {
        assert!(count_attempt_rows(&ts.store, &todo.id).await > 0);
    }

    store
        .delete_endpoint(&f.human.id, &f.endpoint.id)
        .await
        .unwrap();
    for todo in with_history {
        assert_eq!(
            count_attempt_rows(&ts.store, &todo.id).await,
            0,
            "{}'s history goes with it",
            todo.title
        );
    }
    assert_eq!(count_attempt_rows(&ts.store, &kept.id).await, 1);
    assert_eq!(count_open_attempts(&ts.store, &kept.id).await, 1);
}

async fn a_second_revoke_conflicts(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    store
        .revoke_endpoint(&f.human.id, &f.endpoint.id)
        .await
        .unwrap();
    advance_secs(ts, 5);
    let before = (
        store.unscoped_get_endpoint(&f.endpoint.id).await.unwrap(),
        snapshot(store, &f.caller, &todo.id).await,
    );

    assert!(matches!(
        store.revoke_endpoint(&f.human.id, &f.endpoint.id).await,
        Err(StoreError::EndpointRevoked)
    ));
    let after = (
        store.unscoped_get_endpoint(&f.endpoint.id).await.unwrap(),
        snapshot(store, &f.caller, &todo.id).await,
    );
    // `Endpoint` has no `PartialEq`; its debug form shows every field.
    assert_eq!(format!("{after:?}"), format!("{before:?}"));
}

async fn another_human_cannot_revoke(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    let stranger = store.create_human("eve").await.unwrap();

    let foreign = store.revoke_endpoint(&stranger.id, &f.endpoint.id).await;
    let missing = store.revoke_endpoint(&stranger.id, "ep_missing").await;
    assert_same_as_missing(foreign, missing);

    let endpoint = store.unscoped_get_endpoint(&f.endpoint.id).await.unwrap();
    assert_eq!(endpoint.state, EndpointState::Active);
    assert_eq!(get(store, &f.caller, &todo.id).await, todo);
}

async fn create_on_a_revoked_endpoint_conflicts(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    store
        .revoke_endpoint(&f.human.id, &f.endpoint.id)
        .await
        .unwrap();
    let before = count_todos(&ts.store).await;
    assert!(matches!(
        store.create_todo(inbox_todo(&f, "too late")).await,
        Err(StoreError::EndpointRevoked)
    ));
    assert_eq!(count_todos(&ts.store).await, before);
}

async fn expiry_revokes_only_endpoints_past_their_expiry(store: &dyn Store, ts: &TestStore) {
    let ada = store.create_human("ada").await.unwrap();
    let expiring_at = |secs: i64| {
        let at = ts.clock.now().add_secs(secs);
        move |new: &mut NewEndpoint| new.expires_at = Some(at)
    };
    let soon = endpoint_with(store, ada.clone(), "soon", &["inbox"], expiring_at(3_600)).await;
    let later = endpoint_with(store, ada.clone(), "later", &["inbox"], expiring_at(7_200)).await;
    let never = endpoint_with(store, ada, "never", &["inbox"], |_| {}).await;
    let soon_todo = add_todo(store, &soon, "t").await;
    let later_todo = add_todo(store, &later, "t").await;

    advance_secs(ts, 3_599);
    assert!(
        store
            .unscoped_expire_endpoints(100)
            .await
            .unwrap()
            .is_empty()
    );

    advance_secs(ts, 1);
    let expired = store.unscoped_expire_endpoints(100).await.unwrap();
    let now = ts.clock.now();
    assert_eq!(expired.len(), 1, "{expired:?}");
    assert_eq!(expired[0].endpoint_id, soon.endpoint.id);
    assert_eq!(expired[0].dead_lettered, 1);
    assert_dead_lettered_by_revoke(&get(store, &soon.caller, &soon_todo.id).await, now);
    assert_eq!(get(store, &later.caller, &later_todo.id).await, later_todo);
    let state_of = |f: &Fixture| {
        let id = f.endpoint.id.clone();
        async move { store.unscoped_get_endpoint(&id).await.unwrap().state }
    };
    assert_eq!(state_of(&soon).await, EndpointState::Revoked);
    assert_eq!(state_of(&later).await, EndpointState::Active);
    assert_eq!(state_of(&never).await, EndpointState::Active);
    assert!(
        store
            .unscoped_expire_endpoints(100)
            .await
            .unwrap()
            .is_empty(),
        "an expired endpoint is expired once"
    );

    advance_secs(ts, 365 * 86_400);
    let expired = store.unscoped_expire_endpoints(100).await.unwrap();
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].endpoint_id, later.endpoint.id);
    assert_eq!(
        state_of(&never).await,
        EndpointState::Active,
        "no expiry, never expires"
    );
}

/// A vended endpoint whose credential has been authenticated (so cached).
async fn authenticated(store: &dyn Store, f: &Fixture) -> (Endpoint, String) {
    let new = new_endpoint(&f.agent, &["inbox"]);
    let hash = new.credential_hash.clone();
    let endpoint = store.create_endpoint(new).await.unwrap();
    for _ in 0..2 {
        let found = store.authenticate_endpoint(&hash).await.unwrap();
        assert_eq!(found.map(|e| e.id.clone()), Some(endpoint.id.clone()));
    }
    (endpoint, hash)
}

async fn a_revoked_credential_stops_authenticating_at_once(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let (endpoint, hash) = authenticated(store, &f).await;
    store
        .revoke_endpoint(&f.human.id, &endpoint.id)
        .await
        .unwrap();
    assert!(store.authenticate_endpoint(&hash).await.unwrap().is_none());
}

/// SQLite: a revoke written to the file by another connection (a tool
/// beside the server; here the store's own sqlx pool, which the writer lane
/// does not see) reaches the credential cache at the lane's next
/// transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_a_revoke_written_beside_the_store_is_seen_by_the_next_transaction() {
    let ts = sqlite_store().await;
    let store = &*ts.store;
    let f = fixture(store, "ada").await;
    let (endpoint, hash) = authenticated(store, &f).await;
    sqlx::query("UPDATE endpoints SET state = 'revoked', revoked_at = 1 WHERE id = $1")
        .bind(&endpoint.id)
        .execute(ts.store.pool())
        .await
        .unwrap();
    // Any lane transaction: here another credential's lookup.
    let stranger = switchboard::domain::ids::sha256_hex("sbk_nobody");
    assert!(
        store
            .authenticate_endpoint(&stranger)
            .await
            .unwrap()
            .is_none()
    );
    assert!(store.authenticate_endpoint(&hash).await.unwrap().is_none());
    ts.finish().await;
}

exercise_on_both_backends!(
    a_revoked_credential_stops_authenticating_at_once,
    revoke_dead_letters_every_live_todo,
    a_second_revoke_conflicts,
    deleting_a_revoked_endpoint_takes_its_history_along,
    another_human_cannot_revoke,
    create_on_a_revoked_endpoint_conflicts,
    expiry_revokes_only_endpoints_past_their_expiry,
);
