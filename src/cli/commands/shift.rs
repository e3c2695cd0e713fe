//! `shift check EXPR [--at T] [--next N] [--json]`: validate a shift and show
//! how it evaluates, locally (no server, no login). The grammar and its
//! semantics are in `docs/shifts.md`.

use clap::{Args, Subcommand};
use serde::Serialize;

use crate::clock::{Clock, SystemClock};
use crate::domain::Timestamp;
use crate::domain::shift::Shift;

#[derive(Debug, Args)]
pub struct ShiftArgs {
    #[command(subcommand)]
    pub command: ShiftCommand,
}

#[derive(Debug, Subcommand)]
pub enum ShiftCommand {
    /// Validate a shift; print its canonical form, zone, presence at an
    /// instant and the next boundaries. Invalid input exits 1.
    Check(CheckArgs),
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The shift, quoted: e.g. "TZ=Europe/Berlin Mon-Fri 09:00-17:00; Sat 10:00-12:00".
    #[arg(allow_hyphen_values = true)]
    pub expr: String,

    /// Evaluate at this RFC 3339 instant instead of now.
    #[arg(long, value_parser = instant)]
    pub at: Option<Timestamp>,

    /// How many upcoming boundaries to list.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(0..=1000))]
    pub next: u16,

    /// Print one line of JSON.
    #[arg(long)]
    pub json: bool,
}

/// `--json` output, fields in the order spec 05 shows them.
#[derive(Serialize)]
struct ValidReport<'a> {
    valid: bool,
    canonical: String,
    zone: &'a str,
    presence: &'static str,
    next_boundaries: Vec<String>,
}

#[derive(Serialize)]
struct InvalidReport {
    valid: bool,
    error: String,
}

fn instant(text: &str) -> Result<Timestamp, String> {
    Timestamp::parse_rfc3339(text)
        .ok_or_else(|| format!("{text:?} is not an RFC 3339 time (e.g. 2026-09-21T16:00:00Z)"))
}

pub(crate) fn run(args: ShiftArgs) -> anyhow::Result<()> {
    match args.command {
        ShiftCommand::Check(check) => run_check(check),
    }
}

fn run_check(args: CheckArgs) -> anyhow::Result<()> {
    let shift = match Shift::parse(&args.expr) {
        Ok(shift) => shift,
        Err(e) => {
            if args.json {
                let report = InvalidReport {
                    valid: false,
                    error: e.to_string(),
                };
                println!("{}", serde_json::to_string(&report)?);
            }
            return Err(e.into());
        }
    };
    let at = args.at.unwrap_or_else(|| SystemClock.now());
    let boundaries = shift.next_boundaries(at, usize::from(args.next));
    let presence = if shift.contains(at) { "in" } else { "out" };

    if args.json {
        let report = ValidReport {
            valid: true,
            canonical: shift.canonical(),
            zone: shift.zone_name(),
            presence,
            next_boundaries: boundaries.iter().map(|b| b.to_rfc3339()).collect(),
        };
        println!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }

    println!("canonical: {}", shift.canonical());
    println!("zone:      {}", shift.zone_name());
    println!("at:        {}", stamp(at, &shift));
    println!("presence:  {presence}");
    if boundaries.is_empty() {
        if shift.covers_whole_week() {
            println!("next boundaries: none (the shift covers the whole week)");
        } else {
            println!("next boundaries: none listed (--next 0)");
        }
        return Ok(());
    }
    println!("next boundaries:");
    for b in boundaries {
        let turns = if shift.contains(b) { "in" } else { "out" };
        println!("  {}  -> {turns}", stamp(b, &shift));
    }
    Ok(())
}

/// `2026-09-21T16:00:00.000Z (Mon 2026-09-21 09:00:00 PDT)`: UTC, and the
/// wall clock in the shift's zone.
fn stamp(t: Timestamp, shift: &Shift) -> String {
    match jiff::Timestamp::from_millisecond(t.as_millis()) {
        Ok(ts) => {
            let local = ts.to_zoned_datetime(shift.time_zone().clone());
            format!(
                "{} ({})",
                t.to_rfc3339(),
                local.strftime("%a %Y-%m-%d %H:%M:%S %Z")
            )
        }
        Err(_) => t.to_rfc3339(),
    }
}
