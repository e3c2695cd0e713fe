//! Schedules in the store: tenant-scoped records, the due set, and the one
//! guarded statement that moves a schedule to its next occurrence and makes
//! the occurrence's todo: callers racing the same occurrence make one todo.

use switchboard::domain::Timestamp;
use switchboard::store::*;

use crate::exercise_on_both_backends;
use crate::support::{TestStore, fixture};

fn hourly(endpoint_id: &str, next_at: Timestamp) -> NewSchedule {
    NewSchedule {
        endpoint_id: endpoint_id.to_owned(),
        queue: "inbox".into(),
        cron: "0 * * * *".into(),
        tz: "UTC".into(),
        title: "hourly".into(),
        kind: Some("schedule".into()),
        payload: Some(serde_json::json!({"n": 1})),
        catch_up: "one".into(),
        next_at,
    }
}

fn todo(endpoint_id: &str, title: &str) -> NewTodo {
    NewTodo {
        priority: 0,
        intake: Some(crate::support::delivery::operator_intake()),
        ..NewTodo::new(endpoint_id, "inbox", title)
    }
}

async fn todos_of(store: &dyn Store, human_id: &str, endpoint_id: &str) -> Vec<Todo> {
    let filter = TodoFilter {
        endpoint_id: Some(endpoint_id.to_owned()),
        ..TodoFilter::default()
    };
    store
        .human_list_todos(
            human_id,
            &filter,
            &PageRequest {
                limit: 100,
                after: None,
            },
        )
        .await
        .unwrap()
        .items
}

async fn schedules_are_their_humans_and_their_endpoints(store: &dyn Store, ts: &TestStore) {
    let ada = fixture(store, "ada").await;
    let bob = fixture(store, "bob").await;
    let now = ts.clock_now();
    let s = store
        .create_schedule(&ada.human.id, hourly(&ada.endpoint.id, now.add_secs(60)))
        .await
        .unwrap();
    assert!(s.id.starts_with("sc_"), "{s:?}");
    assert!(!s.paused);
    assert_eq!(s.payload, Some(serde_json::json!({"n": 1})));
    assert_eq!(s.next_at, now.add_secs(60));
    assert_eq!(
        store
            .list_schedules(&ada.human.id, &ada.endpoint.id)
            .await
            .unwrap()
            .len(),
        1
    );
    // Another human sees nothing and changes nothing.
    assert!(matches!(
        store.get_schedule(&bob.human.id, &s.id).await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        store.delete_schedule(&bob.human.id, &s.id).await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        store
            .set_schedule_paused(&bob.human.id, &s.id, true, now)
            .await,
        Err(StoreError::NotFound)
    ));
    assert!(
        store
            .list_schedules(&bob.human.id, &ada.endpoint.id)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        store
            .create_schedule(&bob.human.id, hourly(&ada.endpoint.id, now))
            .await,
        Err(StoreError::NotFound)
    ));
    let paused = store
        .set_schedule_paused(&ada.human.id, &s.id, true, s.next_at)
        .await
        .unwrap();
    assert!(paused.paused);
    store.delete_schedule(&ada.human.id, &s.id).await.unwrap();
    assert!(matches!(
        store.get_schedule(&ada.human.id, &s.id).await,
        Err(StoreError::NotFound)
    ));
}

async fn the_due_set_is_unpaused_active_and_past(store: &dyn Store, ts: &TestStore) {
    let ada = fixture(store, "ada").await;
    let now = ts.clock_now();
    let due = store
        .create_schedule(&ada.human.id, hourly(&ada.endpoint.id, now.add_secs(-5)))
        .await
        .unwrap();
    let later = store
        .create_schedule(&ada.human.id, hourly(&ada.endpoint.id, now.add_secs(5)))
        .await
        .unwrap();
    let paused = store
        .create_schedule(&ada.human.id, hourly(&ada.endpoint.id, now.add_secs(-5)))
        .await
        .unwrap();
    store
        .set_schedule_paused(&ada.human.id, &paused.id, true, paused.next_at)
        .await
        .unwrap();
    let ids: Vec<String> = store
        .unscoped_due_schedules(now, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(ids, std::slice::from_ref(&due.id));
    assert_ne!(ids, [later.id]);
    // A revoked endpoint's schedules are not due.
    store
        .revoke_endpoint(&ada.human.id, &ada.endpoint.id)
        .await
        .unwrap();
    assert!(
        store
            .unscoped_due_schedules(now, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn callers_racing_one_occurrence_make_one_todo(store: &dyn Store, ts: &TestStore) {
    let ada = fixture(store, "ada").await;
    let now = ts.clock_now();
    let s = store
        .create_schedule(&ada.human.id, hourly(&ada.endpoint.id, now))
        .await
        .unwrap();
    let next = now.add_secs(3600);
    let races = (0..8).map(|i| {
        store.unscoped_fire_schedule(
            &s.id,
            s.next_at,
            next,
            s.next_at,
            Some(todo(&ada.endpoint.id, &format!("race {i}"))),
        )
    });
    let outcomes = futures_util::future::join_all(races).await;
    let created = outcomes
        .iter()
        .filter(|o| matches!(o, Ok(Fired::Created(_))))
        .count();
    let lost = outcomes
        .iter()
        .filter(|o| matches!(o, Ok(Fired::Lost)))
        .count();
    assert_eq!((created, lost), (1, 7), "{outcomes:?}");
    assert_eq!(
        todos_of(store, &ada.human.id, &ada.endpoint.id).await.len(),
        1
    );
    let after = store.get_schedule(&ada.human.id, &s.id).await.unwrap();
    assert_eq!(after.next_at, next);
    assert_eq!(after.last_at, Some(s.next_at));
    // The same occurrence again (a tick after a restart that read the old row): nothing.
    assert!(matches!(
        store
            .unscoped_fire_schedule(
                &s.id,
                s.next_at,
                next,
                s.next_at,
                Some(todo(&ada.endpoint.id, "again"))
            )
            .await,
        Ok(Fired::Lost)
    ));
    assert_eq!(
        todos_of(store, &ada.human.id, &ada.endpoint.id).await.len(),
        1
    );
}

async fn a_refused_todo_moves_nothing_and_a_skip_makes_none(store: &dyn Store, ts: &TestStore) {
    let ada = fixture(store, "ada").await;
    let now = ts.clock_now();
    let s = store
        .create_schedule(&ada.human.id, hourly(&ada.endpoint.id, now))
        .await
        .unwrap();
    let next = now.add_secs(3600);
    let mut outside = todo(&ada.endpoint.id, "outside");
    outside.queue = "elsewhere".into();
    assert!(matches!(
        store
            .unscoped_fire_schedule(&s.id, s.next_at, next, s.next_at, Some(outside))
            .await,
        Err(StoreError::InvalidArgument(_))
    ));
    assert_eq!(
        store
            .get_schedule(&ada.human.id, &s.id)
            .await
            .unwrap()
            .next_at,
        s.next_at,
        "the refusal rolled the move back"
    );
    assert!(matches!(
        store
            .unscoped_fire_schedule(&s.id, s.next_at, next, s.next_at, None)
            .await,
        Ok(Fired::Advanced)
    ));
    assert!(
        todos_of(store, &ada.human.id, &ada.endpoint.id)
            .await
            .is_empty()
    );
    let after = store.get_schedule(&ada.human.id, &s.id).await.unwrap();
    assert_eq!((after.next_at, after.last_at), (next, None));
    // A paused schedule is not moved.
    store
        .set_schedule_paused(&ada.human.id, &s.id, true, next)
        .await
        .unwrap();
    assert!(matches!(
        store
            .unscoped_fire_schedule(&s.id, next, next.add_secs(3600), next, None)
            .await,
        Ok(Fired::Lost)
    ));
}

exercise_on_both_backends!(
    schedules_are_their_humans_and_their_endpoints,
    the_due_set_is_unpaused_active_and_past,
    callers_racing_one_occurrence_make_one_todo,
    a_refused_todo_moves_nothing_and_a_skip_makes_none,
);
