//! When the runner starts a run: a pure state machine, time passed in.
//!
//! - At most `parallel` runs at once.
//! - Every request for a run ([`Runs::ask`]) lands in one slot, the
//!   *queued* trigger; [`Runs::next`] takes it when a run may start. A
//!   request that cannot start at once (every slot busy, or backing off)
//!   becomes the follow-up, and later requests merge into it: any number of
//!   doorbells during a run make one follow-up run.
//! - Crash loop: a command that fails [`STRIKES`] times in a row within
//!   [`STRIKE_WINDOW`] pauses new runs for a backoff that starts at
//!   [`FIRST_BACKOFF`] and doubles up to [`MAX_BACKOFF`]; a success ends the
//!   streak and resets the backoff.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

pub(super) const STRIKES: usize = 3;
pub(super) const STRIKE_WINDOW: Duration = Duration::from_secs(60);
pub(super) const FIRST_BACKOFF: Duration = Duration::from_secs(5);
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// Why a run started (the log line's `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reason {
    /// A todo doorbell.
    Doorbell,
    /// A digest (the endpoint came back in, or the runner reconnected).
    Digest,
    /// At start (or after a reconnect): push-eligible todos were waiting.
    Start,
    /// Doorbells that came while no run could start, or work still waiting
    /// when a run ended.
    FollowUp,
}

impl Reason {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Doorbell => "doorbell",
            Self::Digest => "digest",
            Self::Start => "start",
            Self::FollowUp => "follow-up",
        }
    }
}

/// A request for a run.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Trigger {
    pub(super) reason: Reason,
    /// The doorbell's meta (`SWITCHBOARD_DOORBELL`), when a doorbell asked.
    pub(super) meta: Option<Map<String, Value>>,
    /// For a run started because work waited: how many push-eligible todos
    /// were pending when it started (the runner's progress check).
    pub(super) pending: Option<i64>,
}

impl Trigger {
    pub(super) fn new(reason: Reason) -> Self {
        Self {
            reason,
            meta: None,
            pending: None,
        }
    }

    /// A doorbell's trigger: a digest when `meta.kind` says so, else a todo
    /// doorbell.
    pub(super) fn doorbell(meta: Map<String, Value>) -> Self {
        let digest = meta.get("kind").and_then(Value::as_str) == Some("digest")
            && !meta.contains_key("todo_id");
        Self {
            reason: if digest {
                Reason::Digest
            } else {
                Reason::Doorbell
            },
            meta: Some(meta),
            pending: None,
        }
    }

    /// `SWITCHBOARD_TODO_ID`: the todo the doorbell names.
    pub(super) fn todo_id(&self) -> Option<&str> {
        self.meta.as_ref()?.get("todo_id")?.as_str()
    }
}

/// What [`Runs::finished`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Nothing holds the next run back.
    Go,
    /// A crash loop: no run starts for this long.
    BackOff(Duration),
}

#[derive(Debug)]
pub(super) struct Runs {
    parallel: usize,
    running: usize,
    queued: Option<Trigger>,
    /// When each run of the current failing streak ended, oldest first (the
    /// last [`STRIKES`] at most).
    failures: VecDeque<Instant>,
    next_backoff: Duration,
    paused_until: Option<Instant>,
    stopping: bool,
}

impl Runs {
    pub(super) fn new(parallel: usize) -> Self {
        Self {
            parallel: parallel.max(1),
            running: 0,
            queued: None,
            failures: VecDeque::new(),
            next_backoff: FIRST_BACKOFF,
            paused_until: None,
            stopping: false,
        }
    }

    pub(super) fn running(&self) -> usize {
        self.running
    }

    fn paused(&self, now: Instant) -> bool {
        self.paused_until.is_some_and(|until| now < until)
    }

    fn can_start(&self, now: Instant) -> bool {
        !self.stopping && self.running < self.parallel && !self.paused(now)
    }

    /// Asks for a run. It waits in the one queued slot for [`next`](Self::next);
    /// when it could not start now, or another request already waits, it is
    /// (merged into) the follow-up, carrying the latest doorbell's meta.
    pub(super) fn ask(&mut self, trigger: Trigger, now: Instant) {
        if self.stopping {
            return;
        }
        let merged = match self.queued.take() {
            None if self.can_start(now) => trigger,
            None => Trigger {
                reason: Reason::FollowUp,
                meta: trigger.meta,
                pending: None,
            },
            Some(waiting) => Trigger {
                reason: Reason::FollowUp,
                meta: trigger.meta.or(waiting.meta),
                pending: None,
            },
        };
        self.queued = Some(merged);
    }

    /// The run to start now, if one waits and may start; its slot is taken
    /// (give it back with [`finished`](Self::finished), or
    /// [`cancel`](Self::cancel) when it did not start after all).
    pub(super) fn next(&mut self, now: Instant) -> Option<Trigger> {
        if !self.can_start(now) {
            return None;
        }
        let trigger = self.queued.take()?;
        self.running += 1;
        Some(trigger)
    }

    /// A slot taken by [`next`](Self::next) whose run was not started.
    pub(super) fn cancel(&mut self) {
        self.running = self.running.saturating_sub(1);
    }

    /// A run ended; `success` when its command exited 0.
    pub(super) fn finished(&mut self, success: bool, now: Instant) -> Outcome {
        self.running = self.running.saturating_sub(1);
        if success {
            self.failures.clear();
            self.next_backoff = FIRST_BACKOFF;
            return Outcome::Go;
        }
        self.failures.push_back(now);
        while self.failures.len() > STRIKES {
            self.failures.pop_front();
        }
        let crash_loop = self.failures.len() == STRIKES
            && now.saturating_duration_since(self.failures[0]) <= STRIKE_WINDOW;
        if !crash_loop {
            return Outcome::Go;
        }
        let pause = self.next_backoff;
        self.paused_until = Some(now + pause);
        self.next_backoff = (pause * 2).min(MAX_BACKOFF);
        Outcome::BackOff(pause)
    }

    /// When a waiting run may start although nothing else happens: the end
    /// of a backoff still ahead of `now`, if a run waits for it. (A backoff
    /// already over wakes nothing: a waiting run then waits for a slot, and
    /// a run's end is an event of its own.)
    pub(super) fn wake_at(&self, now: Instant) -> Option<Instant> {
        self.queued.as_ref()?;
        self.paused_until
            .filter(|until| !self.stopping && *until > now)
    }

    /// Stops starting runs (shutdown): the queued run is dropped.
    pub(super) fn stop(&mut self) {
        self.stopping = true;
        self.queued = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bell(todo: &str) -> Trigger {
        let Value::Object(meta) = json!({"todo_id": todo, "queue": "inbox"}) else {
            unreachable!()
        };
        Trigger::doorbell(meta)
    }

    fn secs(t0: Instant, s: u64) -> Instant {
        t0 + Duration::from_secs(s)
    }

    #[test]
    fn a_doorbell_starts_a_run_at_once() {
        let t0 = Instant::now();
        let mut runs = Runs::new(1);
        runs.ask(bell("td_1"), t0);
        let run = runs.next(t0).unwrap();
        assert_eq!(run.reason, Reason::Doorbell);
        assert_eq!(run.todo_id(), Some("td_1"));
        assert_eq!(runs.running(), 1);
        assert_eq!(runs.next(t0), None);
    }

    #[test]
    fn digests_are_told_from_todo_doorbells() {
        let Value::Object(meta) = json!({"kind": "digest", "pending": "3"}) else {
            unreachable!()
        };
        let digest = Trigger::doorbell(meta);
        assert_eq!(digest.reason, Reason::Digest);
        assert_eq!(digest.todo_id(), None);
        // A todo of kind "digest" has a todo_id (and the server omits its kind anyway).
        let Value::Object(meta) = json!({"kind": "digest", "todo_id": "td_9"}) else {
            unreachable!()
        };
        assert_eq!(Trigger::doorbell(meta).reason, Reason::Doorbell);
    }

    #[test]
    fn doorbells_during_a_run_coalesce_into_one_follow_up() {
        let t0 = Instant::now();
        let mut runs = Runs::new(1);
        runs.ask(bell("td_1"), t0);
        runs.next(t0).unwrap();
        for n in 2..=5 {
            runs.ask(bell(&format!("td_{n}")), t0);
            assert_eq!(runs.next(t0), None, "the only slot is busy");
        }
        assert_eq!(runs.finished(true, secs(t0, 1)), Outcome::Go);
        let follow_up = runs.next(secs(t0, 1)).unwrap();
        assert_eq!(follow_up.reason, Reason::FollowUp);
        assert_eq!(
            follow_up.todo_id(),
            Some("td_5"),
            "the latest doorbell's meta"
        );
        assert_eq!(runs.next(secs(t0, 1)), None, "one follow-up, not four");
    }

    #[test]
    fn a_work_check_merges_into_a_waiting_follow_up_and_keeps_its_meta() {
        let t0 = Instant::now();
        let mut runs = Runs::new(1);
        runs.ask(bell("td_1"), t0);
        runs.next(t0).unwrap();
        runs.ask(bell("td_2"), t0);
        runs.finished(true, t0);
        runs.ask(Trigger::new(Reason::FollowUp), t0);
        let run = runs.next(t0).unwrap();
        assert_eq!(run.reason, Reason::FollowUp);
        assert_eq!(run.todo_id(), Some("td_2"));
    }

    #[test]
    fn parallel_slots_each_take_a_doorbell() {
        let t0 = Instant::now();
        let mut runs = Runs::new(2);
        runs.ask(bell("td_1"), t0);
        assert_eq!(runs.next(t0).unwrap().reason, Reason::Doorbell);
        runs.ask(bell("td_2"), t0);
        assert_eq!(runs.next(t0).unwrap().reason, Reason::Doorbell);
        runs.ask(bell("td_3"), t0);
        assert_eq!(runs.next(t0), None);
        runs.ask(bell("td_4"), t0);
        runs.finished(true, t0);
        let run = runs.next(t0).unwrap();
        assert_eq!(
            (run.reason, run.todo_id()),
            (Reason::FollowUp, Some("td_4"))
        );
        assert_eq!(runs.running(), 2);
    }

    #[test]
    fn a_cancelled_start_gives_its_slot_back() {
        let t0 = Instant::now();
        let mut runs = Runs::new(1);
        runs.ask(Trigger::new(Reason::FollowUp), t0);
        runs.next(t0).unwrap();
        runs.cancel();
        assert_eq!(runs.running(), 0);
        runs.ask(bell("td_1"), t0);
        assert!(runs.next(t0).is_some());
    }

    #[test]
    fn three_quick_failures_back_off_doubling_up_to_five_minutes() {
        let t0 = Instant::now();
        let mut runs = Runs::new(1);
        let mut now = t0;
        let fail = |runs: &mut Runs, now: Instant| {
            runs.ask(Trigger::new(Reason::FollowUp), now);
            runs.next(now).expect("may start");
            runs.finished(false, now)
        };
        assert_eq!(fail(&mut runs, now), Outcome::Go);
        now += Duration::from_secs(1);
        assert_eq!(fail(&mut runs, now), Outcome::Go);
        now += Duration::from_secs(1);
        assert_eq!(fail(&mut runs, now), Outcome::BackOff(FIRST_BACKOFF));

        // Paused: a request waits, and says when it may start.
        runs.ask(Trigger::new(Reason::FollowUp), now);
        assert_eq!(runs.next(now), None);
        assert_eq!(runs.wake_at(now), Some(now + FIRST_BACKOFF));
        now += FIRST_BACKOFF;
        runs.next(now).expect("the backoff is over");
        // Still failing fast: the next pause doubles.
        assert_eq!(
            runs.finished(false, now),
            Outcome::BackOff(Duration::from_secs(10))
        );
        // Each pause doubles; once pauses outlast the window, a pause is
        // followed by at most STRIKES quick tries before the next one.
        let mut pause = Duration::from_secs(10);
        let mut pauses = vec![pause];
        for _ in 0..10 {
            now += pause;
            let mut tries = 0;
            let next = loop {
                tries += 1;
                runs.ask(Trigger::new(Reason::FollowUp), now);
                runs.next(now).expect("not paused");
                if let Outcome::BackOff(p) = runs.finished(false, now) {
                    break p;
                }
                now += Duration::from_secs(1);
            };
            assert!(tries <= STRIKES, "{tries} tries before backing off");
            pause = next;
            pauses.push(pause);
        }
        assert_eq!(
            pauses[..6]
                .iter()
                .map(Duration::as_secs)
                .collect::<Vec<_>>(),
            [10, 20, 40, 80, 160, 300]
        );
        assert_eq!(pause, MAX_BACKOFF, "capped");
    }

    #[test]
    fn slow_failures_are_no_crash_loop_and_a_success_resets_the_streak() {
        let t0 = Instant::now();
        let mut runs = Runs::new(1);
        for n in 0..6 {
            runs.ask(Trigger::new(Reason::FollowUp), secs(t0, n * 40));
            runs.next(secs(t0, n * 40)).unwrap();
            assert_eq!(runs.finished(false, secs(t0, n * 40)), Outcome::Go);
        }
        let now = secs(t0, 1000);
        for ok in [false, false, true, false, false] {
            runs.ask(Trigger::new(Reason::FollowUp), now);
            runs.next(now).unwrap();
            assert_eq!(runs.finished(ok, now), Outcome::Go);
        }
    }

    #[test]
    fn stopping_starts_nothing_more() {
        let t0 = Instant::now();
        let mut runs = Runs::new(1);
        runs.ask(bell("td_1"), t0);
        runs.stop();
        assert_eq!(runs.next(t0), None);
        runs.ask(bell("td_2"), t0);
        assert_eq!(runs.next(t0), None);
        assert_eq!(runs.wake_at(t0), None);
    }

    #[test]
    fn a_backoff_that_is_over_wakes_nothing_while_a_run_holds_the_slot() {
        let t0 = Instant::now();
        let mut runs = Runs::new(1);
        for _ in 0..STRIKES {
            runs.ask(Trigger::new(Reason::FollowUp), t0);
            runs.next(t0).unwrap();
            runs.finished(false, t0);
        }
        let later = t0 + FIRST_BACKOFF;
        runs.ask(Trigger::new(Reason::FollowUp), later);
        runs.next(later).expect("the backoff is over");
        // A doorbell during that run waits for the slot, not for a timer.
        runs.ask(bell("td_1"), later);
        assert_eq!(runs.wake_at(later), None);
        assert_eq!(runs.next(later), None);
    }
}
