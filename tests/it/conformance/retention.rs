//! Retention: terminal todos (done, dead letter) older than the age are
//! deleted in batches; live todos never are, however old.

use switchboard::domain::Timestamp;
use switchboard::store::*;

use crate::common::*;
use crate::exercise_on_both_backends;
use crate::support::{Fixture, TestStore, fixture};

const DAY: u64 = 86_400;
const THIRTY_DAYS: std::time::Duration = std::time::Duration::from_secs(30 * DAY);

async fn done_todo(store: &dyn Store, f: &Fixture, new: NewTodo) -> Todo {
    let todo = create(store, new).await;
    claim(store, &f.caller, &todo.id).await;
    store
        .complete(&f.caller, &todo.id, Finish::default())
        .await
        .unwrap()
}

async fn dead_letter(store: &dyn Store, f: &Fixture, title: &str) -> Todo {
    let todo = create(store, capped_todo(f, title, 1)).await;
    claim(store, &f.caller, &todo.id).await;
    store
        .fail(&f.caller, &todo.id, Finish::default())
        .await
        .unwrap()
}

fn with_intake_event(f: &Fixture, title: &str) -> NewTodo {
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
        ..inbox_todo(f, title)
    }
}

async fn pruning_deletes_only_old_terminal_todos(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let old_done = done_todo(store, &f, with_intake_event(&f, "old done")).await;
    let old_dead = dead_letter(store, &f, "old dead").await;
    let revoked = fixture(store, "bob").await;
    let old_revoked = add_todo(store, &revoked, "old revoked").await;
    store
        .revoke_endpoint(&revoked.human.id, &revoked.endpoint.id)
        .await
        .unwrap();
    let old_pending = add_todo(store, &f, "old pending").await;
    let old_claimed = add_todo(store, &f, "old claimed").await;
    claim(store, &f.caller, &old_claimed.id).await;
    let old_waiting = add_todo(store, &f, "old waiting for retry").await;
    claim_and_fail(store, &f.caller, &old_waiting.id).await;

    advance_secs(ts, 31 * DAY);
    let recent_done = done_todo(store, &f, inbox_todo(&f, "recent done")).await;
    let recent_dead = dead_letter(store, &f, "recent dead").await;
    let mut kept = Vec::new();
    for todo in [
        &old_pending,
        &old_claimed,
        &old_waiting,
        &recent_done,
        &recent_dead,
    ] {
        kept.push(snapshot(store, &f.caller, &todo.id).await);
    }
    assert_eq!(count_intake_events(&ts.store).await, 1);

    assert_eq!(prune_from_start(store, THIRTY_DAYS, 100).await, 3);
    for (caller, gone) in [
        (&f.caller, &old_done),
        (&f.caller, &old_dead),
        (&revoked.caller, &old_revoked),
    ] {
        assert!(
            matches!(
                store.get_todo(caller, &gone.id).await,
                Err(StoreError::NotFound)
            ),
            "{} should be pruned",
            gone.title
        );
        assert_eq!(
            count_attempt_rows(&ts.store, &gone.id).await,
            0,
            "history goes too"
        );
    }
    assert_eq!(
        count_intake_events(&ts.store).await,
        0,
        "its intake event goes too"
    );
    for before in kept {
        let id = &before.0.id;
        assert_eq!(snapshot(store, &f.caller, id).await, before, "{id} is kept");
    }
}

async fn pruning_respects_the_batch_limit_and_resumes_after_its_cursor(
    store: &dyn Store,
    ts: &TestStore,
) {
    let f = fixture(store, "ada").await;
    let bob = fixture(store, "bob").await;
    for n in 0..3 {
        done_todo(store, &f, inbox_todo(&f, &format!("ada's done {n}"))).await;
        done_todo(store, &bob, inbox_todo(&bob, &format!("bob's done {n}"))).await;
    }
    let live = add_todo(store, &f, "ada's pending").await;
    advance_secs(ts, 31 * DAY);

    let mut batches = Vec::new();
    let mut after = RetentionCursor::start();
    loop {
        let pruned = store
            .unscoped_prune_terminal_todos(THIRTY_DAYS, 2, &after)
            .await
            .unwrap();
        batches.push(pruned.deleted);
        match pruned.resume_after {
            Some(next) => after = next,
            None => break,
        }
    }
    assert_eq!(batches, vec![2, 2, 2, 0]);
    assert_eq!(count_todos(&ts.store).await, 1, "the pending todo is kept");
    assert_eq!(get(store, &f.caller, &live.id).await, live);
}

/// A batch reads only todos after its cursor in listing order (endpoint,
/// creation time, id), so a pass never walks back over what it has read.
async fn pruning_starts_after_its_cursor(store: &dyn Store, ts: &TestStore) {
    let ada = fixture(store, "ada").await;
    let bob = fixture(store, "bob").await;
    assert!(ada.endpoint.id < bob.endpoint.id, "ids are minted in order");
    let adas = done_todo(store, &ada, inbox_todo(&ada, "ada's done")).await;
    done_todo(store, &bob, inbox_todo(&bob, "bob's done")).await;
    advance_secs(ts, 31 * DAY);

    let past_adas_todos = RetentionCursor {
        endpoint_id: ada.endpoint.id.clone(),
        created_at: Timestamp::from_millis(i64::MAX),
        id: String::new(),
    };
    let pruned = store
        .unscoped_prune_terminal_todos(THIRTY_DAYS, 100, &past_adas_todos)
        .await
        .unwrap();
    assert_eq!(pruned.deleted, 1);
    assert_eq!(
        get(store, &ada.caller, &adas.id).await,
        adas,
        "before the cursor"
    );
    assert_eq!(prune_from_start(store, THIRTY_DAYS, 100).await, 1);
}

/// Creation is not completion: a todo created long ago and finished within
/// the age is kept, though retention reads todos in creation order.
async fn pruning_goes_by_completion_not_creation(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = create(store, inbox_todo(&f, "waited a long time")).await;
    advance_secs(ts, 40 * DAY);
    claim(store, &f.caller, &todo.id).await;
    let done = store
        .complete(&f.caller, &todo.id, Finish::default())
        .await
        .unwrap();
    advance_secs(ts, 29 * DAY);
    assert_eq!(prune_from_start(store, THIRTY_DAYS, 100).await, 0);
    assert_eq!(get(store, &f.caller, &done.id).await, done);
    advance_secs(ts, 2 * DAY);
    assert_eq!(prune_from_start(store, THIRTY_DAYS, 100).await, 1);
}

async fn pruning_keeps_terminal_todos_younger_than_the_age(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let done = done_todo(store, &f, inbox_todo(&f, "done")).await;
    advance_secs(ts, 29 * DAY);
    assert_eq!(prune_from_start(store, THIRTY_DAYS, 100).await, 0);
    assert_eq!(get(store, &f.caller, &done.id).await, done);
}

exercise_on_both_backends!(
    pruning_deletes_only_old_terminal_todos,
    pruning_respects_the_batch_limit_and_resumes_after_its_cursor,
    pruning_starts_after_its_cursor,
    pruning_goes_by_completion_not_creation,
    pruning_keeps_terminal_todos_younger_than_the_age,
);
