//! Writing down each queue's activity (`domain::activity`): what this
//! instance counted since the last flush is added to the stored buckets,
//! and old buckets are pruned. The board's charts read them.

use crate::delivery::Delivery;
use crate::store::StoreResult;

/// Adds what this instance counted since the last flush; on failure it is
/// kept for the next one (bounded in `ActivityRecorder`). How many rows.
pub async fn flush(delivery: &Delivery) -> StoreResult<usize> {
    let rows = delivery.activity().drain();
    if rows.is_empty() {
        return Ok(0);
    }
    match delivery.store().add_queue_activity(&rows).await {
        Ok(()) => Ok(rows.len()),
        Err(e) => {
            delivery.activity().restore(rows);
            Err(e)
        }
    }
}

/// Deletes buckets older than their chart shows.
pub async fn prune(delivery: &Delivery) -> StoreResult<u64> {
    delivery.store().unscoped_prune_queue_activity().await
}
