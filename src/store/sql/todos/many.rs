//! An agent's work in bulk: `complete_many` (one transaction, an answer per
//! id) and `queue_summary` (one aggregate read of the live todos).

use super::*;

/// `queue_summary`'s one read: `$1` the endpoint, `$2` the groups kept per
/// dimension, `$3` the queue when named. Rows are `(dim, k, pending,
/// claimed, held, oldest, other)`: one per queue with live todos, then per
/// dimension (`kind`, `source`, `sender`) its `$2` largest groups of pending
/// todos and one `other = 1` row summing the rest. Counts only: no title,
/// no payload, and the intake event's body is never read. The live todos
/// are read state by state from their partial indexes (on SQLite named,
/// see [`sqlite_live_index`]), never the endpoint's history.
fn queue_summary_sql(dialect: Dialect, queue_named: bool) -> String {
    let queue = if queue_named { " AND queue = $3" } else { "" };
    let pending = listing_source(dialect, Some(TodoState::Pending), queue_named);
    let claimed = listing_source(dialect, Some(TodoState::Claimed), queue_named);
    let retrying = dialect.todos_by_index("todos_retry_by_endpoint");
    let columns = "queue, kind, source, state, created_at, event_id";
    format!(
        "WITH live AS (\
           SELECT {columns} FROM {pending} WHERE endpoint_id = $1 AND state = 'pending'{queue} \
           UNION ALL SELECT {columns} FROM {claimed} \
             WHERE endpoint_id = $1 AND state = 'claimed'{queue} \
           UNION ALL SELECT {columns} FROM {retrying} WHERE endpoint_id = $1 \
             AND state = 'failed' AND next_retry_at IS NOT NULL{queue}), \
         grouped AS (\
           SELECT 'kind' AS dim, kind AS k, COUNT(*) AS n FROM live \
             WHERE state = 'pending' GROUP BY kind \
           UNION ALL SELECT 'source', source, COUNT(*) FROM live \
             WHERE state = 'pending' GROUP BY source \
           UNION ALL SELECT 'sender', ev.actor, COUNT(*) FROM live l \
             LEFT JOIN intake_events ev ON ev.id = l.event_id \
             WHERE l.state = 'pending' GROUP BY ev.actor), \
         ranked AS (SELECT dim, k, n, ROW_NUMBER() OVER \
           (PARTITION BY dim ORDER BY n DESC, COALESCE(k, '') ASC) AS rn FROM grouped) \
         SELECT 'queue' AS dim, queue AS k, \
           CAST(SUM(CASE WHEN state = 'pending' THEN 1 ELSE 0 END) AS BIGINT) AS pending, \
           CAST(SUM(CASE WHEN state = 'claimed' THEN 1 ELSE 0 END) AS BIGINT) AS claimed, \
           CAST(SUM(CASE WHEN state = 'failed' THEN 1 ELSE 0 END) AS BIGINT) AS held, \
           MIN(CASE WHEN state = 'pending' THEN created_at END) AS oldest, \
           CAST(0 AS BIGINT) AS other FROM live GROUP BY queue \
         UNION ALL SELECT dim, k, CAST(n AS BIGINT), CAST(0 AS BIGINT), CAST(0 AS BIGINT), \
           CAST(NULL AS BIGINT), CAST(0 AS BIGINT) FROM ranked WHERE rn <= $2 \
         UNION ALL SELECT dim, NULL, CAST(SUM(n) AS BIGINT), CAST(0 AS BIGINT), \
           CAST(0 AS BIGINT), CAST(NULL AS BIGINT), CAST(1 AS BIGINT) FROM ranked \
           WHERE rn > $2 GROUP BY dim"
    )
}

impl SqlStore {
    pub(super) async fn complete_each(
        &self,
        caller: &Caller,
        ids: &[String],
        finish: Finish,
    ) -> StoreResult<Vec<StoreResult<Todo>>> {
        rules::validate_complete_many_ids(ids)?;
        let result = encode_result(finish.result.as_ref())?;
        let summary = finish.summary.as_deref().map(rules::clip_summary);
        let token_hash = finish.lease_token.as_deref().map(sha256_hex);
        let now = self.now();
        let mut tx = self.begin().await?;
        // Rows are locked in id order, whatever order the caller gave, so
        // that two calls over the same todos never wait on each other in a
        // cycle (PostgreSQL would fail one as a deadlock); answered in the
        // caller's order.
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by(|&a, &b| ids[a].cmp(&ids[b]));
        let mut answers: Vec<Option<StoreResult<Todo>>> = ids.iter().map(|_| None).collect();
        for i in order {
            let id = &ids[i];
            // `complete`'s own statement and its attempt's close, per id.
            let row = sqlx::query(AssertSqlSafe(statements::COMPLETE.as_str()))
                .bind(result.clone())
                .bind(now.as_millis())
                .bind(id)
                .bind(&caller.endpoint_id)
                .bind(caller.owner())
                .bind(token_hash.clone())
                .fetch_optional(&mut *tx)
                .await?;
            let Some(row) = row else {
                // A guarded update that matched nothing changed nothing:
                // the transaction goes on for the other ids.
                match Self::refusal(&mut tx, caller, id, Refused::Holder, now).await {
                    refused @ (StoreError::NotFound | StoreError::Conflict(_)) => {
                        answers[i] = Some(Err(refused));
                        continue;
                    }
                    other => return Err(other),
                }
            };
            let mut todo = rows::todo(&row)?;
            Self::close_open_attempt(
                &mut tx,
                &todo.id,
                now,
                Outcome::Completed,
                Disposition::Done,
                summary.clone(),
            )
            .await?;
            todo.attempts_pruned += Self::prune_attempts(&mut tx, &todo).await?;
            answers[i] = Some(Ok(todo));
        }
        tx.commit().await?;
        Ok(answers.into_iter().flatten().collect())
    }

    pub(super) async fn summarise_queues(
        &self,
        caller: &Caller,
        queue: Option<&str>,
        top: i64,
    ) -> StoreResult<QueueSummary> {
        let sql = queue_summary_sql(self.dialect, queue.is_some());
        let mut q = sqlx::query(AssertSqlSafe(sql))
            .bind(caller.endpoint_id.clone())
            .bind(top.max(1));
        if let Some(queue) = queue {
            q = q.bind(queue.to_owned());
        }
        let rows = q.fetch_all(self.reader()?).await?;
        let mut summary = QueueSummary::default();
        for row in &rows {
            let dim: String = row.try_get("dim")?;
            let key: Option<String> = row.try_get("k")?;
            let pending: i64 = row.try_get("pending")?;
            let other = row.try_get::<i64, _>("other")? == 1;
            let groups = match dim.as_str() {
                "queue" => {
                    summary.queues.push(QueueCounts {
                        queue: key.unwrap_or_default(),
                        pending,
                        claimed: row.try_get("claimed")?,
                        held: row.try_get("held")?,
                        oldest_pending_at: row
                            .try_get::<Option<i64>, _>("oldest")?
                            .map(Timestamp::from_millis),
                    });
                    continue;
                }
                "kind" => &mut summary.pending_by_kind,
                "source" => &mut summary.pending_by_source,
                _ => &mut summary.pending_by_sender,
            };
            if other {
                groups.other = pending;
            } else {
                groups.top.push((key, pending));
            }
        }
        summary.queues.sort_by(|a, b| a.queue.cmp(&b.queue));
        for groups in [
            &mut summary.pending_by_kind,
            &mut summary.pending_by_source,
            &mut summary.pending_by_sender,
        ] {
            groups
                .top
                .sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        }
        Ok(summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sql::sqlite_plan;

    #[test]
    fn on_sqlite_the_summary_reads_the_live_todos_not_the_history() {
        for named in [false, true] {
            let plan = sqlite_plan(&queue_summary_sql(Dialect::Sqlite, named));
            let uses = |index: &str| plan.iter().any(|step| step.contains(index));
            let pending = if named {
                "todos_pending_by_queue"
            } else {
                "todos_pending_by_endpoint"
            };
            for index in [
                pending,
                "todos_claimed_by_endpoint",
                "todos_retry_by_endpoint",
            ] {
                assert!(uses(index), "queue named {named}, {index}: {plan:#?}");
            }
            assert!(
                !uses("todos_by_endpoint_created") && !uses("SCAN todos"),
                "queue named {named} walks the history: {plan:#?}"
            );
        }
    }
}
