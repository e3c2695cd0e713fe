//! Notify hooks in the store: tenant-scoped records, the enabled set every
//! instance hosts, the bounded delivery log, and failures counted in one
//! statement each with exactly one caller seeing the hook disabled.

use switchboard::clock::Clock;
use switchboard::domain::hook::KEPT_DELIVERIES;
use switchboard::store::*;

use crate::exercise_on_both_backends;
use crate::support::{TestStore, fixture};

fn attempt(hook_id: &str, at: switchboard::domain::Timestamp, n: i64) -> HookDelivery {
    HookDelivery {
        hook_id: hook_id.to_owned(),
        at,
        event: "todo.ready".into(),
        todo_id: Some(format!("td_{n}")),
        outcome: "failed".into(),
        status: Some(500),
        error: None,
        duration_ms: 3,
        attempt: 1,
    }
}

async fn hooks_are_their_humans_and_their_endpoints(store: &dyn Store, _ts: &TestStore) {
    let ada = fixture(store, "ada").await;
    let bob = fixture(store, "bob").await;
    let hook = store
        .create_hook(
            &ada.human.id,
            &ada.endpoint.id,
            "https://example.com/a",
            "whsec_x",
        )
        .await
        .unwrap();
    assert!(hook.id.starts_with("hk_"), "{hook:?}");
    assert!(hook.is_enabled());
    assert_eq!(hook.consecutive_failures, 0);
    // Another human sees nothing and can change nothing.
    assert!(matches!(
        store.get_hook(&bob.human.id, &hook.id).await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        store.delete_hook(&bob.human.id, &hook.id).await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        store.enable_hook(&bob.human.id, &hook.id).await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        store.hook_target(&bob.human.id, &hook.id).await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        store
            .create_hook(
                &bob.human.id,
                &ada.endpoint.id,
                "https://example.com/b",
                "s"
            )
            .await,
        Err(StoreError::NotFound)
    ));
    assert!(
        store
            .list_hooks(&bob.human.id, &ada.endpoint.id)
            .await
            .unwrap()
            .is_empty()
    );
    let target = store.hook_target(&ada.human.id, &hook.id).await.unwrap();
    assert_eq!(target.secret, "whsec_x");
    assert_eq!(target.endpoint_slug, ada.endpoint.slug);
    assert_eq!(
        store.unscoped_hooked_endpoints().await.unwrap(),
        vec![ada.endpoint.id.clone()]
    );
    let listed = store
        .list_hooks(&ada.human.id, &ada.endpoint.id)
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    store.delete_hook(&ada.human.id, &hook.id).await.unwrap();
    assert!(store.unscoped_hooked_endpoints().await.unwrap().is_empty());
    assert!(
        store
            .unscoped_enabled_hooks(&ada.endpoint.id)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn a_revoked_endpoint_gets_no_hook_and_rings_none(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    store
        .create_hook(&f.human.id, &f.endpoint.id, "https://example.com/a", "s")
        .await
        .unwrap();
    store
        .revoke_endpoint(&f.human.id, &f.endpoint.id)
        .await
        .unwrap();
    assert!(
        store
            .unscoped_enabled_hooks(&f.endpoint.id)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.unscoped_hooked_endpoints().await.unwrap().is_empty());
    assert!(matches!(
        store
            .create_hook(&f.human.id, &f.endpoint.id, "https://example.com/b", "s")
            .await,
        Err(StoreError::EndpointRevoked)
    ));
}

async fn the_delivery_log_keeps_the_last_deliveries(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let hook = store
        .create_hook(&f.human.id, &f.endpoint.id, "https://example.com/a", "s")
        .await
        .unwrap();
    let total = KEPT_DELIVERIES + 7;
    for n in 0..total {
        let at = ts.clock.now();
        store
            .unscoped_record_hook_delivery(&attempt(&hook.id, at, n))
            .await
            .unwrap();
        ts.clock.advance(std::time::Duration::from_millis(1));
    }
    let kept = store
        .list_hook_deliveries(&f.human.id, &hook.id, 1000)
        .await
        .unwrap();
    assert_eq!(kept.len() as i64, KEPT_DELIVERIES);
    // Newest first; the oldest ones went.
    assert_eq!(
        kept[0].todo_id.as_deref(),
        Some(&*format!("td_{}", total - 1))
    );
    assert_eq!(
        kept.last().unwrap().todo_id.as_deref(),
        Some(&*format!("td_{}", total - KEPT_DELIVERIES))
    );
    assert_eq!(kept[0].status, Some(500));
    let other = fixture(store, "bob").await;
    assert!(
        store
            .list_hook_deliveries(&other.human.id, &hook.id, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn the_twentieth_failure_disables_once_and_enable_restores(
    store: &dyn Store,
    _ts: &TestStore,
) {
    let f = fixture(store, "ada").await;
    let hook = store
        .create_hook(&f.human.id, &f.endpoint.id, "https://example.com/a", "s")
        .await
        .unwrap();
    for n in 1..20 {
        let failure = store
            .unscoped_hook_failed(&hook.id, 20, "why")
            .await
            .unwrap();
        assert_eq!(failure.consecutive_failures, n);
        assert!(!failure.disabled_now);
    }
    // A success in between starts the count again.
    store.unscoped_hook_succeeded(&hook.id).await.unwrap();
    assert_eq!(
        store
            .get_hook(&f.human.id, &hook.id)
            .await
            .unwrap()
            .consecutive_failures,
        0
    );
    // 20 failures at once, from many callers: exactly one disables it.
    let results = futures_util::future::join_all(
        (0..20).map(|_| store.unscoped_hook_failed(&hook.id, 20, "20 in a row")),
    )
    .await;
    let disabled: Vec<_> = results
        .into_iter()
        .map(Result::unwrap)
        .filter(|f| f.disabled_now)
        .collect();
    assert_eq!(disabled.len(), 1, "{disabled:?}");
    let hook_now = store.get_hook(&f.human.id, &hook.id).await.unwrap();
    assert!(!hook_now.is_enabled());
    assert_eq!(hook_now.consecutive_failures, 20);
    assert_eq!(hook_now.disabled_reason.as_deref(), Some("20 in a row"));
    assert!(store.unscoped_hooked_endpoints().await.unwrap().is_empty());
    // One more failure does not disable it again.
    let again = store.unscoped_hook_failed(&hook.id, 20, "x").await.unwrap();
    assert!(!again.disabled_now);

    let enabled = store.enable_hook(&f.human.id, &hook.id).await.unwrap();
    assert!(enabled.is_enabled());
    assert_eq!(enabled.consecutive_failures, 0);
    assert_eq!(enabled.disabled_reason, None);
    assert_eq!(
        store.unscoped_hooked_endpoints().await.unwrap(),
        vec![f.endpoint.id.clone()]
    );
}

exercise_on_both_backends!(
    hooks_are_their_humans_and_their_endpoints,
    a_revoked_endpoint_gets_no_hook_and_rings_none,
    the_delivery_log_keeps_the_last_deliveries,
    the_twentieth_failure_disables_once_and_enable_restores,
);
