//! Fencing: a fenced claim's lease answers only to its one-time token; a
//! missing, wrong or stale token is a `conflict` that changes nothing.

use sqlx::Row;
use switchboard::domain::ids::sha256_hex;
use switchboard::domain::todo::TodoState;
use switchboard::mint::random_token;
use switchboard::store::*;
use switchboard::testkit::StorePeek;

use crate::common::*;
use crate::exercise_on_every_path;
use crate::support::{TestStore, fixture};

fn is_base64url(token: &str) -> bool {
    token
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

async fn stored_token_hash(store: &SqlStore, id: &str) -> Option<String> {
    sqlx::query("SELECT lease_token_hash FROM todos WHERE id = $1")
        .bind(id)
        .fetch_one(store.pool())
        .await
        .unwrap()
        .get(0)
}

async fn a_fenced_claim_returns_a_one_time_token(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let by_id = add_todo(store, &f, "by id").await;
    let next = add_todo(store, &f, "next").await;

    let (claimed, token) = fenced_claim(store, &f.caller, &by_id.id).await;
    assert!(claimed.todo.fenced);
    assert_eq!(token.len(), 22, "16 bytes of base64url: {token}");
    assert!(is_base64url(&token), "{token}");
    assert_eq!(
        stored_token_hash(&ts.store, &by_id.id).await,
        Some(sha256_hex(&token)),
        "only the hash is stored"
    );

    let via_next = store
        .claim_next(
            &f.caller,
            None,
            ClaimOptions {
                require_fence: true,
                ..ClaimOptions::default()
            },
        )
        .await
        .unwrap()
        .expect("a todo");
    assert_eq!(via_next.todo.id, next.id);
    let other = via_next.lease_token.expect("claim_next can be fenced too");
    assert_ne!(other, token, "tokens are per claim");
}

async fn a_missing_or_wrong_token_conflicts(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    let (_, token) = fenced_claim(store, &f.caller, &todo.id).await;
    // Well-formed, just not this lease's.
    let wrong = random_token(16);
    assert_ne!(wrong, token);

    assert_holder_verbs_conflict(store, &f.caller, &todo.id, None).await;
    assert_holder_verbs_conflict(store, &f.caller, &todo.id, Some(&wrong)).await;
    assert_holder_verbs_conflict(store, &f.caller, &todo.id, Some("")).await;
}

async fn a_stale_token_from_a_released_claim_conflicts(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    let (_, stale) = fenced_claim(store, &f.caller, &todo.id).await;
    store
        .release(
            &f.caller,
            &todo.id,
            ReleaseOptions {
                lease_token: Some(stale.clone()),
                ..ReleaseOptions::default()
            },
        )
        .await
        .unwrap();
    let (_, current) = fenced_claim(store, &f.caller, &todo.id).await;
    assert_ne!(stale, current);

    assert_holder_verbs_conflict(store, &f.caller, &todo.id, Some(&stale)).await;
}

async fn a_stale_token_after_a_takeover_conflicts(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    let (_, stale) = fenced_claim(store, &f.caller, &todo.id).await;
    advance_secs(ts, 301);
    // Another worker sharing the credential takes over the lapsed lease.
    let (_, current) = fenced_claim(store, &f.caller, &todo.id).await;

    assert_holder_verbs_conflict(store, &f.caller, &todo.id, Some(&stale)).await;
    let done = store
        .complete(
            &f.caller,
            &todo.id,
            Finish {
                lease_token: Some(current),
                ..Finish::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(done.state, TodoState::Done);
}

async fn the_right_token_works_for_every_holder_verb(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    for verb in HolderVerb::ALL {
        let todo = add_todo(store, &f, "t").await;
        let (_, token) = fenced_claim(store, &f.caller, &todo.id).await;
        let after = verb
            .call(store, &f.caller, &todo.id, Some(&token))
            .await
            .unwrap_or_else(|e| panic!("{verb:?} with the right token: {e}"));
        let expected = match verb {
            HolderVerb::Heartbeat => TodoState::Claimed,
            HolderVerb::Complete => TodoState::Done,
            HolderVerb::Fail => TodoState::Failed,
            HolderVerb::Release => TodoState::Pending,
        };
        assert_eq!(after.state, expected, "{verb:?}");
        if verb != HolderVerb::Heartbeat {
            assert!(!after.fenced, "{verb:?} ends the fenced lease");
        }
    }
}

async fn the_token_lasts_as_long_as_the_lease(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    let (_, token) = fenced_claim(store, &f.caller, &todo.id).await;
    for _ in 0..3 {
        advance_secs(ts, 200);
        let beat = HolderVerb::Heartbeat
            .call(store, &f.caller, &todo.id, Some(&token))
            .await
            .unwrap();
        assert!(beat.fenced, "a heartbeat keeps the fence");
    }
    let done = HolderVerb::Complete
        .call(store, &f.caller, &todo.id, Some(&token))
        .await
        .unwrap();
    assert_eq!(done.state, TodoState::Done);
}

async fn an_unfenced_claim_ignores_any_token(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    for verb in HolderVerb::ALL {
        let todo = add_todo(store, &f, "t").await;
        let claimed = claim(store, &f.caller, &todo.id).await;
        assert!(!claimed.todo.fenced);
        verb.call(store, &f.caller, &todo.id, Some("made-up-token"))
            .await
            .unwrap_or_else(|e| panic!("{verb:?} on an unfenced lease: {e}"));
    }
}

exercise_on_every_path!(
    a_fenced_claim_returns_a_one_time_token,
    a_missing_or_wrong_token_conflicts,
    a_stale_token_from_a_released_claim_conflicts,
    a_stale_token_after_a_takeover_conflicts,
    the_right_token_works_for_every_holder_verb,
    the_token_lasts_as_long_as_the_lease,
    an_unfenced_claim_ignores_any_token,
);
