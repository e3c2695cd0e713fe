//! Parsing, rendering and evaluation cases beyond the shared vectors
//! (`tests/shift.rs` runs those, plus the property tests).

use super::*;

fn at(rfc3339: &str) -> Timestamp {
    Timestamp::parse_rfc3339(rfc3339).unwrap()
}

fn shift(text: &str) -> Shift {
    Shift::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

fn rejected(text: &str) -> String {
    let e = Shift::parse(text).expect_err(text);
    assert_eq!(e.field, "shift", "{text:?}");
    e.message
}

#[test]
fn canonical_forms() {
    for (input, canonical) in [
        ("Mon-Fri 09:00-13:00", "TZ=UTC Mon-Fri 09:00-13:00"),
        (
            "  CRON_TZ=Europe/Berlin\tmon-FRI   09:00-13:00 ; sat 10:00-12:00\t",
            "TZ=Europe/Berlin Mon-Fri 09:00-13:00; Sat 10:00-12:00",
        ),
        ("Sat,Sun,Mon,Fri 10:00-11:00", "TZ=UTC Fri-Mon 10:00-11:00"),
        ("Mon,Wed,Fri 10:00-11:00", "TZ=UTC Mon,Wed,Fri 10:00-11:00"),
        ("Tue-Mon 10:00-11:00", "TZ=UTC 10:00-11:00"),
        ("Mon-Mon 10:00-11:00", "TZ=UTC Mon 10:00-11:00"),
        ("Mon 22:00-00:00", "TZ=UTC Mon 22:00-24:00"),
        ("Fri 22:00-02:00", "TZ=UTC Fri 22:00-02:00"),
        (
            "Tue 09:00-10:00; Mon 09:00-10:00; Mon 08:00-09:00",
            "TZ=UTC Mon 08:00-09:00; Mon-Tue 09:00-10:00",
        ),
        ("Sat-Sun 00:00-24:00", "TZ=UTC Sat-Sun 00:00-24:00"),
        ("Sun,Mon 01:00-02:00", "TZ=UTC Sun-Mon 01:00-02:00"),
    ] {
        let s = shift(input);
        assert_eq!(s.canonical(), canonical, "{input:?}");
        assert_eq!(shift(&s.canonical()), s, "{input:?} round trip");
    }
}

#[test]
fn zone_names() {
    assert_eq!(shift("09:00-10:00").zone_name(), "UTC");
    assert_eq!(
        shift("TZ=America/Los_Angeles 09:00-10:00").zone_name(),
        "America/Los_Angeles"
    );
    assert_eq!(shift("TZ=Etc/UTC 09:00-10:00").zone_name(), "Etc/UTC");
    assert_eq!(shift("TZ=US/Pacific 09:00-10:00").zone_name(), "US/Pacific");
    // Same schedule, but canonical text (and so equality) keeps the name given.
    assert_ne!(shift("09:00-10:00"), shift("TZ=Etc/UTC 09:00-10:00"));
    assert_eq!(shift("09:00-10:00"), shift("TZ=UTC 09:00-10:00"));
}

#[test]
fn rejections_name_shift_and_say_what_is_wrong() {
    for (text, starts) in [
        ("", "must not be blank"),
        (" \t ", "must not be blank"),
        ("TZ=UTC", "must specify at least one window"),
        ("TZ=UTC   ", "must specify at least one window"),
        ("TZ= 09:00-10:00", "empty time zone"),
        ("TZ=Mars/Olympus 09:00-13:00", "unknown time zone"),
        ("TZ=utc 09:00-13:00", "wrong case in time zone"),
        (
            "TZ=america/los_angeles 09:00-13:00",
            "wrong case in time zone",
        ),
        ("TZ=Local 09:00-13:00", "unsupported time zone"),
        ("TZ=Etc/Unknown 09:00-13:00", "unsupported time zone"),
        ("tz=UTC 09:00-13:00", "wrong case in the time zone prefix"),
        (
            "Cron_TZ=UTC 09:00-13:00",
            "wrong case in the time zone prefix",
        ),
        ("09:00-10:00;;10:00-11:00", "empty window"),
        (";09:00-10:00", "empty window"),
        ("09:00-10:00;", "empty window"),
        ("09:00-10:00; ", "empty window"),
        ("TZ=UTC ;09:00-10:00", "empty window"),
        ("Mon Tue 09:00-13:00", "too many fields"),
        ("Monday 09:00-13:00", "unknown day"),
        ("Mo 09:00-13:00", "unknown day"),
        ("Mon-Tue-Wed 09:00-13:00", "malformed day range"),
        ("Mon,,Tue 09:00-13:00", "empty day"),
        (
            "Mon,Tue, 09:00-13:00",
            "space inside a range or around a comma",
        ),
        ("Mon- 09:00-13:00", "space inside a range or around a comma"),
        ("Mon 09:00 -13:00", "space inside a range or around a comma"),
        ("Mon,Tue,", "malformed time range"),
        ("Mon,Tue, 09:00", "space inside a range or around a comma"),
        ("Mon-,Tue 09:00-13:00", "empty day"),
        (
            "Sat, Sun 10:00-12:00",
            "space inside a range or around a comma",
        ),
        (
            "Sat ,Sun 10:00-12:00",
            "space inside a range or around a comma",
        ),
        (
            "Mon - Fri 10:00-12:00",
            "space inside a range or around a comma",
        ),
        (
            "Mon 10:00 - 12:00",
            "space inside a range or around a comma",
        ),
        ("9:00-13:00", "malformed time"),
        ("09:0-13:00", "malformed time"),
        ("09:00-1300", "malformed time"),
        ("０9:00-13:00", "malformed time"),
        ("09h00-13:00", "malformed time"),
        ("09:00", "malformed time range"),
        ("Mon", "malformed time range"),
        ("09:00-10:00-11:00", "malformed time range"),
        ("-09:00-13:00", "sign"),
        ("+09:00-13:00", "sign"),
        ("09:00-+13:00", "sign"),
        ("09:00--13:00", "sign"),
        ("25:00-26:00", "out-of-range time"),
        ("09:60-10:00", "out-of-range time"),
        ("09:00-24:01", "out-of-range time"),
        ("24:00-13:00", "24:00 as a start"),
        ("Mon 09:00-09:00", "equal start and end"),
        ("00:00-00:00", "equal start and end"),
    ] {
        let message = rejected(text);
        assert!(
            message.starts_with(starts),
            "{text:?}: {message:?} should start with {starts:?}"
        );
    }
}

#[test]
fn whole_week() {
    assert!(shift("00:00-24:00").covers_whole_week());
    assert!(shift("Mon-Sun 12:00-00:00; 00:00-12:00").covers_whole_week());
    assert!(shift("22:00-22:30; 22:30-22:00").covers_whole_week());
    assert!(!shift("00:00-23:59").covers_whole_week());
    assert!(!shift("Mon-Sat 00:00-24:00").covers_whole_week());
    // Sunday's overnight tail reaches into Monday.
    let almost = "Tue-Sat 00:00-24:00; Sun 00:00-23:00; Sun 23:00-22:00";
    assert!(!shift(almost).covers_whole_week());
    assert!(shift(&format!("{almost}; Mon 22:00-24:00")).covers_whole_week());
}

#[test]
fn overnight_tail_wraps_from_sunday_into_monday() {
    let s = shift("Sun 22:00-02:00");
    assert!(s.contains(at("2026-09-28T01:59:59Z")), "Monday 01:59:59");
    assert!(!s.contains(at("2026-09-28T02:00:00Z")));
    assert!(
        !s.contains(at("2026-09-27T01:00:00Z")),
        "Sunday 01:00: Saturday has no window"
    );
}

#[test]
fn membership_is_to_the_second() {
    let s = shift("09:00-10:00");
    assert!(!s.contains(at("2026-09-21T08:59:59.999Z")));
    assert!(s.contains(at("2026-09-21T09:00:00Z")));
    assert!(s.contains(at("2026-09-21T09:59:59.999Z")));
    assert!(!s.contains(at("2026-09-21T10:00:00Z")));
    assert_eq!(
        s.next_boundary(at("2026-09-21T09:59:59.500Z")),
        Some(at("2026-09-21T10:00:00Z"))
    );
}

#[test]
fn next_start() {
    let s = shift("Mon-Fri 09:00-13:00");
    // Inside: past the end to the next opening.
    assert_eq!(
        s.next_start(at("2026-09-21T10:00:00Z")),
        Some(at("2026-09-22T09:00:00Z"))
    );
    // Outside: the next opening.
    assert_eq!(
        s.next_start(at("2026-09-25T14:00:00Z")),
        Some(at("2026-09-28T09:00:00Z"))
    );
    assert_eq!(
        shift("00:00-24:00").next_start(at("2026-09-21T10:00:00Z")),
        None
    );
}

#[test]
fn dst_berlin() {
    // Spring forward: 02:00 CET -> 03:00 CEST at 01:00Z on 2026-03-29 (a Sunday).
    let gap_start = shift("TZ=Europe/Berlin Sun 02:30-04:00");
    assert!(!gap_start.contains(at("2026-03-29T00:59:59Z")));
    assert_eq!(
        gap_start.next_boundary(at("2026-03-29T00:30:00Z")),
        Some(at("2026-03-29T01:00:00Z")),
        "a start label in the gap opens at the jump"
    );
    assert!(gap_start.contains(at("2026-03-29T01:00:00Z")));
    // Fall back: 03:00 CEST -> 02:00 CET at 01:00Z on 2026-10-25 (a Sunday).
    let fold = shift("TZ=Europe/Berlin Sun 02:30-05:00");
    // 02:30 CEST = 00:30Z opens; 02:00 CET (01:00Z) is before 02:30 again: closes;
    // 02:30 CET = 01:30Z opens a second time; closes at 05:00 CET = 04:00Z.
    let mut t = at("2026-10-25T00:00:00Z");
    let mut seen = Vec::new();
    while let Some(b) = fold.next_boundary(t) {
        if b > at("2026-10-26T00:00:00Z") {
            break;
        }
        seen.push(b.to_rfc3339());
        t = b;
    }
    assert_eq!(
        seen,
        [
            "2026-10-25T00:30:00.000Z",
            "2026-10-25T01:00:00.000Z",
            "2026-10-25T01:30:00.000Z",
            "2026-10-25T04:00:00.000Z"
        ]
    );
    // A window spanning the repeated hour is an hour longer.
    let long = shift("TZ=Europe/Berlin Sun 01:00-04:00");
    let open = at("2026-10-24T23:00:00Z");
    assert!(long.contains(open));
    assert_eq!(long.next_boundary(open), Some(at("2026-10-25T03:00:00Z")));
}

#[test]
fn lord_howe_half_hour_dst() {
    // Australia/Lord_Howe moves 30 minutes: 02:00 -> 02:30 on 2026-10-04.
    let s = shift("TZ=Australia/Lord_Howe Sun 02:00-02:30");
    let before = at("2026-10-03T15:00:00Z"); // Sun 01:30 +10:30
    assert!(!s.contains(before));
    let next = s.next_boundary(before).unwrap();
    // Wholly inside the gap: next Sunday 02:00 (+11:00) = Sat 15:00Z.
    assert_eq!(next, at("2026-10-10T15:00:00Z"));
}

#[test]
fn bundled_zone_database() {
    // The zone comes from the compiled-in database (no host tzdata needed).
    let s = shift("TZ=Asia/Kolkata 09:00-10:00");
    assert!(s.contains(at("2026-09-21T03:30:00Z")));
    assert!(!s.contains(at("2026-09-21T03:29:59Z")));
}

#[test]
fn extremes_do_not_panic() {
    let s = shift("TZ=Europe/Berlin Mon 09:00-10:00");
    for t in [i64::MIN, -1, 0, i64::MAX] {
        let t = Timestamp::from_millis(t);
        let _ = s.contains(t);
        let _ = s.next_boundary(t);
    }
}
