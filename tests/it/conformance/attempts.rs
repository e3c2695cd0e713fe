//! Attempt history: each claim opens a record, whatever ends the lease closes
//! it, summaries and claimants are bounded, and old records are pruned.

use switchboard::clock::Clock;
use switchboard::domain::todo::{Disposition, Outcome};
use switchboard::store::*;

use crate::common::*;
use crate::exercise_on_every_path;
use crate::support::{TestStore, fixture};

fn claimant(name: &str) -> ClaimOptions {
    ClaimOptions {
        claimant: Some(name.to_owned()),
        ..ClaimOptions::default()
    }
}

fn release_saying(summary: &str) -> ReleaseOptions {
    ReleaseOptions {
        summary: Some(summary.to_owned()),
        ..ReleaseOptions::default()
    }
}

fn finish_saying(summary: &str) -> Finish {
    Finish {
        summary: Some(summary.to_owned()),
        ..Finish::default()
    }
}

async fn a_claim_opens_an_attempt_record(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    let claimed = store
        .claim(&f.caller, &todo.id, claimant("worker-1"))
        .await
        .unwrap();

    let history = attempts(store, &f.caller, &todo.id).await;
    assert_eq!(history.len(), 1);
    let open = &history[0];
    assert_eq!((open.seq, open.attempt), (claimed.attempt_seq, 1));
    assert_eq!(open.claimant.as_deref(), Some("worker-1"));
    assert_eq!(open.claimed_at, ts.clock.now());
    assert_eq!(open.ended_at, None);
    assert_eq!((open.outcome, open.disposition), (None, None));
    assert!(!open.died);
}

/// The holder's ways to end a lease, and how each closes the attempt.
#[derive(Debug, Clone, Copy)]
enum Ending {
    Complete,
    FailWithRetry,
    FailAtCap,
    Release,
}

impl Ending {
    fn expected(self) -> (Outcome, Disposition) {
        match self {
            Self::Complete => (Outcome::Completed, Disposition::Done),
            Self::FailWithRetry => (Outcome::Failed, Disposition::RetryScheduled),
            Self::FailAtCap => (Outcome::Failed, Disposition::DeadLettered),
            Self::Release => (Outcome::Released, Disposition::Requeued),
        }
    }

    async fn end(self, store: &dyn Store, caller: &Caller, id: &str, summary: &str) {
        let result = match self {
            Self::Complete => store.complete(caller, id, finish_saying(summary)).await,
            Self::FailWithRetry | Self::FailAtCap => {
                store.fail(caller, id, finish_saying(summary)).await
            }
            Self::Release => store.release(caller, id, release_saying(summary)).await,
        };
        result.unwrap_or_else(|e| panic!("{self:?}: {e}"));
    }
}

async fn the_holder_closes_its_attempt_with_outcome_and_disposition(
    store: &dyn Store,
    ts: &TestStore,
) {
    let f = fixture(store, "ada").await;
    for ending in [
        Ending::Complete,
        Ending::FailWithRetry,
        Ending::FailAtCap,
        Ending::Release,
    ] {
        let cap = if matches!(ending, Ending::FailAtCap) {
            1
        } else {
            5
        };
        let todo = create(store, capped_todo(&f, "t", cap)).await;
        claim(store, &f.caller, &todo.id).await;
        advance_secs(ts, 7);
        ending
            .end(store, &f.caller, &todo.id, "what happened")
            .await;

        let closed = last_attempt(store, &f.caller, &todo.id).await;
        let (outcome, disposition) = ending.expected();
        assert_closed_as(&closed, outcome, disposition);
        assert_eq!(closed.ended_at, Some(ts.clock.now()), "{ending:?}");
        assert_eq!(closed.summary.as_deref(), Some("what happened"));
        assert!(!closed.summary_truncated);
        assert_eq!(
            count_open_attempts(&ts.store, &todo.id).await,
            0,
            "{ending:?}"
        );
    }
}

async fn a_long_summary_is_cut_on_a_character_boundary(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    // "€" is 3 bytes, so 2048 bytes falls inside a character: the cut keeps 682.
    let long = "€".repeat(1_000);
    let exact = "x".repeat(2_048);
    for ending in [Ending::Complete, Ending::FailWithRetry, Ending::Release] {
        for (summary, kept, truncated) in [
            (long.as_str(), "€".repeat(682), true),
            (exact.as_str(), exact.clone(), false),
        ] {
            let todo = add_todo(store, &f, "t").await;
            claim(store, &f.caller, &todo.id).await;
            // Never refused, whatever its length.
            ending.end(store, &f.caller, &todo.id, summary).await;
            let closed = last_attempt(store, &f.caller, &todo.id).await;
            assert_eq!(closed.summary.as_deref(), Some(kept.as_str()), "{ending:?}");
            assert_eq!(closed.summary_truncated, truncated, "{ending:?}");
        }
    }
}

async fn a_claimant_is_stripped_of_controls_and_cut(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let noisy = format!("bot\u{1b}[31m\n-{}", "é".repeat(100));
    let todo = add_todo(store, &f, "t").await;
    store
        .claim(&f.caller, &todo.id, claimant(&noisy))
        .await
        .unwrap();

    let recorded = last_attempt(store, &f.caller, &todo.id)
        .await
        .claimant
        .expect("a claimant");
    // "bot[31m-" is 8 bytes; the remaining 120 bytes hold 60 two-byte "é".
    assert_eq!(recorded, format!("bot[31m-{}", "é".repeat(60)));
    assert_eq!(recorded.len(), 128);
}

async fn a_claim_returns_the_five_latest_closed_attempts(store: &dyn Store, _ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    for round in 1..=7 {
        let claimed = claim(store, &f.caller, &todo.id).await;
        assert_eq!(
            claimed.prior_attempts.len(),
            (round - 1).min(5),
            "round {round}"
        );
        store
            .release(
                &f.caller,
                &todo.id,
                release_saying(&format!("round {round}")),
            )
            .await
            .unwrap();
    }

    let claimed = claim(store, &f.caller, &todo.id).await;
    let seqs: Vec<i64> = claimed.prior_attempts.iter().map(|a| a.seq).collect();
    assert_eq!(seqs, vec![7, 6, 5, 4, 3], "newest first");
    let summaries: Vec<&str> = claimed
        .prior_attempts
        .iter()
        .map(|a| a.summary.as_deref().unwrap())
        .collect();
    assert_eq!(
        summaries,
        vec!["round 7", "round 6", "round 5", "round 4", "round 3"]
    );
    assert!(claimed.prior_attempts.iter().all(|a| a.ended_at.is_some()));
}

async fn closed_attempts_beyond_fifty_are_pruned_and_counted(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    // Releases never hit the attempt cap, so one todo can be claimed 55 times.
    let mut last = None;
    for _ in 0..55 {
        claim(store, &f.caller, &todo.id).await;
        last = Some(
            store
                .release(&f.caller, &todo.id, ReleaseOptions::default())
                .await
                .unwrap(),
        );
    }
    let released = last.unwrap();
    assert_eq!(released.attempts_total, 55);
    assert_eq!(released.attempts_pruned, 5);
    assert_eq!(get(store, &f.caller, &todo.id).await, released);

    assert_eq!(count_attempt_rows(&ts.store, &todo.id).await, 50);
    let kept: Vec<i64> = attempts(store, &f.caller, &todo.id)
        .await
        .iter()
        .map(|a| a.seq)
        .collect();
    assert_eq!(kept, (6..=55).rev().collect::<Vec<_>>(), "the oldest go");
}

async fn reaped_attempts_are_pruned_too(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    // Enough attempts that the reaper requeues every time.
    let todo = create(store, capped_todo(&f, "t", 100)).await;
    for _ in 0..55 {
        claim_with_ttl(store, &f.caller, &todo.id, 60).await;
        advance_secs(ts, 61);
        let report = store.unscoped_reap_lapsed_leases(10).await.unwrap();
        assert_eq!(report.requeued.len(), 1);
    }
    assert_eq!(count_attempt_rows(&ts.store, &todo.id).await, 50);
    let reaped = get(store, &f.caller, &todo.id).await;
    assert_eq!((reaped.attempts_total, reaped.attempts_pruned), (55, 5));
}

async fn a_revoked_attempt_is_pruned_too(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    let todo = add_todo(store, &f, "t").await;
    for _ in 0..50 {
        claim(store, &f.caller, &todo.id).await;
        store
            .release(&f.caller, &todo.id, ReleaseOptions::default())
            .await
            .unwrap();
    }
    claim(store, &f.caller, &todo.id).await;
    store
        .revoke_endpoint(&f.human.id, &f.endpoint.id)
        .await
        .unwrap();

    assert_eq!(count_attempt_rows(&ts.store, &todo.id).await, 50);
    let dead = get(store, &f.caller, &todo.id).await;
    assert_eq!((dead.attempts_total, dead.attempts_pruned), (51, 1));
    let newest = last_attempt(store, &f.caller, &todo.id).await;
    assert_eq!(newest.seq, 51);
    assert_eq!(newest.outcome, Some(Outcome::Revoked));
}

exercise_on_every_path!(
    a_claim_opens_an_attempt_record,
    the_holder_closes_its_attempt_with_outcome_and_disposition,
    a_long_summary_is_cut_on_a_character_boundary,
    a_claimant_is_stripped_of_controls_and_cut,
    a_claim_returns_the_five_latest_closed_attempts,
    closed_attempts_beyond_fifty_are_pruned_and_counted,
    reaped_attempts_are_pruned_too,
    a_revoked_attempt_is_pruned_too,
);
