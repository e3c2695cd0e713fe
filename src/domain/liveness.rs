//! Liveness (`docs/api.md`): how long an agent may stay quiet, whether it
//! is stale, and the one condition an operator sees.

use std::time::Duration;

use serde::Serialize;

use super::Timestamp;

/// The MCP session idle limit, which is also a `session` agent's expected interval.
pub const SESSION_IDLE_LIMIT: Duration = Duration::from_secs(30 * 60);
/// A `heartbeat` agent's default expected interval.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(30 * 60);

/// Whether every live hearer of the endpoint is deaf (`docs/doorbells.md`):
/// an endpoint with an enabled notify hook is heard by it (its rings go
/// there, and a hook that keeps failing is disabled); else it is deaf when
/// it has sessions (ghosts are none) and every one of them is deaf.
pub fn every_hearer_deaf(hooked: bool, sessions: usize, deaf_sessions: usize) -> bool {
    !hooked && sessions > 0 && deaf_sessions == sessions
}

/// Whether work waits that nothing hears (`docs/board.md`, "unheard"): the
/// condition says idle, yet todos are pending and the endpoint has no live
/// hearer — no enabled notify hook and no session — so their doorbells
/// ring nobody. The condition stays `idle` by the spec's table (the API and
/// `/metrics` report it so); an operator's view shows this instead of a
/// calm idle, since the work waits until the agent comes back by itself.
pub fn work_unheard(condition: Condition, pending: i64, hooked: bool, sessions: usize) -> bool {
    condition == Condition::Idle && pending > 0 && !hooked && sessions == 0
}

/// How often an agent of this kind is expected to be heard from, unless the
/// agent sets its own interval. A `task` agent is expected within its
/// endpoint's effective lease.
pub fn expected_interval(
    kind: &str,
    agent_override_seconds: Option<i64>,
    effective_lease_seconds: i64,
) -> Duration {
    if let Some(secs) = agent_override_seconds.filter(|s| *s > 0) {
        return Duration::from_secs(secs as u64);
    }
    match kind {
        "heartbeat" => HEARTBEAT_INTERVAL,
        "task" => Duration::from_secs(effective_lease_seconds.max(1) as u64),
        _ => SESSION_IDLE_LIMIT,
    }
}

/// The instant after which an endpoint last seen at `last_seen` counts as
/// stale: `last_seen + 2 × expected_interval`. `None` when never seen.
pub fn stale_after(last_seen: Option<Timestamp>, expected: Duration) -> Option<Timestamp> {
    last_seen.map(|seen| seen.saturating_add(expected * 2))
}

/// Stale means `now − last_seen > 2 × expected_interval`; never-seen is not stale.
pub fn is_stale(last_seen: Option<Timestamp>, expected: Duration, now: Timestamp) -> bool {
    stale_after(last_seen, expected).is_some_and(|after| now > after)
}

/// The one derived value per endpoint, in precedence order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    Revoked,
    Off,
    Unknown,
    Stale,
    Deaf,
    Working,
    Idle,
}

impl Condition {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Revoked => "revoked",
            Self::Off => "off",
            Self::Unknown => "unknown",
            Self::Stale => "stale",
            Self::Deaf => "deaf",
            Self::Working => "working",
            Self::Idle => "idle",
        }
    }
}

/// What the condition is decided from.
#[derive(Debug, Clone, Copy)]
pub struct ConditionInputs {
    pub revoked: bool,
    /// Effective presence is `out`.
    pub presence_out: bool,
    pub last_seen: Option<Timestamp>,
    pub expected_interval: Duration,
    /// Attached sessions exist and all of them are deaf.
    pub all_sessions_deaf: bool,
    /// Holds at least one live claim.
    pub holds_claim: bool,
}

/// Everything an endpoint's (or an agent's) liveness is judged from.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    /// The agent's kind (`session`, `heartbeat`, `task`).
    pub kind: &'a str,
    /// The agent's own expected interval, when it set one.
    pub expected_interval_seconds: Option<i64>,
    /// The effective lease a `task` agent is expected within.
    pub effective_lease_seconds: i64,
    /// Revoked (for an agent: it has endpoints and none is active).
    pub revoked: bool,
    /// Effective presence is `out` (for an agent: every active endpoint is).
    pub presence_out: bool,
    pub last_seen: Option<Timestamp>,
    /// Attached sessions exist and all of them are deaf.
    pub all_sessions_deaf: bool,
    /// Holds at least one live claim.
    pub holds_claim: bool,
}

/// What the rules say of a subject at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Assessment {
    pub expected_interval: Duration,
    /// When it turns stale if nothing is heard; `None` when never seen.
    pub stale_after: Option<Timestamp>,
    pub condition: Condition,
}

/// The one liveness judgement: the API's views, `/metrics` and the board
/// all call this.
pub fn assess(subject: &Subject<'_>, now: Timestamp) -> Assessment {
    let expected = expected_interval(
        subject.kind,
        subject.expected_interval_seconds,
        subject.effective_lease_seconds,
    );
    Assessment {
        expected_interval: expected,
        stale_after: stale_after(subject.last_seen, expected),
        condition: condition(
            ConditionInputs {
                revoked: subject.revoked,
                presence_out: subject.presence_out,
                last_seen: subject.last_seen,
                expected_interval: expected,
                all_sessions_deaf: subject.all_sessions_deaf,
                holds_claim: subject.holds_claim,
            },
            now,
        ),
    }
}

/// The condition, in precedence order, from already resolved inputs.
pub fn condition(inputs: ConditionInputs, now: Timestamp) -> Condition {
    if inputs.revoked {
        Condition::Revoked
    } else if inputs.presence_out {
        Condition::Off
    } else if inputs.last_seen.is_none() {
        Condition::Unknown
    } else if is_stale(inputs.last_seen, inputs.expected_interval, now) {
        Condition::Stale
    } else if inputs.all_sessions_deaf {
        Condition::Deaf
    } else if inputs.holds_claim {
        Condition::Working
    } else {
        Condition::Idle
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn an_endpoint_is_deaf_only_when_every_live_hearer_is() {
        assert!(every_hearer_deaf(false, 2, 2));
        assert!(!every_hearer_deaf(false, 2, 1), "one session still hears");
        assert!(
            !every_hearer_deaf(false, 0, 0),
            "no hearer is not a deaf one"
        );
        assert!(
            !every_hearer_deaf(true, 2, 2),
            "its rings go to the enabled hook, not the deaf sessions"
        );
    }

    use super::*;

    #[test]
    fn idle_with_pending_work_and_no_hearer_is_unheard() {
        assert!(work_unheard(Condition::Idle, 3, false, 0));
        assert!(!work_unheard(Condition::Idle, 0, false, 0), "nothing waits");
        assert!(
            !work_unheard(Condition::Idle, 3, false, 1),
            "a session hears"
        );
        assert!(!work_unheard(Condition::Idle, 3, true, 0), "a hook hears");
        for other in [
            Condition::Working,
            Condition::Off,
            Condition::Deaf,
            Condition::Stale,
            Condition::Unknown,
            Condition::Revoked,
        ] {
            assert!(
                !work_unheard(other, 3, false, 0),
                "{other:?} already says more than idle"
            );
        }
    }

    const MIN: Duration = Duration::from_secs(60);

    fn base(now: Timestamp) -> ConditionInputs {
        ConditionInputs {
            revoked: false,
            presence_out: false,
            last_seen: Some(now),
            expected_interval: 30 * MIN,
            all_sessions_deaf: false,
            holds_claim: false,
        }
    }

    #[test]
    fn expected_interval_by_kind() {
        assert_eq!(expected_interval("heartbeat", None, 300), 30 * MIN);
        assert_eq!(expected_interval("session", None, 300), 30 * MIN);
        assert_eq!(expected_interval("task", None, 600), 10 * MIN);
        assert_eq!(expected_interval("task", Some(120), 600), 2 * MIN);
    }

    #[test]
    fn stale_is_strictly_more_than_twice_the_interval() {
        let seen = Timestamp::from_millis(0);
        let exactly = seen.saturating_add(2 * 30 * MIN);
        assert!(!is_stale(Some(seen), 30 * MIN, exactly));
        assert!(is_stale(Some(seen), 30 * MIN, exactly.add_secs(1)));
        assert!(
            !is_stale(None, 30 * MIN, exactly.add_secs(1)),
            "never seen is unknown, not stale"
        );
        assert_eq!(stale_after(Some(seen), 30 * MIN), Some(exactly));
    }

    #[test]
    fn condition_precedence() {
        let now = Timestamp::from_millis(10_000_000);
        let c = |f: fn(&mut ConditionInputs)| {
            let mut i = base(now);
            f(&mut i);
            condition(i, now)
        };
        assert_eq!(c(|_| {}), Condition::Idle);
        assert_eq!(c(|i| i.holds_claim = true), Condition::Working);
        assert_eq!(
            c(|i| {
                i.holds_claim = true;
                i.all_sessions_deaf = true
            }),
            Condition::Deaf
        );
        assert_eq!(
            c(|i| {
                i.all_sessions_deaf = true;
                i.last_seen = Some(Timestamp::from_millis(0))
            }),
            Condition::Stale
        );
        assert_eq!(c(|i| i.last_seen = None), Condition::Unknown);
        assert_eq!(
            c(|i| {
                i.last_seen = None;
                i.presence_out = true
            }),
            Condition::Off
        );
        assert_eq!(
            c(|i| {
                i.presence_out = true;
                i.revoked = true
            }),
            Condition::Revoked
        );
    }

    fn subject(now: Timestamp) -> Subject<'static> {
        Subject {
            kind: "task",
            expected_interval_seconds: None,
            effective_lease_seconds: 600,
            revoked: false,
            presence_out: false,
            last_seen: Some(now),
            all_sessions_deaf: false,
            holds_claim: false,
        }
    }

    #[test]
    fn assess_derives_the_interval_the_stale_instant_and_the_condition_together() {
        let now = Timestamp::from_millis(1_000_000_000);
        let a = assess(&subject(now), now);
        assert_eq!(a.expected_interval, 10 * MIN, "a task agent: its lease");
        assert_eq!(a.stale_after, Some(now.saturating_add(20 * MIN)));
        assert_eq!(a.condition, Condition::Idle);
        let later = now.saturating_add(21 * MIN);
        assert_eq!(assess(&subject(now), later).condition, Condition::Stale);
    }

    #[test]
    fn assess_of_a_subject_never_seen_is_unknown_and_never_stale() {
        let now = Timestamp::from_millis(1_000_000_000);
        let never = Subject {
            last_seen: None,
            ..subject(now)
        };
        let a = assess(&never, now.saturating_add(1_000 * MIN));
        assert_eq!((a.condition, a.stale_after), (Condition::Unknown, None));
    }
}
