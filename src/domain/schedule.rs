//! Schedules (`docs/queue.md`, "Recurring todos"): a 5-field cron expression
//! in a time zone, and when it next occurs.
//!
//! The fields are minute (0–59), hour (0–23), day of month (1–31), month
//! (1–12 or `jan`–`dec`) and day of week (0–7, 0 and 7 are Sunday, or
//! `sun`–`sat`); each is `*`, a value, a range `a-b`, a step `*/n`, `a/n` or
//! `a-b/n`, or a comma list of those. As in Vixie cron, when both the day of
//! month and the day of week are restricted (neither starts with `*`), a day
//! matches when either does. `@hourly`, `@daily`, `@weekly`, `@monthly` and
//! `@yearly` are shorthands.
//!
//! Occurrences are local wall-clock times. Across a daylight-saving change
//! a local time the clocks skip fires at the first minute after the gap
//! (once, however many skipped minutes matched), and a local time the clocks
//! repeat fires once, at its first pass.

use std::time::Duration;

use jiff::civil::{Date, DateTime};
use jiff::tz::{AmbiguousOffset, TimeZone};

use super::{Invalid, Timestamp};

/// A schedule's choice for occurrences missed while no instance ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatchUp {
    /// Creates one todo for the latest missed occurrence.
    One,
    /// Skips them: the next todo is the next future occurrence's.
    None,
}

impl CatchUp {
    pub fn as_str(self) -> &'static str {
        match self {
            CatchUp::One => "one",
            CatchUp::None => "none",
        }
    }

    pub fn parse(s: &str) -> Result<Self, Invalid> {
        match s {
            "one" => Ok(CatchUp::One),
            "none" => Ok(CatchUp::None),
            other => Err(Invalid::new(
                "catch_up",
                format!("{other:?} is not one of: one, none"),
            )),
        }
    }
}

/// How far ahead an occurrence is looked for; an expression that matches no
/// day in this window (`0 0 30 2 *`) never occurs and is refused.
const HORIZON_YEARS: i16 = 9;

/// An occurrence this late or less is on time, not missed (the maintenance
/// tick that sees it may run a little after it).
pub fn on_time_grace(tick: Duration) -> Duration {
    (tick * 2).max(Duration::from_secs(60))
}

/// A parsed 5-field cron expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u32,
    days: u32,
    months: u16,
    weekdays: u8,
    any_day: bool,
    any_weekday: bool,
}

struct Field {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const MINUTE: Field = Field {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
};
const HOUR: Field = Field {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
};
const DAY: Field = Field {
    name: "day-of-month",
    min: 1,
    max: 31,
    names: &[],
};
const MONTH: Field = Field {
    name: "month",
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
};
const WEEKDAY: Field = Field {
    name: "day-of-week",
    min: 0,
    max: 7,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
};

fn invalid(field: &Field, message: impl std::fmt::Display) -> Invalid {
    Invalid::new("cron", format!("{}: {message}", field.name))
}

impl Field {
    fn value(&self, s: &str) -> Result<u32, Invalid> {
        let lower = s.to_ascii_lowercase();
        if let Some(i) = self.names.iter().position(|n| *n == lower) {
            return Ok(i as u32 + self.min);
        }
        let v: u32 = s
            .parse()
            .map_err(|_| invalid(self, format!("{s:?} is not a number{}", self.name_hint())))?;
        if v < self.min || v > self.max {
            return Err(invalid(
                self,
                format!("{v} is out of range {}-{}", self.min, self.max),
            ));
        }
        Ok(v)
    }

    fn name_hint(&self) -> &'static str {
        if self.names.is_empty() {
            ""
        } else if self.name == "month" {
            " or a month name (jan-dec)"
        } else {
            " or a day name (sun-sat)"
        }
    }

    /// The set of values the field allows, as a bit mask (bit `v`).
    fn parse(&self, text: &str) -> Result<u64, Invalid> {
        let mut mask = 0u64;
        for item in text.split(',') {
            if item.is_empty() {
                return Err(invalid(self, "an empty list item"));
            }
            let (range, step) = match item.split_once('/') {
                Some((r, s)) => {
                    let step: u32 = s
                        .parse()
                        .map_err(|_| invalid(self, format!("step {s:?} is not a number")))?;
                    if step == 0 || step > self.max {
                        return Err(invalid(
                            self,
                            format!("step {step} is out of range 1-{}", self.max),
                        ));
                    }
                    (r, Some(step))
                }
                None => (item, None),
            };
            let (lo, hi) = if range == "*" {
                (self.min, self.max)
            } else if let Some((a, b)) = range.split_once('-') {
                let (a, b) = (self.value(a)?, self.value(b)?);
                if a > b {
                    return Err(invalid(self, format!("range {a}-{b} runs backwards")));
                }
                (a, b)
            } else {
                let a = self.value(range)?;
                // `a/n` runs from a to the end, as in Vixie cron.
                (a, if step.is_some() { self.max } else { a })
            };
            let mut v = lo;
            while v <= hi {
                mask |= 1 << v;
                v += step.unwrap_or(1);
            }
        }
        Ok(mask)
    }
}

impl Cron {
    /// Parses and checks an expression; the error names the cron field at fault.
    pub fn parse(expr: &str) -> Result<Cron, Invalid> {
        let expr = expr.trim();
        let expanded = match expr.to_ascii_lowercase().as_str() {
            "@hourly" => "0 * * * *",
            "@daily" | "@midnight" => "0 0 * * *",
            "@weekly" => "0 0 * * 0",
            "@monthly" => "0 0 1 * *",
            "@yearly" | "@annually" => "0 0 1 1 *",
            _ if expr.starts_with('@') => {
                return Err(Invalid::new(
                    "cron",
                    format!(
                        "unknown shorthand {expr:?} (@hourly, @daily, @weekly, @monthly, @yearly)"
                    ),
                ));
            }
            _ => expr,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(Invalid::new(
                "cron",
                format!(
                    "{} fields; expected 5: minute hour day-of-month month day-of-week",
                    fields.len()
                ),
            ));
        }
        let mut weekdays = WEEKDAY.parse(fields[4])?;
        if weekdays & (1 << 7) != 0 {
            weekdays = (weekdays & !(1 << 7)) | 1;
        }
        let cron = Cron {
            minutes: MINUTE.parse(fields[0])?,
            hours: HOUR.parse(fields[1])? as u32,
            days: DAY.parse(fields[2])? as u32,
            months: MONTH.parse(fields[3])? as u16,
            weekdays: weekdays as u8,
            any_day: fields[2].starts_with('*'),
            any_weekday: fields[4].starts_with('*'),
        };
        // A day that never comes (`0 0 30 2 *`) is refused rather than kept forever.
        let probe = DateTime::constant(2000, 1, 1, 0, 0, 0, 0);
        if cron.next_civil(probe, HORIZON_YEARS).is_none() {
            return Err(invalid(
                &DAY,
                "no day matches both the day of month and the month",
            ));
        }
        Ok(cron)
    }

    fn day_matches(&self, date: Date) -> bool {
        let dom = self.days & (1 << date.day()) != 0;
        let dow = self.weekdays & (1 << date.weekday().to_sunday_zero_offset()) != 0;
        match (self.any_day, self.any_weekday) {
            (true, true) => true,
            (true, false) => dow,
            (false, true) => dom,
            (false, false) => dom || dow,
        }
    }

    /// The first local minute at or after `from` (seconds ignored) that
    /// matches, within `years` years.
    fn next_civil(&self, from: DateTime, years: i16) -> Option<DateTime> {
        let limit = from.year().saturating_add(years);
        let mut date = from.date();
        let (mut hour, mut minute) = (from.hour() as u32, from.minute() as u32);
        while date.year() <= limit {
            if self.months & (1 << date.month()) == 0 {
                date = date.last_of_month().tomorrow().ok()?;
                (hour, minute) = (0, 0);
                continue;
            }
            if !self.day_matches(date) {
                date = date.tomorrow().ok()?;
                (hour, minute) = (0, 0);
                continue;
            }
            match (hour..24).find(|h| self.hours & (1 << h) != 0) {
                None => {
                    date = date.tomorrow().ok()?;
                    (hour, minute) = (0, 0);
                    continue;
                }
                Some(h) if h != hour => (hour, minute) = (h, 0),
                Some(_) => {}
            }
            match (minute..60).find(|m| self.minutes & (1 << m) != 0) {
                Some(m) => {
                    return Some(date.at(hour as i8, m as i8, 0, 0));
                }
                None => {
                    (hour, minute) = (hour + 1, 0);
                    if hour == 24 {
                        date = date.tomorrow().ok()?;
                        hour = 0;
                    }
                }
            }
        }
        None
    }

    /// The first occurrence strictly after `after`, in `tz`; `None` if there
    /// is none within the horizon (which [`Cron::parse`] rules out).
    pub fn next_occurrence(&self, after: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        let after_ts = jiff::Timestamp::from_millisecond(after.as_millis()).ok()?;
        let local = tz.to_datetime(after_ts);
        let minute = local.date().at(local.hour(), local.minute(), 0, 0);
        let mut from = minute.checked_add(jiff::Span::new().minutes(1)).ok()?;
        // Each pass either returns or moves `from` forward a minute at least.
        for _ in 0..100_000 {
            let civil = self.next_civil(from, HORIZON_YEARS)?;
            let instant = resolve(tz, civil)?;
            if instant > after {
                return Some(instant);
            }
            from = civil.checked_add(jiff::Span::new().minutes(1)).ok()?;
        }
        None
    }

    /// The latest occurrence at or before `now`, counting `next_at` (the
    /// occurrence a schedule waits for) as one; `None` when `next_at` is
    /// still ahead.
    pub fn latest_due(
        &self,
        next_at: Timestamp,
        now: Timestamp,
        tz: &TimeZone,
    ) -> Option<Timestamp> {
        if next_at > now {
            return None;
        }
        let walk = |from: Timestamp, start: Timestamp| {
            let mut latest = start;
            let mut cur = from;
            for _ in 0..10_000 {
                match self.next_occurrence(cur, tz) {
                    Some(o) if o <= now => {
                        latest = o;
                        cur = o;
                    }
                    _ => break,
                }
            }
            latest
        };
        // Most schedules are frequent: look at the last day first.
        let recent = now.saturating_sub(Duration::from_secs(26 * 3600));
        if recent > next_at {
            let latest = walk(recent, next_at);
            if latest > next_at {
                return Some(latest);
            }
        }
        Some(walk(next_at, next_at))
    }
}

/// The instant of a local time: the first pass of a repeated one, and the
/// first minute after the gap for a skipped one.
fn resolve(tz: &TimeZone, civil: DateTime) -> Option<Timestamp> {
    let mut civil = civil;
    for _ in 0..(48 * 60) {
        let ambiguous = tz.to_ambiguous_timestamp(civil);
        match ambiguous.offset() {
            AmbiguousOffset::Unambiguous { .. } | AmbiguousOffset::Fold { .. } => {
                let ts = ambiguous.earlier().ok()?;
                return Some(Timestamp::from_millis(ts.as_millisecond()));
            }
            AmbiguousOffset::Gap { .. } => {
                civil = civil.checked_add(jiff::Span::new().minutes(1)).ok()?;
            }
        }
    }
    None
}

/// A todo's title from its schedule's template: `{date}` (`2026-03-10`),
/// `{time}` (`09:00`) and `{datetime}` (`2026-03-10 09:00`) are the
/// occurrence's local date and time in `tz`; everything else is kept.
pub fn render_title(template: &str, occurrence: Timestamp, tz: &TimeZone) -> String {
    if !template.contains('{') {
        return template.to_owned();
    }
    let Ok(ts) = jiff::Timestamp::from_millisecond(occurrence.as_millis()) else {
        return template.to_owned();
    };
    let local = tz.to_datetime(ts);
    let date = local.date().to_string();
    let time = format!("{:02}:{:02}", local.hour(), local.minute());
    template
        .replace("{datetime}", &format!("{date} {time}"))
        .replace("{date}", &date)
        .replace("{time}", &time)
}

/// Looks up an IANA time zone name (the bundled database).
pub fn parse_tz(name: &str) -> Result<TimeZone, Invalid> {
    let name = name.trim();
    if name.is_empty() {
        return Err(Invalid::new(
            "tz",
            "required (an IANA name such as Europe/Berlin, or UTC)",
        ));
    }
    TimeZone::get(name)
        .map_err(|_| Invalid::new("tz", format!("{name:?} is not a known IANA time zone")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        Timestamp::parse_rfc3339(s).unwrap()
    }

    fn next(expr: &str, after: &str, tz: &str) -> String {
        let cron = Cron::parse(expr).unwrap();
        let tz = parse_tz(tz).unwrap();
        cron.next_occurrence(at(after), &tz).unwrap().to_rfc3339()
    }

    fn series(expr: &str, after: &str, tz: &str, n: usize) -> Vec<String> {
        let cron = Cron::parse(expr).unwrap();
        let tz = parse_tz(tz).unwrap();
        let mut out = Vec::new();
        let mut t = at(after);
        for _ in 0..n {
            t = cron.next_occurrence(t, &tz).unwrap();
            out.push(t.to_rfc3339());
        }
        out
    }

    #[test]
    fn parses_the_forms_and_names_the_field_at_fault() {
        for ok in [
            "* * * * *",
            "*/15 9-17 * * mon-fri",
            "0,30 8 1,15 jan,JUL *",
            "5/10 * * * 7",
            "0 0 29 2 *",
            "@daily",
            "@hourly",
        ] {
            Cron::parse(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for (bad, field) in [
            ("60 * * * *", "minute"),
            ("* 24 * * *", "hour"),
            ("* * 0 * *", "day-of-month"),
            ("* * * 13 *", "month"),
            ("* * * foo *", "month"),
            ("* * * * 8", "day-of-week"),
            ("*/0 * * * *", "minute"),
            ("5-1 * * * *", "minute"),
            ("1,,2 * * * *", "minute"),
            ("0 0 30 2 *", "day-of-month"),
        ] {
            let err = Cron::parse(bad).unwrap_err();
            assert_eq!(err.field, "cron");
            assert!(err.message.starts_with(field), "{bad}: {}", err.message);
        }
        assert!(
            Cron::parse("* * * *")
                .unwrap_err()
                .message
                .contains("expected 5")
        );
        assert!(Cron::parse("@often").is_err());
        assert_eq!(parse_tz("Mars/Olympus").unwrap_err().field, "tz");
        assert_eq!(CatchUp::parse("all").unwrap_err().field, "catch_up");
    }

    #[test]
    fn next_occurrences_in_plain_time() {
        assert_eq!(
            next("*/15 * * * *", "2026-03-10T10:07:30Z", "UTC"),
            "2026-03-10T10:15:00.000Z"
        );
        // Strictly after: an occurrence is not its own next.
        assert_eq!(
            next("0 9 * * *", "2026-03-10T09:00:00Z", "UTC"),
            "2026-03-11T09:00:00.000Z"
        );
        // 09:00 in Berlin in winter is 08:00 UTC; Monday to Friday only.
        assert_eq!(
            series(
                "0 9 * * mon-fri",
                "2026-01-09T12:00:00Z",
                "Europe/Berlin",
                2
            ),
            ["2026-01-12T08:00:00.000Z", "2026-01-13T08:00:00.000Z"]
        );
        // Day of month OR day of week when both are restricted.
        assert_eq!(
            series("0 0 13 * fri", "2026-02-01T00:00:00Z", "UTC", 3),
            [
                "2026-02-06T00:00:00.000Z",
                "2026-02-13T00:00:00.000Z",
                "2026-02-20T00:00:00.000Z"
            ]
        );
        // A leap day.
        assert_eq!(
            next("0 12 29 2 *", "2026-03-01T00:00:00Z", "UTC"),
            "2028-02-29T12:00:00.000Z"
        );
        // Sunday as 0 and as 7.
        assert_eq!(
            next("0 0 * * 7", "2026-03-10T00:00:00Z", "UTC"),
            next("0 0 * * 0", "2026-03-10T00:00:00Z", "UTC")
        );
    }

    #[test]
    fn berlin_spring_forward_fires_a_skipped_time_at_the_first_minute_after_the_gap() {
        // 2026-03-29: 02:00 CET jumps to 03:00 CEST (01:00 UTC).
        assert_eq!(
            series("30 2 * * *", "2026-03-28T12:00:00Z", "Europe/Berlin", 3),
            [
                "2026-03-29T01:00:00.000Z", // 03:00 CEST, the first valid minute
                "2026-03-30T00:30:00.000Z", // 02:30 CEST
                "2026-03-31T00:30:00.000Z"
            ]
        );
        // Every 15 minutes: 02:00–02:45 are skipped and fire once, at 03:00.
        assert_eq!(
            series("*/15 * * * *", "2026-03-29T00:40:00Z", "Europe/Berlin", 3),
            [
                "2026-03-29T00:45:00.000Z", // 01:45 CET
                "2026-03-29T01:00:00.000Z", // 03:00 CEST
                "2026-03-29T01:15:00.000Z"  // 03:15 CEST
            ]
        );
    }

    #[test]
    fn berlin_fall_back_fires_a_repeated_time_once() {
        // 2026-10-25: 03:00 CEST goes back to 02:00 CET (01:00 UTC).
        assert_eq!(
            series("30 2 * * *", "2026-10-24T12:00:00Z", "Europe/Berlin", 2),
            ["2026-10-25T00:30:00.000Z", "2026-10-26T01:30:00.000Z"]
        );
        assert_eq!(
            series("0 * * * *", "2026-10-24T23:30:00Z", "Europe/Berlin", 3),
            [
                "2026-10-25T00:00:00.000Z", // 02:00 CEST
                "2026-10-25T02:00:00.000Z", // 03:00 CET (02:00 CET is not repeated)
                "2026-10-25T03:00:00.000Z"
            ]
        );
        // Asked from inside the second pass, the repeated hour is over.
        assert_eq!(
            next("*/15 * * * *", "2026-10-25T01:10:00Z", "Europe/Berlin"),
            "2026-10-25T02:00:00.000Z"
        );
    }

    #[test]
    fn new_york_transitions() {
        // 2026-03-08: 02:00 EST jumps to 03:00 EDT (07:00 UTC).
        assert_eq!(
            series("30 2 * * *", "2026-03-07T12:00:00Z", "America/New_York", 2),
            ["2026-03-08T07:00:00.000Z", "2026-03-09T06:30:00.000Z"]
        );
        // 2026-11-01: 02:00 EDT goes back to 01:00 EST (06:00 UTC).
        assert_eq!(
            series("30 1 * * *", "2026-10-31T12:00:00Z", "America/New_York", 2),
            ["2026-11-01T05:30:00.000Z", "2026-11-02T06:30:00.000Z"]
        );
        // 09:00 keeps local time across the change.
        assert_eq!(
            series("0 9 * * *", "2026-10-31T00:00:00Z", "America/New_York", 2),
            ["2026-10-31T13:00:00.000Z", "2026-11-01T14:00:00.000Z"]
        );
    }

    /// Property: around both changes of the year in both zones, occurrences
    /// strictly increase, each is an occurrence's local minute or the first
    /// minute after a gap, and none is skipped (a brute-force minute scan
    /// agrees).
    #[test]
    fn property_next_agrees_with_a_minute_by_minute_scan() {
        for tz_name in ["Europe/Berlin", "America/New_York", "UTC"] {
            let tz = parse_tz(tz_name).unwrap();
            for expr in [
                "*/7 * * * *",
                "30 2 * * *",
                "0 1-3 * * sun",
                "15 2,3 25-31 3,10,11 *",
            ] {
                let cron = Cron::parse(expr).unwrap();
                for (start, end) in [
                    ("2026-03-01T00:00:00Z", "2026-04-05T00:00:00Z"),
                    ("2026-10-20T00:00:00Z", "2026-11-08T00:00:00Z"),
                ] {
                    let (start, end) = (at(start), at(end));
                    // Brute force: every UTC minute; a minute fires when its local
                    // time matches, unless that local time already fired (the
                    // repeated hour), plus the first minute after a gap when a
                    // skipped local minute matched.
                    let mut expected = Vec::new();
                    let mut seen = std::collections::HashSet::new();
                    let mut prev_local: Option<DateTime> = None;
                    let mut t = start.as_millis() + 60_000;
                    while t < end.as_millis() {
                        let ts = jiff::Timestamp::from_millisecond(t).unwrap();
                        let local = tz.to_datetime(ts);
                        let mut fires =
                            cron.next_civil(local, 0) == Some(local) && seen.insert(local);
                        if let Some(p) = prev_local {
                            // A jump forward: local minutes between were skipped.
                            let mut skipped = p.checked_add(jiff::Span::new().minutes(1)).unwrap();
                            while skipped < local {
                                if cron.next_civil(skipped, 0) == Some(skipped) {
                                    fires = true;
                                }
                                skipped =
                                    skipped.checked_add(jiff::Span::new().minutes(1)).unwrap();
                            }
                        }
                        if fires {
                            expected.push(t);
                        }
                        prev_local = Some(local);
                        t += 60_000;
                    }
                    let mut got = Vec::new();
                    let mut cur = start;
                    loop {
                        let n = cron.next_occurrence(cur, &tz).unwrap();
                        if n >= end {
                            break;
                        }
                        assert!(n > cur);
                        got.push(n.as_millis());
                        cur = n;
                    }
                    assert_eq!(got.len(), expected.len(), "{tz_name} {expr}");
                    assert_eq!(got, expected, "{tz_name} {expr}");
                }
            }
        }
    }

    #[test]
    fn titles_name_the_local_occurrence() {
        let tz = parse_tz("Europe/Berlin").unwrap();
        let t = at("2026-03-10T08:00:00Z");
        assert_eq!(render_title("standup {date}", t, &tz), "standup 2026-03-10");
        assert_eq!(
            render_title("{datetime}/{time}", t, &tz),
            "2026-03-10 09:00/09:00"
        );
        assert_eq!(render_title("plain {x}", t, &tz), "plain {x}");
    }

    #[test]
    fn latest_due_counts_missed_occurrences() {
        let cron = Cron::parse("0 * * * *").unwrap();
        let tz = parse_tz("UTC").unwrap();
        let now = at("2026-03-10T10:20:00Z");
        assert_eq!(cron.latest_due(at("2026-03-10T11:00:00Z"), now, &tz), None);
        assert_eq!(
            cron.latest_due(at("2026-03-10T10:00:00Z"), now, &tz),
            Some(at("2026-03-10T10:00:00Z"))
        );
        // Down for three days: the latest is this hour's.
        assert_eq!(
            cron.latest_due(at("2026-03-07T10:00:00Z"), now, &tz),
            Some(at("2026-03-10T10:00:00Z"))
        );
        // Yearly, down for two years.
        let yearly = Cron::parse("@yearly").unwrap();
        assert_eq!(
            yearly.latest_due(at("2024-01-01T00:00:00Z"), now, &tz),
            Some(at("2026-01-01T00:00:00Z"))
        );
    }
}
