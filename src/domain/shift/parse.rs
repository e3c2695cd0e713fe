//! Text to windows. The grammar (spec 05):
//!
//! ```text
//! shift  = ows [zone sep] window {ows ";" ows window} ows
//! zone   = ("TZ=" | "CRON_TZ=") iana-name
//! window = [days sep] start "-" end
//! days   = item {"," item};  item = day ["-" day];  day = mon … sun (any case)
//! ```
//!
//! `sep` and `ows` are spaces and tabs only. Every error names `shift` and
//! starts with what is wrong.

use jiff::tz::TimeZone;

use super::{ALL_DAYS, DAY, Window, bundled_db};
use crate::domain::Invalid;

pub(super) struct Parsed {
    pub zone: String,
    pub tz: TimeZone,
    pub windows: Vec<Window>,
}

const DAY_NAMES: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
const EXAMPLE: &str = "e.g. \"TZ=Europe/Berlin Mon-Fri 09:00-17:00; Sat 10:00-12:00\"";

fn invalid(message: impl Into<String>) -> Invalid {
    Invalid::new("shift", message)
}

fn is_blank(c: char) -> bool {
    c == ' ' || c == '\t'
}

pub(super) fn parse(text: &str) -> Result<Parsed, Invalid> {
    if text.trim().is_empty() {
        return Err(invalid(format!("must not be blank; {EXAMPLE}")));
    }
    let text = text.trim_matches(is_blank);
    let first_field = text.split(is_blank).next().unwrap_or_default();

    let (zone, tz, rest) = match zone_prefix(first_field)? {
        Some(name) => {
            let tz = lookup_zone(name)?;
            let rest = text[first_field.len()..].trim_start_matches(is_blank);
            if rest.is_empty() {
                return Err(invalid(format!(
                    "must specify at least one window after the time zone; {EXAMPLE}"
                )));
            }
            (name.to_owned(), tz, rest)
        }
        // No prefix means UTC, never the host's zone: instances must agree.
        None => ("UTC".to_owned(), TimeZone::UTC, text),
    };

    let windows = rest
        .split(';')
        .map(|w| window(w.trim_matches(is_blank)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Parsed { zone, tz, windows })
}

/// The zone name when the first field is a `TZ=` / `CRON_TZ=` prefix.
fn zone_prefix(field: &str) -> Result<Option<&str>, Invalid> {
    if let Some(name) = field
        .strip_prefix("TZ=")
        .or_else(|| field.strip_prefix("CRON_TZ="))
    {
        return Ok(Some(name));
    }
    let lower = field.to_ascii_lowercase();
    if lower.starts_with("tz=") || lower.starts_with("cron_tz=") {
        return Err(invalid(format!(
            "wrong case in the time zone prefix {field:?}: write TZ= or CRON_TZ= in capitals"
        )));
    }
    Ok(None)
}

/// An IANA zone from the bundled database, spelled exactly as there.
fn lookup_zone(name: &str) -> Result<TimeZone, Invalid> {
    if name.is_empty() {
        return Err(invalid(
            "empty time zone after TZ=: name an IANA zone such as Europe/Berlin or UTC",
        ));
    }
    // jiff maps these two specially; neither names a real zone here.
    if name.eq_ignore_ascii_case("Local") || name.eq_ignore_ascii_case("Etc/Unknown") {
        return Err(invalid(format!(
            "unsupported time zone {name:?}: name an IANA zone such as Europe/Berlin or UTC"
        )));
    }
    let Ok(tz) = bundled_db().get(name) else {
        return Err(invalid(format!(
            "unknown time zone {name:?}: use an IANA name such as Europe/Berlin or UTC"
        )));
    };
    // The database lookup ignores case; the grammar does not.
    match tz.iana_name() {
        Some(exact) if exact == name => Ok(tz),
        Some(exact) => Err(invalid(format!(
            "wrong case in time zone {name:?}: the IANA name is {exact:?}"
        ))),
        None => Err(invalid(format!("unknown time zone {name:?}"))),
    }
}

fn window(text: &str) -> Result<Window, Invalid> {
    if text.is_empty() {
        return Err(invalid(
            "empty window (look for \";;\" or a leading or trailing \";\")",
        ));
    }
    let fields: Vec<&str> = text.split(is_blank).filter(|f| !f.is_empty()).collect();
    // A field boundary next to "-" or "," is a space inside a range or list.
    let spaced = fields
        .windows(2)
        .any(|pair| pair[0].ends_with(['-', ',']) || pair[1].starts_with(['-', ',']));
    if spaced {
        return Err(invalid(format!(
            "space inside a range or around a comma in {text:?}: write days like Mon-Fri or Sat,Sun and times like 09:00-17:00"
        )));
    }
    let (days, times) = match fields[..] {
        [times] => (ALL_DAYS, times),
        [days_text, times] => (days(days_text)?, times),
        _ => {
            return Err(invalid(format!(
                "too many fields in window {text:?}: expected [DAYS] HH:MM-HH:MM"
            )));
        }
    };
    let (start, end) = time_range(times)?;
    Ok(Window { days, start, end })
}

fn days(text: &str) -> Result<u8, Invalid> {
    let mut set = 0u8;
    for item in text.split(',') {
        let bounds: Vec<&str> = item.split('-').collect();
        let (first, last) = match bounds[..] {
            [one] => (day(one, text)?, day(one, text)?),
            [a, b] => (day(a, text)?, day(b, text)?),
            _ => {
                return Err(invalid(format!(
                    "malformed day range {item:?}: a range is two days, e.g. Mon-Fri"
                )));
            }
        };
        // Inclusive and wrapping: Fri-Mon is Fri, Sat, Sun, Mon; Mon-Mon is Monday.
        let mut d = first;
        loop {
            set |= 1 << d;
            if d == last {
                break;
            }
            d = (d + 1) % 7;
        }
    }
    Ok(set)
}

/// Monday = 0 … Sunday = 6.
fn day(name: &str, days_text: &str) -> Result<u8, Invalid> {
    if name.is_empty() {
        return Err(invalid(format!("empty day in {days_text:?}")));
    }
    DAY_NAMES
        .iter()
        .position(|d| d.eq_ignore_ascii_case(name))
        .map(|i| i as u8)
        .ok_or_else(|| {
            invalid(format!(
                "unknown day {name:?}: use Mon, Tue, Wed, Thu, Fri, Sat or Sun"
            ))
        })
}

/// `HH:MM-HH:MM` as minutes of the day; an end of `00:00` becomes 1440
/// (the same instant as `24:00`).
fn time_range(text: &str) -> Result<(u16, u16), Invalid> {
    if text.starts_with(['+', '-']) || text.contains("-+") || text.contains("--") {
        return Err(invalid(format!(
            "sign in time range {text:?}: times are HH:MM without a sign"
        )));
    }
    let Some((start_text, end_text)) = text.split_once('-') else {
        return Err(invalid(format!(
            "malformed time range {text:?}: expected HH:MM-HH:MM"
        )));
    };
    if end_text.contains('-') {
        return Err(invalid(format!(
            "malformed time range {text:?}: expected HH:MM-HH:MM"
        )));
    }
    let start = time(start_text)?;
    let end = time(end_text)?;
    if start == DAY {
        return Err(invalid(format!(
            "24:00 as a start in {text:?}: 24:00 is valid only as a window's end"
        )));
    }
    if start == end {
        return Err(invalid(format!(
            "equal start and end in {text:?}: a window must not be empty"
        )));
    }
    Ok((start, if end == 0 { DAY } else { end }))
}

/// `HH:MM`, exactly two ASCII digits each, `00:00`..`23:59` or `24:00`.
fn time(text: &str) -> Result<u16, Invalid> {
    let b = text.as_bytes();
    let well_formed =
        b.len() == 5 && b[2] == b':' && [0, 1, 3, 4].iter().all(|&i| b[i].is_ascii_digit());
    if !well_formed {
        return Err(invalid(format!(
            "malformed time {text:?}: use HH:MM with two digits each, e.g. 09:00"
        )));
    }
    let digit = |i: usize| u16::from(b[i] - b'0');
    let (hours, minutes) = (digit(0) * 10 + digit(1), digit(3) * 10 + digit(4));
    if minutes > 59 || hours > 24 || (hours == 24 && minutes != 0) {
        return Err(invalid(format!(
            "out-of-range time {text:?}: use 00:00 to 23:59, or 24:00 as an end"
        )));
    }
    Ok(hours * 60 + minutes)
}
