//! Shifts: the shared vectors (`../shared/vectors/shift-*.jsonl`, or the copy
//! in `tests/fixtures/vectors/` where `../shared` is absent) and property
//! tests of parsing, membership and next boundaries.

use std::path::PathBuf;

use jiff::tz::{TimeZone, TimeZoneDatabase};
use proptest::prelude::*;
use serde_json::Value;
use switchboard::domain::Timestamp;
use switchboard::domain::shift::Shift;

// ---------------------------------------------------------------- vectors

/// The shared copy wins when present; the fixture copy keeps the tests
/// running where `../shared` is not checked out.
fn vectors(name: &str) -> Vec<Value> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let shared = root.join("../shared/vectors").join(name);
    let fixture = root.join("tests/fixtures/vectors").join(name);
    let text = std::fs::read_to_string(&shared)
        .or_else(|_| std::fs::read_to_string(&fixture))
        .unwrap_or_else(|e| panic!("{name}: neither {shared:?} nor {fixture:?}: {e}"));
    let cases: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{name}: {l}: {e}")))
        .collect();
    assert!(!cases.is_empty(), "{name} has no cases");
    cases
}

fn at(rfc3339: &str) -> Timestamp {
    Timestamp::parse_rfc3339(rfc3339).unwrap_or_else(|| panic!("bad instant {rfc3339}"))
}

#[test]
fn eval_vectors() {
    for case in vectors("shift-eval.jsonl") {
        let id = case["id"].as_str().unwrap();
        let text = case["shift"].as_str().unwrap();
        let t = at(case["at"].as_str().unwrap());
        let shift = Shift::parse(text).unwrap_or_else(|e| panic!("{id} {text:?}: {e}"));
        let expected_in = match case["expected"].as_str().unwrap() {
            "in" => true,
            "out" => false,
            other => panic!("{id}: expected {other:?}"),
        };
        assert_eq!(shift.contains(t), expected_in, "{id} {text:?} membership");
        let expected_next = case["next_boundary"].as_str().map(at);
        assert_eq!(
            shift.next_boundary(t),
            expected_next,
            "{id} {text:?} next boundary ({})",
            case["note"]
        );
        assert_eq!(
            expected_next.is_none(),
            shift.covers_whole_week(),
            "{id}: only a whole-week shift has no boundary"
        );
    }
}

#[test]
fn invalid_vectors() {
    for case in vectors("shift-invalid.jsonl") {
        let id = case["id"].as_str().unwrap();
        let text = case["shift"].as_str().unwrap();
        match Shift::parse(text) {
            Ok(s) => panic!("{id} {text:?} accepted as {:?}", s.canonical()),
            Err(e) => {
                assert_eq!(e.field, "shift", "{id}");
                assert!(!e.message.is_empty(), "{id}");
            }
        }
    }
}

/// The fixture copy is what runs without `../shared`; say so when it drifts.
#[test]
fn fixture_copies_match_shared() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for name in ["shift-eval.jsonl", "shift-invalid.jsonl"] {
        let Ok(shared) = std::fs::read_to_string(root.join("../shared/vectors").join(name)) else {
            continue;
        };
        let fixture = std::fs::read_to_string(root.join("tests/fixtures/vectors").join(name))
            .unwrap_or_default();
        if shared != fixture {
            eprintln!("note: tests/fixtures/vectors/{name} differs from ../shared; using shared");
        }
    }
}

// ------------------------------------------------------------- properties

const ZONES: [&str; 5] = [
    "UTC",
    "America/Los_Angeles",
    "Europe/Berlin",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
];
const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
const MINUTE_MS: i64 = 60_000;
const DAY_MS: i64 = 86_400_000;

/// A generated shift: its text and, independently of the parser, what it
/// means (zone, and per window the day set and start/end minutes).
#[derive(Debug, Clone)]
struct Case {
    text: String,
    zone: &'static str,
    /// (days bitmask Monday = bit 0, start minute, end minute with 0 = midnight)
    windows: Vec<(u8, u16, u16)>,
}

fn minute() -> impl Strategy<Value = u16> {
    // Half the time a half-hour label, so DST gaps and folds get hit.
    prop_oneof![(0u16..48).prop_map(|h| h * 30), 0u16..1440]
}

/// Day list items `(first, optional last)` as indices; `None` = no day list.
type DayItems = Option<Vec<(usize, Option<usize>)>>;

fn day_items() -> impl Strategy<Value = DayItems> {
    prop::option::weighted(
        0.8,
        prop::collection::vec((0usize..7, prop::option::of(0usize..7)), 1..4),
    )
}

fn window() -> impl Strategy<Value = (DayItems, u16, u16, bool)> {
    (day_items(), minute(), minute(), any::<bool>())
        .prop_filter("start = end is invalid", |(_, s, e, _)| s != e)
}

fn cased(name: &str, upper: bool) -> String {
    if upper {
        let mut c = name.chars();
        let first = c.next().unwrap().to_ascii_uppercase();
        std::iter::once(first).chain(c).collect()
    } else {
        name.to_owned()
    }
}

fn hhmm(m: u16) -> String {
    format!("{:02}:{:02}", m / 60, m % 60)
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::option::of((0usize..ZONES.len(), any::<bool>())),
        prop::collection::vec(window(), 1..4),
        any::<bool>(),
        0u8..4,
    )
        .prop_map(|(zone, windows, upper, whole_day)| {
            let mut text = String::new();
            let zone_name = match zone {
                Some((i, cron)) => {
                    text.push_str(if cron { "CRON_TZ=" } else { "TZ=" });
                    text.push_str(ZONES[i]);
                    text.push(if upper { '\t' } else { ' ' });
                    ZONES[i]
                }
                None => "UTC",
            };
            let mut meaning = Vec::new();
            let mut parts = Vec::new();
            for (items, start, end, end_as_24) in windows {
                let mut mask = 0u8;
                let mut part = String::new();
                if let Some(items) = &items {
                    let rendered: Vec<String> = items
                        .iter()
                        .map(|&(a, b)| {
                            let mut d = a;
                            loop {
                                mask |= 1 << d;
                                if Some(d) == b || b.is_none() {
                                    break;
                                }
                                d = (d + 1) % 7;
                            }
                            match b {
                                Some(b) => format!("{}-{}", cased(DAYS[a], upper), DAYS[b]),
                                None => cased(DAYS[a], !upper),
                            }
                        })
                        .collect();
                    part.push_str(&rendered.join(","));
                    part.push(' ');
                } else {
                    mask = 0b111_1111;
                }
                let end_text = if end == 0 && end_as_24 && start != 0 {
                    "24:00".to_owned()
                } else {
                    hhmm(end)
                };
                part.push_str(&format!("{}-{end_text}", hhmm(start)));
                parts.push(part);
                meaning.push((mask, start, end));
            }
            // Sometimes a whole day every day, so whole-week shifts occur too.
            if whole_day == 0 {
                parts.push("00:00-24:00".to_owned());
                meaning.push((0b111_1111, 0, 0));
            }
            text.push_str(&parts.join(if upper { " ; " } else { ";" }));
            Case {
                text,
                zone: zone_name,
                windows: meaning,
            }
        })
}

fn tz(name: &str) -> TimeZone {
    TimeZoneDatabase::bundled().get(name).unwrap()
}

/// Membership straight from the definition in spec 05, without the bitmap.
fn oracle(case: &Case, zone: &TimeZone, t: Timestamp) -> bool {
    let local = zone.to_datetime(jiff::Timestamp::from_millisecond(t.as_millis()).unwrap());
    let day = local.weekday().to_monday_zero_offset() as u8;
    let yesterday = (day + 6) % 7;
    let m = local.hour() as u16 * 60 + local.minute() as u16;
    case.windows.iter().any(|&(days, start, end)| {
        let on = |d: u8| days & (1 << d) != 0;
        let end = if end == 0 { 1440 } else { end };
        if start < end {
            on(day) && start <= m && m < end
        } else {
            (on(day) && m >= start) || (on(yesterday) && m < end)
        }
    })
}

fn oracle_whole_week(case: &Case) -> bool {
    (0..7u8).all(|day| {
        let yesterday = (day + 6) % 7;
        (0..1440u16).all(|m| {
            case.windows.iter().any(|&(days, start, end)| {
                let on = |d: u8| days & (1 << d) != 0;
                let end = if end == 0 { 1440 } else { end };
                if start < end {
                    on(day) && start <= m && m < end
                } else {
                    (on(day) && m >= start) || (on(yesterday) && m < end)
                }
            })
        })
    })
}

/// 2026 DST changes of the zones above (UTC): LA, Berlin, Lord Howe.
const CHANGES: [&str; 6] = [
    "2026-03-08T10:00:00Z",
    "2026-11-01T09:00:00Z",
    "2026-03-29T01:00:00Z",
    "2026-10-25T01:00:00Z",
    "2026-04-04T15:00:00Z",
    "2026-10-03T15:30:00Z",
];

/// The zone of each entry of [`CHANGES`].
const CHANGE_ZONES: [&str; 6] = [
    "America/Los_Angeles",
    "America/Los_Angeles",
    "Europe/Berlin",
    "Europe/Berlin",
    "Australia/Lord_Howe",
    "Australia/Lord_Howe",
];

/// A shift in a DST zone whose labels sit in and around that zone's gaps and
/// folds (all on Sundays), and an instant within six hours of a change.
fn dst_case() -> impl Strategy<Value = (Case, Timestamp)> {
    const LABELS: [u16; 12] = [0, 60, 90, 105, 120, 135, 150, 165, 180, 210, 240, 1320];
    const DAY_SETS: [(&str, u8); 5] = [
        ("", 0b111_1111),
        ("Sun ", 0b100_0000),
        ("Sat ", 0b010_0000),
        ("Sat-Sun ", 0b110_0000),
        ("sun-MON ", 0b100_0001),
    ];
    let window = (0..DAY_SETS.len(), 0..LABELS.len(), 0..LABELS.len())
        .prop_filter("start = end is invalid", |(_, s, e)| s != e);
    (
        0..CHANGES.len(),
        prop::collection::vec(window, 1..3),
        -6 * 3_600_000i64..6 * 3_600_000,
    )
        .prop_map(|(change, windows, delta)| {
            let zone = CHANGE_ZONES[change];
            let parts: Vec<String> = windows
                .iter()
                .map(|&(d, s, e)| {
                    format!("{}{}-{}", DAY_SETS[d].0, hhmm(LABELS[s]), hhmm(LABELS[e]))
                })
                .collect();
            let case = Case {
                text: format!("TZ={zone} {}", parts.join("; ")),
                zone,
                windows: windows
                    .iter()
                    .map(|&(d, s, e)| (DAY_SETS[d].1, LABELS[s], LABELS[e]))
                    .collect(),
            };
            (
                case,
                Timestamp::from_millis(at(CHANGES[change]).as_millis() + delta),
            )
        })
}

fn instant() -> impl Strategy<Value = Timestamp> {
    let start = at("2026-01-01T00:00:00Z").as_millis();
    let end = at("2027-01-01T00:00:00Z").as_millis();
    prop_oneof![
        (start..end).prop_map(Timestamp::from_millis),
        // Near a DST change: within three days, on a minute or anywhere.
        (0..CHANGES.len(), -3 * DAY_MS..3 * DAY_MS, any::<bool>()).prop_map(
            |(i, delta, on_minute)| {
                let delta = if on_minute {
                    delta - delta.rem_euclid(MINUTE_MS)
                } else {
                    delta
                };
                Timestamp::from_millis(at(CHANGES[i]).as_millis() + delta)
            }
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn canonical_round_trips(case in case(), samples in prop::collection::vec(instant(), 8)) {
        let shift = Shift::parse(&case.text).map_err(|e| TestCaseError::fail(format!("{}: {e}", case.text)))?;
        let zone = tz(case.zone);
        prop_assert_eq!(shift.zone_name(), case.zone);
        let canonical = shift.canonical();
        let again = Shift::parse(&canonical).map_err(|e| TestCaseError::fail(format!("{canonical}: {e}")))?;
        prop_assert_eq!(&again, &shift);
        prop_assert_eq!(again.canonical(), canonical.clone());
        prop_assert_eq!(again.covers_whole_week(), oracle_whole_week(&case));
        for t in samples {
            let expected = oracle(&case, &zone, t);
            prop_assert_eq!(shift.contains(t), expected, "{} at {}", case.text, t);
            prop_assert_eq!(again.contains(t), expected, "{} at {}", canonical, t);
        }
    }

    #[test]
    fn next_boundary_is_the_first_change(case in case(), t in instant(), fractions in prop::collection::vec(0.0f64..1.0, 4)) {
        check_boundary(&case, t, &fractions)?;
    }

    /// Labels in and around the gaps and folds, on the days of the changes,
    /// evaluated in the hours before and after them.
    #[test]
    fn next_boundary_around_dst((case, t) in dst_case(), fractions in prop::collection::vec(0.0f64..1.0, 4)) {
        check_boundary(&case, t, &fractions)?;
    }

    #[test]
    fn next_start_turns_in(case in case(), t in instant()) {
        let shift = Shift::parse(&case.text).map_err(|e| TestCaseError::fail(format!("{}: {e}", case.text)))?;
        match shift.next_start(t) {
            None => prop_assert!(shift.covers_whole_week()),
            Some(s) => {
                prop_assert!(s > t);
                prop_assert!(shift.contains(s));
                prop_assert!(!shift.contains(Timestamp::from_millis(s.as_millis() - 1)));
            }
        }
    }
}

/// (b) and (c): `next_boundary(t)` is `None` only for a whole-week shift;
/// otherwise membership is constant from `t` up to it and differs at it.
fn check_boundary(case: &Case, t: Timestamp, fractions: &[f64]) -> Result<(), TestCaseError> {
    let shift =
        Shift::parse(&case.text).map_err(|e| TestCaseError::fail(format!("{}: {e}", case.text)))?;
    let zone = tz(case.zone);
    let inside = shift.contains(t);
    prop_assert_eq!(oracle(case, &zone, t), inside);
    let Some(b) = shift.next_boundary(t) else {
        prop_assert!(
            shift.covers_whole_week(),
            "{}: no boundary after {}",
            case.text,
            t
        );
        return Ok(());
    };
    prop_assert!(!shift.covers_whole_week());
    prop_assert!(b > t);
    prop_assert!(
        b.as_millis() - t.as_millis() <= 15 * DAY_MS,
        "{}: {} -> {}",
        case.text,
        t,
        b
    );
    prop_assert_ne!(
        shift.contains(b),
        inside,
        "{}: no change at {}",
        case.text,
        b
    );
    prop_assert_ne!(
        oracle(case, &zone, b),
        inside,
        "{}: oracle sees no change at {}",
        case.text,
        b
    );
    // Every zone here has whole-minute offsets, so membership can only
    // change on a whole UTC minute: checking each minute (and a few
    // arbitrary instants) before `b` is exhaustive.
    let (t_ms, b_ms) = (t.as_millis(), b.as_millis());
    let mut inner: Vec<i64> = vec![t_ms + 1, b_ms - 1];
    inner.extend(
        fractions
            .iter()
            .map(|f| t_ms + 1 + ((b_ms - t_ms - 2) as f64 * f) as i64),
    );
    let mut m = t_ms - t_ms.rem_euclid(MINUTE_MS) + MINUTE_MS;
    while m < b_ms {
        inner.push(m);
        m += MINUTE_MS;
    }
    for ms in inner.into_iter().filter(|&ms| ms > t_ms && ms < b_ms) {
        let x = Timestamp::from_millis(ms);
        prop_assert_eq!(
            oracle(case, &zone, x),
            inside,
            "{}: changed at {} before {}",
            case.text,
            x,
            b
        );
        prop_assert_eq!(
            shift.contains(x),
            inside,
            "{}: contains changed at {}",
            case.text,
            x
        );
    }
    Ok(())
}
