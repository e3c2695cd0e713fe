//! Effective presence (`docs/presence.md`): one pure function of the stored
//! inputs (shift, override) and an instant, called by every consumer —
//! doorbells, the sweep, the agent verbs, the API and the evaluator.

use serde::Serialize;

use super::Timestamp;

/// Whether an endpoint should be rung now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Presence {
    In,
    Out,
}

impl Presence {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::In => "in",
            Self::Out => "out",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "in" => Some(Self::In),
            "out" => Some(Self::Out),
            _ => None,
        }
    }

    fn of(member: bool) -> Self {
        if member { Self::In } else { Self::Out }
    }
}

/// What decided the effective presence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Agent,
    Operator,
    Shift,
    Default,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Agent => "agent",
            Self::Operator => "operator",
            Self::Shift => "shift",
            Self::Default => "default",
        }
    }
}

/// A weekly schedule as presence needs it (implemented by the shift evaluator).
pub trait Schedule: Sync {
    /// Inside the schedule at `t`.
    fn contains(&self, t: Timestamp) -> bool;
    /// The first instant strictly after `t` at which membership differs;
    /// `None` when it never changes.
    fn next_boundary(&self, t: Timestamp) -> Option<Timestamp>;
}

/// An `in`/`out` written by the agent or its human.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    pub value: Presence,
    pub until: Option<Timestamp>,
    pub set_at: Timestamp,
    pub by: OverrideBy,
}

/// Who set an override: the agent through its own verbs, or a human.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OverrideBy {
    Agent,
    /// The human's id.
    Operator(String),
}

impl OverrideBy {
    /// The stored form: `agent` or `operator:<human_id>`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "agent" => Some(Self::Agent),
            _ => text
                .strip_prefix("operator:")
                .map(|id| Self::Operator(id.to_owned())),
        }
    }
}

impl Serialize for OverrideBy {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl std::fmt::Display for OverrideBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Agent => f.write_str("agent"),
            Self::Operator(id) => write!(f, "operator:{id}"),
        }
    }
}

impl Override {
    pub fn source(&self) -> Source {
        match self.by {
            OverrideBy::Operator(_) => Source::Operator,
            OverrideBy::Agent => Source::Agent,
        }
    }

    /// When the override stops deciding: its `until`, or the first shift
    /// boundary after it was set, whichever comes first (`None` = never).
    pub fn ends_at(&self, shift: Option<&dyn Schedule>) -> Option<Timestamp> {
        let boundary = shift.and_then(|s| s.next_boundary(self.set_at));
        match (self.until, boundary) {
            (Some(u), Some(b)) => Some(u.min(b)),
            (Some(u), None) => Some(u),
            (None, b) => b,
        }
    }

    /// Live: `now` is before both its `until` and the first shift boundary
    /// strictly after `set_at`.
    pub fn is_live(&self, shift: Option<&dyn Schedule>, now: Timestamp) -> bool {
        self.ends_at(shift).is_none_or(|end| now < end)
    }
}

/// The answer: presence, what decided it, and when the **value** next changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Effective {
    pub presence: Presence,
    pub source: Source,
    pub until: Option<Timestamp>,
}

/// Presence from the shift alone (or `in` without one).
fn underlying(shift: Option<&dyn Schedule>, t: Timestamp) -> Presence {
    shift.map_or(Presence::In, |s| Presence::of(s.contains(t)))
}

/// The first instant at or after `from` where the underlying value differs
/// from `value`, following the shift's boundaries.
fn underlying_change(
    shift: Option<&dyn Schedule>,
    value: Presence,
    from: Timestamp,
) -> Option<Timestamp> {
    if underlying(shift, from) != value {
        return Some(from);
    }
    let shift = shift?;
    // Membership is constant between boundaries, so the next boundary after
    // `from` is where the value flips.
    shift.next_boundary(from)
}

/// `effective(shift, override, now) -> (presence, source, until)`.
pub fn effective(
    shift: Option<&dyn Schedule>,
    override_: Option<&Override>,
    now: Timestamp,
) -> Effective {
    if let Some(o) = override_.filter(|o| o.is_live(shift, now)) {
        let until = o
            .ends_at(shift)
            .and_then(|end| underlying_change(shift, o.value, end));
        return Effective {
            presence: o.value,
            source: o.source(),
            until,
        };
    }
    match shift {
        Some(s) => Effective {
            presence: Presence::of(s.contains(now)),
            source: Source::Shift,
            until: s.next_boundary(now),
        },
        None => Effective {
            presence: Presence::In,
            source: Source::Default,
            until: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 3_600_000;
    const DAY: i64 = 24 * H;

    /// A daily window [start_h, end_h) in UTC hours: a small real schedule.
    struct Daily {
        start_h: i64,
        end_h: i64,
    }

    impl Schedule for Daily {
        fn contains(&self, t: Timestamp) -> bool {
            let h = t.as_millis().rem_euclid(DAY);
            h >= self.start_h * H && h < self.end_h * H
        }

        fn next_boundary(&self, t: Timestamp) -> Option<Timestamp> {
            let day = t.as_millis().div_euclid(DAY) * DAY;
            [self.start_h, self.end_h, self.start_h + 24, self.end_h + 24]
                .into_iter()
                .map(|h| day + h * H)
                .filter(|b| *b > t.as_millis())
                .min()
                .map(Timestamp::from_millis)
        }
    }

    fn at(h: i64) -> Timestamp {
        Timestamp::from_millis(10 * DAY + h * H)
    }

    fn agent(value: Presence, set_h: i64, until_h: Option<i64>) -> Override {
        Override {
            value,
            until: until_h.map(at),
            set_at: at(set_h),
            by: OverrideBy::Agent,
        }
    }

    const NINE_TO_ONE: Daily = Daily {
        start_h: 9,
        end_h: 13,
    };

    #[test]
    fn default_is_in_forever() {
        let e = effective(None, None, at(3));
        assert_eq!(
            e,
            Effective {
                presence: Presence::In,
                source: Source::Default,
                until: None
            }
        );
    }

    #[test]
    fn the_shift_decides_without_an_override() {
        let s: &dyn Schedule = &NINE_TO_ONE;
        let e = effective(Some(s), None, at(10));
        assert_eq!(
            (e.presence, e.source, e.until),
            (Presence::In, Source::Shift, Some(at(13)))
        );
        let e = effective(Some(s), None, at(14));
        assert_eq!((e.presence, e.until), (Presence::Out, Some(at(24 + 9))));
    }

    #[test]
    fn clock_out_mid_shift_lasts_until_the_next_start() {
        // The spec's example: clock_out at 10:00 inside 09:00-13:00 -> out
        // until 09:00 next day (at 13:00 only the source changes).
        let s: &dyn Schedule = &NINE_TO_ONE;
        let o = agent(Presence::Out, 10, None);
        let e = effective(Some(s), Some(&o), at(11));
        assert_eq!(
            (e.presence, e.source, e.until),
            (Presence::Out, Source::Agent, Some(at(24 + 9)))
        );
        // After 13:00 the override is dead and the shift says out.
        let e = effective(Some(s), Some(&o), at(14));
        assert_eq!((e.presence, e.source), (Presence::Out, Source::Shift));
        assert!(!o.is_live(Some(s), at(13)));
    }

    #[test]
    fn a_boundary_ends_an_override() {
        let s: &dyn Schedule = &NINE_TO_ONE;
        // Clocked in at 20:00 (outside the shift) for 2 h: in until 22:00.
        let o = agent(Presence::In, 20, Some(22));
        let e = effective(Some(s), Some(&o), at(21));
        assert_eq!((e.presence, e.until), (Presence::In, Some(at(22))));
        // Clocked in at 08:00 without an end: the 09:00 start ends the
        // override, and in continues until 13:00.
        let o = agent(Presence::In, 8, None);
        let e = effective(Some(s), Some(&o), at(8));
        assert_eq!(
            (e.presence, e.source, e.until),
            (Presence::In, Source::Agent, Some(at(13)))
        );
        assert!(!o.is_live(Some(s), at(9)));
    }

    #[test]
    fn without_a_shift_an_override_lasts_until_its_end() {
        let o = agent(Presence::Out, 1, None);
        assert_eq!(effective(None, Some(&o), at(500)).until, None);
        let o = agent(Presence::Out, 1, Some(5));
        let e = effective(None, Some(&o), at(2));
        assert_eq!((e.presence, e.until), (Presence::Out, Some(at(5))));
        assert_eq!(effective(None, Some(&o), at(5)).source, Source::Default);
    }

    #[test]
    fn operator_overrides_name_their_source() {
        let o = Override {
            by: OverrideBy::Operator("hu_1".into()),
            ..agent(Presence::Out, 1, None)
        };
        assert_eq!(effective(None, Some(&o), at(2)).source, Source::Operator);
    }
}
