//! The retry backoff as the store applies it: `min(30 s · 2^(n−1), 15 min)`.

use switchboard::clock::Clock;
use switchboard::store::*;

use crate::common::*;
use crate::exercise_on_both_backends;
use crate::support::{TestStore, fixture};

async fn successive_fails_follow_the_backoff_schedule(store: &dyn Store, ts: &TestStore) {
    let f = fixture(store, "ada").await;
    // A cap above the number of fails keeps every fail a retry, not a dead letter.
    let todo = create(store, capped_todo(&f, "flaky", 10)).await;
    let expected_windows = [30, 60, 120, 240, 480, 900, 900];

    let mut windows = Vec::new();
    for attempt in 1..=expected_windows.len() as i64 {
        // Claiming by id also proves the todo is claimable again right when
        // the previous window closes.
        let claimed = claim(store, &f.caller, &todo.id).await;
        assert_eq!(claimed.todo.attempt, attempt);
        let failed = store
            .fail(&f.caller, &todo.id, Finish::default())
            .await
            .unwrap();
        let now = ts.clock.now();
        let retry_at = failed.next_retry_at.expect("below the cap: a retry");
        let window = (retry_at.as_millis() - now.as_millis()) / 1000;
        windows.push(window);
        advance_secs(ts, window as u64);
    }
    assert_eq!(windows, expected_windows);
}

exercise_on_both_backends!(successive_fails_follow_the_backoff_schedule);
