//! Recurring todos (`docs/queue.md`, "Recurring todos"): the due-check of
//! `ops::schedules` with the manual clock on both backends (a due schedule
//! makes one todo that rings, two instances racing make one per occurrence,
//! catch-up `one` against `none`, pause and resume, refusals that write
//! nothing), and two real instances on PostgreSQL making exactly one todo
//! per occurrence, also after a restart.
//!
//! The real servers run on the system clock: a test makes a schedule due by
//! setting its `next_at` in the database, then waits (a bounded poll) for
//! an instance to move it on; the move and the todo are one transaction, so
//! once it moved the todo is there, and the guard lets no second one in.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchboard::clock::Clock;
use switchboard::delivery::Delivery;
use switchboard::domain::Timestamp;
use switchboard::ops::schedules::{AddSchedule, DueReport, run_due};
use switchboard::store::prelude::*;
use switchboard::store::*;

use crate::on_both_backends;
use crate::support::delivery::{Hub, hub, todo_id_of};
use crate::support::mcp::{Mcp, client};
use crate::support::server::Process;
use crate::support::sse::{Stream, todo_id};
use crate::support::{TestStore, fixture, postgres_store};

/// What the server uses with its default 30 s tick.
const GRACE: Duration = Duration::from_secs(60);

fn add(cron: &str, title: &str, catch_up: &str) -> AddSchedule {
    AddSchedule {
        queue: Some("inbox".into()),
        cron: cron.into(),
        tz: "Europe/Berlin".into(),
        title: title.into(),
        kind: None,
        payload: Some(json!({"report": "daily"})),
        catch_up: Some(catch_up.into()),
    }
}

async fn todos(ts: &TestStore, human_id: &str) -> Vec<Todo> {
    ts.store
        .human_list_todos(
            human_id,
            &TodoFilter::default(),
            &PageRequest {
                limit: 100,
                after: None,
            },
        )
        .await
        .unwrap()
        .items
}

async fn due(delivery: &Delivery) -> DueReport {
    run_due(delivery, GRACE, 100).await.unwrap()
}

fn advance_to(ts: &TestStore, at: Timestamp) {
    let now = ts.clock.now();
    if at > now {
        ts.clock.advance(Duration::from_millis(
            (at.as_millis() - now.as_millis()) as u64,
        ));
    }
}

async fn a_due_schedule_makes_one_todo_that_rings(ts: &TestStore) {
    let f = fixture(&*ts.store, "ada").await;
    let hub: Hub = hub();
    let delivery = hub.on(&ts.store);
    let mut stream = hub.stream(&f.endpoint);
    let s = switchboard::ops::schedules::add(
        &delivery,
        &f.human.id,
        &f.endpoint,
        add("*/5 * * * *", "check at {time}", "one"),
    )
    .await
    .unwrap();
    assert!(s.next_at > ts.clock_now(), "{s:?}");
    assert_eq!(due(&delivery).await, DueReport::default(), "not due yet");
    stream.assert_silent("nothing is due");

    advance_to(ts, s.next_at);
    assert_eq!(due(&delivery).await.created, 1);
    let made = todos(ts, &f.human.id).await;
    assert_eq!(made.len(), 1);
    let todo = &made[0];
    assert!(todo.title.starts_with("check at "), "{}", todo.title);
    assert_eq!(todo.kind.as_deref(), Some("schedule"));
    assert_eq!(todo.source.as_deref(), Some("schedule"));
    assert_eq!(todo.payload, Some(json!({"report": "daily"})));
    let bell = stream.one("the schedule's todo rings as a push does");
    assert_eq!(todo_id_of(&bell), todo.id);

    // The same instant again: the occurrence is made.
    assert_eq!(due(&delivery).await, DueReport::default());
    let after = ts.store.get_schedule(&f.human.id, &s.id).await.unwrap();
    assert_eq!(after.last_at, Some(s.next_at));
    assert!(after.next_at > s.next_at);
    assert_eq!(todos(ts, &f.human.id).await.len(), 1);
    stream.assert_silent("one ring");
}

async fn two_instances_racing_make_one_todo_per_occurrence(ts: &TestStore) {
    let f = fixture(&*ts.store, "ada").await;
    let (a, b) = (hub(), hub());
    let (on_a, on_b) = (a.on(&ts.store), b.on(&ts.store));
    let s = switchboard::ops::schedules::add(
        &on_a,
        &f.human.id,
        &f.endpoint,
        add("0 * * * *", "hourly", "one"),
    )
    .await
    .unwrap();
    let mut next = s.next_at;
    for round in 1..=3 {
        advance_to(ts, next);
        let (ra, rb) = tokio::join!(due(&on_a), due(&on_b));
        assert_eq!(ra.created + rb.created, 1, "round {round}: {ra:?} {rb:?}");
        assert_eq!(todos(ts, &f.human.id).await.len(), round);
        next = ts
            .store
            .get_schedule(&f.human.id, &s.id)
            .await
            .unwrap()
            .next_at;
    }
}

async fn catch_up_one_makes_the_latest_and_none_skips(ts: &TestStore) {
    let f = fixture(&*ts.store, "ada").await;
    let hub = hub();
    let delivery = hub.on(&ts.store);
    let one = switchboard::ops::schedules::add(
        &delivery,
        &f.human.id,
        &f.endpoint,
        add("0 * * * *", "one {time}", "one"),
    )
    .await
    .unwrap();
    let none = switchboard::ops::schedules::add(
        &delivery,
        &f.human.id,
        &f.endpoint,
        add("0 * * * *", "none {time}", "none"),
    )
    .await
    .unwrap();
    assert_eq!(one.next_at, none.next_at);
    // Down for five hours and a half: five occurrences missed.
    advance_to(ts, one.next_at.add_secs(4 * 3600 + 1800));
    let report = due(&delivery).await;
    assert_eq!(
        report,
        DueReport {
            created: 1,
            skipped: 1
        }
    );
    let made = todos(ts, &f.human.id).await;
    assert_eq!(made.len(), 1, "{made:?}");
    // The latest missed occurrence's.
    let latest = one.next_at.add_secs(4 * 3600);
    let tz = switchboard::domain::schedule::parse_tz("Europe/Berlin").unwrap();
    assert_eq!(
        made[0].title,
        switchboard::domain::schedule::render_title("one {time}", latest, &tz)
    );
    for s in [&one, &none] {
        let after = ts.store.get_schedule(&f.human.id, &s.id).await.unwrap();
        assert_eq!(
            after.next_at,
            one.next_at.add_secs(5 * 3600),
            "the next future one"
        );
    }
    // On time, both make theirs.
    advance_to(ts, one.next_at.add_secs(5 * 3600 + 10));
    assert_eq!(due(&delivery).await.created, 2);
}

async fn pause_holds_and_resume_starts_from_the_next_future_occurrence(ts: &TestStore) {
    let f = fixture(&*ts.store, "ada").await;
    let hub = hub();
    let delivery = hub.on(&ts.store);
    let s = switchboard::ops::schedules::add(
        &delivery,
        &f.human.id,
        &f.endpoint,
        add("0 * * * *", "hourly", "one"),
    )
    .await
    .unwrap();
    let paused = switchboard::ops::schedules::pause(&delivery, &f.human.id, &s.id)
        .await
        .unwrap();
    assert!(paused.paused);
    advance_to(ts, s.next_at.add_secs(2 * 3600 + 60));
    assert_eq!(due(&delivery).await, DueReport::default());
    let resumed = switchboard::ops::schedules::resume(&delivery, &f.human.id, &s.id)
        .await
        .unwrap();
    assert!(!resumed.paused);
    assert_eq!(resumed.next_at, s.next_at.add_secs(3 * 3600));
    assert_eq!(
        due(&delivery).await,
        DueReport::default(),
        "nothing made up for"
    );
    advance_to(ts, resumed.next_at);
    assert_eq!(due(&delivery).await.created, 1);
    switchboard::ops::schedules::delete(&delivery, &f.human.id, &s.id)
        .await
        .unwrap();
    advance_to(ts, resumed.next_at.add_secs(3600));
    assert_eq!(due(&delivery).await, DueReport::default());
}

async fn a_refused_schedule_names_its_field_and_writes_nothing(ts: &TestStore) {
    let f = fixture(&*ts.store, "ada").await;
    let hub = hub();
    let delivery = hub.on(&ts.store);
    let cases = [
        (
            AddSchedule {
                queue: Some("elsewhere".into()),
                ..add("* * * * *", "x", "one")
            },
            "queue",
        ),
        (
            AddSchedule {
                queue: None,
                ..add("* * * * *", "x", "one")
            },
            "queue",
        ),
        (add("* * * * mon-xyz", "x", "one"), "cron"),
        (
            AddSchedule {
                tz: "Europe/Atlantis".into(),
                ..add("* * * * *", "x", "one")
            },
            "tz",
        ),
        (add("* * * * *", "", "one"), "title"),
        (
            add("* * * * *", &"x".repeat(199).replace("xx", "{date}"), "one"),
            "title",
        ),
        (
            AddSchedule {
                kind: Some("two words".into()),
                ..add("* * * * *", "x", "one")
            },
            "kind",
        ),
        (add("* * * * *", "x", "every"), "catch_up"),
    ];
    for (case, field) in cases {
        match switchboard::ops::schedules::add(&delivery, &f.human.id, &f.endpoint, case).await {
            Err(StoreError::InvalidArgument(invalid)) => {
                assert_eq!(invalid.field, field, "{invalid}")
            }
            other => panic!("{field}: {other:?}"),
        }
    }
    assert!(
        ts.store
            .list_schedules(&f.human.id, &f.endpoint.id)
            .await
            .unwrap()
            .is_empty()
    );
}

on_both_backends!(
    a_due_schedule_makes_one_todo_that_rings,
    two_instances_racing_make_one_todo_per_occurrence,
    catch_up_one_makes_the_latest_and_none_skips,
    pause_holds_and_resume_starts_from_the_next_future_occurrence,
    a_refused_schedule_names_its_field_and_writes_nothing,
);

/// Generous rates, a one-second maintenance tick.
const FLAGS: [&str; 6] = [
    "--api-write-rate",
    "1000",
    "--api-read-rate",
    "1000",
    "--maintenance-interval",
    "1s",
];

struct Api {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Api {
    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self
            .http
            .request(method, format!("{}/api/v1{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("API request");
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        assert!(status.is_success(), "{path}: {status} {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    async fn titles(&self, slug: &str) -> Vec<String> {
        let listed = self
            .call(
                reqwest::Method::GET,
                &format!("/todos?endpoint={slug}&limit=100"),
                None,
            )
            .await;
        listed["todos"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["title"].as_str().unwrap().to_owned())
            .collect()
    }

    async fn schedule(&self, slug: &str, id: &str) -> Value {
        let listed = self
            .call(
                reqwest::Method::GET,
                &format!("/endpoints/{slug}/schedules"),
                None,
            )
            .await;
        listed["schedules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id)
            .cloned()
            .expect("listed")
    }
}

/// Makes the schedule due at `at` (ms since the epoch), as if it had waited for it.
async fn set_next_at(url: &str, id: &str, at: i64) {
    use sqlx::Connection;
    let mut db = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::query("UPDATE schedules SET next_at = $1 WHERE id = $2")
        .bind(at)
        .bind(id)
        .execute(&mut db)
        .await
        .unwrap();
}

/// Waits until an instance moved the schedule off `from` (bounded).
async fn wait_moved(api: &Api, slug: &str, id: &str, from: i64) -> Value {
    let from = Timestamp::from_millis(from).to_rfc3339();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = api.schedule(slug, id).await;
        if s["next_at"] != from.as_str() {
            return s;
        }
        assert!(Instant::now() < deadline, "no instance fired {id}: {s}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_real_instances_make_one_todo_per_occurrence_also_after_a_restart() {
    let Some(ts) = postgres_store("schedules_cluster_once").await else {
        return;
    };
    let url = ts.postgres_url().expect("a PostgreSQL database");
    let dir = tempfile::tempdir().unwrap();
    let mut args: Vec<&str> = FLAGS.to_vec();
    args.extend(["--database", url.as_str()]);
    let start = |args: &[&str]| {
        let a = Process::start(dir.path(), args);
        let b = Process::start(dir.path(), args);
        (a, b)
    };
    let (a, b) = start(&args);
    let token = a.first_token().expect("the first start's token");
    let http = client();
    let api = Api {
        http: http.clone(),
        base: a.url(""),
        token: token.clone(),
    };
    let vended = api
        .call(
            reqwest::Method::POST,
            "/endpoints",
            Some(json!({"agent": "cron"})),
        )
        .await;
    let slug = vended["slug"].as_str().unwrap().to_owned();
    let credential = vended["token"].as_str().unwrap().to_owned();
    let mut bells = Stream::open(Mcp {
        http: http.clone(),
        url: b.url(&format!("/mcp/{slug}")),
        authorization: format!("Bearer {credential}"),
    })
    .await;
    // Yearly, so that only the test makes them due.
    let mut ids = Vec::new();
    for (title, catch_up) in [("one {date}", "one"), ("none {date}", "none")] {
        let s = api
            .call(
                reqwest::Method::POST,
                &format!("/endpoints/{slug}/schedules"),
                Some(
                    json!({"cron": "0 0 1 1 *", "tz": "UTC", "title": title, "catch_up": catch_up}),
                ),
            )
            .await;
        ids.push(s["id"].as_str().unwrap().to_owned());
    }
    let (one, none) = (ids[0].clone(), ids[1].clone());

    // Three occurrences due now, each fired by one of the two instances.
    for round in 1..=3 {
        let due = now_ms() - 1_000;
        set_next_at(&url, &one, due).await;
        let moved = wait_moved(&api, &slug, &one, due).await;
        assert!(moved["last_at"].is_string(), "{moved}");
        let titles = api.titles(&slug).await;
        assert_eq!(titles.len(), round, "one todo per occurrence: {titles:?}");
        let bell = bells
            .next(Duration::from_secs(10))
            .await
            .expect("a doorbell");
        assert!(todo_id(&bell).is_some(), "{bell}");
    }

    // Both instances down while an occurrence passes (2020's New Year, as
    // the schedules had waited for it since), then both back.
    drop((a, b));
    let missed = Timestamp::parse_rfc3339("2020-01-01T00:00:00Z")
        .unwrap()
        .as_millis();
    set_next_at(&url, &one, missed).await;
    set_next_at(&url, &none, missed).await;
    let (a, b) = start(&args);
    let api = Api {
        base: b.url(""),
        ..api
    };
    let moved_one = wait_moved(&api, &slug, &one, missed).await;
    let moved_none = wait_moved(&api, &slug, &none, missed).await;
    let mut titles = api.titles(&slug).await;
    titles.sort();
    let this_year = format!(
        "one {}-01-01",
        &moved_one["next_at"].as_str().unwrap()[..4]
            .parse::<i32>()
            .unwrap()
            - 1
    );
    assert_eq!(titles.len(), 4, "{titles:?}");
    assert_eq!(
        titles.iter().filter(|t| **t == this_year).count(),
        1,
        "the latest missed occurrence, once ({this_year}): {titles:?}"
    );
    assert!(
        titles.iter().all(|t| !t.starts_with("none")),
        "none skipped: {titles:?}"
    );
    assert_eq!(
        moved_one["next_at"], moved_none["next_at"],
        "both wait for next New Year"
    );
    assert!(moved_none["last_at"].is_null(), "{moved_none}");
    drop((a, b));
    ts.finish().await;
}
