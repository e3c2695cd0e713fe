//! Membership and boundaries.
//!
//! Membership is a function of the local wall clock only (weekday and minute;
//! labels are whole minutes, so the seconds never matter). Seen as a function
//! of the instant it can therefore change only
//!
//! - where the wall clock passes a window label or a midnight (the weekday
//!   changes), and
//! - where the wall clock jumps: the zone's offset transitions.
//!
//! [`next_boundary`] collects exactly those instants in a span after `t`,
//! sorted, and returns the first at which membership differs from `t`'s. Since
//! nothing can change between two consecutive candidates, the first candidate
//! whose membership differs is the boundary; no stepping scan is involved.

use jiff::civil::{Date, DateTime};
use jiff::tz::AmbiguousOffset;

use super::{DAY, Shift};
use crate::domain::Timestamp;

/// Each pass considers candidates within this many days after its start.
/// Local dates from the start's − 1 to + 16 are resolved, which covers more
/// than 15 days of instants whatever the offset.
const SPAN_DAYS: i64 = 15;

/// Passes before giving up. A shift that does not cover the whole week misses
/// some minute of every local week, and that minute can only be skipped by a
/// spring-forward gap, so the first pass (15 days, 14 needed) always finds a
/// boundary in real zones; the extra passes only guard against odd tz data.
const MAX_PASSES: usize = 30;

pub(super) fn contains(shift: &Shift, t: Timestamp) -> bool {
    let local = shift.tz.to_datetime(to_jiff(t));
    let weekday = local.weekday().to_monday_zero_offset() as u16;
    let minute = weekday * DAY + local.hour() as u16 * 60 + local.minute() as u16;
    shift.week.get(usize::from(minute))
}

pub(super) fn next_boundary(shift: &Shift, t: Timestamp) -> Option<Timestamp> {
    if shift.covers_whole_week() {
        return None;
    }
    let inside = contains(shift, t);
    let mut from = t;
    for _ in 0..MAX_PASSES {
        let until = from.add_secs(SPAN_DAYS * 86_400);
        for candidate in candidates(shift, from, until) {
            if contains(shift, candidate) != inside {
                return Some(candidate);
            }
        }
        // Nothing changes in (from, until]: membership at `until` is still `inside`.
        if until == from {
            return None; // the end of representable time
        }
        from = until;
    }
    None
}

/// Every instant in `(from, until]` at which membership could change, sorted
/// and without duplicates.
fn candidates(shift: &Shift, from: Timestamp, until: Timestamp) -> Vec<Timestamp> {
    let tz = &shift.tz;
    let mut labels: Vec<u16> = shift
        .windows
        .iter()
        .flat_map(|w| [w.start, w.end % DAY])
        .chain([0]) // midnight: the weekday changes
        .collect();
    labels.sort_unstable();
    labels.dedup();

    let mut out = Vec::new();
    let first_date = tz.to_datetime(to_jiff(from)).date();
    for offset in -1..=SPAN_DAYS + 1 {
        let Ok(date) = first_date.checked_add(jiff::Span::new().days(offset)) else {
            continue;
        };
        for &label in &labels {
            resolve(tz, at(date, label), &mut out);
        }
    }
    // Offset transitions: where a label falls in a gap the wall clock jumps
    // over it, and membership changes at the jump itself; a fall-back can
    // also change membership at the jump (the clock returns to an earlier,
    // possibly differently covered, minute).
    for transition in tz.following(to_jiff(from)) {
        let ts = from_jiff(transition.timestamp());
        if ts > until {
            break;
        }
        out.push(ts);
    }

    out.retain(|&c| c > from && c <= until);
    out.sort_unstable();
    out.dedup();
    out
}

/// The instants a local wall-clock time occurs at: one normally, two in a
/// repeated hour (a boundary there happens twice), none in a gap (the
/// transition instant stands in for it).
fn resolve(tz: &jiff::tz::TimeZone, local: DateTime, out: &mut Vec<Timestamp>) {
    let offsets = match tz.to_ambiguous_timestamp(local).offset() {
        AmbiguousOffset::Unambiguous { offset } => [Some(offset), None],
        AmbiguousOffset::Fold { before, after } => [Some(before), Some(after)],
        AmbiguousOffset::Gap { .. } => [None, None],
    };
    for offset in offsets.into_iter().flatten() {
        if let Ok(ts) = offset.to_timestamp(local) {
            out.push(from_jiff(ts));
        }
    }
}

fn at(date: Date, minute_of_day: u16) -> DateTime {
    date.at((minute_of_day / 60) as i8, (minute_of_day % 60) as i8, 0, 0)
}

/// Clamped into jiff's range (years −9999..=9999); our instants are i64 ms.
fn to_jiff(t: Timestamp) -> jiff::Timestamp {
    let ms = t.as_millis().clamp(
        jiff::Timestamp::MIN.as_millisecond(),
        jiff::Timestamp::MAX.as_millisecond(),
    );
    jiff::Timestamp::from_millisecond(ms).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

fn from_jiff(ts: jiff::Timestamp) -> Timestamp {
    Timestamp::from_millis(ts.as_millisecond())
}
