//! What the pages show, built from store records and this instance's
//! sessions: plain strings and numbers, so that templates stay dumb.

use axum::response::{IntoResponse, Response};

use super::BoardState;
use super::assets;
use super::auth::Signed;
use crate::delivery::Doorbells;
use crate::delivery::fleet::{all_deaf, assess_endpoint, session_statuses};
use crate::delivery::presence::shift_of;
use crate::domain::Timestamp;
use crate::domain::liveness::{Condition, work_unheard};
use crate::store::{Endpoint, EndpointActivity, StoreResult};

pub(crate) use super::render::render;

/// What every signed-in page's frame shows.
pub(crate) struct Layout {
    pub(crate) human: String,
    pub(crate) csrf: String,
    /// Which navigation entry is the current page.
    pub(crate) nav: &'static str,
    pub(crate) title: String,
    /// A message carried over a redirect (`?error=` / `?notice=`).
    pub(crate) error: Option<String>,
    pub(crate) notice: Option<String>,
    pub(crate) htmx: &'static str,
    pub(crate) htmx_sse: &'static str,
    pub(crate) css: &'static str,
    pub(crate) js: &'static str,
}

impl Layout {
    pub(crate) fn new(signed: &Signed, nav: &'static str, title: impl Into<String>) -> Self {
        Self {
            human: signed.human.name.clone(),
            csrf: signed.csrf.clone(),
            nav,
            title: title.into(),
            error: None,
            notice: None,
            htmx: assets::HTMX,
            htmx_sse: assets::HTMX_SSE,
            css: assets::CSS,
            js: assets::JS,
        }
    }

    pub(crate) fn with_messages(mut self, messages: &Messages) -> Self {
        self.error = messages.error.clone();
        self.notice = messages.notice.clone();
        self
    }
}

/// `?error=…&notice=…`: what a form's redirect says happened.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct Messages {
    pub(crate) error: Option<String>,
    pub(crate) notice: Option<String>,
}

/// A redirect back to `path` saying what happened.
pub(crate) fn back(path: &str, outcome: Result<String, String>) -> Response {
    let (key, text) = match outcome {
        Ok(notice) => ("notice", notice),
        Err(error) => ("error", error),
    };
    let query = serde_urlencoded::to_string([(key, text)]).unwrap_or_default();
    let sep = if path.contains('?') { '&' } else { '?' };
    axum::response::Redirect::to(&format!("{path}{sep}{query}")).into_response()
}

/// `12 s ago`, `3 min ago`, `in 2 h`.
pub(crate) fn relative(now: Timestamp, t: Timestamp) -> String {
    let delta = (now.as_millis() - t.as_millis()) / 1000;
    let span = delta.unsigned_abs();
    let text = if span < 60 {
        format!("{span} s")
    } else if span < 3600 {
        format!("{} min", span / 60)
    } else if span < 48 * 3600 {
        format!("{} h", span / 3600)
    } else {
        format!("{} d", span / 86_400)
    };
    if delta >= 0 {
        format!("{text} ago")
    } else {
        format!("in {text}")
    }
}

/// A lease or countdown: `4 min 12 s`.
pub(crate) fn countdown(now: Timestamp, until: Timestamp) -> String {
    let secs = ((until.as_millis() - now.as_millis()) / 1000).max(0);
    if secs >= 3600 {
        format!("{} h {} min", secs / 3600, (secs % 3600) / 60)
    } else if secs >= 60 {
        format!("{} min {} s", secs / 60, secs % 60)
    } else {
        format!("{secs} s")
    }
}

/// An instant as a person reads it in `zone`, with the zone: `09:00 CET`
/// within a day of `now`, else `Tue 3 Dec 09:00 CET`.
pub(crate) fn wall_clock(t: Timestamp, now: Timestamp, zone: &jiff::tz::TimeZone) -> String {
    let Ok(ts) = jiff::Timestamp::from_millisecond(t.as_millis()) else {
        return t.to_rfc3339();
    };
    let local = ts.to_zoned_datetime(zone.clone());
    if (t.as_millis() - now.as_millis()).abs() < 20 * 3600 * 1000 {
        local.strftime("%H:%M %Z").to_string()
    } else {
        local.strftime("%a %-d %b %H:%M %Z").to_string()
    }
}

/// An instant with its day, in `zone`: `Tue 3 Dec 09:00 CET`.
pub(crate) fn dated(t: Timestamp, zone: &jiff::tz::TimeZone) -> String {
    match jiff::Timestamp::from_millisecond(t.as_millis()) {
        Ok(ts) => ts
            .to_zoned_datetime(zone.clone())
            .strftime("%a %-d %b %H:%M %Z")
            .to_string(),
        Err(_) => t.to_rfc3339(),
    }
}

/// An instant as a date and time with its zone: `2026-12-06 09:00 UTC`.
pub(crate) fn absolute(t: Timestamp, zone: &jiff::tz::TimeZone) -> String {
    match jiff::Timestamp::from_millisecond(t.as_millis()) {
        Ok(ts) => ts
            .to_zoned_datetime(zone.clone())
            .strftime("%Y-%m-%d %H:%M %Z")
            .to_string(),
        Err(_) => t.to_rfc3339(),
    }
}

/// An instant as the board shows it: relative (`3 min ago`), absolute with
/// its zone (`2026-12-06 09:00 UTC`, beside it or in its `title`), and
/// RFC 3339 for the `datetime` attribute.
pub(crate) struct When {
    pub(crate) rel: String,
    pub(crate) abs: String,
    pub(crate) iso: String,
}

impl When {
    pub(crate) fn at(t: Timestamp, now: Timestamp, zone: &jiff::tz::TimeZone) -> Self {
        Self {
            rel: relative(now, t),
            abs: absolute(t, zone),
            iso: exact(t),
        }
    }
}

/// An instant in UTC for a `title` or `datetime` attribute.
pub(crate) fn exact(t: Timestamp) -> String {
    t.to_rfc3339()
}

/// The zone an endpoint's times are shown in: its shift's, else UTC.
pub(crate) fn zone_of(endpoint: &Endpoint) -> jiff::tz::TimeZone {
    shift_of(endpoint)
        .map(|s| s.time_zone().clone())
        .unwrap_or(jiff::tz::TimeZone::UTC)
}

/// The condition chip's text: `off until 09:00`, `deaf (unanswered)`, or
/// the condition's name.
fn chip_text(condition: Condition, until: Option<&str>, deaf_reason: Option<&str>) -> String {
    match (condition, until, deaf_reason) {
        (Condition::Off, Some(until), _) => format!("off until {until}"),
        (Condition::Deaf, _, Some(reason)) => format!("deaf ({reason})"),
        (other, _, _) => other.as_str().to_owned(),
    }
}

/// One MCP session of an endpoint on this instance.
pub(crate) struct SessionLine {
    pub(crate) id_prefix: String,
    pub(crate) client: String,
    /// A `switchboard work` runner, shown as such.
    pub(crate) runner: bool,
    pub(crate) streaming: bool,
    pub(crate) deaf_reason: Option<&'static str>,
    pub(crate) idle: String,
}

/// Everything an endpoint card or page shows.
pub(crate) struct EndpointCard {
    pub(crate) id: String,
    pub(crate) slug: String,
    pub(crate) agent: String,
    pub(crate) agent_kind: &'static str,
    pub(crate) server_name: String,
    pub(crate) active: bool,
    /// `working`, `idle`, `off`, … (the CSS class of the chip), or
    /// `unheard` ([`work_unheard`]: idle, with pending work nobody hears).
    pub(crate) condition: &'static str,
    /// The chip's text: `off until 09:00 CET`, `deaf (unanswered)`, `stale`.
    pub(crate) chip: String,
    /// What the chip means, for its `title` (and the endpoint page).
    pub(crate) chip_hint: Option<String>,
    pub(crate) presence: &'static str,
    pub(crate) presence_source: &'static str,
    pub(crate) presence_until: Option<String>,
    pub(crate) presence_until_exact: Option<String>,
    /// `2026-12-06 22:00 CET`, for the until's tooltip.
    pub(crate) presence_until_abs: Option<String>,
    pub(crate) shift: Option<String>,
    pub(crate) last_seen: String,
    pub(crate) last_seen_exact: Option<String>,
    /// `2026-12-06 09:00 UTC`, in the endpoint's zone.
    pub(crate) last_seen_abs: Option<String>,
    pub(crate) last_contact: Option<When>,
    /// `+3 s` when the agent's own claim runs ahead of the server's.
    pub(crate) skew: Option<String>,
    pub(crate) stale_after: Option<When>,
    pub(crate) sessions: Vec<SessionLine>,
    pub(crate) attached: usize,
    pub(crate) streaming: usize,
    pub(crate) deaf: usize,
    pub(crate) pending: i64,
    pub(crate) claimed: i64,
    /// Failed, waiting for their scheduled retry.
    pub(crate) retrying: i64,
    /// Not claimable before their `run_at`.
    pub(crate) delayed: i64,
    pub(crate) dead_letters: i64,
    /// How long the oldest pending todo has waited.
    pub(crate) oldest_pending: Option<When>,
    pub(crate) working_on: Option<String>,
    pub(crate) note: Option<String>,
    pub(crate) queues: Vec<String>,
    pub(crate) verbs: Vec<String>,
    pub(crate) expires: Option<When>,
    pub(crate) mcp_url: String,
    /// The endpoint's own default lease (empty: the server's), and the one in force.
    pub(crate) default_lease: String,
    pub(crate) effective_lease: i64,
}

impl EndpointCard {
    pub(crate) fn build(
        e: &Endpoint,
        activity: &EndpointActivity,
        doorbells: &Doorbells,
        hooked: bool,
        public_url: &str,
        now: Timestamp,
    ) -> Self {
        let statuses = session_statuses(doorbells, &e.id);
        let (presence, assessment) = assess_endpoint(
            e,
            activity.working_on.is_some(),
            all_deaf(&statuses, hooked),
            now,
        );
        let sessions: Vec<SessionLine> = statuses
            .into_iter()
            .map(|s| SessionLine {
                id_prefix: s.id_prefix,
                client: match (s.client_name, s.client_version) {
                    (Some(n), Some(v)) => format!("{n} {v}"),
                    (Some(n), None) => n,
                    _ => "unnamed client".to_owned(),
                },
                runner: s.kind == "runner",
                streaming: s.streaming,
                deaf_reason: s.deaf_reason.map(|r| r.as_str()),
                idle: format!("idle {}", countdown(now, now.saturating_add(s.idle_for))),
            })
            .collect();
        let deaf = sessions.iter().filter(|s| s.deaf_reason.is_some()).count();
        let zone = zone_of(e);
        let until = presence.until.map(|u| wall_clock(u, now, &zone));
        let mut chip = chip_text(
            assessment.condition,
            until.as_deref(),
            sessions.iter().find_map(|s| s.deaf_reason),
        );
        let mut condition = assessment.condition.as_str();
        let mut chip_hint = None;
        if work_unheard(
            assessment.condition,
            activity.pending,
            hooked,
            sessions.len(),
        ) {
            condition = "unheard";
            chip = format!("unheard ({} pending)", activity.pending);
            chip_hint = Some(
                "todos are pending and no session or hook hears their doorbell: \
                 they wait until the agent connects"
                    .to_owned(),
            );
        }
        Self {
            id: e.id.clone(),
            slug: e.slug.clone(),
            agent: e.agent_name.clone(),
            agent_kind: e.agent_kind.as_str(),
            server_name: e.server_name(),
            active: e.is_active(),
            condition,
            chip,
            chip_hint,
            presence: presence.presence.as_str(),
            presence_source: presence.source.as_str(),
            presence_until: until,
            presence_until_exact: presence.until.map(exact),
            presence_until_abs: presence.until.map(|t| absolute(t, &zone)),
            shift: e.shift.clone(),
            last_seen: e
                .last_seen_at
                .map(|t| relative(now, t))
                .unwrap_or_else(|| "never".to_owned()),
            last_seen_exact: e.last_seen_at.map(exact),
            last_seen_abs: e.last_seen_at.map(|t| absolute(t, &zone)),
            last_contact: e.last_contact_at.map(|t| When::at(t, now, &zone)),
            skew: match (e.last_contact_at, e.last_seen_at) {
                (Some(c), Some(s)) => {
                    let secs = (c.as_millis() - s.as_millis()) / 1000;
                    Some(format!("{secs:+} s"))
                }
                _ => None,
            },
            stale_after: assessment.stale_after.map(|t| When::at(t, now, &zone)),
            attached: sessions.len(),
            streaming: sessions.iter().filter(|s| s.streaming).count(),
            deaf,
            sessions,
            pending: activity.pending,
            claimed: activity.claimed,
            retrying: activity.retrying,
            delayed: activity.delayed,
            dead_letters: activity.dead_letters,
            oldest_pending: activity.oldest_pending_at.map(|t| When::at(t, now, &zone)),
            working_on: activity.working_on.clone(),
            note: e.last_note.clone(),
            queues: e.scope_queues.clone(),
            verbs: e.scope_verbs.clone(),
            expires: e.expires_at.map(|t| When::at(t, now, &zone)),
            mcp_url: format!("{}/mcp/{}", public_url.trim_end_matches('/'), e.slug),
            default_lease: e
                .default_lease_ttl_seconds
                .map(|s| s.to_string())
                .unwrap_or_default(),
            effective_lease: e.effective_lease_seconds(),
        }
    }
}

/// Cards for these endpoints, with their work counts, in one activity read.
pub(crate) async fn cards(
    state: &BoardState,
    endpoints: &[Endpoint],
) -> StoreResult<Vec<EndpointCard>> {
    let ids: Vec<String> = endpoints.iter().map(|e| e.id.clone()).collect();
    let activity = state.store.endpoint_activity(&ids).await?;
    let idle = EndpointActivity::default();
    let now = state.store.clock().now();
    Ok(endpoints
        .iter()
        .map(|e| {
            EndpointCard::build(
                e,
                activity.get(&e.id).unwrap_or(&idle),
                state.delivery.doorbells(),
                state.delivery.hooks().hooked(&e.id),
                &state.board.public_url,
                now,
            )
        })
        .collect())
}

/// All of a human's endpoints (the board shows at most this many).
pub(crate) const MAX_ENDPOINTS: i64 = 200;

pub(crate) async fn all_endpoints(
    state: &BoardState,
    human_id: &str,
) -> StoreResult<Vec<Endpoint>> {
    let page = state
        .store
        .list_endpoints(
            human_id,
            &crate::store::PageRequest {
                limit: MAX_ENDPOINTS,
                after: None,
            },
        )
        .await?;
    Ok(page.items)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Timestamp = Timestamp::from_millis(1_800_000_000_000);

    #[test]
    fn relative_times_read_as_people_say_them() {
        assert_eq!(relative(NOW, NOW), "0 s ago");
        assert_eq!(relative(NOW, NOW.add_secs(-59)), "59 s ago");
        assert_eq!(relative(NOW, NOW.add_secs(-3 * 60)), "3 min ago");
        assert_eq!(relative(NOW, NOW.add_secs(-5 * 3600)), "5 h ago");
        assert_eq!(relative(NOW, NOW.add_secs(-3 * 86_400)), "3 d ago");
        assert_eq!(relative(NOW, NOW.add_secs(120)), "in 2 min");
    }

    #[test]
    fn the_chip_says_until_when_and_why() {
        assert_eq!(
            chip_text(Condition::Off, Some("09:00"), None),
            "off until 09:00"
        );
        assert_eq!(chip_text(Condition::Off, None, None), "off");
        assert_eq!(
            chip_text(Condition::Deaf, None, Some("unanswered")),
            "deaf (unanswered)"
        );
        assert_eq!(
            chip_text(Condition::Deaf, None, Some("buffer_full")),
            "deaf (buffer_full)"
        );
        for (c, text) in [
            (Condition::Stale, "stale"),
            (Condition::Working, "working"),
            (Condition::Idle, "idle"),
            (Condition::Unknown, "unknown"),
            (Condition::Revoked, "revoked"),
        ] {
            assert_eq!(chip_text(c, Some("09:00"), None), text);
        }
    }

    #[test]
    fn countdowns_never_go_negative() {
        assert_eq!(countdown(NOW, NOW.add_secs(252)), "4 min 12 s");
        assert_eq!(countdown(NOW, NOW.add_secs(3 * 3600 + 60)), "3 h 1 min");
        assert_eq!(countdown(NOW, NOW.add_secs(-10)), "0 s");
    }

    #[test]
    fn wall_clock_shows_the_day_only_beyond_a_day() {
        let berlin = jiff::tz::TimeZone::get("Europe/Berlin").unwrap();
        // 2027-01-15T08:00:00Z is 09:00 in Berlin (CET).
        let t = Timestamp::parse_rfc3339("2027-01-15T08:00:00Z").unwrap();
        assert_eq!(wall_clock(t, t.add_secs(-3600), &berlin), "09:00 CET");
        assert_eq!(
            wall_clock(t, t.add_secs(-3 * 86_400), &berlin),
            "Fri 15 Jan 09:00 CET"
        );
        assert_eq!(dated(t, &berlin), "Fri 15 Jan 09:00 CET");
        assert_eq!(absolute(t, &berlin), "2027-01-15 09:00 CET");
        assert_eq!(
            absolute(t, &jiff::tz::TimeZone::UTC),
            "2027-01-15 08:00 UTC"
        );
    }
}
