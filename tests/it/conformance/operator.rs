//! A human's operator actions (`07-operator.md`): cancel one todo, retry and
//! cancel in bulk by filter or ids, and the listing's `kind`/`source`/`q`
//! filters. A cancelled todo is terminal: never claimed, never rung, and
//! pruned by retention like any finished todo.

use std::time::Duration;

use switchboard::domain::todo::{Disposition, MAX_BULK, Outcome, TodoState};
use switchboard::store::*;

use crate::common::*;
use crate::exercise_on_both_backends;
use crate::support::{Fixture, TestStore, endpoint_for, fixture};

/// A todo from authenticated intake (only those may ring).
fn rung_todo(f: &Fixture, title: &str) -> NewTodo {
    NewTodo {
        priority: 0,
        intake: Some(NewIntakeEvent {
            trust_mode: TrustMode::Operator,
            actor: "human:test".into(),
            webhook_id: None,
            headers: serde_json::json!({}),
            content_type: None,
            body: Vec::new(),
        }),
        ..inbox_todo(f, title)
    }
}

fn labelled(f: &Fixture, queue: &str, title: &str, kind: &str) -> NewTodo {
    NewTodo {
        kind: Some(kind.to_owned()),
        source: Some(format!("src-{kind}")),
        ..NewTodo::new(&f.endpoint.id, queue, title)
    }
}

async fn failed_waiting(store: &dyn Store, f: &Fixture, title: &str) -> Todo {
    let todo = add_todo(store, f, title).await;
    claim(store, &f.caller, &todo.id).await;
    store
        .fail(&f.caller, &todo.id, Finish::default())
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

fn filter() -> TodoFilter {
    TodoFilter::default()
}

async fn titles(store: &dyn Store, f: &Fixture, filter: TodoFilter) -> Vec<String> {
    let page = store
        .human_list_todos(&f.human.id, &filter, &PageRequest::default())
        .await
        .unwrap();
    let mut titles: Vec<String> = page.items.into_iter().map(|t| t.title).collect();
    titles.sort();
    titles
}

async fn pending_claimed_and_waiting_todos_cancel(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let pending = add_todo(store, &f, "pending").await;
    let claimed = add_todo(store, &f, "claimed").await;
    claim(store, &f.caller, &claimed.id).await;
    let waiting = failed_waiting(store, &f, "waiting").await;
    assert!(waiting.next_retry_at.is_some());

    for id in [&pending.id, &claimed.id, &waiting.id] {
        let todo = store.human_cancel(&f.human.id, id).await.unwrap();
        assert_eq!(todo.state, TodoState::Cancelled);
        assert!(!todo.dead_letter);
        assert_eq!(
            todo.cancelled_by.as_deref(),
            Some(format!("human:{}", f.human.id).as_str())
        );
        assert!(
            todo.completed_at.is_some(),
            "terminal: counts for retention"
        );
        assert!(todo.lease_expires_at.is_none() && todo.next_retry_at.is_none());
        assert_eq!(get(store, &f.caller, id).await.state, TodoState::Cancelled);
    }
    // The claimed one's attempt records who cancelled it.
    let attempt = last_attempt(store, &f.caller, &claimed.id).await;
    assert_closed_as(&attempt, Outcome::Cancelled, Disposition::Cancelled);
    assert_eq!(attempt.summary.as_deref(), Some("cancelled by human ada"));
    // The others had no open attempt; nothing was added to their history.
    assert!(attempts(store, &f.caller, &pending.id).await.is_empty());
    assert_eq!(attempts(store, &f.caller, &waiting.id).await.len(), 1);
}

async fn the_holder_of_a_cancelled_todo_gets_conflict(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "held").await;
    let (_, token) = fenced_claim(store, &f.caller, &todo.id).await;
    store.human_cancel(&f.human.id, &todo.id).await.unwrap();
    let before = snapshot(store, &f.caller, &todo.id).await;
    assert_holder_verbs_conflict(store, &f.caller, &todo.id, Some(&token)).await;
    let finish = Finish {
        lease_token: Some(token.clone()),
        ..Finish::default()
    };
    match store.complete(&f.caller, &todo.id, finish).await {
        Err(StoreError::Conflict(message)) => assert!(message.contains("cancelled"), "{message}"),
        other => panic!("expected a conflict naming the state, got {other:?}"),
    }
    assert_eq!(snapshot(store, &f.caller, &todo.id).await, before);
    assert_eq!(count_open_attempts(&ts.store, &todo.id).await, 0);
}

async fn finished_todos_refuse_cancel_naming_their_state(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let done = add_todo(store, &f, "done").await;
    claim(store, &f.caller, &done.id).await;
    store
        .complete(&f.caller, &done.id, Finish::default())
        .await
        .unwrap();
    let dead = dead_letter(store, &f, "dead").await;
    let cancelled = add_todo(store, &f, "cancelled").await;
    store
        .human_cancel(&f.human.id, &cancelled.id)
        .await
        .unwrap();

    for (id, named) in [
        (&done.id, "is done"),
        (&dead.id, "is a dead letter"),
        (&cancelled.id, "is cancelled"),
    ] {
        let before = snapshot(store, &f.caller, id).await;
        match store.human_cancel(&f.human.id, id).await {
            Err(StoreError::Conflict(message)) => assert!(message.contains(named), "{message}"),
            other => panic!("expected a conflict, got {other:?}"),
        }
        assert_eq!(snapshot(store, &f.caller, id).await, before);
    }
}

async fn a_foreign_cancel_reads_as_missing(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "mine").await;
    let eve = fixture(store, "eve").await;
    assert_same_as_missing(
        store.human_cancel(&eve.human.id, &todo.id).await,
        store.human_cancel(&eve.human.id, &missing_id()).await,
    );
    let outcome = store
        .human_bulk_cancel(&eve.human.id, &BulkTarget::Ids(vec![todo.id.clone()]))
        .await
        .unwrap();
    assert_eq!(outcome, BulkOutcome::default());
    let everything = store
        .human_bulk_cancel(&eve.human.id, &BulkTarget::Filter(filter()))
        .await
        .unwrap();
    assert!(everything.ids.is_empty());
    assert_eq!(
        get(store, &f.caller, &todo.id).await.state,
        TodoState::Pending
    );
}

async fn a_cancelled_todo_is_never_claimed_or_rung(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = create(store, rung_todo(&f, "ring me")).await;
    store.human_cancel(&f.human.id, &todo.id).await.unwrap();

    assert!(
        store
            .claim_next(&f.caller, None, ClaimOptions::default())
            .await
            .unwrap()
            .is_none()
    );
    assert_conflict(
        store
            .claim(&f.caller, &todo.id, ClaimOptions::default())
            .await,
    );
    assert!(
        store
            .unscoped_ringable_todo(&todo.id)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .unscoped_claim_ready_ring(&todo.id)
            .await
            .unwrap()
            .is_none()
    );
    let steps = vec![Duration::from_secs(60); 5];
    advance_secs(ts, 24 * 3_600);
    let endpoints = vec![f.endpoint.id.clone()];
    assert!(
        store
            .unscoped_endpoints_with_due_rings(&endpoints, &steps, 100)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .unscoped_claim_due_rings(&endpoints, &steps, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .unscoped_digest_todos(&f.endpoint.id)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn a_cancelled_todo_can_be_retried_by_id(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "undo me").await;
    store.human_cancel(&f.human.id, &todo.id).await.unwrap();
    let retried = store.human_retry(&f.human.id, &todo.id).await.unwrap();
    assert_eq!(retried.state, TodoState::Pending);
    assert_eq!(retried.cancelled_by, None);
    assert_eq!(retried.completed_at, None);
    let claimed = store
        .claim_next(&f.caller, None, ClaimOptions::default())
        .await
        .unwrap()
        .expect("the retried todo is claimable");
    assert_eq!(claimed.todo.id, todo.id);
}

async fn bulk_cancel_by_filter_and_by_ids(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let helper = endpoint_for(store, f.human.clone(), "helper", &["inbox"]).await;
    let a = create(store, labelled(&f, "inbox", "Deploy web", "deploy")).await;
    let b = create(store, labelled(&f, "reviews", "Deploy api", "deploy")).await;
    let c = create(store, labelled(&f, "inbox", "Review docs", "review")).await;
    let held = create(store, labelled(&f, "inbox", "Deploy held", "deploy")).await;
    claim(store, &f.caller, &held.id).await;
    let done = create(store, labelled(&f, "inbox", "Deploy done", "deploy")).await;
    claim(store, &f.caller, &done.id).await;
    store
        .complete(&f.caller, &done.id, Finish::default())
        .await
        .unwrap();
    let elsewhere = create(
        store,
        NewTodo::new(&helper.endpoint.id, "inbox", "Deploy x"),
    )
    .await;

    // kind + endpoint + queue + q, together.
    let target = BulkTarget::Filter(TodoFilter {
        endpoint_id: Some(f.endpoint.id.clone()),
        queue: Some("inbox".into()),
        kind: Some("deploy".into()),
        q: Some("DEPLOY".into()),
        ..filter()
    });
    let outcome = store.human_bulk_cancel(&f.human.id, &target).await.unwrap();
    let mut expected = vec![a.id.clone(), held.id.clone()];
    expected.sort();
    let mut got = outcome.ids.clone();
    got.sort();
    assert_eq!(got, expected, "the done one and the other queue are left");
    assert!(!outcome.more);
    assert_eq!(get(store, &f.caller, &b.id).await.state, TodoState::Pending);
    assert_eq!(get(store, &f.caller, &c.id).await.state, TodoState::Pending);
    assert_eq!(get(store, &f.caller, &done.id).await.state, TodoState::Done);
    assert_eq!(count_open_attempts(&ts.store, &held.id).await, 0);
    let attempt = last_attempt(store, &f.caller, &held.id).await;
    assert_closed_as(&attempt, Outcome::Cancelled, Disposition::Cancelled);
    assert_eq!(attempt.summary.as_deref(), Some("cancelled by human ada"));

    // Explicit ids: only the cancellable ones change.
    let outcome = store
        .human_bulk_cancel(
            &f.human.id,
            &BulkTarget::Ids(vec![
                c.id.clone(),
                done.id.clone(),
                a.id.clone(),
                missing_id(),
            ]),
        )
        .await
        .unwrap();
    assert_eq!(outcome.ids, vec![c.id.clone()]);
    assert!(!outcome.more);
    assert_eq!(
        get(store, &helper.caller, &elsewhere.id).await.state,
        TodoState::Pending
    );

    // A state filter the action can never apply to is refused, naming it.
    assert_invalid(
        store
            .human_bulk_cancel(
                &f.human.id,
                &BulkTarget::Filter(TodoFilter {
                    state: Some(TodoState::Done),
                    ..filter()
                }),
            )
            .await,
        "state",
    );
    assert_invalid(
        store
            .human_bulk_cancel(&f.human.id, &BulkTarget::Ids(vec![]))
            .await,
        "ids",
    );
}

async fn bulk_retry_defaults_to_failed_and_keeps_keys_unique(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let dead = dead_letter(store, &f, "dead").await;
    let waiting = failed_waiting(store, &f, "waiting").await;
    let cancelled = add_todo(store, &f, "cancelled").await;
    store
        .human_cancel(&f.human.id, &cancelled.id)
        .await
        .unwrap();
    let pending = add_todo(store, &f, "pending").await;

    let outcome = store
        .human_bulk_retry(&f.human.id, &BulkTarget::Filter(filter()))
        .await
        .unwrap();
    let mut expected = vec![dead.id.clone(), waiting.id.clone()];
    expected.sort();
    let mut got = outcome.ids.clone();
    got.sort();
    assert_eq!(
        got, expected,
        "without a state, retry means the failed ones"
    );
    for id in &expected {
        let todo = get(store, &f.caller, id).await;
        assert_eq!((todo.state, todo.attempt), (TodoState::Pending, 0));
    }
    assert_eq!(
        get(store, &f.caller, &cancelled.id).await.state,
        TodoState::Cancelled
    );
    let outcome = store
        .human_bulk_retry(
            &f.human.id,
            &BulkTarget::Filter(TodoFilter {
                state: Some(TodoState::Cancelled),
                ..filter()
            }),
        )
        .await
        .unwrap();
    assert_eq!(outcome.ids, vec![cancelled.id.clone()]);
    assert_eq!(
        get(store, &f.caller, &pending.id).await.state,
        TodoState::Pending
    );
    assert_invalid(
        store
            .human_bulk_retry(
                &f.human.id,
                &BulkTarget::Filter(TodoFilter {
                    state: Some(TodoState::Pending),
                    ..filter()
                }),
            )
            .await,
        "state",
    );

    // Two dead letters with one key (a redelivery after the first died):
    // retrying both would make two live todos with one key; the newest wins.
    let first = dead_letter_keyed(store, &f, "k1").await;
    let second = dead_letter_keyed(store, &f, "k1").await;
    // And a dead letter whose key a live todo holds again is left.
    let old = dead_letter_keyed(store, &f, "k2").await;
    let live = create(store, keyed_todo(&f, "live again", "k2")).await;
    let outcome = store
        .human_bulk_retry(&f.human.id, &BulkTarget::Filter(filter()))
        .await
        .unwrap();
    assert_eq!(outcome.ids, vec![second.id.clone()]);
    assert!(!outcome.more, "the skipped ones do not count as more");
    assert!(get(store, &f.caller, &first.id).await.dead_letter);
    assert!(get(store, &f.caller, &old.id).await.dead_letter);
    assert_eq!(
        get(store, &f.caller, &live.id).await.state,
        TodoState::Pending
    );
}

async fn dead_letter_keyed(store: &dyn Store, f: &Fixture, key: &str) -> Todo {
    let todo = create(
        store,
        NewTodo {
            max_attempts: Some(1),
            ..keyed_todo(f, "keyed", key)
        },
    )
    .await;
    claim(store, &f.caller, &todo.id).await;
    store
        .fail(&f.caller, &todo.id, Finish::default())
        .await
        .unwrap()
}

async fn one_bulk_call_changes_at_most_a_thousand(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let mut ids = Vec::new();
    for i in 0..=MAX_BULK {
        ids.push(add_todo(store, &f, &format!("t{i}")).await.id);
        // Distinct creation times keep "oldest first" checkable.
        ts.clock.advance(Duration::from_millis(1));
    }
    let first = store
        .human_bulk_cancel(&f.human.id, &BulkTarget::Filter(filter()))
        .await
        .unwrap();
    assert_eq!(first.ids.len(), MAX_BULK);
    assert!(first.more);
    assert_eq!(first.ids, ids[..MAX_BULK].to_vec(), "oldest first");
    let second = store
        .human_bulk_cancel(&f.human.id, &BulkTarget::Filter(filter()))
        .await
        .unwrap();
    assert_eq!(second.ids, vec![ids[MAX_BULK].clone()]);
    assert!(!second.more);

    // More ids than one call takes: refused whole, nothing changed.
    let retried_before = store
        .human_bulk_retry(&f.human.id, &BulkTarget::Ids(ids.clone()))
        .await;
    assert_invalid(retried_before, "ids");
    assert_eq!(
        get(store, &f.caller, &ids[0]).await.state,
        TodoState::Cancelled
    );
    let retried = store
        .human_bulk_retry(&f.human.id, &BulkTarget::Ids(ids[..MAX_BULK].to_vec()))
        .await
        .unwrap();
    assert_eq!(retried.ids.len(), MAX_BULK);
    assert!(!retried.more);
}

async fn title_search_is_literal_and_ascii_case_insensitive(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    for title in [
        "100% done",
        "100 done",
        "a_b",
        "axb",
        "Back\\slash",
        "Ünïcode Fix",
    ] {
        add_todo(store, &f, title).await;
    }
    let q = |text: &str| TodoFilter {
        q: Some(text.to_owned()),
        ..filter()
    };
    assert_eq!(titles(store, &f, q("%")).await, vec!["100% done"]);
    assert_eq!(titles(store, &f, q("0% D")).await, vec!["100% done"]);
    assert_eq!(titles(store, &f, q("_")).await, vec!["a_b"]);
    assert_eq!(titles(store, &f, q("A_B")).await, vec!["a_b"]);
    assert_eq!(titles(store, &f, q("\\")).await, vec!["Back\\slash"]);
    assert_eq!(titles(store, &f, q("DONE")).await.len(), 2);
    // Only ASCII letters fold, identically on both backends.
    assert_eq!(
        titles(store, &f, q("Ünïcode FIX")).await,
        vec!["Ünïcode Fix"]
    );
    assert!(titles(store, &f, q("ünïcode")).await.is_empty());
    assert_invalid(
        store
            .human_list_todos(&f.human.id, &q(""), &PageRequest::default())
            .await,
        "q",
    );
    // The same filter drives bulk actions.
    let outcome = store
        .human_bulk_cancel(&f.human.id, &BulkTarget::Filter(q("%")))
        .await
        .unwrap();
    assert_eq!(outcome.ids.len(), 1);
}

async fn kind_and_source_filter_the_listing_with_keyset_pages(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    for i in 0..5 {
        create(
            store,
            labelled(&f, "inbox", &format!("deploy {i}"), "deploy"),
        )
        .await;
        create(
            store,
            labelled(&f, "inbox", &format!("review {i}"), "review"),
        )
        .await;
    }
    let by_kind = TodoFilter {
        kind: Some("deploy".into()),
        ..filter()
    };
    let mut seen = Vec::new();
    let mut page = PageRequest {
        limit: 2,
        after: None,
    };
    loop {
        let got = store
            .human_list_todos(&f.human.id, &by_kind, &page)
            .await
            .unwrap();
        seen.extend(got.items.iter().map(|t| t.title.clone()));
        match got.next_cursor {
            Some(cursor) => page.after = Some(cursor),
            None => break,
        }
    }
    seen.sort();
    assert_eq!(
        seen,
        (0..5).map(|i| format!("deploy {i}")).collect::<Vec<_>>()
    );
    let by_source = TodoFilter {
        source: Some("src-review".into()),
        ..filter()
    };
    assert_eq!(titles(store, &f, by_source).await.len(), 5);
    let cancelled = TodoFilter {
        state: Some(TodoState::Cancelled),
        ..filter()
    };
    assert!(titles(store, &f, cancelled).await.is_empty());
}

/// Every page of `filter`'s listing for `f`'s human, `limit` at a time, in order.
async fn every_page(store: &dyn Store, f: &Fixture, filter: &TodoFilter, limit: i64) -> Vec<Todo> {
    let mut seen = Vec::new();
    let mut page = PageRequest { limit, after: None };
    loop {
        let got = store
            .human_list_todos(&f.human.id, filter, &page)
            .await
            .unwrap();
        assert!(got.items.len() as i64 <= limit);
        seen.extend(got.items);
        match got.next_cursor {
            Some(cursor) => page.after = Some(cursor),
            None => return seen,
        }
    }
}

/// A human's listing spans their endpoints, newest first (ties by id), in
/// keyset pages that neither repeat nor skip a todo, however the endpoints'
/// todos interleave in time; filtered by state it is the same order.
async fn a_humans_listing_pages_across_endpoints_newest_first(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let human = store.get_human(&f.human.id).await.unwrap();
    let second = endpoint_for(store, human.clone(), "second", &["inbox"]).await;
    let third = endpoint_for(store, human, "third", &["inbox"]).await;
    let stranger = fixture(store, "grace").await;
    let mut made = Vec::new();
    for round in 0..4 {
        // Within a round the three endpoints' todos share one creation time.
        for (i, endpoint) in [&f, &second, &third].into_iter().enumerate() {
            made.push(add_todo(store, endpoint, &format!("r{round} e{i}")).await);
        }
        add_todo(store, &stranger, "not ada's").await;
        advance_secs(ts, 1);
    }
    made.push(add_todo(store, &third, "newest").await);
    let mut newest_first = made.clone();
    newest_first.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
    let ids = |todos: &[Todo]| todos.iter().map(|t| t.id.clone()).collect::<Vec<_>>();

    for limit in [1, 2, 5, 50] {
        let listed = every_page(store, &f, &filter(), limit).await;
        assert_eq!(ids(&listed), ids(&newest_first), "pages of {limit}");
    }

    let one_endpoint = TodoFilter {
        endpoint_id: Some(second.endpoint.id.clone()),
        ..filter()
    };
    let expected: Vec<String> = newest_first
        .iter()
        .filter(|t| t.endpoint_id == second.endpoint.id)
        .map(|t| t.id.clone())
        .collect();
    assert_eq!(
        ids(&every_page(store, &f, &one_endpoint, 3).await),
        expected
    );
    let foreign = TodoFilter {
        endpoint_id: Some(stranger.endpoint.id.clone()),
        ..filter()
    };
    assert!(
        every_page(store, &f, &foreign, 3).await.is_empty(),
        "another human's endpoint"
    );

    for todo in [&made[1], &made[5], &made[6]] {
        let holder = [&f, &second, &third]
            .into_iter()
            .find(|e| e.endpoint.id == todo.endpoint_id)
            .unwrap();
        claim(store, &holder.caller, &todo.id).await;
    }
    let claimed = TodoFilter {
        state: Some(TodoState::Claimed),
        ..filter()
    };
    let expected: Vec<String> = ids(&newest_first)
        .into_iter()
        .filter(|id| [&made[1].id, &made[5].id, &made[6].id].contains(&id))
        .collect();
    assert_eq!(ids(&every_page(store, &f, &claimed, 2).await), expected);
    let pending = TodoFilter {
        state: Some(TodoState::Pending),
        ..filter()
    };
    assert_eq!(
        every_page(store, &f, &pending, 4).await.len(),
        made.len() - 3
    );
}

async fn retention_prunes_old_cancelled_todos(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "cancel me").await;
    let live = add_todo(store, &f, "keep me").await;
    store.human_cancel(&f.human.id, &todo.id).await.unwrap();
    let thirty_days = Duration::from_secs(30 * 86_400);
    assert_eq!(prune_from_start(store, thirty_days, 100).await, 0);
    advance_secs(ts, 31 * 86_400);
    assert_eq!(prune_from_start(store, thirty_days, 100).await, 1);
    assert!(matches!(
        store.get_todo(&f.caller, &todo.id).await,
        Err(StoreError::NotFound)
    ));
    assert_eq!(
        get(store, &f.caller, &live.id).await.state,
        TodoState::Pending
    );
}

exercise_on_both_backends!(
    pending_claimed_and_waiting_todos_cancel,
    the_holder_of_a_cancelled_todo_gets_conflict,
    finished_todos_refuse_cancel_naming_their_state,
    a_foreign_cancel_reads_as_missing,
    a_cancelled_todo_is_never_claimed_or_rung,
    a_cancelled_todo_can_be_retried_by_id,
    bulk_cancel_by_filter_and_by_ids,
    bulk_retry_defaults_to_failed_and_keeps_keys_unique,
    one_bulk_call_changes_at_most_a_thousand,
    title_search_is_literal_and_ascii_case_insensitive,
    kind_and_source_filter_the_listing_with_keyset_pages,
    a_humans_listing_pages_across_endpoints_newest_first,
    retention_prunes_old_cancelled_todos,
    a_bulk_cancel_racing_claimers_leaves_nothing_claimed,
    two_bulk_cancels_at_once_split_the_work,
);

/// A bulk cancel racing claimers: once it has returned, every todo is
/// cancelled (claimed ones too), no attempt is left open, and nothing can be
/// claimed. Claimers that won a todo first simply lose it with `conflict`.
async fn a_bulk_cancel_racing_claimers_leaves_nothing_claimed(store: &dyn Store, ts: &TestStore) {
    use std::sync::Arc;
    use tokio::sync::Barrier;
    const TODOS: usize = 60;
    const CLAIMERS: usize = 6;
    let f = fixture(store, "ada").await;
    let mut ids = Vec::new();
    for n in 0..TODOS {
        ids.push(add_todo(store, &f, &format!("todo {n}")).await.id);
    }
    let start = Arc::new(Barrier::new(CLAIMERS + 1));
    let claimers: Vec<_> = (0..CLAIMERS)
        .map(|_| {
            let (store, caller, start) = (ts.store.clone(), f.caller.clone(), start.clone());
            tokio::spawn(async move {
                start.wait().await;
                let mut won = Vec::new();
                while let Some(c) = store
                    .claim_next(&caller, None, ClaimOptions::default())
                    .await
                    .expect("claim_next")
                {
                    won.push(c.todo.id);
                }
                won
            })
        })
        .collect();
    let canceller = {
        let (store, human, start) = (ts.store.clone(), f.human.id.clone(), start.clone());
        tokio::spawn(async move {
            start.wait().await;
            store
                .human_bulk_cancel(&human, &BulkTarget::Filter(TodoFilter::default()))
                .await
                .expect("bulk cancel")
        })
    };
    let outcome = canceller.await.unwrap();
    let mut won = Vec::new();
    for claimer in claimers {
        won.extend(claimer.await.unwrap());
    }
    // Whatever a claimer got before the cancel reached it was cancelled too.
    let mut cancelled = outcome.ids.clone();
    cancelled.sort();
    let mut all = ids.clone();
    all.sort();
    assert_eq!(cancelled, all, "every todo, claimed or not, in one batch");
    assert!(!outcome.more);
    for id in &ids {
        assert_eq!(get(store, &f.caller, id).await.state, TodoState::Cancelled);
        assert_eq!(count_open_attempts(&ts.store, id).await, 0, "{id}");
    }
    for id in &won {
        assert_conflict(store.complete(&f.caller, id, Finish::default()).await);
    }
    assert!(
        store
            .claim_next(&f.caller, None, ClaimOptions::default())
            .await
            .unwrap()
            .is_none()
    );
}

/// Two bulk cancels at once (a double click on the board): together they
/// cancel everything once, neither fails.
async fn two_bulk_cancels_at_once_split_the_work(store: &dyn Store, ts: &TestStore) {
    const TODOS: usize = 200;
    let f = fixture(store, "ada").await;
    let mut ids = Vec::new();
    for n in 0..TODOS {
        ids.push(add_todo(store, &f, &format!("todo {n}")).await.id);
    }
    let other = crate::support::second_handle(ts).await;
    let everything = BulkTarget::Filter(TodoFilter::default());
    let (a, b) = tokio::join!(
        ts.store.human_bulk_cancel(&f.human.id, &everything),
        other.human_bulk_cancel(&f.human.id, &everything),
    );
    let (a, b) = (
        a.expect("first bulk cancel"),
        b.expect("second bulk cancel"),
    );
    let mut both: Vec<String> = a.ids.iter().chain(&b.ids).cloned().collect();
    both.sort();
    ids.sort();
    assert_eq!(both, ids, "each todo cancelled exactly once");
    assert!(!a.more && !b.more);
}
