//! Go-style durations: `90m`, `2h30m`, `1.5h`, `28800s`, `250ms` (and `d` for days).

use std::time::Duration;

use super::Invalid;

/// Parses a positive duration made of `<number><unit>` parts, where units are
/// `ms`, `s`, `m`, `h` or `d` and numbers may have a fraction (`1.5h`).
/// Errors name `field`.
pub fn parse_duration(text: &str, field: &'static str) -> Result<Duration, Invalid> {
    let bad = |why: &str| {
        Invalid::new(
            field,
            format!("{text:?} is not a duration ({why}); use e.g. 90m, 2h30m, 1.5h or 28800s"),
        )
    };
    let s = text.trim();
    if s.is_empty() {
        return Err(bad("empty"));
    }
    let mut total_ms: f64 = 0.0;
    let mut rest = s;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| bad("a number needs a unit"))?;
        if number_len == 0 {
            return Err(bad("expected a number"));
        }
        let number: f64 = rest[..number_len]
            .parse()
            .map_err(|_| bad("malformed number"))?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit_ms = match &rest[..unit_len] {
            "ms" => 1.0,
            "s" => 1_000.0,
            "m" => 60_000.0,
            "h" => 3_600_000.0,
            "d" => 86_400_000.0,
            "" => return Err(bad("a number needs a unit")),
            _ => return Err(bad("unknown unit")),
        };
        rest = &rest[unit_len..];
        total_ms += number * unit_ms;
    }
    if !total_ms.is_finite() || total_ms > 365.0 * 86_400_000.0 {
        return Err(bad("too long"));
    }
    Ok(Duration::from_millis(total_ms.round() as u64))
}

/// Like [`parse_duration`] but refuses zero.
pub fn parse_positive_duration(text: &str, field: &'static str) -> Result<Duration, Invalid> {
    let d = parse_duration(text, field)?;
    if d.is_zero() {
        return Err(Invalid::new(field, "must be greater than zero"));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: &str) -> u64 {
        parse_duration(s, "for").unwrap().as_secs()
    }

    #[test]
    fn go_style_examples() {
        assert_eq!(secs("90m"), 5400);
        assert_eq!(secs("2h30m"), 9000);
        assert_eq!(secs("1.5h"), 5400);
        assert_eq!(secs("28800s"), 28800);
        assert_eq!(secs("1d"), 86400);
        assert_eq!(parse_duration("250ms", "x").unwrap().as_millis(), 250);
    }

    #[test]
    fn refusals_name_the_field() {
        for bad in ["", "h", "10", "-5m", "5 m", "1.2.3h", "5x", "9999999h"] {
            let err = parse_duration(bad, "for").unwrap_err();
            assert_eq!(err.field, "for", "{bad}");
        }
        assert!(parse_positive_duration("0s", "for").is_err());
    }
}
