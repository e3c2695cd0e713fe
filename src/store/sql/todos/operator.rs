//! A human's operator actions on todos (`docs/api.md`): cancel one, and
//! retry or cancel in bulk.
//!
//! Each is one guarded `UPDATE … RETURNING` in one transaction with whatever
//! closes the attempts it ends: a batch is applied whole or not at all.

use super::filter::Conditions;
use super::*;

/// What a cancel applies to: a live todo (pending, claimed, or failed and
/// waiting for its retry). A dead letter is already finished.
const CANCELLABLE: &str = LIVE_CONDITION;

/// What a retry applies to: a failed todo (waiting or dead) or a cancelled one.
const RETRYABLE: &str = "state IN ('failed', 'cancelled')";

/// A bulk retry must not give two live todos one idempotency key (the unique
/// index would refuse the whole batch): a todo is skipped while another todo
/// of its endpoint holds its key live, or a newer finished one could be
/// retried with it. Of finished todos sharing a key, only the newest is retried.
const RETRY_KEEPS_KEYS_UNIQUE: &str = "(idempotency_key IS NULL OR NOT EXISTS (\
    SELECT 1 FROM todos o WHERE o.endpoint_id = todos.endpoint_id \
      AND o.idempotency_key = todos.idempotency_key AND o.id <> todos.id \
      AND (o.state IN ('pending', 'claimed', 'delayed') \
           OR (o.state = 'failed' AND o.next_retry_at IS NOT NULL) \
           OR (o.state IN ('failed', 'cancelled') AND o.id > todos.id))))";

/// What a cancel sets: `$1` now, `by` the placeholder of who cancelled.
fn cancel_set(by: &str) -> String {
    format!(
        "state = 'cancelled', cancelled_by = {by}, completed_at = $1, updated_at = $1, \
         lease_expires_at = NULL, lease_token_hash = NULL, next_retry_at = NULL"
    )
}

/// What a retry sets (as `human_retry`): `$1` now.
const RETRY_SET: &str = "state = 'pending', attempt = 0, result = NULL, next_retry_at = NULL, \
    owner = NULL, lease_expires_at = NULL, lease_token_hash = NULL, completed_at = NULL, \
    ring_attempts = 0, last_ringed_at = NULL, cancelled_by = NULL, updated_at = $1";

#[derive(Clone, Copy)]
enum BulkAction {
    Cancel,
    Retry,
}

impl BulkAction {
    /// The action's own guard, re-checked on each row it updates.
    fn guard(self) -> String {
        match self {
            Self::Cancel => CANCELLABLE.to_owned(),
            Self::Retry => format!("{RETRYABLE} AND {RETRY_KEEPS_KEYS_UNIQUE}"),
        }
    }

    /// Refuses a state filter the action can never apply to; without one, a
    /// bulk retry means the failed todos (a cancel was deliberate: retrying
    /// cancelled todos in bulk takes `state=cancelled` or explicit ids).
    fn check_filter(self, filter: &TodoFilter) -> StoreResult<TodoFilter> {
        let mut filter = filter.clone();
        match (self, filter.state) {
            (Self::Cancel, Some(TodoState::Done | TodoState::Cancelled)) => {
                return Err(Invalid::new(
                    "state",
                    "cancel applies to pending, claimed or failed todos",
                )
                .into());
            }
            (Self::Retry, Some(TodoState::Pending | TodoState::Claimed | TodoState::Done)) => {
                return Err(
                    Invalid::new("state", "retry applies to failed or cancelled todos").into(),
                );
            }
            (Self::Retry, None) => filter.state = Some(TodoState::Failed),
            _ => {}
        }
        Ok(filter)
    }
}

impl SqlStore {
    /// A bulk target's filter as the action reads it (`None` for ids),
    /// refused when the action can never apply to it.
    fn bulk_filter(target: &BulkTarget, action: BulkAction) -> StoreResult<Option<TodoFilter>> {
        match target {
            BulkTarget::Ids(ids) => {
                rules::validate_bulk_ids(ids, "ids")?;
                Ok(None)
            }
            BulkTarget::Filter(filter) => Ok(Some(action.check_filter(filter)?)),
        }
    }

    /// Which todos a bulk action applies to, with values bound from `$first`:
    /// the same conditions for the count, the batch and the "more" check.
    fn bulk_conditions(
        &self,
        human_id: &str,
        target: &BulkTarget,
        filter: Option<&TodoFilter>,
        action: BulkAction,
        first: usize,
    ) -> StoreResult<Conditions> {
        let mut c = Conditions::starting_at(first);
        let human = c.bind(human_id.to_owned());
        c.push(format!(
            "endpoint_id IN (SELECT id FROM endpoints WHERE human_id = {human} \
             AND state = 'active')"
        ));
        c.push(action.guard());
        match (target, filter) {
            (BulkTarget::Ids(ids), _) => c.ids(self.dialect, ids),
            (BulkTarget::Filter(_), Some(filter)) => c.filter(self.dialect, filter)?,
            (BulkTarget::Filter(_), None) => {
                return Err(StoreError::internal("a bulk filter was not checked"));
            }
        }
        Ok(c)
    }

    /// How many todos a bulk action would touch now (at most
    /// [`rules::MAX_BULK`]) and whether more match: what the board's
    /// confirmation shows before the action runs.
    pub(super) async fn bulk_count(
        &self,
        human_id: &str,
        target: &BulkTarget,
        retry: bool,
    ) -> StoreResult<BulkCount> {
        let action = if retry {
            BulkAction::Retry
        } else {
            BulkAction::Cancel
        };
        let filter = Self::bulk_filter(target, action)?;
        let conditions = self.bulk_conditions(human_id, target, filter.as_ref(), action, 2)?;
        let sql = format!(
            "SELECT COUNT(*) AS n FROM (SELECT id FROM todos WHERE {} LIMIT $1) counted",
            conditions.joined()
        );
        let mut q = sqlx::query(AssertSqlSafe(sql)).bind(rules::MAX_BULK as i64 + 1);
        for value in &conditions.binds {
            q = q.bind(value.clone());
        }
        let n: i64 = q.fetch_one(self.reader()?).await?.try_get("n")?;
        Ok(BulkCount {
            count: n.min(rules::MAX_BULK as i64),
            more: n > rules::MAX_BULK as i64,
        })
    }

    /// Deletes one todo of the human's for good — its attempts go with it
    /// (`ON DELETE CASCADE`), and its intake event, as retention deletes
    /// them. A claimed todo is refused (`Conflict`): its holder is working
    /// on it; cancel or release it first.
    pub(super) async fn delete_one(&self, human_id: &str, id: &str) -> StoreResult<Todo> {
        let mut tx = self.begin().await?;
        let row = sqlx::query(concat!(
            "DELETE FROM todos WHERE id = $1 AND state <> 'claimed' AND endpoint_id IN ",
            "(SELECT id FROM endpoints WHERE human_id = $2) RETURNING ",
            todo_columns!()
        ))
        .bind(id)
        .bind(human_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            // Only a claimed todo of the human's is refused; anything else is missing.
            let found = sqlx::query(
                "SELECT 1 FROM todos t JOIN endpoints e ON e.id = t.endpoint_id \
                 WHERE t.id = $1 AND e.human_id = $2",
            )
            .bind(id)
            .bind(human_id)
            .fetch_optional(&mut *tx)
            .await?;
            tx.rollback().await?;
            return Err(match found {
                Some(_) => StoreError::Conflict(
                    "the todo is claimed, not pending or finished; cancel or release it first"
                        .to_owned(),
                ),
                None => StoreError::NotFound,
            });
        };
        let todo = rows::todo(&row)?;
        if let Some(event_id) = &todo.event_id {
            // Another todo may name the same event (a redelivery): kept then.
            sqlx::query(
                "DELETE FROM intake_events WHERE id = $1 \
                 AND NOT EXISTS (SELECT 1 FROM todos WHERE event_id = $1)",
            )
            .bind(event_id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(todo)
    }

    /// Cancels one todo of the human's: pending, claimed or waiting for a retry
    /// → `cancelled`, its open attempt (if claimed) closed as `cancelled`.
    pub(super) async fn cancel_one(&self, human_id: &str, id: &str) -> StoreResult<Todo> {
        let now = self.now();
        let mut tx = self.begin().await?;
        let row = sqlx::query(AssertSqlSafe(format!(
            concat!(
                "UPDATE todos SET {set} WHERE id = $4 AND {guard} AND endpoint_id IN ",
                "(SELECT id FROM endpoints WHERE human_id = $3 AND state = 'active') RETURNING ",
                todo_columns!()
            ),
            set = cancel_set("$2"),
            guard = CANCELLABLE,
        )))
        .bind(now.as_millis())
        .bind(format!("human:{human_id}"))
        .bind(human_id)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            let err = Self::human_refusal(
                &mut tx,
                human_id,
                id,
                "pending, claimed or waiting for a retry",
            )
            .await;
            tx.rollback().await?;
            return Err(err);
        };
        let summary = Some((Self::cancelled_by_summary(&mut tx, human_id).await?, false));
        Self::end_lease_and_commit(
            tx,
            &row,
            now,
            Outcome::Cancelled,
            Disposition::Cancelled,
            summary,
        )
        .await
    }

    pub(super) async fn bulk_cancel(
        &self,
        human_id: &str,
        target: &BulkTarget,
    ) -> StoreResult<BulkOutcome> {
        self.bulk(human_id, target, BulkAction::Cancel).await
    }

    pub(super) async fn bulk_retry(
        &self,
        human_id: &str,
        target: &BulkTarget,
    ) -> StoreResult<BulkOutcome> {
        self.bulk(human_id, target, BulkAction::Retry).await
    }

    /// One batch of at most [`rules::MAX_BULK`] todos, oldest first, in one
    /// transaction; `more` says whether others still match.
    async fn bulk(
        &self,
        human_id: &str,
        target: &BulkTarget,
        action: BulkAction,
    ) -> StoreResult<BulkOutcome> {
        // Checked before anything is written.
        let filter = Self::bulk_filter(target, action)?;
        // Which todos the action applies to, with values bound from `$first`.
        let matching = |first: usize| -> StoreResult<Conditions> {
            self.bulk_conditions(human_id, target, filter.as_ref(), action, first)
        };
        let now = self.now();
        // $1 now, $2 the batch size, then the conditions' values.
        let mut conditions = matching(3)?;
        let set = match action {
            BulkAction::Cancel => {
                let by = conditions.bind(format!("human:{human_id}"));
                cancel_set(&by)
            }
            BulkAction::Retry => RETRY_SET.to_owned(),
        };
        // On PostgreSQL the batch's rows are locked in one order (oldest
        // first), so two bulk calls at once queue behind each other instead
        // of deadlocking.
        let sql = format!(
            "UPDATE todos SET {set} WHERE id IN (SELECT id FROM todos WHERE {matching} \
               ORDER BY created_at, id LIMIT $2{lock}) AND {guard} \
             RETURNING id, created_at, attempts_total, attempts_pruned",
            matching = conditions.joined(),
            lock = self.dialect.for_update(),
            guard = action.guard(),
        );
        let mut q = sqlx::query(AssertSqlSafe(sql))
            .bind(now.as_millis())
            .bind(rules::MAX_BULK as i64);
        for value in &conditions.binds {
            q = q.bind(value.clone());
        }
        let mut tx = self.begin().await?;
        let updated = match q.fetch_all(&mut *tx).await {
            Ok(rows) => rows,
            // A concurrent create took a key between the guard and the write.
            Err(e) if is_unique_violation(&e) => {
                tx.rollback().await?;
                return Err(Taken::IdempotencyKey.into());
            }
            Err(e) => return Err(e.into()),
        };
        let mut changed: Vec<(i64, String, i64, i64)> = updated
            .iter()
            .map(|r| {
                Ok((
                    r.try_get("created_at")?,
                    r.try_get("id")?,
                    r.try_get("attempts_total")?,
                    r.try_get("attempts_pruned")?,
                ))
            })
            .collect::<StoreResult<_>>()?;
        changed.sort();
        let ids: Vec<String> = changed.iter().map(|c| c.1.clone()).collect();
        if matches!(action, BulkAction::Cancel) && !ids.is_empty() {
            self.close_cancelled_attempts(&mut tx, human_id, &ids, now)
                .await?;
            for (_, id, total, pruned) in &changed {
                Self::prune_attempts_of(&mut tx, id, *total, *pruned).await?;
            }
        }
        // What changed no longer matches; anything still matching is more.
        let more = match target {
            BulkTarget::Ids(_) => false,
            BulkTarget::Filter(_) => {
                let conditions = matching(1)?;
                let sql = format!("SELECT id FROM todos WHERE {} LIMIT 1", conditions.joined());
                let mut q = sqlx::query(AssertSqlSafe(sql));
                for value in &conditions.binds {
                    q = q.bind(value.clone());
                }
                q.fetch_optional(&mut *tx).await?.is_some()
            }
        };
        tx.commit().await?;
        Ok(BulkOutcome { ids, more })
    }

    /// Closes the open attempts (those of the claimed todos) of a cancelled batch.
    async fn close_cancelled_attempts(
        &self,
        tx: &mut Transaction<'static, Any>,
        human_id: &str,
        ids: &[String],
        now: Timestamp,
    ) -> StoreResult<()> {
        let summary = Self::cancelled_by_summary(tx, human_id).await?;
        let sql = format!(
            "UPDATE todo_attempts SET ended_at = $1, outcome = $2, disposition = $3, \
               summary = $4, summary_truncated = 0 \
             WHERE ended_at IS NULL AND todo_id IN ({})",
            self.dialect.json_text_list(5)
        );
        sqlx::query(AssertSqlSafe(sql))
            .bind(now.as_millis())
            .bind(Outcome::Cancelled.as_str())
            .bind(Disposition::Cancelled.as_str())
            .bind(summary)
            .bind(crate::store::dialect::json_list(ids))
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// The attempt summary that says who cancelled a claimed todo.
    async fn cancelled_by_summary(
        tx: &mut Transaction<'static, Any>,
        human_id: &str,
    ) -> StoreResult<String> {
        let name: Option<String> = sqlx::query("SELECT name FROM humans WHERE id = $1")
            .bind(human_id)
            .fetch_optional(&mut **tx)
            .await?
            .map(|r| r.get(0));
        Ok(match name {
            Some(name) => format!("cancelled by human {name}"),
            None => "cancelled by a human".to_owned(),
        })
    }
}
