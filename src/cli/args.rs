//! Flags shared by the client commands, and parsers for their values.
//! A value that does not parse is a usage error (exit 2), like any clap error.

use std::time::Duration;

use anyhow::bail;
use clap::Args;

use super::client::{ApiClient, display_url, parse_server_url};
use super::credentials::{self, Secret};
use crate::clock::{Clock, SystemClock};
use crate::domain::Timestamp;
use crate::domain::duration::parse_positive_duration;

/// Where the server is and who is calling, plus the output format.
#[derive(Debug, Args)]
pub struct ClientArgs {
    /// Server URL (default: the saved login's).
    #[arg(long, global = true, env = "SWITCHBOARD_URL")]
    pub url: Option<String>,

    /// Human API token, sbh_… (default: the saved login's). Prefer
    /// SWITCHBOARD_TOKEN or `login`: a flag shows in ps and shell history.
    #[arg(long, global = true, env = "SWITCHBOARD_TOKEN", hide_env_values = true)]
    pub token: Option<Secret>,

    /// Print the API's JSON body verbatim instead of a table or summary.
    #[arg(long, global = true)]
    pub json: bool,
}

impl ClientArgs {
    /// A client from the flags (or their environment variables), else the
    /// saved login. The saved token is only ever sent to the saved URL.
    pub fn connect(&self) -> anyhow::Result<ApiClient> {
        let saved = credentials::load()?;
        let url = match (&self.url, &saved) {
            (Some(url), _) => parse_server_url(url)?,
            (None, Some(saved)) => parse_server_url(&saved.url)?,
            (None, None) => bail!(
                "not logged in: run `switchboard login URL`, or pass --url and --token \
                 (SWITCHBOARD_URL, SWITCHBOARD_TOKEN)"
            ),
        };
        let token = match (&self.token, saved) {
            (Some(token), _) => token.clone(),
            (None, Some(saved)) if saved.url == display_url(&url) => saved.token,
            (None, Some(saved)) => bail!(
                "the saved login is for {}, not {}; pass --token for this server",
                saved.url,
                display_url(&url)
            ),
            (None, None) => bail!("no token: pass --token (or SWITCHBOARD_TOKEN), or log in"),
        };
        ApiClient::new(url, token)
    }
}

/// `90`, `90s`, `15m`, `1h`: whole seconds.
pub(super) fn seconds(text: &str) -> Result<i64, String> {
    if let Ok(n) = text.trim().parse::<i64>() {
        return match n {
            1.. => Ok(n),
            _ => Err("must be greater than zero".into()),
        };
    }
    let d = parse_positive_duration(text, "duration").map_err(|e| e.message)?;
    if d.subsec_nanos() != 0 {
        return Err("must be whole seconds".into());
    }
    i64::try_from(d.as_secs()).map_err(|_| "too long".into())
}

/// A lease TTL, or `default` to return to the server's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseTtl {
    Seconds(i64),
    Default,
}

pub(super) fn lease_ttl(text: &str) -> Result<LeaseTtl, String> {
    if text.trim().eq_ignore_ascii_case("default") {
        Ok(LeaseTtl::Default)
    } else {
        seconds(text).map(LeaseTtl::Seconds)
    }
}

/// A lifetime: a duration (`30d`, `12h`, `90m`) or the RFC 3339 instant it
/// ends at, which must lie ahead.
pub(super) fn lifetime(text: &str) -> Result<Duration, String> {
    lifetime_at(text, SystemClock.now())
}

fn lifetime_at(text: &str, now: Timestamp) -> Result<Duration, String> {
    let duration_error = match parse_positive_duration(text, "duration") {
        Ok(d) => return Ok(d),
        Err(e) => e.message,
    };
    let Some(end) = Timestamp::parse_rfc3339(text) else {
        return Err(format!("{duration_error}, or an RFC 3339 time"));
    };
    let ms = end.as_millis() - now.as_millis();
    if ms <= 0 {
        return Err(format!("{text} is not in the future"));
    }
    // The same bounds as a duration typed directly.
    parse_positive_duration(&format!("{}s", (ms + 999) / 1000), "duration").map_err(|e| e.message)
}

/// A lifetime as the API takes it (`expires_in`).
pub(super) fn api_duration(d: Duration) -> String {
    format!("{}s", d.as_secs().max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_take_numbers_or_durations() {
        assert_eq!(seconds("90"), Ok(90));
        assert_eq!(seconds("15m"), Ok(900));
        assert_eq!(seconds("1.5h"), Ok(5400));
        assert!(seconds("0").is_err());
        assert!(seconds("250ms").is_err());
        assert!(seconds("soon").is_err());
    }

    #[test]
    fn lease_ttl_accepts_default() {
        assert_eq!(lease_ttl("default"), Ok(LeaseTtl::Default));
        assert_eq!(lease_ttl("2m"), Ok(LeaseTtl::Seconds(120)));
    }

    #[test]
    fn lifetimes_are_durations_or_future_times() {
        let now = Timestamp::parse_rfc3339("2026-01-01T00:00:00Z").unwrap();
        assert_eq!(lifetime_at("30d", now), Ok(Duration::from_secs(30 * 86400)));
        assert_eq!(
            lifetime_at("2026-01-01T02:00:00+00:00", now),
            Ok(Duration::from_secs(7200))
        );
        assert!(lifetime_at("2025-12-31T00:00:00Z", now).is_err());
        assert!(
            lifetime_at("2028-01-01T00:00:00Z", now).is_err(),
            "over a year"
        );
        assert!(lifetime_at("tomorrow", now).is_err());
    }
}
