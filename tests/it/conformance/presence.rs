//! Presence storage (`05-presence.md`): transitions claimed exactly once
//! across instances, a shift change judging the override under the old
//! shift in the same transaction, and dead-override clears guarded on
//! `override_set_at`.

use std::time::Duration;

use switchboard::delivery::presence::{override_of, shift_of};
use switchboard::domain::Timestamp;
use switchboard::domain::presence::{Override, OverrideBy, Presence, Schedule};
use switchboard::store::*;

use crate::exercise_on_both_backends;
use crate::support::{TestStore, fixture, second_handle};

fn agent_override(value: Presence, set_at: Timestamp, until: Option<Timestamp>) -> Override {
    Override {
        value,
        until,
        set_at,
        by: OverrideBy::Agent,
    }
}

fn at(rfc3339: &str) -> Timestamp {
    Timestamp::parse_rfc3339(rfc3339).expect("a valid instant")
}

/// What `PUT shift` hands the store: is the stored override dead under the
/// shift stored on the row (the old one)?
fn dead_under_old_shift(now: Timestamp) -> impl for<'e> Fn(&'e Endpoint) -> bool + Send + Sync {
    move |e: &Endpoint| {
        let shift = shift_of(e);
        override_of(e).is_some_and(|o| !o.is_live(shift.as_ref().map(|s| s as &dyn Schedule), now))
    }
}

async fn racing_evaluators_claim_each_transition_exactly_once(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let other = second_handle(ts).await;
    let (a, b): (&dyn Store, &dyn Store) = (&*ts.store, &other);
    let id = &f.endpoint.id;
    for round in 0..50 {
        let new = if round % 2 == 0 {
            Presence::Out
        } else {
            Presence::In
        };
        let (first, second) = tokio::join!(
            a.claim_presence_transition(id, new, "shift", ts.clock_now(), None),
            b.claim_presence_transition(id, new, "shift", ts.clock_now(), None),
        );
        let (first, second) = (first.unwrap(), second.unwrap());
        assert!(
            first ^ second,
            "round {round}: exactly one instance claims {new:?} (got {first}, {second})"
        );
        // Once claimed, nobody claims the same value again.
        assert!(
            !a.claim_presence_transition(id, new, "shift", ts.clock_now(), None)
                .await
                .unwrap()
        );
        assert!(
            !b.claim_presence_transition(id, new, "shift", ts.clock_now(), None)
                .await
                .unwrap()
        );
        let row = store.unscoped_get_endpoint(id).await.unwrap();
        assert_eq!(row.presence_seen, new);
        assert_eq!(row.presence_changed_at, Some(ts.clock_now()));
        assert_eq!(row.presence_changed_by.as_deref(), Some("shift"));
        ts.clock.advance(Duration::from_secs(1));
    }
    other.close().await;
}

async fn a_transition_claim_records_who_and_when(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let id = &f.endpoint.id;
    assert_eq!(f.endpoint.presence_seen, Presence::In, "seen in by default");
    assert!(
        !store
            .claim_presence_transition(id, Presence::In, "agent", ts.clock_now(), None)
            .await
            .unwrap(),
        "no transition to the value already seen"
    );
    ts.clock.advance(Duration::from_secs(60));
    assert!(
        store
            .claim_presence_transition(id, Presence::Out, "operator:hu_1", ts.clock_now(), None)
            .await
            .unwrap()
    );
    let row = store.unscoped_get_endpoint(id).await.unwrap();
    assert_eq!(row.presence_seen, Presence::Out);
    assert_eq!(row.presence_changed_at, Some(ts.clock_now()));
    assert_eq!(row.presence_changed_by.as_deref(), Some("operator:hu_1"));
}

async fn set_shift_clears_an_override_dead_under_the_old_shift(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let id = &f.endpoint.id;
    let keep_all = |_: &Endpoint| false;
    store
        .set_shift(id, Some("Mon-Fri 09:00-13:00"), &keep_all)
        .await
        .unwrap();
    // Clocked out at Mon 10:00: the 13:00 boundary ends it.
    ts.clock.set(at("2026-01-05T10:00:00Z"));
    store
        .set_presence_override(id, &agent_override(Presence::Out, ts.clock_now(), None))
        .await
        .unwrap();
    ts.clock.set(at("2026-01-05T14:00:00Z"));
    // Without a shift the same override would be live again: judge it first.
    let row = ts
        .store
        .set_shift(id, None, &dead_under_old_shift(ts.clock_now()))
        .await
        .unwrap();
    assert_eq!(row.shift, None);
    assert_eq!(
        row.presence_override, None,
        "cleared in the same transaction"
    );
    assert_eq!(
        (row.override_until, row.override_set_at, row.override_by),
        (None, None, None)
    );

    // An override still live under the old shift survives the change.
    store
        .set_shift(id, Some("Mon-Fri 09:00-13:00"), &keep_all)
        .await
        .unwrap();
    let set_at = ts.clock_now();
    store
        .set_presence_override(id, &agent_override(Presence::Out, set_at, None))
        .await
        .unwrap();
    ts.clock.advance(Duration::from_secs(3_600));
    let row = ts
        .store
        .set_shift(
            id,
            Some("Mon-Fri 09:00-17:00"),
            &dead_under_old_shift(ts.clock_now()),
        )
        .await
        .unwrap();
    assert_eq!(row.shift.as_deref(), Some("Mon-Fri 09:00-17:00"));
    assert_eq!(row.presence_override, Some(Presence::Out));
    assert_eq!(row.override_set_at, Some(set_at));

    // The judge sees the row as it was before the change (the old shift).
    let seen = std::sync::Mutex::new(None);
    let spy = |e: &Endpoint| {
        *seen.lock().unwrap() = e.shift.clone();
        false
    };
    store
        .set_shift(id, Some("09:00-10:00"), &spy)
        .await
        .unwrap();
    assert_eq!(
        seen.into_inner().unwrap().as_deref(),
        Some("Mon-Fri 09:00-17:00")
    );
}

async fn a_guarded_clear_leaves_a_newer_override_alone(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let id = &f.endpoint.id;
    let old_set_at = ts.clock_now();
    store
        .set_presence_override(
            id,
            &agent_override(Presence::Out, old_set_at, Some(old_set_at.add_secs(60))),
        )
        .await
        .unwrap();
    // A reader finds the old one dead; meanwhile a newer override was written.
    ts.clock.advance(Duration::from_secs(120));
    let new_set_at = ts.clock_now();
    store
        .set_presence_override(
            id,
            &Override {
                by: OverrideBy::Operator("hu_1".into()),
                ..agent_override(Presence::Out, new_set_at, None)
            },
        )
        .await
        .unwrap();
    assert!(
        !store
            .clear_presence_override(id, Some(old_set_at))
            .await
            .unwrap(),
        "the guard does not match the newer override"
    );
    let row = store.unscoped_get_endpoint(id).await.unwrap();
    assert_eq!(row.presence_override, Some(Presence::Out));
    assert_eq!(row.override_set_at, Some(new_set_at));
    assert_eq!(row.override_by, Some(OverrideBy::Operator("hu_1".into())));
    assert_eq!(row.override_until, None);

    assert!(
        store
            .clear_presence_override(id, Some(new_set_at))
            .await
            .unwrap()
    );
    let row = store.unscoped_get_endpoint(id).await.unwrap();
    assert_eq!(
        (row.presence_override, row.override_set_at, row.override_by),
        (None, None, None)
    );
    assert!(
        !store.clear_presence_override(id, None).await.unwrap(),
        "nothing left to clear"
    );
}

async fn racing_guarded_clears_clear_once(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let other = second_handle(ts).await;
    let (a, b): (&dyn Store, &dyn Store) = (&*ts.store, &other);
    let id = &f.endpoint.id;
    for _ in 0..20 {
        let set_at = ts.clock_now();
        store
            .set_presence_override(id, &agent_override(Presence::Out, set_at, None))
            .await
            .unwrap();
        let (first, second) = tokio::join!(
            a.clear_presence_override(id, Some(set_at)),
            b.clear_presence_override(id, Some(set_at)),
        );
        assert!(first.unwrap() ^ second.unwrap(), "one clear wins");
        ts.clock.advance(Duration::from_secs(1));
    }
    other.close().await;
}

async fn digest_todos_and_marking_touch_only_what_they_name(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let intake = || NewIntakeEvent {
        trust_mode: TrustMode::Operator,
        actor: "human:test".into(),
        webhook_id: None,
        headers: serde_json::json!({}),
        content_type: None,
        body: Vec::new(),
    };
    let pushed = |title: &str, queue: &str| NewTodo {
        priority: 0,
        intake: Some(intake()),
        ..NewTodo::new(&f.endpoint.id, queue, title)
    };
    let a = ts
        .store
        .create_todo(pushed("a", "reviews"))
        .await
        .unwrap()
        .todo;
    ts.clock.advance(Duration::from_secs(1));
    let b = ts
        .store
        .create_todo(pushed("b", "inbox"))
        .await
        .unwrap()
        .todo;
    store
        .create_todo(NewTodo::new(&f.endpoint.id, "inbox", "pull-only"))
        .await
        .unwrap();
    let counted = ts
        .store
        .unscoped_digest_todos(&f.endpoint.id)
        .await
        .unwrap();
    let ids: Vec<&str> = counted.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(
        ids,
        [a.id.as_str(), b.id.as_str()],
        "push-eligible, oldest first"
    );
    // Claimed before the marking: no longer pending, not marked.
    store
        .claim(&f.caller, &b.id, ClaimOptions::default())
        .await
        .unwrap();
    let c = ts
        .store
        .create_todo(pushed("c", "inbox"))
        .await
        .unwrap()
        .todo;
    ts.clock.advance(Duration::from_secs(1));
    let now = ts.clock_now();
    let marked = ts
        .store
        .unscoped_mark_rung(&[a.id.clone(), b.id.clone()], now)
        .await
        .unwrap();
    assert_eq!(marked, 1);
    let row = |id: String| {
        let caller = f.caller.clone();
        let store = ts.store.clone();
        async move { store.get_todo(&caller, &id).await.unwrap() }
    };
    let a_row = row(a.id.clone()).await;
    assert_eq!((a_row.last_ringed_at, a_row.ring_attempts), (Some(now), 0));
    assert_eq!(row(b.id.clone()).await.last_ringed_at, None);
    assert_eq!(
        row(c.id.clone()).await.last_ringed_at,
        None,
        "not counted, not marked"
    );
}

async fn is_presence_candidate(store: &dyn Store, id: &str) -> bool {
    let due = store
        .unscoped_presence_candidates(None, 1_000)
        .await
        .unwrap();
    due.iter().any(|e| e.id == id)
}

/// The winning claim records the next check in the same statement, guarded
/// on the inputs it was decided from; a losing claim records nothing.
async fn a_winning_claim_records_the_next_check_while_inputs_hold(
    store: &dyn Store,
    ts: &TestStore,
) {
    let f = fixture(store, "ada").await;
    let id = &f.endpoint.id;
    let hour = Duration::from_secs(3_600);
    let in_an_hour = |ts: &TestStore| ts.clock_now().saturating_add(hour);
    let next = NextPresenceCheck {
        inputs: &f.endpoint,
        at: in_an_hour(ts),
    };
    assert!(
        store
            .claim_presence_transition(id, Presence::Out, "shift", ts.clock_now(), Some(next))
            .await
            .unwrap()
    );
    assert!(
        !is_presence_candidate(store, id).await,
        "seen out, but not due for an hour"
    );
    ts.clock.advance(hour);
    assert!(
        is_presence_candidate(store, id).await,
        "due when the hour is up"
    );

    // Inputs changed after they were read: the claim still wins, and the
    // next check it was given (decided from the old inputs) is not written.
    let clocked_in = store
        .set_presence_override(id, &agent_override(Presence::In, ts.clock_now(), None))
        .await
        .unwrap();
    let stale = NextPresenceCheck {
        inputs: &f.endpoint,
        at: in_an_hour(ts),
    };
    assert!(
        store
            .claim_presence_transition(id, Presence::In, "agent", ts.clock_now(), Some(stale))
            .await
            .unwrap()
    );
    assert!(
        is_presence_candidate(store, id).await,
        "a check decided from stale inputs is not recorded"
    );

    // A claim that loses (the value is already seen) records nothing either.
    let current = NextPresenceCheck {
        inputs: &clocked_in,
        at: in_an_hour(ts),
    };
    assert!(
        !store
            .claim_presence_transition(id, Presence::In, "agent", ts.clock_now(), Some(current))
            .await
            .unwrap()
    );
    assert!(
        is_presence_candidate(store, id).await,
        "a lost claim records no check"
    );
    store.set_presence_recheck(current).await.unwrap();
    assert!(
        !is_presence_candidate(store, id).await,
        "the same check, recorded on its own, holds"
    );
}

exercise_on_both_backends!(
    racing_evaluators_claim_each_transition_exactly_once,
    a_transition_claim_records_who_and_when,
    set_shift_clears_an_override_dead_under_the_old_shift,
    a_guarded_clear_leaves_a_newer_override_alone,
    racing_guarded_clears_clear_once,
    digest_todos_and_marking_touch_only_what_they_name,
    a_winning_claim_records_the_next_check_while_inputs_hold,
);
