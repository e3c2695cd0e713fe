//! What this instance did to each queue, per bucket, since it last wrote it
//! down (`domain::activity`): counted where the attempt counters are (by
//! `crate::ops` and the maintenance loop), added to the database every few
//! seconds by `ops::activity::flush`.
//!
//! Memory holds it only until that flush: a crash loses at most the last
//! few seconds of a chart, never work, and the hot path pays a map update
//! instead of a statement (docs/decisions.md, "Queue charts are counted
//! where the attempt counters are").

use std::collections::HashMap;
use std::sync::Mutex;

use crate::domain::Timestamp;
use crate::domain::activity::{Activity, ActivityRange, ready_at};
use crate::store::{QueueActivity, Todo, TodoRef};

/// Past this many pending rows (a database down for long), new activity is
/// dropped rather than kept without bound.
const MAX_PENDING: usize = 100_000;

type Key = (String, String, ActivityRange, Timestamp);

#[derive(Debug, Default)]
pub struct ActivityRecorder {
    pending: Mutex<HashMap<Key, Activity>>,
}

impl ActivityRecorder {
    fn add(&self, endpoint_id: &str, queue: &str, at: Timestamp, change: impl Fn(&mut Activity)) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        for range in ActivityRange::ALL {
            let key = (
                endpoint_id.to_owned(),
                queue.to_owned(),
                range,
                range.bucket_of(at),
            );
            if pending.len() >= MAX_PENDING && !pending.contains_key(&key) {
                return;
            }
            change(pending.entry(key).or_default());
        }
    }

    /// A todo was created (not a dedup hit).
    pub fn created(&self, todo: &Todo) {
        self.add(&todo.endpoint_id, &todo.queue, todo.created_at, |a| {
            a.created += 1
        });
    }

    /// A todo was claimed: its first claim counts how long it waited.
    pub fn claimed(&self, todo: &Todo) {
        let Some(claimed_at) = todo.claimed_at else {
            return;
        };
        if todo.attempt != 1 {
            return;
        }
        let waited = claimed_at.as_millis() - ready_at(todo.created_at, todo.run_at).as_millis();
        self.add(&todo.endpoint_id, &todo.queue, claimed_at, |a| {
            a.claim_latency.record(waited)
        });
    }

    /// A todo was completed at `at`.
    pub fn completed(&self, todo: &Todo, at: Timestamp) {
        let took = at.as_millis() - ready_at(todo.created_at, todo.run_at).as_millis();
        self.add(&todo.endpoint_id, &todo.queue, at, |a| {
            a.completed += 1;
            a.complete_latency.record(took);
        });
    }

    /// An attempt failed at `at` (`fail`, or a lapsed lease); `dead` when
    /// the todo became a dead letter.
    pub fn failed(&self, todo: &TodoRef, at: Timestamp, dead: bool) {
        self.add(&todo.endpoint_id, &todo.queue, at, |a| {
            a.failed += 1;
            if dead {
                a.dead_lettered += 1;
            }
        });
    }

    /// Takes what was counted since the last flush.
    pub fn drain(&self) -> Vec<QueueActivity> {
        let pending = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
        pending
            .into_iter()
            .map(
                |((endpoint_id, queue, range, bucket_at), activity)| QueueActivity {
                    endpoint_id,
                    queue,
                    range,
                    bucket_at,
                    activity,
                },
            )
            .collect()
    }

    /// Puts back what a flush could not write, to be tried again.
    pub fn restore(&self, rows: Vec<QueueActivity>) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        for row in rows {
            let key = (row.endpoint_id, row.queue, row.range, row.bucket_at);
            if pending.len() >= MAX_PENDING && !pending.contains_key(&key) {
                continue;
            }
            pending.entry(key).or_default().merge(&row.activity);
        }
    }
}
