//! Weekly shifts: `TZ=America/Los_Angeles Mon-Fri 09:00-13:00; Sat 10:00-12:00`.
//!
//! The grammar is Harness's `operating_hours` (spec 05, "The shift grammar"), so
//! one string can be pasted into both. A parsed shift is reduced to a bitmap of
//! the minutes of a local week; membership at an instant is a lookup of the
//! instant's local wall-clock minute in that bitmap, which is what makes the
//! DST behaviours fall out on their own (a label inside a spring-forward gap is
//! never reached on the wall clock, a repeated hour is walked through twice).
//!
//! - `parse`: text to windows, every rejection naming the field `shift`.
//! - `render`: the canonical text.
//! - `eval`: membership and the exact next boundary.
//!
//! The time zone database is the one compiled into the binary, never the
//! host's: every instance must reach the same answer.

mod eval;
mod parse;
mod render;

use std::sync::OnceLock;

use jiff::tz::{TimeZone, TimeZoneDatabase};

use super::{Invalid, Timestamp};

/// Minutes in a day and in a week (Monday 00:00 is minute 0 of the week).
const DAY: u16 = 1440;
const WEEK: usize = 7 * DAY as usize;

/// A validated weekly schedule in one time zone.
///
/// Two shifts are equal when their canonical forms are equal: the same zone
/// name and the same windows after normalisation (day sets merged per time
/// range, `00:00` as an end written `24:00`).
#[derive(Clone, Debug)]
pub struct Shift {
    zone: String,
    tz: TimeZone,
    /// Sorted by (start, end); at most one window per (start, end).
    windows: Vec<Window>,
    week: WeekMask,
}

/// One window: the days it starts on, and a start and end in minutes of the
/// local day. `end` is `1..=1440`; `end < start` is an overnight window whose
/// tail lies on the following day.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Window {
    /// Bit 0 = Monday … bit 6 = Sunday.
    days: u8,
    start: u16,
    end: u16,
}

const ALL_DAYS: u8 = 0b111_1111;

impl PartialEq for Shift {
    fn eq(&self, other: &Self) -> bool {
        self.zone == other.zone && self.windows == other.windows
    }
}

impl Eq for Shift {}

impl Shift {
    /// Parses and validates a shift. Errors name the field `shift`.
    pub fn parse(text: &str) -> Result<Shift, Invalid> {
        let parsed = parse::parse(text)?;
        Ok(Shift::new(parsed.zone, parsed.tz, parsed.windows))
    }

    fn new(zone: String, tz: TimeZone, windows: Vec<Window>) -> Shift {
        let windows = normalise(windows);
        let week = WeekMask::from_windows(&windows);
        Shift {
            zone,
            tz,
            windows,
            week,
        }
    }

    /// The canonical text: always with a `TZ=` prefix (so it means the same
    /// when pasted into Harness, whose default zone is the host's), windows
    /// sorted by start, day names capitalised, day sets merged per time range.
    pub fn canonical(&self) -> String {
        render::canonical(&self.zone, &self.windows)
    }

    /// The IANA zone name; `UTC` when the text had no prefix.
    pub fn zone_name(&self) -> &str {
        &self.zone
    }

    /// The zone itself (from the bundled database), e.g. to show local times.
    pub fn time_zone(&self) -> &TimeZone {
        &self.tz
    }

    /// Whether `t` falls inside the shift (local wall-clock time in the zone).
    pub fn contains(&self, t: Timestamp) -> bool {
        eval::contains(self, t)
    }

    /// The first instant strictly after `t` at which membership differs from
    /// membership at `t`; `None` only when the shift covers the whole week.
    pub fn next_boundary(&self, t: Timestamp) -> Option<Timestamp> {
        eval::next_boundary(self, t)
    }

    /// The first instant strictly after `t` at which the shift turns in;
    /// `None` when that never happens (a whole-week shift is never "entered").
    pub fn next_start(&self, t: Timestamp) -> Option<Timestamp> {
        let first = self.next_boundary(t)?;
        if self.contains(t) {
            self.next_boundary(first)
        } else {
            Some(first)
        }
    }

    /// The next `n` instants at which membership changes, each after the
    /// last (fewer when the shift covers the whole week): what `shift check`
    /// and the board's shift editor preview.
    pub fn next_boundaries(&self, from: Timestamp, n: usize) -> Vec<Timestamp> {
        let mut out = Vec::with_capacity(n.min(64));
        let mut t = from;
        while out.len() < n {
            let Some(b) = self.next_boundary(t) else {
                break;
            };
            out.push(b);
            t = b;
        }
        out
    }

    /// Whether every minute of the local week is inside the shift, in which
    /// case membership never changes.
    pub fn covers_whole_week(&self) -> bool {
        self.week.is_full()
    }
}

/// One window per (start, end), day sets unioned, sorted by (start, end).
/// Windows with the same times on different days are the same as one window
/// on the union of the days, so this changes nothing about membership.
fn normalise(windows: Vec<Window>) -> Vec<Window> {
    let mut merged: Vec<Window> = Vec::with_capacity(windows.len());
    for w in windows {
        match merged
            .iter_mut()
            .find(|m| (m.start, m.end) == (w.start, w.end))
        {
            Some(m) => m.days |= w.days,
            None => merged.push(w),
        }
    }
    merged.sort_by_key(|w| (w.start, w.end));
    merged
}

/// One bit per minute of the local week.
#[derive(Clone, PartialEq, Eq)]
struct WeekMask(Box<[u64]>);

impl std::fmt::Debug for WeekMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let minutes: u32 = self.0.iter().map(|w| w.count_ones()).sum();
        write!(f, "WeekMask({minutes} of {WEEK} minutes)")
    }
}

impl WeekMask {
    fn from_windows(windows: &[Window]) -> WeekMask {
        let mut mask = WeekMask(vec![0; WEEK.div_ceil(64)].into_boxed_slice());
        for w in windows {
            // An overnight window runs past midnight into the next day (and
            // Sunday's into Monday's, hence the modulo).
            let len = if w.end > w.start {
                w.end - w.start
            } else {
                DAY - w.start + w.end
            };
            for day in (0..7u16).filter(|d| w.days & (1 << d) != 0) {
                let first = usize::from(day * DAY + w.start);
                for minute in first..first + usize::from(len) {
                    mask.set(minute % WEEK);
                }
            }
        }
        mask
    }

    fn set(&mut self, minute: usize) {
        self.0[minute / 64] |= 1 << (minute % 64);
    }

    fn get(&self, minute: usize) -> bool {
        self.0[minute / 64] & (1 << (minute % 64)) != 0
    }

    fn is_full(&self) -> bool {
        // Bits past the week are never set.
        self.0
            .iter()
            .map(|w| w.count_ones() as usize)
            .sum::<usize>()
            == WEEK
    }
}

/// The tz database compiled into the binary. Not `jiff::tz::db()`: that one
/// prefers the host's zoneinfo when jiff is built with it, and instances on
/// hosts with different tzdata must still agree.
fn bundled_db() -> &'static TimeZoneDatabase {
    static DB: OnceLock<TimeZoneDatabase> = OnceLock::new();
    DB.get_or_init(TimeZoneDatabase::bundled)
}

#[cfg(test)]
mod tests;
