//! Humans' API tokens and the board sessions bound to them (issue 48): a
//! session's token authenticates only while the token it was signed in with
//! is live, is written only for a live one of the same human, and is
//! revoked with it.

use switchboard::domain::Timestamp;
use switchboard::domain::ids::sha256_hex;
use switchboard::store::*;

use crate::common::*;
use crate::exercise_on_both_backends;
use crate::support::TestStore;

async fn authenticates(store: &dyn Store, secret: &str) -> Option<AuthenticatedToken> {
    store
        .authenticate_api_token(&sha256_hex(secret))
        .await
        .unwrap()
}

fn at(ts: &TestStore, secs: i64) -> Timestamp {
    Timestamp::from_millis(ts.clock_now().as_millis() + secs * 1_000)
}

async fn a_session_lives_only_while_the_token_it_is_of_lives(store: &dyn Store, ts: &TestStore) {
    let ada = store.create_human("ada").await.unwrap();
    let (pasted, record) = issue_api_token(store, &ada.id, None, Some(at(ts, 3_600)))
        .await
        .unwrap();
    let signed = authenticates(store, &pasted).await.expect("live");
    assert_eq!(signed.authority_expires_at, record.expires_at);
    assert_eq!(signed.token.session_of, None);

    let (session, session_record) = issue_session_token(
        store,
        &ada.id,
        &record.id,
        Some("board sign-in".into()),
        Some(at(ts, 600)),
    )
    .await
    .unwrap();
    assert_eq!(
        session_record.session_of.as_deref(),
        Some(record.id.as_str())
    );
    let board = authenticates(store, &session)
        .await
        .expect("a live session");
    assert_eq!(board.token.session_of.as_deref(), Some(record.id.as_str()));
    // What it may mint is bounded by the pasted token, not by the session.
    assert_eq!(board.authority_expires_at, record.expires_at);

    // Revoking the pasted token revokes the session in the same statement.
    let revoked = store.revoke_api_token(&ada.id, &record.id).await.unwrap();
    assert_eq!(revoked.id, record.id);
    assert!(authenticates(store, &session).await.is_none());
    let listed = store
        .list_api_tokens(
            &ada.id,
            &PageRequest {
                limit: 10,
                after: None,
            },
        )
        .await
        .unwrap();
    let session_row = listed
        .items
        .iter()
        .find(|t| t.id == session_record.id)
        .unwrap();
    assert!(session_row.revoked_at.is_some(), "{session_row:?}");

    // No session is written for a dead token, nor for another human's.
    let dead = issue_session_token(store, &ada.id, &record.id, None, Some(at(ts, 600))).await;
    assert!(matches!(dead, Err(StoreError::NotFound)), "{dead:?}");
    let bob = store.create_human("bob").await.unwrap();
    let (_, bobs) = issue_api_token(store, &bob.id, None, None).await.unwrap();
    let foreign = issue_session_token(store, &ada.id, &bobs.id, None, Some(at(ts, 600))).await;
    assert!(matches!(foreign, Err(StoreError::NotFound)), "{foreign:?}");
}

async fn a_session_ends_when_the_token_it_is_of_expires(store: &dyn Store, ts: &TestStore) {
    let ada = store.create_human("ada").await.unwrap();
    let (_, record) = issue_api_token(store, &ada.id, None, Some(at(ts, 60)))
        .await
        .unwrap();
    // A session written to last longer than its token (the store does not
    // clamp; `ops` does) still ends with it.
    let (session, _) = issue_session_token(store, &ada.id, &record.id, None, Some(at(ts, 600)))
        .await
        .unwrap();
    assert!(authenticates(store, &session).await.is_some());
    advance_secs(ts, 61);
    assert!(authenticates(store, &session).await.is_none());
}

exercise_on_both_backends!(
    a_session_lives_only_while_the_token_it_is_of_lives,
    a_session_ends_when_the_token_it_is_of_expires,
);
