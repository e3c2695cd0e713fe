//! OAuth clients, codes, grants and tokens (`docs/oauth.md`): a code is
//! taken once, only for the human's own active endpoint; a refresh token
//! rotates and a reused one revokes its whole grant; an access token
//! authenticates as its endpoint and never outlives it, nor its grant.

use switchboard::domain::ids::sha256_hex;
use switchboard::domain::oauth::{CODE_TTL_MS, ClientMetadata, ClientMetadataInput};
use switchboard::store::*;

use crate::common::*;
use crate::exercise_on_both_backends;
use crate::support::{TestStore, fixture};

fn metadata() -> ClientMetadata {
    ClientMetadataInput {
        client_name: Some("Claude".into()),
        redirect_uris: Some(vec!["https://claude.ai/api/mcp/auth_callback".into()]),
        ..Default::default()
    }
    .check()
    .unwrap()
}

fn tokens(n: u32) -> NewOAuthTokens {
    NewOAuthTokens {
        access_hash: sha256_hex(&format!("sbo_access_{n}")),
        refresh_hash: sha256_hex(&format!("sbr_refresh_{n}")),
    }
}

fn new_code(client: &OAuthClient, f: &crate::support::Fixture, code: &str) -> NewOAuthCode {
    NewOAuthCode {
        code_hash: sha256_hex(code),
        client_id: client.id.clone(),
        human_id: f.human.id.clone(),
        endpoint_id: f.endpoint.id.clone(),
        redirect_uri: "https://claude.ai/api/mcp/auth_callback".into(),
        code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM".into(),
        resource: format!("https://sb.example/mcp/{}", f.endpoint.slug),
    }
}

async fn authenticates(store: &dyn Store, n: u32) -> Option<std::sync::Arc<Endpoint>> {
    store
        .authenticate_oauth_token(&sha256_hex(&format!("sbo_access_{n}")))
        .await
        .unwrap()
}

/// A granted connection: client, code taken, grant with tokens `1`.
async fn granted(store: &dyn Store, f: &crate::support::Fixture) -> (OAuthClient, OAuthIssued) {
    let client = store.register_oauth_client(&metadata()).await.unwrap();
    store
        .create_oauth_code(new_code(&client, f, "sbc_one"))
        .await
        .unwrap();
    let code = store
        .take_oauth_code(&sha256_hex("sbc_one"))
        .await
        .unwrap()
        .unwrap();
    let issued = store.create_oauth_grant(&code, tokens(1)).await.unwrap();
    (client, issued)
}

async fn a_code_is_taken_once_and_only_for_the_humans_own_endpoint(
    store: &dyn Store,
    ts: &TestStore,
) {
    let ada = fixture(store, "ada").await;
    let bob = fixture(store, "bob").await;
    let client = store.register_oauth_client(&metadata()).await.unwrap();
    assert!(client.id.starts_with("oc_"), "{}", client.id);
    assert!(!client.verified);
    assert_eq!(
        store.get_oauth_client(&client.id).await.unwrap(),
        Some(client.clone())
    );

    // Bob cannot have a code for Ada's endpoint: tenancy in the statement.
    let mut foreign = new_code(&client, &ada, "sbc_foreign");
    foreign.human_id = bob.human.id.clone();
    assert!(matches!(
        store.create_oauth_code(foreign).await,
        Err(StoreError::NotFound)
    ));
    assert!(
        store
            .take_oauth_code(&sha256_hex("sbc_foreign"))
            .await
            .unwrap()
            .is_none()
    );

    store
        .create_oauth_code(new_code(&client, &ada, "sbc_mine"))
        .await
        .unwrap();
    let code = store
        .take_oauth_code(&sha256_hex("sbc_mine"))
        .await
        .unwrap()
        .expect("taken once");
    assert_eq!(code.endpoint_id, ada.endpoint.id);
    assert_eq!(
        code.expires_at.as_millis(),
        ts.clock_now().as_millis() + CODE_TTL_MS
    );
    assert!(
        store
            .take_oauth_code(&sha256_hex("sbc_mine"))
            .await
            .unwrap()
            .is_none(),
        "a code is single use"
    );

    // No code for a revoked endpoint.
    store
        .revoke_endpoint(&ada.human.id, &ada.endpoint.id)
        .await
        .unwrap();
    assert!(matches!(
        store
            .create_oauth_code(new_code(&client, &ada, "sbc_late"))
            .await,
        Err(StoreError::NotFound)
    ));
}

async fn an_access_token_authenticates_as_its_endpoint_until_the_endpoint_goes(
    store: &dyn Store,
    ts: &TestStore,
) {
    let f = fixture(store, "ada").await;
    let (_, issued) = granted(store, &f).await;
    assert!(issued.grant.id.starts_with("og_"));
    let endpoint = authenticates(store, 1).await.expect("live token");
    assert_eq!(endpoint.id, f.endpoint.id);
    assert_eq!(endpoint.scope_queues, f.endpoint.scope_queues);
    assert!(
        store
            .authenticate_oauth_token(&sha256_hex("sbr_refresh_1"))
            .await
            .unwrap()
            .is_none(),
        "a refresh token is not an access token"
    );

    // The token expires within the hour.
    advance_secs(ts, 3_601);
    assert!(authenticates(store, 1).await.is_none(), "expired");

    // A refreshed pair works until the endpoint is revoked, cache or not.
    let refreshed = store
        .refresh_oauth_grant(
            &issued.grant.client_id,
            &sha256_hex("sbr_refresh_1"),
            tokens(2),
        )
        .await
        .unwrap();
    assert!(
        matches!(refreshed, OAuthRefresh::Rotated(_)),
        "{refreshed:?}"
    );
    assert!(authenticates(store, 2).await.is_some());
    store
        .revoke_endpoint(&f.human.id, &f.endpoint.id)
        .await
        .unwrap();
    assert!(authenticates(store, 2).await.is_none(), "endpoint revoked");
    assert!(
        store
            .list_oauth_connections(&f.human.id, &f.endpoint.id)
            .await
            .unwrap()
            .is_empty(),
        "the endpoint's grants are revoked with it"
    );
    let after = store
        .refresh_oauth_grant(
            &issued.grant.client_id,
            &sha256_hex("sbr_refresh_2"),
            tokens(3),
        )
        .await
        .unwrap();
    assert!(matches!(after, OAuthRefresh::Refused), "{after:?}");
}

async fn a_reused_refresh_token_revokes_the_whole_grant(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let (client, issued) = granted(store, &f).await;
    let rotated = store
        .refresh_oauth_grant(&client.id, &sha256_hex("sbr_refresh_1"), tokens(2))
        .await
        .unwrap();
    let OAuthRefresh::Rotated(rotated) = rotated else {
        panic!("{rotated:?}")
    };
    assert_eq!(rotated.grant.id, issued.grant.id);

    // Another client presenting a live refresh token gets nothing, and
    // spends nothing.
    let other = store.register_oauth_client(&metadata()).await.unwrap();
    let stolen = store
        .refresh_oauth_grant(&other.id, &sha256_hex("sbr_refresh_2"), tokens(9))
        .await
        .unwrap();
    assert!(matches!(stolen, OAuthRefresh::Refused), "{stolen:?}");

    // The spent one again: the family dies, the newest pair included.
    let reused = store
        .refresh_oauth_grant(&client.id, &sha256_hex("sbr_refresh_1"), tokens(3))
        .await
        .unwrap();
    match reused {
        OAuthRefresh::Reused {
            grant_id,
            endpoint_id,
        } => {
            assert_eq!(grant_id, issued.grant.id);
            assert_eq!(endpoint_id, f.endpoint.id);
        }
        other => panic!("{other:?}"),
    }
    assert!(authenticates(store, 2).await.is_none());
    let newest = store
        .refresh_oauth_grant(&client.id, &sha256_hex("sbr_refresh_2"), tokens(4))
        .await
        .unwrap();
    assert!(matches!(newest, OAuthRefresh::Refused), "{newest:?}");
    // Unknown tokens are refused and revoke nothing.
    let unknown = store
        .refresh_oauth_grant(&client.id, &sha256_hex("sbr_nothing"), tokens(5))
        .await
        .unwrap();
    assert!(matches!(unknown, OAuthRefresh::Refused), "{unknown:?}");
}

async fn connections_are_listed_and_revoked_by_their_human_only(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let bob = fixture(store, "bob").await;
    let (client, issued) = granted(store, &f).await;
    let listed = store
        .list_oauth_connections(&f.human.id, &f.endpoint.id)
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].grant.id, issued.grant.id);
    assert_eq!(listed[0].client.id, client.id);
    assert!(
        store
            .list_oauth_connections(&bob.human.id, &f.endpoint.id)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        store
            .revoke_oauth_grant(&bob.human.id, &f.endpoint.id, &issued.grant.id)
            .await,
        Err(StoreError::NotFound)
    ));
    assert!(authenticates(store, 1).await.is_some());
    let revoked = store
        .revoke_oauth_grant(&f.human.id, &f.endpoint.id, &issued.grant.id)
        .await
        .unwrap();
    assert!(revoked.revoked_at.is_some());
    assert!(
        authenticates(store, 1).await.is_none(),
        "at once, cache or not"
    );
    assert!(matches!(
        store
            .revoke_oauth_grant(&f.human.id, &f.endpoint.id, &issued.grant.id)
            .await,
        Err(StoreError::Conflict(_))
    ));
    // Pruning takes the revoked grant's tokens, and a day on, clients that
    // never got a code; a client with a grant (even a revoked one) stays.
    let unused = store.register_oauth_client(&metadata()).await.unwrap();
    advance_secs(ts, 1);
    assert!(store.unscoped_prune_oauth().await.unwrap() >= 2);
    assert!(store.get_oauth_client(&unused.id).await.unwrap().is_some());
    advance_secs(ts, 86_400);
    assert_eq!(store.unscoped_prune_oauth().await.unwrap(), 1);
    assert!(store.get_oauth_client(&unused.id).await.unwrap().is_none());
    assert!(store.get_oauth_client(&client.id).await.unwrap().is_some());
}

async fn a_metadata_document_client_is_cached_and_refreshed(store: &dyn Store, _ts: &TestStore) {
    let url = "https://app.example.com/oauth/client.json";
    let first = store
        .put_oauth_document_client(url, &metadata())
        .await
        .unwrap();
    assert!(first.verified);
    assert!(first.fetched_at.is_some());
    let renamed = ClientMetadata {
        name: Some("Renamed".into()),
        ..metadata()
    };
    let second = store
        .put_oauth_document_client(url, &renamed)
        .await
        .unwrap();
    assert_eq!(second.name.as_deref(), Some("Renamed"));
    assert_eq!(second.created_at, first.created_at);
    // A registered client is never overwritten by a document.
    let registered = store.register_oauth_client(&metadata()).await.unwrap();
    assert!(matches!(
        store
            .put_oauth_document_client(&registered.id, &renamed)
            .await,
        Err(StoreError::NotFound)
    ));
}

exercise_on_both_backends!(
    a_code_is_taken_once_and_only_for_the_humans_own_endpoint,
    an_access_token_authenticates_as_its_endpoint_until_the_endpoint_goes,
    a_reused_refresh_token_revokes_the_whole_grant,
    connections_are_listed_and_revoked_by_their_human_only,
    a_metadata_document_client_is_cached_and_refreshed,
);
