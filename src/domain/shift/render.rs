//! The canonical text of a shift.

use super::{ALL_DAYS, DAY, Window};

const DAY_LABELS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];

/// `TZ=<zone> <window>; <window>…` with windows already normalised.
pub(super) fn canonical(zone: &str, windows: &[Window]) -> String {
    let windows: Vec<String> = windows.iter().map(window).collect();
    format!("TZ={zone} {}", windows.join("; "))
}

fn window(w: &Window) -> String {
    let times = format!("{}-{}", hhmm(w.start), hhmm(w.end));
    if w.days == ALL_DAYS {
        times
    } else {
        format!("{} {times}", days(w.days))
    }
}

/// Runs of consecutive days as ranges, Monday first; a run through Sunday
/// into Monday stays one wrapping range (`Fri-Mon`).
fn days(set: u8) -> String {
    let has = |d: usize| set & (1 << (d % 7)) != 0;
    let mut items = Vec::new();
    for (first, label) in DAY_LABELS.iter().enumerate() {
        // A run starts where the day before is not in the set.
        if !has(first) || has(first + 6) {
            continue;
        }
        let mut last = first;
        while has(last + 1) {
            last += 1;
        }
        items.push(if last == first {
            (*label).to_owned()
        } else {
            format!("{label}-{}", DAY_LABELS[last % 7])
        });
    }
    items.join(",")
}

/// Minutes of the day as `HH:MM`; 1440 (an end at midnight) as `24:00`.
fn hhmm(minutes: u16) -> String {
    debug_assert!(minutes <= DAY);
    format!("{:02}:{:02}", minutes / 60, minutes % 60)
}
