//! `process_*`, the Prometheus client conventions for a process, read from
//! `/proc/self` at scrape time: CPU seconds, resident memory, open and
//! maximum file descriptors, start time. Linux only; elsewhere (or when
//! `/proc` is not mounted) the families are simply absent.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};

/// Registers the collector on an unprefixed registry.
pub fn register(registry: &mut Registry) {
    registry.register_collector(Box::new(ProcessCollector));
}

#[derive(Debug)]
struct ProcessCollector;

/// One reading of `/proc/self`.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ProcessStats {
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<i64>,
    pub open_fds: Option<i64>,
    pub max_fds: Option<i64>,
    pub start_time_seconds: Option<f64>,
}

impl ProcessStats {
    pub fn read() -> Self {
        if !cfg!(target_os = "linux") {
            return Self::default();
        }
        let ticks = rustix::param::clock_ticks_per_second() as f64;
        let stat = std::fs::read_to_string("/proc/self/stat").ok();
        let stat = stat.as_deref().and_then(parse_stat);
        let boot = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|text| parse_boot_time(&text));
        let page = rustix::param::page_size() as i64;
        Self {
            cpu_seconds: stat.map(|s| (s.utime + s.stime) as f64 / ticks),
            resident_bytes: std::fs::read_to_string("/proc/self/statm")
                .ok()
                .and_then(|text| text.split_whitespace().nth(1)?.parse::<i64>().ok())
                .map(|pages| pages * page),
            open_fds: std::fs::read_dir("/proc/self/fd")
                .ok()
                .map(|dir| dir.count() as i64),
            max_fds: std::fs::read_to_string("/proc/self/limits")
                .ok()
                .and_then(|text| parse_max_open_files(&text)),
            start_time_seconds: stat
                .zip(boot)
                .map(|(s, boot)| boot as f64 + s.starttime as f64 / ticks),
        }
    }
}

/// The fields of `/proc/self/stat` we read (in clock ticks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    utime: u64,
    stime: u64,
    starttime: u64,
}

/// `pid (comm) state ppid …`: the command may hold spaces and parentheses,
/// so fields are counted after the last `)`. utime and stime are fields 14
/// and 15, starttime 22 (`proc(5)`), so 11, 12 and 19 after the state.
fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| fields.get(i)?.parse::<u64>().ok();
    Some(Stat {
        utime: field(11)?,
        stime: field(12)?,
        starttime: field(19)?,
    })
}

/// `btime <seconds since the epoch>` of `/proc/stat`.
fn parse_boot_time(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// The soft limit of `Max open files` in `/proc/self/limits`.
fn parse_max_open_files(text: &str) -> Option<i64> {
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let stats = ProcessStats::read();
        if let Some(cpu) = stats.cpu_seconds {
            let counter = ConstCounter::new(cpu);
            let metric = encoder.encode_descriptor(
                "process_cpu",
                "User and system CPU time spent",
                Some(&Unit::Seconds),
                counter.metric_type(),
            )?;
            counter.encode(metric)?;
        }
        let gauges: [(&str, &str, Option<Unit>, Option<f64>); 4] = [
            (
                "process_resident_memory",
                "Resident memory size",
                Some(Unit::Bytes),
                stats.resident_bytes.map(|v| v as f64),
            ),
            (
                "process_open_fds",
                "Open file descriptors",
                None,
                stats.open_fds.map(|v| v as f64),
            ),
            (
                "process_max_fds",
                "The open file descriptor limit (soft)",
                None,
                stats.max_fds.map(|v| v as f64),
            ),
            (
                "process_start_time",
                "Start time of the process since the Unix epoch",
                Some(Unit::Seconds),
                stats.start_time_seconds,
            ),
        ];
        for (name, help, unit, value) in gauges {
            if let Some(value) = value {
                let gauge = ConstGauge::new(value);
                let metric =
                    encoder.encode_descriptor(name, help, unit.as_ref(), gauge.metric_type())?;
                gauge.encode(metric)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command() {
        let line = "4242 (switch board) (x)) S 1 4242 4242 0 -1 4194560 1234 0 0 0 \
                    250 75 0 0 20 0 12 0 98765 123456789 2500 18446744073709551615";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                utime: 250,
                stime: 75,
                starttime: 98765
            })
        );
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn limits_and_boot_time_are_parsed() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max cpu time              unlimited            unlimited            seconds\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(parse_max_open_files(limits), Some(1024));
        assert_eq!(
            parse_boot_time("cpu  1 2 3\nbtime 1764547200\nprocesses 9\n"),
            Some(1764547200)
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_read() {
        let stats = ProcessStats::read();
        assert!(stats.cpu_seconds.is_some_and(|v| v >= 0.0));
        assert!(stats.resident_bytes.is_some_and(|v| v > 0));
        assert!(stats.open_fds.is_some_and(|v| v > 0));
        assert!(stats.max_fds.is_some_and(|v| v > 0));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = stats.start_time_seconds.unwrap();
        assert!(
            start <= now + 1.0 && start > now - 86_400.0 * 365.0,
            "{start} vs {now}"
        );
    }
}
