//! Bad input: `InvalidArgument` naming the field, and nothing written.
//! (Non-positive leases are covered in `leases.rs`.)

use switchboard::domain::todo::MAX_PAYLOAD_BYTES;
use switchboard::store::*;

use crate::common::*;
use crate::exercise_on_both_backends;
use crate::support::{Fixture, TestStore, fixture};

/// Writes nothing: no todo, no intake event (every case carries one).
async fn assert_create_refused(ts: &TestStore, new: NewTodo, field: &str) {
    let store: &dyn Store = &*ts.store;
    let before = (
        count_todos(&ts.store).await,
        count_intake_events(&ts.store).await,
    );
    let what = format!("{:?}/{:?}", new.queue, new.title);
    assert_invalid(store.create_todo(new).await, field);
    let after = (
        count_todos(&ts.store).await,
        count_intake_events(&ts.store).await,
    );
    assert_eq!(after, before, "a refused create ({what}) wrote something");
}

fn base(f: &Fixture) -> NewTodo {
    NewTodo {
        priority: 0,
        intake: Some(NewIntakeEvent {
            trust_mode: TrustMode::Operator,
            actor: format!("human:{}", f.human.id),
            webhook_id: None,
            headers: serde_json::json!({}),
            content_type: None,
            body: b"{}".to_vec(),
        }),
        ..inbox_todo(f, "a fine title")
    }
}

/// A JSON string whose encoding (with its quotes) is exactly `bytes` long.
fn payload_of(bytes: usize) -> serde_json::Value {
    serde_json::Value::String("x".repeat(bytes - 2))
}

async fn bad_queue_names_are_refused(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    for queue in ["", "Inbox", "-inbox", "in box", &"q".repeat(65)] {
        let new = NewTodo {
            queue: queue.to_owned(),
            ..base(&f)
        };
        assert_create_refused(ts, new, "queue").await;
    }
}

async fn a_queue_outside_the_scope_is_refused(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let new = NewTodo {
        queue: "ops".to_owned(),
        ..base(&f)
    };
    assert_create_refused(ts, new, "queue").await;
}

async fn claim_next_checks_the_named_queue(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;

    let outside = store
        .claim_next(&f.caller, Some("ops"), ClaimOptions::default())
        .await;
    assert!(
        matches!(outside, Err(StoreError::Forbidden(_))),
        "{outside:?}"
    );
    let malformed = store
        .claim_next(&f.caller, Some("Not A Queue"), ClaimOptions::default())
        .await;
    assert_invalid(malformed, "queue");
    assert_eq!(
        get(store, &f.caller, &todo.id).await,
        todo,
        "nothing claimed"
    );
}

async fn bad_titles_are_refused(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    for title in ["", "   ", "two\nlines", &"x".repeat(201), &"é".repeat(101)] {
        let new = NewTodo {
            title: title.to_owned(),
            ..base(&f)
        };
        assert_create_refused(ts, new, "title").await;
    }
    let longest = NewTodo {
        title: "x".repeat(200),
        ..base(&f)
    };
    create(store, longest).await;
}

async fn an_oversized_payload_is_refused(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let too_big = NewTodo {
        payload: Some(payload_of(MAX_PAYLOAD_BYTES + 1)),
        ..base(&f)
    };
    assert_create_refused(ts, too_big, "payload").await;
    let at_limit = NewTodo {
        payload: Some(payload_of(MAX_PAYLOAD_BYTES)),
        ..base(&f)
    };
    let todo = create(store, at_limit).await;
    assert_eq!(todo.payload, Some(payload_of(MAX_PAYLOAD_BYTES)));
}

async fn bad_idempotency_keys_are_refused(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    for key in [String::new(), "k".repeat(257)] {
        let new = NewTodo {
            idempotency_key: Some(key),
            ..base(&f)
        };
        assert_create_refused(ts, new, "key").await;
    }
    let longest = NewTodo {
        idempotency_key: Some("k".repeat(256)),
        ..base(&f)
    };
    create(store, longest).await;
}

async fn bad_max_attempts_are_refused(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    for max_attempts in [0, -1, 101] {
        let new = NewTodo {
            max_attempts: Some(max_attempts),
            ..base(&f)
        };
        assert_create_refused(ts, new, "max_attempts").await;
    }
}

async fn a_missing_endpoint_is_not_found(store: &dyn Store, ts: &TestStore) {
    let before = count_todos(&ts.store).await;
    let result = store
        .create_todo(NewTodo::new("ep_missing", "inbox", "t"))
        .await;
    assert!(matches!(result, Err(StoreError::NotFound)), "{result:?}");
    assert_eq!(count_todos(&ts.store).await, before);
}

exercise_on_both_backends!(
    bad_queue_names_are_refused,
    a_queue_outside_the_scope_is_refused,
    claim_next_checks_the_named_queue,
    bad_titles_are_refused,
    an_oversized_payload_is_refused,
    bad_idempotency_keys_are_refused,
    bad_max_attempts_are_refused,
    a_missing_endpoint_is_not_found,
);
