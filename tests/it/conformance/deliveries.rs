//! Webhook deliveries in the store (`08-intake.md`, "Delivery history",
//! "Trusted senders and quarantine"): recorded and listed newest first with
//! exact filters and keyset pages; a quarantined delivery is settled exactly
//! once; another human's delivery or webhook answers like a missing one;
//! retention deletes old ones in batches.

use serde_json::json;
use switchboard::store::*;

use crate::common::{advance_secs, assert_conflict, missing_id};
use crate::exercise_on_both_backends;
use crate::support::{Fixture, TestStore, fixture};

async fn webhook(store: &dyn Store, f: &Fixture, hash: &str) -> Webhook {
    store
        .create_webhook(&f.human.id, &f.endpoint.id, "inbox", hash, None)
        .await
        .unwrap()
}

fn delivery(w: &Webhook, decision: Decision, event: &str, sender: &str) -> NewDelivery {
    NewDelivery {
        webhook_id: w.id.clone(),
        human_id: w.human_id.clone(),
        endpoint_id: w.endpoint_id.clone(),
        decision,
        reason: None,
        rule: None,
        envelope: Envelope {
            source: "github".into(),
            event: Some(event.into()),
            sender: Some(sender.into()),
            trust_mode: "token".into(),
            verified: true,
            size: 2,
            ..Envelope::default()
        },
        headers: json!({"x-github-event": event}),
        body: Some(b"{}".to_vec()),
        title: Some(format!("{event} by {sender}")),
        kind: Some(event.into()),
        source: Some("github".into()),
        idempotency_key: Some(format!("{}:{event}:{sender}", w.id)),
        todo_id: None,
        replay_of: None,
    }
}

async fn all_pages(
    store: &dyn Store,
    f: &Fixture,
    w: &Webhook,
    filter: &DeliveryFilter,
    limit: i64,
) -> Vec<String> {
    let mut ids = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .list_deliveries(
                &f.human.id,
                &w.id,
                filter,
                &PageRequest {
                    limit,
                    after: after.clone(),
                },
            )
            .await
            .unwrap();
        assert!(page.items.len() as i64 <= limit);
        ids.extend(page.items.iter().map(|d| d.id.clone()));
        match page.next_cursor {
            Some(cursor) => after = Some(cursor),
            None => return ids,
        }
    }
}

async fn deliveries_are_recorded_and_listed_with_filters_and_keyset_pages(
    store: &dyn Store,
    ts: &TestStore,
) {
    let f = fixture(store, "ada").await;
    let w = webhook(store, &f, "hash-ada").await;
    let other = webhook(store, &f, "hash-ada-2").await;
    let mut recorded = Vec::new();
    for (i, (decision, event, sender)) in [
        (Decision::Duplicate, "issues", "alice"),
        (Decision::Quarantined, "issues", "Mallory"),
        (Decision::Quarantined, "pull_request", "mallory"),
        (Decision::Dropped, "push", "alice"),
        (Decision::Refused, "issues", "eve"),
    ]
    .into_iter()
    .enumerate()
    {
        let d = store
            .record_delivery(delivery(&w, decision, event, sender))
            .await
            .unwrap();
        assert!(d.id.starts_with("dl_"), "{d:?}");
        assert_eq!(d.decision, decision);
        assert_eq!(d.settled_at, None);
        recorded.push(d.id.clone());
        // Two share a millisecond: the id orders them.
        if i != 1 {
            advance_secs(ts, 1);
        }
    }
    store
        .record_delivery(delivery(&other, Decision::Refused, "issues", "alice"))
        .await
        .unwrap();

    let shown = store.get_delivery(&f.human.id, &recorded[1]).await.unwrap();
    assert_eq!(shown.envelope.sender.as_deref(), Some("Mallory"));
    assert_eq!(shown.headers, json!({"x-github-event": "issues"}));
    assert_eq!(shown.body.as_deref(), Some(&b"{}"[..]));
    assert_eq!(shown.title.as_deref(), Some("issues by Mallory"));

    let newest_first: Vec<String> = recorded.iter().rev().cloned().collect();
    for limit in [1, 2, 3, 50] {
        assert_eq!(
            all_pages(store, &f, &w, &DeliveryFilter::default(), limit).await,
            newest_first,
            "pages of {limit}"
        );
    }
    let quarantined = DeliveryFilter {
        decision: Some(Decision::Quarantined),
        ..DeliveryFilter::default()
    };
    assert_eq!(
        all_pages(store, &f, &w, &quarantined, 1).await,
        [recorded[2].clone(), recorded[1].clone()]
    );
    let issues_by_mallory = DeliveryFilter {
        event: Some("issues".into()),
        sender: Some("MALLORY".into()),
        ..DeliveryFilter::default()
    };
    assert_eq!(
        all_pages(store, &f, &w, &issues_by_mallory, 50).await,
        [recorded[1].clone()],
        "the sender matches case-insensitively, the event exactly"
    );
    let nothing = DeliveryFilter {
        event: Some("Issues".into()),
        ..DeliveryFilter::default()
    };
    assert!(all_pages(store, &f, &w, &nothing, 50).await.is_empty());
}

async fn a_quarantined_delivery_is_settled_exactly_once(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let w = webhook(store, &f, "hash-ada").await;
    let held = store
        .record_delivery(delivery(&w, Decision::Quarantined, "issues", "mallory"))
        .await
        .unwrap();
    let released = store
        .settle_delivery(&f.human.id, &held.id, Decision::Released, Some("td_x"))
        .await
        .unwrap();
    assert_eq!(released.decision, Decision::Released);
    assert_eq!(released.todo_id.as_deref(), Some("td_x"));
    assert!(released.settled_at.is_some());
    // Neither a second release nor a discard: it is not quarantined any more.
    assert_conflict(
        store
            .settle_delivery(&f.human.id, &held.id, Decision::Released, Some("td_y"))
            .await,
    );
    assert_conflict(
        store
            .settle_delivery(&f.human.id, &held.id, Decision::Discarded, None)
            .await,
    );
    let now = store.get_delivery(&f.human.id, &held.id).await.unwrap();
    assert_eq!(now.decision, Decision::Released);
    assert_eq!(
        now.todo_id.as_deref(),
        Some("td_x"),
        "the first release stands"
    );

    // Only a quarantined delivery is settled.
    let accepted = store
        .record_delivery(delivery(&w, Decision::Duplicate, "issues", "alice"))
        .await
        .unwrap();
    assert_conflict(
        store
            .settle_delivery(&f.human.id, &accepted.id, Decision::Discarded, None)
            .await,
    );

    // Concurrent settles of one quarantined delivery: exactly one wins.
    let held = store
        .record_delivery(delivery(&w, Decision::Quarantined, "issues", "eve"))
        .await
        .unwrap();
    let (a, b) = tokio::join!(
        store.settle_delivery(&f.human.id, &held.id, Decision::Released, Some("td_a")),
        store.settle_delivery(&f.human.id, &held.id, Decision::Discarded, None),
    );
    let won = [&a, &b].iter().filter(|r| r.is_ok()).count();
    assert_eq!(won, 1, "{a:?} {b:?}");
    let lost = if a.is_ok() { b } else { a };
    assert_conflict(lost);
}

async fn another_humans_delivery_answers_like_a_missing_one(store: &dyn Store, _ts: &TestStore) {
    let ada = fixture(store, "ada").await;
    let bob = fixture(store, "bob").await;
    let w = webhook(store, &ada, "hash-ada").await;
    let held = store
        .record_delivery(delivery(&w, Decision::Quarantined, "issues", "mallory"))
        .await
        .unwrap();
    let missing = format!("dl_{}", &missing_id()[3..]);
    for id in [&held.id, &missing] {
        assert!(matches!(
            store.get_delivery(&bob.human.id, id).await,
            Err(StoreError::NotFound)
        ));
        for to in [Decision::Released, Decision::Discarded] {
            assert!(matches!(
                store.settle_delivery(&bob.human.id, id, to, None).await,
                Err(StoreError::NotFound)
            ));
        }
    }
    assert!(matches!(
        store
            .list_deliveries(
                &bob.human.id,
                &w.id,
                &DeliveryFilter::default(),
                &PageRequest {
                    limit: 50,
                    after: None
                }
            )
            .await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        store
            .set_webhook_senders(&bob.human.id, &w.id, &Senders::Everyone)
            .await,
        Err(StoreError::NotFound)
    ));
    // Bob's attempts changed nothing.
    let still = store.get_delivery(&ada.human.id, &held.id).await.unwrap();
    assert_eq!(still.decision, Decision::Quarantined);
    assert_eq!(still.settled_at, None);

    // Trusted senders are set by the owner only, and read back.
    let logins = Senders::logins(vec!["Alice".into()], SenderMatch::Both).unwrap();
    let set = store
        .set_webhook_senders(&ada.human.id, &w.id, &logins)
        .await
        .unwrap();
    assert_eq!(set.senders, logins);
    let back = store
        .set_webhook_senders(&ada.human.id, &w.id, &Senders::Everyone)
        .await
        .unwrap();
    assert_eq!(back.senders, Senders::Everyone);
}

async fn retention_deletes_old_deliveries_in_batches(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let w = webhook(store, &f, "hash-ada").await;
    for sender in ["a", "b", "c"] {
        store
            .record_delivery(delivery(&w, Decision::Duplicate, "issues", sender))
            .await
            .unwrap();
    }
    advance_secs(ts, 2 * 86_400);
    let young = store
        .record_delivery(delivery(&w, Decision::Quarantined, "issues", "d"))
        .await
        .unwrap();
    let day = std::time::Duration::from_secs(86_400);
    assert_eq!(store.unscoped_prune_deliveries(day, 2).await.unwrap(), 2);
    assert_eq!(store.unscoped_prune_deliveries(day, 2).await.unwrap(), 1);
    assert_eq!(store.unscoped_prune_deliveries(day, 2).await.unwrap(), 0);
    let left = all_pages(store, &f, &w, &DeliveryFilter::default(), 50).await;
    assert_eq!(left, [young.id], "only the young one is kept");
}

/// Rules are stored whole and read back; only the owner sets them; a
/// dropped delivery's key is found again (it is spent), another decision's
/// is not.
async fn rules_are_replaced_whole_and_a_dropped_key_is_found_again(
    store: &dyn Store,
    _ts: &TestStore,
) {
    use switchboard::domain::rules::RuleSet;
    let ada = fixture(store, "ada").await;
    let bob = fixture(store, "bob").await;
    let w = webhook(store, &ada, "hash-ada").await;
    assert_eq!(w.rules, None);
    let rules = RuleSet::parse(&json!({
        "rules": [{"if": ".event == \"workflow_run\"", "then": {"drop": true}}],
        "on_error": "skip",
    }))
    .unwrap();
    let set = store
        .set_webhook_rules(&ada.human.id, &w.id, Some(&rules))
        .await
        .unwrap();
    assert_eq!(set.rules.as_ref(), Some(&rules));
    assert_eq!(
        store.get_webhook(&ada.human.id, &w.id).await.unwrap().rules,
        Some(rules.clone())
    );
    assert!(matches!(
        store.set_webhook_rules(&bob.human.id, &w.id, None).await,
        Err(StoreError::NotFound)
    ));
    let cleared = store
        .set_webhook_rules(&ada.human.id, &w.id, None)
        .await
        .unwrap();
    assert_eq!(cleared.rules, None);

    let dropped = store
        .record_delivery(delivery(&w, Decision::Dropped, "workflow_run", "ci"))
        .await
        .unwrap();
    let quarantined = store
        .record_delivery(delivery(&w, Decision::Quarantined, "issues", "eve"))
        .await
        .unwrap();
    let found = store
        .find_dropped_delivery(&w.id, dropped.idempotency_key.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(found.map(|d| d.id), Some(dropped.id));
    let not_spent = store
        .find_dropped_delivery(&w.id, quarantined.idempotency_key.as_deref().unwrap())
        .await
        .unwrap();
    assert!(not_spent.is_none(), "only a drop spends a key");
}

exercise_on_both_backends!(
    rules_are_replaced_whole_and_a_dropped_key_is_found_again,
    deliveries_are_recorded_and_listed_with_filters_and_keyset_pages,
    retention_deletes_old_deliveries_in_batches,
    a_quarantined_delivery_is_settled_exactly_once,
    another_humans_delivery_answers_like_a_missing_one,
);
