//! Presence scenarios (`05-presence.md` and the seed's "Confirmation" list),
//! in process on both backends: the self verbs through `tools::call`, the
//! operator controls, the evaluator and the digest, with the manual clock
//! (which starts on Monday 2026-01-05 09:00Z).

use crate::on_both_backends;
use crate::support;

use crate::support::delivery::*;
use serde_json::{Value, json};
use support::{TestStore, endpoint_for, endpoint_with, fixture};
use switchboard::bus::{Bus, BusEvent, Envelope, Message, Subscription};
use switchboard::delivery::listener::{apply, catch_up};
use switchboard::delivery::presence::{evaluator_tick, stream_opened};
use switchboard::delivery::sweep::{SweepConfig, sweep_tick};
use switchboard::delivery::{DropReason, Trigger};
use switchboard::domain::Timestamp;
use switchboard::domain::doorbell::DigestReason;
use switchboard::domain::presence::{OverrideBy, Presence};
use switchboard::domain::todo::TodoState;
use switchboard::ops::presence::{operator_clear, operator_set, operator_set_shift};
use switchboard::store::*;

const SHIFT: &str = "Mon-Fri 09:00-13:00";

fn at(rfc3339: &str) -> Timestamp {
    Timestamp::parse_rfc3339(rfc3339).expect("a valid instant")
}

async fn presence(ts: &TestStore, hub: &Hub, endpoint: &Endpoint) -> Value {
    tool_ok(ts, hub, endpoint, "presence", json!({})).await
}

async fn evaluate(ts: &TestStore, hub: &Hub) {
    evaluator_tick(&hub.on(&ts.store), 10_000).await;
}

async fn set_shift(
    ts: &TestStore,
    hub: &Hub,
    endpoint: &Endpoint,
    shift: Option<&str>,
) -> Endpoint {
    let row = endpoint_row(ts, endpoint).await;
    operator_set_shift(&hub.on(&ts.store), &row, &row.human_id, shift)
        .await
        .expect("set shift")
}

/// The reconnect check the GET handler runs for a stream of `endpoint` that
/// opened now.
async fn reconnect_check(ts: &TestStore, hub: &Hub, endpoint: &Endpoint) {
    let row = endpoint_row(ts, endpoint).await;
    stream_opened(&hub.on(&ts.store), &row, ts.clock_now()).await;
}

/// The last presence transition a bus subscriber heard, as another instance
/// receives it.
fn heard_transition(heard: &mut Subscription) -> Message {
    let mut last = None;
    while let Some(event) = heard.try_next() {
        if let BusEvent::Message(Envelope {
            message: m @ Message::TransitionClaimed { .. },
            ..
        }) = event
        {
            last = Some(m);
        }
    }
    last.expect("a transition was claimed")
}

fn digests(hub: &Hub, reason: DigestReason) -> u64 {
    hub.doorbells
        .counters
        .rings("digest", Trigger::Digest(reason))
}

async fn an_endpoint_with_no_shift_and_no_override_is_in(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let hub = hub();
    let mut s = hub.stream(&f.endpoint);
    assert_eq!(
        presence(ts, &hub, &f.endpoint).await,
        json!({"presence": "in", "source": "default", "until": null, "shift": null, "pending": 0})
    );
    let todo = push(ts, &hub, &f.endpoint, "inbox", "rings as ever").await;
    assert_eq!(
        todo_id_of(&s.one("an endpoint that is in is rung")),
        todo.id
    );
    evaluate(ts, &hub).await;
    ts.clock.advance(hours(24 * 7));
    evaluate(ts, &hub).await;
    let row = endpoint_row(ts, &f.endpoint).await;
    assert_eq!(row.presence_seen, Presence::In);
    assert_eq!(row.presence_changed_at, None, "nothing ever changed");
    assert_eq!(presence(ts, &hub, &f.endpoint).await["pending"], 1);
}

async fn presence_returns_the_documented_shape(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let hub = hub();
    set_shift(ts, &hub, &f.endpoint, Some(&format!("  {SHIFT} "))).await;
    push(ts, &hub, &f.endpoint, "inbox", "one").await;
    ts.store
        .create_todo(NewTodo::new(&f.endpoint.id, "inbox", "pull-only"))
        .await
        .unwrap();
    let view = presence(ts, &hub, &f.endpoint).await;
    let mut keys: Vec<&str> = view
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["pending", "presence", "shift", "source", "until"]);
    assert_eq!(
        view,
        json!({
            "presence": "in",
            "source": "shift",
            "until": "2026-01-05T13:00:00.000Z",
            "shift": SHIFT,
            "pending": 1,
        }),
        "the shift is stored trimmed; pending counts push-eligible todos only"
    );
}

async fn the_spec_example_clock_out_mid_shift_lasts_until_the_next_start(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let hub = hub();
    set_shift(ts, &hub, &f.endpoint, Some(SHIFT)).await;
    ts.clock.set(at("2026-01-05T10:00:00Z"));
    let out = tool_ok(ts, &hub, &f.endpoint, "clock_out", json!({})).await;
    assert_eq!(
        out,
        json!({
            "presence": "out",
            "source": "agent",
            "until": "2026-01-06T09:00:00.000Z",
            "shift": SHIFT,
            "pending": 0,
        })
    );
    let row = endpoint_row(ts, &f.endpoint).await;
    assert_eq!(row.presence_override, Some(Presence::Out));
    assert_eq!(row.override_by, Some(OverrideBy::Agent));
    assert_eq!(row.override_until, None);
    assert_eq!(row.presence_seen, Presence::Out);
    assert_eq!(row.presence_changed_by.as_deref(), Some("agent"));
    // At 13:00 only the source changes.
    ts.clock.set(at("2026-01-05T13:00:00Z"));
    let view = presence(ts, &hub, &f.endpoint).await;
    assert_eq!(
        (&view["presence"], &view["source"], &view["until"]),
        (
            &json!("out"),
            &json!("shift"),
            &json!("2026-01-06T09:00:00.000Z")
        )
    );
}

async fn a_shift_boundary_ends_an_override(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let hub = hub();
    let mut s = hub.stream(&f.endpoint);
    set_shift(ts, &hub, &f.endpoint, Some(SHIFT)).await;
    // An out override set mid-shift ends at the 13:00 boundary...
    ts.clock.set(at("2026-01-05T10:00:00Z"));
    tool_ok(ts, &hub, &f.endpoint, "clock_out", json!({})).await;
    ts.clock.set(at("2026-01-05T13:00:00Z"));
    evaluate(ts, &hub).await;
    let row = endpoint_row(ts, &f.endpoint).await;
    assert_eq!(
        row.presence_override, None,
        "the evaluator cleared the dead override"
    );
    assert_eq!(row.presence_seen, Presence::Out, "out under the shift now");
    // ... so the next start brings the agent back without anyone calling anything.
    let held = push(ts, &hub, &f.endpoint, "reviews", "held overnight").await;
    s.assert_silent("held while out");
    ts.clock.set(at("2026-01-06T08:59:59Z"));
    evaluate(ts, &hub).await;
    s.assert_silent("not yet");
    ts.clock.set(at("2026-01-06T09:00:00Z"));
    evaluate(ts, &hub).await;
    assert_digest(
        &s.one("one digest at the start"),
        "shift_start",
        1,
        "reviews",
    );
    assert_eq!(
        todo_row(ts, &f.endpoint, &held.id).await.last_ringed_at,
        Some(ts.clock_now())
    );

    // An in override set before the start ends at the start (09:00), not at its own end.
    ts.clock.set(at("2026-01-07T06:00:00Z"));
    evaluate(ts, &hub).await;
    let clocked = tool_ok(ts, &hub, &f.endpoint, "clock_in", json!({"for": "8h"})).await;
    assert_eq!(
        (&clocked["presence"], &clocked["source"], &clocked["until"]),
        (
            &json!("in"),
            &json!("agent"),
            &json!("2026-01-07T13:00:00.000Z")
        ),
        "in until 09:00 by the override, then in by the shift until 13:00"
    );
    let row = endpoint_row(ts, &f.endpoint).await;
    assert_eq!(row.override_until, Some(at("2026-01-07T09:00:00Z")));
    ts.clock.set(at("2026-01-07T09:00:00Z"));
    let view = presence(ts, &hub, &f.endpoint).await;
    assert_eq!(
        (&view["presence"], &view["source"]),
        (&json!("in"), &json!("shift"))
    );
    // Clocked in after the end, for 2 h: in until then, out after.
    ts.clock.set(at("2026-01-07T20:00:00Z"));
    evaluate(ts, &hub).await;
    let clocked = tool_ok(ts, &hub, &f.endpoint, "clock_in", json!({"for": "2h"})).await;
    assert_eq!(clocked["until"], "2026-01-07T22:00:00.000Z");
    ts.clock.set(at("2026-01-07T22:00:00Z"));
    evaluate(ts, &hub).await;
    let view = presence(ts, &hub, &f.endpoint).await;
    assert_eq!(
        (&view["presence"], &view["source"], &view["until"]),
        (
            &json!("out"),
            &json!("shift"),
            &json!("2026-01-08T09:00:00.000Z")
        )
    );
    assert_eq!(endpoint_row(ts, &f.endpoint).await.presence_override, None);
}

async fn clock_in_for_nine_hours_is_refused_and_changes_nothing(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let hub = hub();
    let mut s = hub.stream(&f.endpoint);
    tool_ok(ts, &hub, &f.endpoint, "clock_out", json!({})).await;
    push(ts, &hub, &f.endpoint, "inbox", "waiting").await;
    ts.clock.advance(minutes(1));
    let before = presence_row(ts, &f.endpoint).await;
    for bad in ["9h", "8h0m1s", "0s", "-1h", "1d", "soon", ""] {
        let (code, message) =
            tool_err(ts, &hub, &f.endpoint, "clock_in", json!({"for": bad})).await;
        assert_eq!(code, "invalid_argument", "for={bad:?}: {message}");
        assert!(message.starts_with("for"), "names the argument: {message}");
        assert_eq!(
            presence_row(ts, &f.endpoint).await,
            before,
            "a refused clock_in (for={bad:?}) changed nothing"
        );
    }
    let (code, _) = tool_err(ts, &hub, &f.endpoint, "clock_in", json!({"for": 3600})).await;
    assert_eq!(code, "invalid_argument");
    s.assert_silent("a refused clock_in rings nothing");
    // The cap itself is allowed.
    let ok = tool_ok(ts, &hub, &f.endpoint, "clock_in", json!({"for": "8h"})).await;
    assert_eq!(ok["presence"], "in");
    assert_digest(&s.one("back in"), "clock_in", 1, "inbox");
}

async fn a_clocked_out_endpoint_holds_doorbells_but_keeps_every_pull(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let hub = hub();
    let mut s = hub.stream(&f.endpoint);
    let out = tool_ok(ts, &hub, &f.endpoint, "clock_out", json!({})).await;
    assert_eq!(out["presence"], "out");
    let held = push(ts, &hub, &f.endpoint, "inbox", "held").await;
    s.assert_silent("a clocked-out endpoint's new todo rings no session");
    assert_eq!(hub.doorbells.counters.drops(DropReason::PresenceOut), 1);
    assert_eq!(hub.doorbells.total_rings(), 0);
    for _ in 0..16 {
        ts.clock.advance(hours(1));
        assert_eq!(
            sweep_tick(&hub.on(&ts.store), &SweepConfig::default()).await,
            0
        );
    }
    s.assert_silent("the sweep neither selects nor rings it");
    let row = todo_row(ts, &f.endpoint, &held.id).await;
    assert_eq!((row.ring_attempts, row.last_ringed_at), (0, None));
    // Beside an endpoint that is in (so the sweep's query does run).
    let g = endpoint_for(&ts.store, f.human.clone(), "awake", &["inbox"]).await;
    let mut awake = hub.stream(&g.endpoint);
    let due = push(ts, &hub, &g.endpoint, "inbox", "due").await;
    awake.one("rung at creation");
    ts.clock.advance(minutes(5));
    assert_eq!(
        sweep_tick(&hub.on(&ts.store), &SweepConfig::default()).await,
        1
    );
    assert_eq!(todo_id_of(&awake.one("the awake endpoint's ring")), due.id);
    s.assert_silent("still held");
    let row = todo_row(ts, &f.endpoint, &held.id).await;
    assert_eq!((row.ring_attempts, row.last_ringed_at), (0, None));
    // A retry window elapsing while out is held too.
    hub.on(&ts.store).todo_retried(&todo_ref(&held)).await;
    s.assert_silent("held");
    // Pulls behave exactly as when in.
    let listed = tool_ok(ts, &hub, &f.endpoint, "list_todos", json!({})).await;
    assert_eq!(listed["todos"][0]["id"], json!(held.id));
    let listed = ts
        .store
        .list_todos(&f.caller, None, Some(TodoState::Pending), 10)
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    let claimed = tool_ok(ts, &hub, &f.endpoint, "claim_next", json!({})).await;
    assert_eq!(claimed["empty"], false);
    assert_eq!(claimed["todo"]["id"], json!(held.id));
    tool_ok(ts, &hub, &f.endpoint, "complete", json!({"id": held.id})).await;
    assert_eq!(presence(ts, &hub, &f.endpoint).await["presence"], "out");
}

/// The sweep reads presence for the endpoints first in line only; one that
/// is out there must not cost an endpoint further back its ring.
async fn an_out_endpoint_first_in_line_does_not_hold_back_the_sweep(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let g = endpoint_for(&ts.store, f.human.clone(), "awake", &["inbox"]).await;
    let hub = hub();
    let mut away = hub.stream(&f.endpoint);
    let mut awake = hub.stream(&g.endpoint);
    tool_ok(ts, &hub, &f.endpoint, "clock_out", json!({})).await;
    // Older, so first in the sweep's order.
    let held = push(ts, &hub, &f.endpoint, "inbox", "held").await;
    ts.clock.advance(std::time::Duration::from_secs(1));
    let due = push(ts, &hub, &g.endpoint, "inbox", "due").await;
    awake.one("rung at creation");
    ts.clock.advance(minutes(5));
    let config = SweepConfig {
        per_tick: 1,
        ..SweepConfig::default()
    };
    assert_eq!(sweep_tick(&hub.on(&ts.store), &config).await, 1);
    assert_eq!(
        todo_id_of(&awake.one("the present endpoint's ring")),
        due.id
    );
    away.assert_silent("held while out");
    let row = todo_row(ts, &f.endpoint, &held.id).await;
    assert_eq!((row.ring_attempts, row.last_ringed_at), (0, None));
}

async fn clocking_in_sends_one_digest_and_marks_exactly_the_counted_todos(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let hub = hub();
    let mut s = hub.stream(&f.endpoint);
    let mut idle = hub.stream(&f.endpoint);
    tool_ok(ts, &hub, &f.endpoint, "clock_out", json!({})).await;
    let mut counted = Vec::new();
    for (queue, title) in [("reviews", "r1"), ("inbox", "i1"), ("reviews", "r2")] {
        counted.push(push(ts, &hub, &f.endpoint, queue, title).await);
        ts.clock.advance(minutes(30));
    }
    let pull_only = ts
        .store
        .create_todo(NewTodo::new(&f.endpoint.id, "inbox", "pull-only"))
        .await
        .unwrap()
        .todo;
    let other = endpoint_for(&ts.store, f.human.clone(), "other", &["lane-m"]).await;
    push(ts, &hub, &other.endpoint, "lane-m", "not ours").await;
    ts.clock.advance(hours(13));
    let back = tool_ok(ts, &hub, &f.endpoint, "clock_in", json!({})).await;
    assert_eq!(back["presence"], "in");
    assert_eq!(back["pending"], 3);
    let digest_at = ts.clock_now();

    let (mut got, other_got) = (s.drain(), idle.drain());
    assert_eq!(
        got.len() + other_got.len(),
        1,
        "exactly one digest, to one session"
    );
    got.extend(other_got);
    let digest = &got[0];
    assert_digest(digest, "clock_in", 3, "inbox,reviews");
    assert_eq!(
        content(digest),
        "switchboard: clocked in — 3 todos waiting (reviews 2, inbox 1), oldest 14h. Drain with claim_next."
    );
    assert_eq!(digests(&hub, DigestReason::ClockIn), 1);
    for todo in &counted {
        let row = todo_row(ts, &f.endpoint, &todo.id).await;
        assert_eq!(row.last_ringed_at, Some(digest_at), "{}", todo.title);
        assert_eq!(row.ring_attempts, 0, "a digest never counts a ring");
    }
    let row = todo_row(ts, &f.endpoint, &pull_only.id).await;
    assert_eq!(row.last_ringed_at, None, "a pull-only todo is not counted");
    // A todo created after the count is not marked (and simply rings).
    ts.clock.advance(minutes(1));
    let later = push(ts, &hub, &f.endpoint, "inbox", "after the digest").await;
    assert_eq!(
        todo_row(ts, &f.endpoint, &later.id).await.last_ringed_at,
        None
    );
    let rung: Vec<_> = s.drain().into_iter().chain(idle.drain()).collect();
    assert_eq!(rung.len(), 1, "{rung:?}");
    assert_eq!(todo_id_of(&rung[0]), later.id);

    // A summarised todo waits a full step from the digest, not from its creation.
    ts.clock.set(digest_at.saturating_add(minutes(4)));
    assert_eq!(
        sweep_tick(&hub.on(&ts.store), &SweepConfig::default()).await,
        0
    );
    ts.clock.set(digest_at.saturating_add(minutes(5)));
    assert_eq!(
        sweep_tick(&hub.on(&ts.store), &SweepConfig::default()).await,
        3
    );
}

async fn nothing_is_sent_when_nothing_waits(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let hub = hub();
    let mut s = hub.stream(&f.endpoint);
    tool_ok(ts, &hub, &f.endpoint, "clock_out", json!({})).await;
    ts.store
        .create_todo(NewTodo::new(&f.endpoint.id, "inbox", "pull-only"))
        .await
        .unwrap();
    ts.clock.advance(hours(1));
    let back = tool_ok(ts, &hub, &f.endpoint, "clock_in", json!({})).await;
    assert_eq!(
        (&back["presence"], &back["pending"]),
        (&json!("in"), &json!(0))
    );
    s.assert_silent("no digest when nothing push-eligible waits");
    assert_eq!(
        endpoint_row(ts, &f.endpoint).await.presence_seen,
        Presence::In
    );
    // Nor on a reconnect.
    ts.clock.advance(hours(1));
    reconnect_check(ts, &hub, &f.endpoint).await;
    s.assert_silent("no reconnect digest either");
}

async fn an_operator_return_digests_with_reason_operator(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let hub = hub();
    let mut s = hub.stream(&f.endpoint);
    let row = endpoint_row(ts, &f.endpoint).await;
    operator_set(&hub.on(&ts.store), &row, &f.human.id, Presence::Out, None)
        .await
        .unwrap();
    let out = endpoint_row(ts, &f.endpoint).await;
    assert_eq!(
        out.override_by,
        Some(OverrideBy::Operator(f.human.id.clone()))
    );
    assert_eq!(out.presence_seen, Presence::Out);
    let view = presence(ts, &hub, &f.endpoint).await;
    assert_eq!(
        (&view["presence"], &view["source"]),
        (&json!("out"), &json!("operator"))
    );
    push(ts, &hub, &f.endpoint, "inbox", "held").await;
    ts.clock.advance(hours(2));
    let row = endpoint_row(ts, &f.endpoint).await;
    operator_set(&hub.on(&ts.store), &row, &f.human.id, Presence::In, None)
        .await
        .unwrap();
    assert_digest(&s.one("one digest"), "operator", 1, "inbox");
    let row = endpoint_row(ts, &f.endpoint).await;
    assert_eq!(
        row.presence_changed_by,
        Some(format!("operator:{}", f.human.id))
    );

    // DELETE presence from out is a human's write too.
    let row = endpoint_row(ts, &f.endpoint).await;
    operator_set(&hub.on(&ts.store), &row, &f.human.id, Presence::Out, None)
        .await
        .unwrap();
    ts.clock.advance(minutes(1));
    let row = endpoint_row(ts, &f.endpoint).await;
    operator_clear(&hub.on(&ts.store), &row, &row.human_id)
        .await
        .unwrap();
    assert_digest(&s.one("one digest"), "operator", 1, "inbox");
    assert_eq!(digests(&hub, DigestReason::Operator), 2);
    // An until that is not in the future is refused and changes nothing.
    let row = endpoint_row(ts, &f.endpoint).await;
    let refused = operator_set(
        &hub.on(&ts.store),
        &row,
        &f.human.id,
        Presence::Out,
        Some(ts.clock_now()),
    )
    .await;
    assert!(
        matches!(refused, Err(StoreError::InvalidArgument(_))),
        "{refused:?}"
    );
    assert_eq!(presence_row(ts, &f.endpoint).await, PresenceRow::from(&row));
}

async fn a_window_opening_digests_with_reason_shift_start(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let hub = hub();
    let mut s = hub.stream(&f.endpoint);
    // The manual clock says Mon 09:00: this window opens a minute from now.
    set_shift(ts, &hub, &f.endpoint, Some("09:01-17:00")).await;
    let row = endpoint_row(ts, &f.endpoint).await;
    assert_eq!(
        row.presence_seen,
        Presence::Out,
        "the in→out is claimed too (no digest)"
    );
    // A human's shift write caused it, so the audit names the human.
    assert_eq!(
        row.presence_changed_by.as_deref(),
        Some(format!("operator:{}", f.human.id).as_str())
    );
    s.assert_silent("in→out sends nothing");
    push(ts, &hub, &f.endpoint, "inbox", "held one").await;
    push(ts, &hub, &f.endpoint, "inbox", "held two").await;
    s.assert_silent("held");
    ts.clock.advance(std::time::Duration::from_secs(59));
    evaluate(ts, &hub).await;
    s.assert_silent("the window has not opened");
    ts.clock.advance(std::time::Duration::from_secs(1));
    evaluate(ts, &hub).await;
    let digest = s.one("one digest when the window opens");
    assert_digest(&digest, "shift_start", 2, "inbox");
    assert!(content(&digest).starts_with("switchboard: shift started — 2 todos"));
    evaluate(ts, &hub).await;
    s.assert_silent("the transition is acted on once");
    assert_eq!(
        endpoint_row(ts, &f.endpoint).await.presence_seen,
        Presence::In
    );
}

async fn the_evaluator_pages_through_every_candidate(ts: &TestStore) {
    let first = fixture(&ts.store, "ada").await;
    let mut endpoints = vec![first.endpoint.clone()];
    for name in ["bee", "cat"] {
        let more = support::endpoint_for(&ts.store, first.human.clone(), name, &["inbox"]).await;
        endpoints.push(more.endpoint);
    }
    let hub = hub();
    for endpoint in &endpoints {
        set_shift(ts, &hub, endpoint, Some("09:01-17:00")).await;
    }
    ts.clock.advance(std::time::Duration::from_secs(60));
    // A page of one: every endpoint must still be reached in one tick.
    let seen = evaluator_tick(&hub.on(&ts.store), 1).await;
    assert_eq!(seen, 3);
    for endpoint in &endpoints {
        assert_eq!(
            endpoint_row(ts, endpoint).await.presence_seen,
            Presence::In,
            "{}",
            endpoint.slug
        );
    }
}

async fn an_until_passing_digests_with_reason_override_end(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let hub = hub();
    let mut s = hub.stream(&f.endpoint);
    let row = endpoint_row(ts, &f.endpoint).await;
    let until = ts.clock_now().saturating_add(minutes(30));
    operator_set(
        &hub.on(&ts.store),
        &row,
        &f.human.id,
        Presence::Out,
        Some(until),
    )
    .await
    .unwrap();
    let view = presence(ts, &hub, &f.endpoint).await;
    assert_eq!(view["until"], json!(until.to_rfc3339()));
    push(ts, &hub, &f.endpoint, "reviews", "held").await;
    ts.clock.advance(minutes(29));
    evaluate(ts, &hub).await;
    s.assert_silent("still out");
    ts.clock.advance(minutes(2));
    evaluate(ts, &hub).await;
    let digest = s.one("one digest when the until passes");
    assert_digest(&digest, "override_end", 1, "reviews");
    assert!(content(&digest).starts_with("switchboard: back in — 1 todo waiting (reviews 1)"));
    let row = endpoint_row(ts, &f.endpoint).await;
    assert_eq!(row.presence_override, None, "the dead override was cleared");
    assert_eq!(row.presence_seen, Presence::In);

    // With a shift: an until before the next boundary is still an override end.
    set_shift(ts, &hub, &f.endpoint, Some("00:00-23:00")).await;
    let row = endpoint_row(ts, &f.endpoint).await;
    let until = ts.clock_now().saturating_add(hours(1));
    operator_set(
        &hub.on(&ts.store),
        &row,
        &f.human.id,
        Presence::Out,
        Some(until),
    )
    .await
    .unwrap();
    ts.clock.set(until);
    evaluate(ts, &hub).await;
    assert_digest(&s.one("one digest"), "override_end", 1, "reviews");
}

async fn self_verbs_need_no_scope_and_cannot_name_another_endpoint(ts: &TestStore) {
    let human = ts.store.create_human("ada").await.unwrap();
    let f = endpoint_with(&ts.store, human.clone(), "reader", &["inbox"], |new| {
        new.verbs = vec!["list_todos".into()];
    })
    .await;
    let other = endpoint_for(&ts.store, human, "other", &["inbox"]).await;
    assert_eq!(
        f.endpoint.scope_verbs,
        ["list_todos"],
        "scope lists none of them"
    );
    let hub = hub();
    let listed = switchboard::mcp::tools::list(&f.endpoint);
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for verb in ["clock_in", "clock_out", "presence", "list_todos"] {
        assert!(names.contains(&verb), "{verb} in {names:?}");
    }
    assert!(!names.contains(&"claim"), "{names:?}");
    let (code, _) = tool_err(ts, &hub, &f.endpoint, "claim_next", json!({})).await;
    assert_eq!(
        code, "forbidden",
        "the scope still applies to the other verbs"
    );

    let other_before = presence_row(ts, &other.endpoint).await;
    let mine_before = presence_row(ts, &f.endpoint).await;
    for verb in ["clock_in", "clock_out", "presence"] {
        for (key, value) in [
            ("endpoint", json!(other.endpoint.id)),
            ("endpoint", json!(other.endpoint.slug)),
            ("id", json!(other.endpoint.id)),
            ("slug", json!(other.endpoint.slug)),
            ("endpoint_id", json!(other.endpoint.id)),
        ] {
            let mut args = serde_json::Map::new();
            args.insert(key.into(), value);
            if verb == "clock_in" {
                args.insert("for".into(), json!("1h"));
            }
            let (code, message) = tool_err(ts, &hub, &f.endpoint, verb, Value::Object(args)).await;
            assert_eq!(code, "invalid_argument", "{verb} {key}: {message}");
            assert!(message.starts_with(key), "names {key}: {message}");
        }
    }
    assert_eq!(presence_row(ts, &other.endpoint).await, other_before);
    assert_eq!(presence_row(ts, &f.endpoint).await, mine_before);

    assert_eq!(presence(ts, &hub, &f.endpoint).await["presence"], "in");
    tool_ok(ts, &hub, &f.endpoint, "clock_out", json!({})).await;
    assert_eq!(
        endpoint_row(ts, &f.endpoint).await.presence_seen,
        Presence::Out
    );
    assert_eq!(
        presence_row(ts, &other.endpoint).await,
        other_before,
        "only the caller's own row changes"
    );
    tool_ok(ts, &hub, &f.endpoint, "clock_in", json!({})).await;
    assert_eq!(
        endpoint_row(ts, &f.endpoint).await.presence_seen,
        Presence::In
    );
    assert_eq!(
        endpoint_row(ts, &f.endpoint).await.scope_verbs,
        ["list_todos"],
        "never stored in scope.verbs"
    );
}

async fn repeating_clock_out_or_clock_in_changes_nothing_further(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let hub = hub();
    let mut s = hub.stream(&f.endpoint);
    tool_ok(ts, &hub, &f.endpoint, "clock_out", json!({})).await;
    let out = presence_row(ts, &f.endpoint).await;
    push(ts, &hub, &f.endpoint, "inbox", "held").await;
    ts.clock.advance(minutes(5));
    tool_ok(ts, &hub, &f.endpoint, "clock_out", json!({})).await;
    assert_eq!(
        presence_row(ts, &f.endpoint).await,
        out,
        "a repeated clock_out is a no-op"
    );
    s.assert_silent("nothing rang");

    tool_ok(ts, &hub, &f.endpoint, "clock_in", json!({})).await;
    assert_digest(&s.one("the first clock_in digests"), "clock_in", 1, "inbox");
    let back = presence_row(ts, &f.endpoint).await;
    ts.clock.advance(minutes(5));
    for _ in 0..3 {
        tool_ok(ts, &hub, &f.endpoint, "clock_in", json!({})).await;
    }
    assert_eq!(
        presence_row(ts, &f.endpoint).await,
        back,
        "a repeated clock_in is a no-op"
    );
    s.assert_silent("a repeated clock_in rings nothing");
    assert_eq!(digests(&hub, DigestReason::ClockIn), 1);

    // Against the shift: an agent's own live in override is not renewed.
    set_shift(ts, &hub, &f.endpoint, Some(SHIFT)).await;
    ts.clock.set(at("2026-01-05T14:00:00Z"));
    evaluate(ts, &hub).await;
    assert_eq!(
        endpoint_row(ts, &f.endpoint).await.presence_seen,
        Presence::Out
    );
    tool_ok(ts, &hub, &f.endpoint, "clock_in", json!({"for": "2h"})).await;
    assert_digest(&s.one("back in against the shift"), "clock_in", 1, "inbox");
    let first = presence_row(ts, &f.endpoint).await;
    assert_eq!(first.override_until, Some(at("2026-01-05T16:00:00Z")));
    ts.clock.advance(minutes(30));
    let again = tool_ok(ts, &hub, &f.endpoint, "clock_in", json!({"for": "8h"})).await;
    assert_eq!(again["until"], "2026-01-05T16:00:00.000Z");
    assert_eq!(presence_row(ts, &f.endpoint).await, first);
    s.assert_silent("nothing rang");
}

async fn a_reconnect_digest_is_sent_at_most_once_per_ten_minutes(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let hub = hub();
    // Work arrives while nobody is connected.
    push(ts, &hub, &f.endpoint, "inbox", "waiting 1").await;
    push(ts, &hub, &f.endpoint, "reviews", "waiting 2").await;
    ts.clock.advance(hours(3));
    let connect = |hub: &Hub| hub.stream(&f.endpoint);
    let mut s = connect(&hub);
    reconnect_check(ts, &hub, &f.endpoint).await;
    let digest = s.one("one reconnect digest for the backlog");
    assert_digest(&digest, "reconnect", 2, "inbox,reviews");
    assert!(content(&digest).starts_with("switchboard: reconnected — 2 todos"));
    let first_at = ts.clock_now();
    drop(s);

    ts.clock.set(first_at.saturating_add(minutes(9)));
    let mut s = connect(&hub);
    reconnect_check(ts, &hub, &f.endpoint).await;
    s.assert_silent("a second reconnect 9 min later sends nothing");
    drop(s);

    ts.clock.set(first_at.saturating_add(minutes(11)));
    let mut s = connect(&hub);
    reconnect_check(ts, &hub, &f.endpoint).await;
    assert_digest(
        &s.one("11 min later: one again"),
        "reconnect",
        2,
        "inbox,reviews",
    );
    assert_eq!(digests(&hub, DigestReason::Reconnect), 2);

    // While out: no reconnect digest.
    tool_ok(ts, &hub, &f.endpoint, "clock_out", json!({})).await;
    ts.clock.advance(hours(1));
    reconnect_check(ts, &hub, &f.endpoint).await;
    s.assert_silent("an endpoint that is out gets no reconnect digest");
}

async fn a_reconnect_without_work_does_not_close_the_gate(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let hub = hub();
    let s = hub.stream(&f.endpoint);
    reconnect_check(ts, &hub, &f.endpoint).await;
    drop(s);
    // Work arrives while disconnected; the agent reconnects two minutes later.
    push(ts, &hub, &f.endpoint, "inbox", "arrived meanwhile").await;
    ts.clock.advance(minutes(2));
    let mut s = hub.stream(&f.endpoint);
    reconnect_check(ts, &hub, &f.endpoint).await;
    // The creation doorbell was held by the old, streamless session; the
    // new session learns of the work only from a reconnect digest.
    let got = s.drain();
    let digests_got: Vec<_> = got
        .iter()
        .filter(|m| m["params"]["meta"]["kind"] == "digest")
        .collect();
    assert_eq!(
        digests_got.len(),
        1,
        "no digest was sent at the first reconnect, so none is rationed: {got:#?}"
    );
}

async fn a_transition_digest_arms_the_reconnect_gate(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let hub = hub();
    let mut s = hub.stream(&f.endpoint);
    set_shift(ts, &hub, &f.endpoint, Some("09:01-17:00")).await;
    push(ts, &hub, &f.endpoint, "inbox", "held").await;
    ts.clock.advance(minutes(1));
    evaluate(ts, &hub).await;
    assert_digest(&s.one("shift start"), "shift_start", 1, "inbox");
    drop(s);
    ts.clock.advance(minutes(1));
    let mut s = hub.stream(&f.endpoint);
    reconnect_check(ts, &hub, &f.endpoint).await;
    s.assert_silent("no reconnect digest right after a transition digest");
    drop(s);
    ts.clock.advance(minutes(9));
    let mut s = hub.stream(&f.endpoint);
    reconnect_check(ts, &hub, &f.endpoint).await;
    assert_digest(
        &s.one("10 min after the transition"),
        "reconnect",
        1,
        "inbox",
    );
}

/// The GET handler runs the reconnect check in a task of its own, which may
/// run well after the stream opened (a loaded machine): a todo created in
/// between rang on the stream as it was created, and must not come again in a
/// reconnect digest. (That late digest made the MCP and cluster doorbell
/// tests flaky, `mcp::doorbells::a_dedup_hit_rings_nothing` among them.) The
/// check is played here late, in that order.
async fn a_late_reconnect_check_digests_nothing_created_after_the_stream_opened(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let hub = hub();
    let mut s = hub.stream(&f.endpoint);
    let opened_at = ts.clock_now();
    let endpoint = endpoint_row(ts, &f.endpoint).await;
    ts.clock.advance(std::time::Duration::from_millis(5));
    let fresh = push(ts, &hub, &f.endpoint, "inbox", "arrived after the open").await;
    assert_eq!(todo_id_of(&s.one("the creation doorbell")), fresh.id);
    stream_opened(&hub.on(&ts.store), &endpoint, opened_at).await;
    s.assert_silent("nothing waited when the stream opened: no reconnect digest");
    assert_eq!(
        todo_row(ts, &f.endpoint, &fresh.id).await.last_ringed_at,
        None
    );
    assert_eq!(digests(&hub, DigestReason::Reconnect), 0);
}

/// What waited when the stream opened is digested, and only that is marked,
/// however late the check runs.
async fn a_late_reconnect_digest_counts_only_what_waited_when_the_stream_opened(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let hub = hub();
    let waited = push(ts, &hub, &f.endpoint, "inbox", "waited overnight").await;
    ts.clock.advance(hours(8));
    let mut s = hub.stream(&f.endpoint);
    let opened_at = ts.clock_now();
    let endpoint = endpoint_row(ts, &f.endpoint).await;
    ts.clock.advance(std::time::Duration::from_millis(5));
    let fresh = push(ts, &hub, &f.endpoint, "reviews", "arrived after the open").await;
    assert_eq!(todo_id_of(&s.one("the creation doorbell")), fresh.id);
    stream_opened(&hub.on(&ts.store), &endpoint, opened_at).await;
    assert_digest(&s.one("the reconnect digest"), "reconnect", 1, "inbox");
    let digest_at = ts.clock_now();
    assert_only_the_waiting_marked(ts, &f.endpoint, &waited.id, &fresh.id, digest_at).await;
}

/// Instance one claims a return (and digests at once); instance two hosts a
/// session too and digests when the bus message arrives, which can be well
/// after the return. A todo created in between rang two's session on its
/// own (the endpoint was in) and did not wait: two's digest must not count
/// it again. The message is delivered here late, in that order.
async fn a_return_digest_arriving_late_elsewhere_counts_only_what_waited(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let (one, two) = (hub(), hub());
    let mut on_one = one.stream(&f.endpoint);
    let mut on_two = two.stream(&f.endpoint);
    tool_ok(ts, &one, &f.endpoint, "clock_out", json!({})).await;
    let waited = push(ts, &one, &f.endpoint, "inbox", "held while out").await;
    ts.clock.advance(hours(1));
    let mut heard = one.bus.subscribe();
    tool_ok(ts, &one, &f.endpoint, "clock_in", json!({})).await;
    let returned_at = ts.clock_now();
    assert_digest(&on_one.one("the claimant's digest"), "clock_in", 1, "inbox");
    let claimed = heard_transition(&mut heard);

    ts.clock.advance(std::time::Duration::from_millis(5));
    let fresh = push(ts, &two, &f.endpoint, "reviews", "arrived after the return").await;
    assert_eq!(todo_id_of(&on_two.one("the creation doorbell")), fresh.id);
    apply(&two.on(&ts.store), claimed).await;
    assert_digest(
        &on_two.one("two's own digest of the return"),
        "clock_in",
        1,
        "inbox",
    );
    on_one.assert_silent("one digest per instance");
    let row = endpoint_row(ts, &f.endpoint).await;
    assert_eq!(row.presence_changed_at, Some(returned_at));
    assert_only_the_waiting_marked(ts, &f.endpoint, &waited.id, &fresh.id, ts.clock_now()).await;
}

/// The same return, missed on the bus by instance two and found by its
/// catch-up after the todo created since had rung there.
async fn a_catch_up_digest_counts_only_what_waited_before_the_return(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let (one, two) = (hub(), hub());
    let mut on_two = two.stream(&f.endpoint);
    operator_set(
        &one.on(&ts.store),
        &endpoint_row(ts, &f.endpoint).await,
        &f.human.id,
        Presence::Out,
        None,
    )
    .await
    .expect("clock out");
    push(ts, &one, &f.endpoint, "inbox", "held while out").await;
    ts.clock.advance(hours(1));
    let heard_until = ts.clock_now();
    ts.clock.advance(minutes(1));
    operator_clear(
        &one.on(&ts.store),
        &endpoint_row(ts, &f.endpoint).await,
        &f.human.id,
    )
    .await
    .expect("back in");
    ts.clock.advance(std::time::Duration::from_millis(5));
    let fresh = push(ts, &two, &f.endpoint, "reviews", "arrived after the return").await;
    assert_eq!(todo_id_of(&on_two.one("the creation doorbell")), fresh.id);
    // Rung once in the cluster: with several instances that ring is claimed
    // on the row (this in-process bus decides it in memory instead).
    ts.store
        .unscoped_claim_ready_ring(&fresh.id)
        .await
        .expect("claim the ring")
        .expect("not rung by anyone yet");
    let _ = heard_until;
    catch_up(&two.on(&ts.store)).await;
    assert_digest(
        &on_two.one("two's digest of the return it missed"),
        "operator",
        1,
        "inbox",
    );
    assert_eq!(
        todo_row(ts, &f.endpoint, &fresh.id).await.last_ringed_at,
        None
    );
}

async fn removing_a_shift_does_not_revive_a_clock_out_that_had_ended(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let hub = hub();
    let mut s = hub.stream(&f.endpoint);
    set_shift(ts, &hub, &f.endpoint, Some(SHIFT)).await;
    ts.clock.set(at("2026-01-05T10:00:00Z"));
    tool_ok(ts, &hub, &f.endpoint, "clock_out", json!({})).await;
    push(ts, &hub, &f.endpoint, "inbox", "held").await;
    ts.clock.set(at("2026-01-05T14:00:00Z"));
    evaluate(ts, &hub).await;
    assert_eq!(endpoint_row(ts, &f.endpoint).await.presence_override, None);
    let row = set_shift(ts, &hub, &f.endpoint, None).await;
    assert_eq!(row.shift, None);
    let view = presence(ts, &hub, &f.endpoint).await;
    assert_eq!(
        view,
        json!({"presence": "in", "source": "default", "until": null, "shift": null, "pending": 1})
    );
    assert_digest(
        &s.one("back in by the human's change"),
        "operator",
        1,
        "inbox",
    );
}

async fn removing_a_shift_clears_an_ended_clock_out_even_before_the_evaluator(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let hub = hub();
    set_shift(ts, &hub, &f.endpoint, Some(SHIFT)).await;
    ts.clock.set(at("2026-01-05T10:00:00Z"));
    tool_ok(ts, &hub, &f.endpoint, "clock_out", json!({})).await;
    ts.clock.set(at("2026-01-05T14:00:00Z"));
    // No evaluator ran: the dead override is still stored.
    assert!(
        endpoint_row(ts, &f.endpoint)
            .await
            .presence_override
            .is_some()
    );
    let row = set_shift(ts, &hub, &f.endpoint, None).await;
    assert_eq!(
        row.presence_override, None,
        "judged dead under the old shift"
    );
    assert_eq!(presence(ts, &hub, &f.endpoint).await["presence"], "in");

    // A clock-out still live under the old shift survives the change.
    set_shift(ts, &hub, &f.endpoint, Some(SHIFT)).await;
    ts.clock.set(at("2026-01-06T10:00:00Z"));
    tool_ok(ts, &hub, &f.endpoint, "clock_out", json!({})).await;
    ts.clock.set(at("2026-01-06T11:00:00Z"));
    set_shift(ts, &hub, &f.endpoint, None).await;
    let view = presence(ts, &hub, &f.endpoint).await;
    assert_eq!(
        (&view["presence"], &view["source"], &view["until"]),
        (&json!("out"), &json!("agent"), &json!(null))
    );
}

async fn an_invalid_shift_is_refused_and_stores_nothing(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let hub = hub();
    for bad in [
        "",
        "   ",
        "Monday 09:00-13:00",
        "09:00-09:00",
        "TZ=Local 09:00-13:00",
    ] {
        let row = endpoint_row(ts, &f.endpoint).await;
        let refused = operator_set_shift(&hub.on(&ts.store), &row, &row.human_id, Some(bad)).await;
        match refused {
            Err(StoreError::InvalidArgument(invalid)) => assert_eq!(invalid.field, "shift"),
            other => panic!("{bad:?} should be refused, got {other:?}"),
        }
        assert_eq!(presence_row(ts, &f.endpoint).await, PresenceRow::from(&row));
    }
}

async fn the_audit_names_who_changed_presence(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let hub = hub();
    // No shift: the agent clocks out, then back in (clearing its override).
    tool_ok(ts, &hub, &f.endpoint, "clock_out", json!({})).await;
    let row = endpoint_row(ts, &f.endpoint).await;
    assert_eq!(row.presence_changed_by.as_deref(), Some("agent"));
    ts.clock.advance(minutes(1));
    tool_ok(ts, &hub, &f.endpoint, "clock_in", json!({})).await;
    let row = endpoint_row(ts, &f.endpoint).await;
    assert_eq!(row.presence_seen, Presence::In);
    assert_eq!(row.presence_changed_at, Some(ts.clock_now()));
    assert_eq!(
        row.presence_changed_by.as_deref(),
        Some("agent"),
        "the agent's clock_in changed it, whatever decides now"
    );
    // Inside a shift, clock_in clears an operator's out override: the agent did it.
    set_shift(ts, &hub, &f.endpoint, Some(SHIFT)).await;
    ts.clock.set(at("2026-01-06T10:00:00Z"));
    evaluate(ts, &hub).await;
    let row = endpoint_row(ts, &f.endpoint).await;
    operator_set(&hub.on(&ts.store), &row, &f.human.id, Presence::Out, None)
        .await
        .unwrap();
    assert_eq!(
        endpoint_row(ts, &f.endpoint).await.presence_changed_by,
        Some(format!("operator:{}", f.human.id))
    );
    ts.clock.advance(minutes(1));
    tool_ok(ts, &hub, &f.endpoint, "clock_in", json!({})).await;
    let row = endpoint_row(ts, &f.endpoint).await;
    assert_eq!(
        (row.presence_seen.as_str(), row.presence_override),
        ("in", None)
    );
    assert_eq!(row.presence_changed_by.as_deref(), Some("agent"));
    // The shift's own boundary: by `shift`.
    ts.clock.set(at("2026-01-06T13:00:00Z"));
    evaluate(ts, &hub).await;
    let row = endpoint_row(ts, &f.endpoint).await;
    assert_eq!(row.presence_seen, Presence::Out);
    assert_eq!(row.presence_changed_by.as_deref(), Some("shift"));
}

async fn a_digest_nobody_could_take_marks_nothing(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let hub = hub();
    let mut s = hub.stream(&f.endpoint);
    tool_ok(ts, &hub, &f.endpoint, "clock_out", json!({})).await;
    let held = push(ts, &hub, &f.endpoint, "inbox", "held").await;
    s.fill();
    ts.clock.advance(hours(1));
    tool_ok(ts, &hub, &f.endpoint, "clock_in", json!({})).await;
    assert_eq!(hub.doorbells.counters.drops(DropReason::BufferFull), 1);
    assert_eq!(digests(&hub, DigestReason::ClockIn), 0);
    assert!(s.drain().iter().all(|m| m.get("filler").is_some()));
    let row = todo_row(ts, &f.endpoint, &held.id).await;
    assert_eq!(
        (row.last_ringed_at, row.ring_attempts),
        (None, 0),
        "a failed digest write marks nothing"
    );
    assert_eq!(
        endpoint_row(ts, &f.endpoint).await.presence_seen,
        Presence::In
    );
}

async fn a_digest_goes_to_one_session_preferring_a_streaming_one(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let hub = hub();
    let waiting = hub.attach(&f.endpoint);
    let mut a = hub.stream(&f.endpoint);
    let mut b = hub.stream(&f.endpoint);
    let mut landed = Vec::new();
    for round in 0..4 {
        tool_ok(ts, &hub, &f.endpoint, "clock_out", json!({})).await;
        push(ts, &hub, &f.endpoint, "inbox", &format!("held {round}")).await;
        ts.clock.advance(minutes(1));
        tool_ok(ts, &hub, &f.endpoint, "clock_in", json!({})).await;
        let (on_a, on_b) = (a.drain(), b.drain());
        assert_eq!(on_a.len() + on_b.len(), 1, "one digest per transition");
        let digest = on_a.first().or(on_b.first()).unwrap();
        assert_digest(digest, "clock_in", round + 1, "inbox");
        landed.push(if on_a.is_empty() { "b" } else { "a" });
    }
    assert!(
        landed.contains(&"a") && landed.contains(&"b"),
        "rotates: {landed:?}"
    );
    hub.open(&waiting)
        .assert_silent("a streamless session is not chosen while a streaming one exists");

    // With only a streamless session, the digest waits for its stream.
    let g = endpoint_for(&ts.store, f.human.clone(), "solo", &["inbox"]).await;
    let solo = hub.attach(&g.endpoint);
    tool_ok(ts, &hub, &g.endpoint, "clock_out", json!({})).await;
    push(ts, &hub, &g.endpoint, "inbox", "held").await;
    tool_ok(ts, &hub, &g.endpoint, "clock_in", json!({})).await;
    assert_digest(&hub.open(&solo).one("held digest"), "clock_in", 1, "inbox");
}

async fn two_instances_decide_a_shift_start_once(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let other_store = support::second_handle(ts).await;
    let (one, two) = (hub(), hub());
    let mut on_one = one.stream(&f.endpoint);
    let mut on_two = two.stream(&f.endpoint);
    set_shift(ts, &one, &f.endpoint, Some("09:01-17:00")).await;
    push(ts, &one, &f.endpoint, "inbox", "held").await;
    ts.clock.advance(minutes(1));
    let (mut heard_one, mut heard_two) = (one.bus.subscribe(), two.bus.subscribe());
    let (instance_one, instance_two) = (one.on(&ts.store), two.on(&other_store));
    let (x, y) = tokio::join!(
        evaluator_tick(&instance_one, 100),
        evaluator_tick(&instance_two, 100),
    );
    // When one evaluator settles the endpoint before the other reads it, the
    // second legitimately finds nothing due: what must hold is one claim.
    assert!(x + y >= 1, "an evaluator found the endpoint due ({x}, {y})");
    let claims = (
        transitions_claimed(&mut heard_one),
        transitions_claimed(&mut heard_two),
    );
    assert!(
        claims == (1, 0) || claims == (0, 1),
        "exactly one instance claimed the transition: {claims:?}"
    );
    let (got_one, got_two) = (on_one.drain(), on_two.drain());
    assert!(
        got_one.len() <= 1 && got_two.len() <= 1,
        "at most one digest per instance: {got_one:?} {got_two:?}"
    );
    let digests_sent =
        digests(&one, DigestReason::ShiftStart) + digests(&two, DigestReason::ShiftStart);
    assert_eq!(
        digests_sent,
        (got_one.len() + got_two.len()) as u64,
        "every digest sent arrived"
    );
    let claimant = if claims.0 == 1 { &one } else { &two };
    assert_eq!(
        digests(claimant, DigestReason::ShiftStart),
        1,
        "the claiming instance sent its digest"
    );
    for d in got_one.iter().chain(&got_two) {
        assert_digest(d, "shift_start", 1, "inbox");
    }
    let row = endpoint_row(ts, &f.endpoint).await;
    assert_eq!(
        (
            row.presence_seen.as_str(),
            row.presence_changed_by.as_deref()
        ),
        ("in", Some("shift"))
    );
    // Neither decides it again: nothing is due before the window ends at 17:00.
    let (instance_one, instance_two) = (one.on(&ts.store), two.on(&other_store));
    let (x, y) = tokio::join!(
        evaluator_tick(&instance_one, 100),
        evaluator_tick(&instance_two, 100),
    );
    assert_eq!(
        (x, y),
        (0, 0),
        "the evaluator reads only endpoints that are due"
    );
    on_one.assert_silent("decided once");
    on_two.assert_silent("decided once");
    other_store.close().await;
}

async fn the_evaluator_reads_only_endpoints_that_are_due(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let hub = hub();
    set_shift(ts, &hub, &f.endpoint, Some("09:01-17:00")).await;
    // Settled at the write: nothing to do until the window opens at 09:01.
    assert_eq!(evaluator_tick(&hub.on(&ts.store), 100).await, 0);
    ts.clock.advance(minutes(1));
    assert_eq!(evaluator_tick(&hub.on(&ts.store), 100).await, 1);
    assert_eq!(
        endpoint_row(ts, &f.endpoint).await.presence_seen,
        Presence::In
    );
    assert_eq!(evaluator_tick(&hub.on(&ts.store), 100).await, 0);
    // A write of inputs makes it due at once.
    tool_ok(ts, &hub, &f.endpoint, "clock_out", json!({})).await;
    ts.clock.set(at("2026-01-05T17:00:00Z"));
    assert_eq!(
        evaluator_tick(&hub.on(&ts.store), 100).await,
        1,
        "the clock-out's end at the 17:00 boundary is due"
    );
}

async fn the_reconnect_gate_is_per_instance(ts: &TestStore) {
    let f = fixture(&ts.store, "ada").await;
    let (one, two) = (hub(), hub());
    push(ts, &one, &f.endpoint, "inbox", "waiting").await;
    ts.clock.advance(hours(1));
    let mut a = one.stream(&f.endpoint);
    reconnect_check(ts, &one, &f.endpoint).await;
    assert_digest(&a.one("instance one"), "reconnect", 1, "inbox");
    ts.clock.advance(minutes(1));
    let mut b = two.stream(&f.endpoint);
    reconnect_check(ts, &two, &f.endpoint).await;
    assert_digest(
        &b.one("instance two has its own gate"),
        "reconnect",
        1,
        "inbox",
    );
    a.assert_silent("one digest per instance");
}

on_both_backends!(
    the_evaluator_reads_only_endpoints_that_are_due,
    the_evaluator_pages_through_every_candidate,
    an_endpoint_with_no_shift_and_no_override_is_in,
    presence_returns_the_documented_shape,
    the_spec_example_clock_out_mid_shift_lasts_until_the_next_start,
    a_shift_boundary_ends_an_override,
    clock_in_for_nine_hours_is_refused_and_changes_nothing,
    a_clocked_out_endpoint_holds_doorbells_but_keeps_every_pull,
    an_out_endpoint_first_in_line_does_not_hold_back_the_sweep,
    clocking_in_sends_one_digest_and_marks_exactly_the_counted_todos,
    nothing_is_sent_when_nothing_waits,
    an_operator_return_digests_with_reason_operator,
    a_window_opening_digests_with_reason_shift_start,
    an_until_passing_digests_with_reason_override_end,
    self_verbs_need_no_scope_and_cannot_name_another_endpoint,
    repeating_clock_out_or_clock_in_changes_nothing_further,
    a_reconnect_digest_is_sent_at_most_once_per_ten_minutes,
    a_reconnect_without_work_does_not_close_the_gate,
    a_transition_digest_arms_the_reconnect_gate,
    a_late_reconnect_check_digests_nothing_created_after_the_stream_opened,
    a_late_reconnect_digest_counts_only_what_waited_when_the_stream_opened,
    a_return_digest_arriving_late_elsewhere_counts_only_what_waited,
    a_catch_up_digest_counts_only_what_waited_before_the_return,
    removing_a_shift_does_not_revive_a_clock_out_that_had_ended,
    removing_a_shift_clears_an_ended_clock_out_even_before_the_evaluator,
    an_invalid_shift_is_refused_and_stores_nothing,
    the_audit_names_who_changed_presence,
    a_digest_nobody_could_take_marks_nothing,
    a_digest_goes_to_one_session_preferring_a_streaming_one,
    two_instances_decide_a_shift_start_once,
    the_reconnect_gate_is_per_instance,
);

/// A digest marked the todo that waited (at `at`) and left the one created
/// after it unmarked.
async fn assert_only_the_waiting_marked(
    ts: &TestStore,
    endpoint: &Endpoint,
    waited: &str,
    fresh: &str,
    at: Timestamp,
) {
    assert_eq!(
        todo_row(ts, endpoint, waited).await.last_ringed_at,
        Some(at)
    );
    assert_eq!(
        todo_row(ts, endpoint, fresh).await.last_ringed_at,
        None,
        "a todo the digest did not count is not marked"
    );
}
