//! `switchboard shift check` through the real binary: local, no server.

use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::support::server::BIN;

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("shift")
        .arg("check")
        .args(args)
        // Nothing here may depend on a login or a server.
        .env(
            "SWITCHBOARD_CONFIG_DIR",
            "/nonexistent/switchboard-shift-cli",
        )
        .env_remove("SWITCHBOARD_URL")
        .env_remove("SWITCHBOARD_TOKEN")
        .output()
        .expect("run switchboard")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json_of(out: &Output) -> Value {
    serde_json::from_str(stdout(out).trim())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(out)))
}

#[test]
fn json_valid() {
    let out = run(&[
        "TZ=America/Los_Angeles mon-FRI 09:00-13:00",
        "--at",
        "2026-09-21T16:00:00Z",
        "--next",
        "3",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().count(), 1, "one line of JSON");
    assert!(stdout(&out).starts_with(r#"{"valid":true,"canonical":"#));
    let v = json_of(&out);
    assert_eq!(v["valid"], json!(true));
    assert_eq!(
        v["canonical"],
        json!("TZ=America/Los_Angeles Mon-Fri 09:00-13:00")
    );
    assert_eq!(v["zone"], json!("America/Los_Angeles"));
    assert_eq!(v["presence"], json!("in"));
    let boundaries: Vec<i64> = v["next_boundaries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| instant(b.as_str().unwrap()))
        .collect();
    assert_eq!(
        boundaries,
        [
            instant("2026-09-21T20:00:00Z"),
            instant("2026-09-22T16:00:00Z"),
            instant("2026-09-22T20:00:00Z"),
        ]
    );
}

fn instant(s: &str) -> i64 {
    switchboard::domain::Timestamp::parse_rfc3339(s)
        .unwrap_or_else(|| panic!("not RFC 3339: {s}"))
        .as_millis()
}

#[test]
fn json_whole_week_has_no_boundaries() {
    let out = run(&["00:00-24:00", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json_of(&out);
    assert_eq!(v["zone"], json!("UTC"));
    assert_eq!(v["canonical"], json!("TZ=UTC 00:00-24:00"));
    assert_eq!(v["presence"], json!("in"));
    assert_eq!(v["next_boundaries"], json!([]));
}

#[test]
fn json_invalid_exits_1() {
    let out = run(&["Monday 09:00-13:00", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).starts_with(r#"{"valid":false,"error":"shift: "#));
    let v = json_of(&out);
    assert_eq!(v["valid"], json!(false));
    let error = v["error"].as_str().unwrap();
    assert!(error.starts_with("shift: unknown day"), "{error}");
    assert_eq!(v.as_object().unwrap().len(), 2, "{v}");
}

#[test]
fn invalid_exits_1_with_the_error() {
    for expr in [
        "",
        "TZ=UTC",
        "24:00-13:00",
        "-09:00-13:00",
        "TZ=Local 09:00-10:00",
    ] {
        let out = run(&[expr]);
        assert_eq!(out.status.code(), Some(1), "{expr:?}: {}", stderr(&out));
        assert!(stdout(&out).is_empty(), "{expr:?}");
        assert!(
            stderr(&out).contains("shift: "),
            "{expr:?}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn human_output() {
    let out = run(&[
        "TZ=Europe/Berlin Sun 02:30-04:00",
        "--at",
        "2026-03-29T00:30:00Z",
        "--next",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("canonical: TZ=Europe/Berlin Sun 02:30-04:00"),
        "{text}"
    );
    assert!(text.contains("zone:      Europe/Berlin"), "{text}");
    assert!(text.contains("presence:  out"), "{text}");
    // 02:30 falls in the spring-forward gap: it opens at the jump (03:00 CEST).
    assert!(
        text.contains("2026-03-29T01:00:00.000Z (Sun 2026-03-29 03:00:00 CEST)  -> in"),
        "{text}"
    );
    assert!(
        text.contains("2026-03-29T02:00:00.000Z (Sun 2026-03-29 04:00:00 CEST)  -> out"),
        "{text}"
    );
}

#[test]
fn bad_at_is_a_usage_error() {
    let out = run(&["09:00-10:00", "--at", "tomorrow"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn defaults_to_now_and_five_boundaries() {
    let out = run(&["Mon-Fri 09:00-17:00", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json_of(&out);
    assert_eq!(v["next_boundaries"].as_array().unwrap().len(), 5);
    assert!(matches!(v["presence"].as_str(), Some("in" | "out")));
}
