//! The queue page's charts, drawn on the server as inline SVG (no script,
//! no external library): a range's buckets become paths in a fixed
//! 720 × 180 view box that scales with the page. Counts use a linear axis
//! from zero; latencies a logarithmic one, since they span milliseconds to
//! hours. A bucket with no sample leaves a gap in a latency line.

use crate::domain::Timestamp;
use crate::domain::activity::{Activity, ActivityRange, LatencyHistogram, latency_label};

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 180.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 10.0;
const TOP: f64 = 10.0;
const BOTTOM: f64 = 24.0;

/// One line of a chart, and its legend entry.
pub(crate) struct Line {
    pub(crate) label: &'static str,
    /// The CSS class that colours and dashes it (`s-created`, …).
    pub(crate) class: &'static str,
    /// An SVG path (`M x y L x y …`); empty when the line has no point.
    pub(crate) path: String,
    /// The range's total (counts) or percentile over the range (latencies).
    pub(crate) summary: String,
    /// Where the line has a sample, for a marker (latencies, whose lines
    /// have gaps; a lone sample would otherwise not show).
    pub(crate) dots: Vec<(f64, f64)>,
}

/// A tick on an axis: its position in the view box and its label.
pub(crate) struct Tick {
    pub(crate) at: f64,
    pub(crate) label: String,
}

pub(crate) struct Chart {
    pub(crate) id: &'static str,
    pub(crate) title: String,
    pub(crate) lines: Vec<Line>,
    pub(crate) y_ticks: Vec<Tick>,
    pub(crate) x_ticks: Vec<Tick>,
    /// Whether any line has a point (an empty chart says so instead).
    pub(crate) has_data: bool,
}

/// One bucket's numbers, for the table under the charts.
pub(crate) struct BucketRow {
    pub(crate) at: String,
    pub(crate) created: u64,
    pub(crate) completed: u64,
    pub(crate) failed: u64,
    pub(crate) dead_lettered: u64,
    pub(crate) claim_p50: String,
    pub(crate) complete_p50: String,
}

fn plot_bottom() -> f64 {
    HEIGHT - BOTTOM
}

fn x_of(i: usize, n: usize) -> f64 {
    let span = (WIDTH - LEFT - RIGHT) / (n.saturating_sub(1).max(1)) as f64;
    LEFT + i as f64 * span
}

/// 1, 2, 5 × 10ⁿ: the smallest at or above `n`.
fn nice_ceiling(n: u64) -> u64 {
    let mut scale = 1;
    loop {
        for step in [1, 2, 5] {
            if step * scale >= n {
                return step * scale;
            }
        }
        scale *= 10;
    }
}

/// Ticks under the plot: about six, at bucket starts, labelled in UTC
/// (`14:05`, or `Mon 14:00` over a week).
fn x_ticks(range: ActivityRange, series: &[(Timestamp, Activity)]) -> Vec<Tick> {
    let n = series.len();
    let every = (n / 6).max(1);
    series
        .iter()
        .enumerate()
        .filter(|(i, _)| i % every == 0)
        .map(|(i, (at, _))| {
            let text = at.to_rfc3339();
            // `2026-12-06T14:05:00Z` → `14:05`; a week also names the day.
            let time = text.get(11..16).unwrap_or("").to_owned();
            let label = match range {
                ActivityRange::Week => format!("{} {time}", text.get(5..10).unwrap_or("")),
                _ => time,
            };
            Tick {
                at: x_of(i, n),
                label,
            }
        })
        .collect()
}

/// Created, completed, failed and dead-lettered per bucket.
pub(crate) fn throughput(range: ActivityRange, series: &[(Timestamp, Activity)]) -> Chart {
    type Pick = fn(&Activity) -> u64;
    let kinds: [(&'static str, &'static str, Pick); 4] = [
        ("created", "s-created", |a| a.created),
        ("completed", "s-completed", |a| a.completed),
        ("failed", "s-failed", |a| a.failed),
        ("dead-lettered", "s-dead", |a| a.dead_lettered),
    ];
    let max = series
        .iter()
        .flat_map(|(_, a)| kinds.iter().map(move |(_, _, pick)| pick(a)))
        .max()
        .unwrap_or(0);
    let top = nice_ceiling(max.max(1));
    let y_of = |v: u64| plot_bottom() - (v as f64 / top as f64) * (plot_bottom() - TOP);
    let n = series.len();
    let lines = kinds
        .iter()
        .map(|(label, class, pick)| {
            let mut path = String::new();
            for (i, (_, a)) in series.iter().enumerate() {
                let verb = if i == 0 { 'M' } else { 'L' };
                path.push_str(&format!("{verb}{:.1} {:.1} ", x_of(i, n), y_of(pick(a))));
            }
            Line {
                label,
                class,
                path: path.trim_end().to_owned(),
                summary: series.iter().map(|(_, a)| pick(a)).sum::<u64>().to_string(),
                dots: Vec::new(),
            }
        })
        .collect();
    Chart {
        id: "chart-throughput",
        title: format!("Todos per {}", bucket_name(range)),
        lines,
        y_ticks: [0, top / 2, top]
            .into_iter()
            .filter(|v| *v == 0 || *v == top || top.is_multiple_of(2))
            .map(|v| Tick {
                at: y_of(v),
                label: v.to_string(),
            })
            .collect(),
        x_ticks: x_ticks(range, series),
        has_data: max > 0,
    }
}

/// Time to claim and time to complete, p50 and p95 per bucket.
pub(crate) fn latency(range: ActivityRange, series: &[(Timestamp, Activity)]) -> Chart {
    type Pick = fn(&Activity) -> &LatencyHistogram;
    let kinds: [(&'static str, &'static str, Pick, f64); 4] = [
        ("claim p50", "s-claim", |a| &a.claim_latency, 0.5),
        ("claim p95", "s-claim p95", |a| &a.claim_latency, 0.95),
        ("complete p50", "s-complete", |a| &a.complete_latency, 0.5),
        (
            "complete p95",
            "s-complete p95",
            |a| &a.complete_latency,
            0.95,
        ),
    ];
    let values: Vec<Vec<Option<i64>>> = kinds
        .iter()
        .map(|(_, _, pick, q)| series.iter().map(|(_, a)| pick(a).percentile(*q)).collect())
        .collect();
    let present = values.iter().flatten().flatten().copied();
    let (low, high) = present.fold((i64::MAX, 0), |(lo, hi), v| (lo.min(v), hi.max(v)));
    // Decades of milliseconds: 10 ms, 100 ms, 1 s, 10 s, … around the data.
    let floor_exp = if low == i64::MAX {
        1
    } else {
        (low.max(1) as f64).log10().floor() as i32
    };
    let ceil_exp = ((high.max(10) as f64).log10().ceil() as i32).max(floor_exp + 1);
    let y_of = |ms: i64| {
        let at =
            ((ms.max(1) as f64).log10() - f64::from(floor_exp)) / f64::from(ceil_exp - floor_exp);
        plot_bottom() - at.clamp(0.0, 1.0) * (plot_bottom() - TOP)
    };
    let n = series.len();
    let mut has_data = false;
    let lines = kinds
        .iter()
        .zip(&values)
        .map(|((label, class, pick, q), values)| {
            let mut path = String::new();
            let mut dots = Vec::new();
            let mut drawing = false;
            for (i, v) in values.iter().enumerate() {
                match v {
                    Some(ms) => {
                        has_data = true;
                        let (x, y) = (x_of(i, n), y_of(*ms));
                        let verb = if drawing { 'L' } else { 'M' };
                        path.push_str(&format!("{verb}{x:.1} {y:.1} "));
                        dots.push((x, y));
                        drawing = true;
                    }
                    None => drawing = false,
                }
            }
            let mut whole = LatencyHistogram::default();
            for (_, a) in series {
                whole.merge(pick(a));
            }
            Line {
                label,
                class,
                path: path.trim_end().to_owned(),
                summary: whole.percentile(*q).map(latency_label).unwrap_or_default(),
                dots,
            }
        })
        .collect();
    Chart {
        id: "chart-latency",
        title: format!("Time to claim and to complete, per {}", bucket_name(range)),
        lines,
        y_ticks: (floor_exp..=ceil_exp)
            .map(|e| {
                let ms = 10_i64.pow(e.max(0) as u32);
                Tick {
                    at: y_of(ms),
                    label: latency_label(ms),
                }
            })
            .collect(),
        x_ticks: x_ticks(range, series),
        has_data,
    }
}

/// The non-empty buckets, newest first, for the table under the charts.
pub(crate) fn bucket_rows(series: &[(Timestamp, Activity)]) -> Vec<BucketRow> {
    series
        .iter()
        .rev()
        .filter(|(_, a)| !a.is_empty())
        .map(|(at, a)| BucketRow {
            at: at.to_rfc3339(),
            created: a.created,
            completed: a.completed,
            failed: a.failed,
            dead_lettered: a.dead_lettered,
            claim_p50: a
                .claim_latency
                .percentile(0.5)
                .map(latency_label)
                .unwrap_or_default(),
            complete_p50: a
                .complete_latency
                .percentile(0.5)
                .map(latency_label)
                .unwrap_or_default(),
        })
        .collect()
}

fn bucket_name(range: ActivityRange) -> &'static str {
    match range {
        ActivityRange::Hour => "minute",
        ActivityRange::Day => "quarter hour",
        ActivityRange::Week => "hour",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_axis_ends_at_a_round_number() {
        assert_eq!(nice_ceiling(1), 1);
        assert_eq!(nice_ceiling(3), 5);
        assert_eq!(nice_ceiling(11), 20);
        assert_eq!(nice_ceiling(500), 500);
        assert_eq!(nice_ceiling(501), 1_000);
    }
}
