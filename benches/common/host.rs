//! What the host and the processes of a run spent, read from /proc: CPU in
//! clock ticks, time the CPUs sat waiting on the disk, and bytes written to
//! the disks. Shared by the benchmarks that put CPU per loop beside their
//! rates, so that "the loop is CPU-bound" and "the loop waits on the disk"
//! are told apart from the same run's evidence.

#![allow(dead_code)]

use std::process::Command;

/// Clock ticks per second (`getconf CLK_TCK`; 100 when it cannot be read).
pub fn clock_ticks_per_sec() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|&t| t > 0.0)
        .unwrap_or(100.0)
}

/// utime + stime + cutime + cstime of a process (`"self"` or a pid), in
/// clock ticks; `None` once the process is gone.
pub fn process_ticks(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (state); utime is field 14.
    let get = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    Some(get(11)? + get(12)? + get(13)? + get(14)?)
}

/// The whole host's CPU time, in clock ticks summed over its CPUs.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostTicks {
    /// user + nice + system + irq + softirq + steal (guest time is inside user).
    pub busy: u64,
    /// Idle while some task waited on I/O.
    pub iowait: u64,
}

impl HostTicks {
    /// From the first line of /proc/stat; zeros when it cannot be read.
    pub fn now() -> Self {
        let Ok(stat) = std::fs::read_to_string("/proc/stat") else {
            return Self::default();
        };
        let v: Vec<u64> = stat
            .lines()
            .next()
            .unwrap_or("")
            .split_whitespace()
            .skip(1)
            .filter_map(|f| f.parse().ok())
            .collect();
        // user nice system idle iowait irq softirq steal
        let get = |i: usize| v.get(i).copied().unwrap_or(0);
        Self {
            busy: get(0) + get(1) + get(2) + get(5) + get(6) + get(7),
            iowait: get(4),
        }
    }
}

/// Bytes written so far to the host's whole disks (/proc/diskstats sectors
/// written × 512), leaving out partitions, device-mapper and md devices
/// (their writes are their disks' writes), loop devices and RAM disks.
pub fn disk_bytes_written() -> u64 {
    let Ok(stats) = std::fs::read_to_string("/proc/diskstats") else {
        return 0;
    };
    stats
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let name = *fields.get(2)?;
            let virtual_device = ["loop", "ram", "zram", "dm-", "md", "sr"]
                .iter()
                .any(|prefix| name.starts_with(prefix));
            // /sys/block lists whole disks only.
            let whole_disk = std::path::Path::new("/sys/block").join(name).exists();
            (whole_disk && !virtual_device)
                .then(|| fields.get(9)?.parse::<u64>().ok())
                .flatten()
        })
        .sum::<u64>()
        * 512
}

/// A process's I/O system calls and bytes so far (/proc/<pid>/io): on
/// SQLite, a read is a page the connection's cache missed and a write a
/// WAL frame or a checkpointed page, so their counts per loop tell cache
/// misses and write volume apart from CPU.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessIo {
    pub read_calls: u64,
    pub write_calls: u64,
    pub read_bytes: u64,
    pub written_bytes: u64,
}

impl ProcessIo {
    /// Of `pid` (`"self"` or a pid); zeros when it cannot be read.
    pub fn of(pid: &str) -> Self {
        let Ok(io) = std::fs::read_to_string(format!("/proc/{pid}/io")) else {
            return Self::default();
        };
        let field = |name: &str| {
            io.lines()
                .find_map(|l| {
                    l.strip_prefix(name)?
                        .strip_prefix(": ")?
                        .trim()
                        .parse()
                        .ok()
                })
                .unwrap_or(0)
        };
        Self {
            read_calls: field("syscr"),
            write_calls: field("syscw"),
            read_bytes: field("rchar"),
            written_bytes: field("wchar"),
        }
    }

    /// What happened between `self` (earlier) and `later`.
    pub fn until(&self, later: &Self) -> Self {
        Self {
            read_calls: later.read_calls.saturating_sub(self.read_calls),
            write_calls: later.write_calls.saturating_sub(self.write_calls),
            read_bytes: later.read_bytes.saturating_sub(self.read_bytes),
            written_bytes: later.written_bytes.saturating_sub(self.written_bytes),
        }
    }
}
