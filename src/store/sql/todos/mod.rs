//! The todo lifecycle (`docs/queue.md`): create with dedup, claims, the holder's
//! verbs, and a human's retry and release.
//!
//! Every transition is a guarded `UPDATE … RETURNING`: when it matches no row
//! nothing happened, and [`SqlStore::refusal`] tells the caller whether the
//! todo exists in its scope (`conflict`) or not (`not_found`).
//!
//! [`TodoStore`] is implemented here, one method per operation; the pieces
//! they share live beside it: `create` (the insert with dedup), `claim` (the
//! claim statement), `attempts` (closing and pruning attempt history) and
//! `refusal` (why a guarded transition matched nothing).

mod attempts;
mod chained;
mod claim;
mod create;
mod filter;
mod many;
mod operator;
mod refusal;

use claim::ClaimTarget;
use refusal::{Holding, Refused};

use super::paging::Cursor;
use super::sqlite::transitions as lane;
use super::statements::{self, ClaimScope, Ending};
use super::{Specialised, SqlStore, paging};
use crate::domain::backoff::after_failure;
use crate::domain::ids::sha256_hex;
use crate::domain::lease::resolve_lease_seconds;
use crate::domain::todo::{self as rules, Disposition, Outcome, TodoState};
use crate::domain::{Invalid, Timestamp};
use crate::mint::{new_id, new_todo_id, random_token};
use crate::store::dialect::Dialect;
use crate::store::error::is_unique_violation;
use crate::store::model::*;
use crate::store::prelude::*;
use crate::store::rows::{attempt_columns, todo_columns};
use crate::store::{StoreError, StoreResult, Taken, rows};
use async_trait::async_trait;
use sqlx::{Any, AssertSqlSafe, Row, Transaction};

/// On SQLite, the index a listing of `state` names with `INDEXED BY`, when
/// `state` is a live one. SQLite has no statistics (the product never runs
/// ANALYZE) and serves a listing's `ORDER BY` from the listings' index,
/// walking the endpoints' whole history for the few todos in a live state
/// (an agent's claimed todos: 132 ms against 400 000 finished ones; a
/// human's across three endpoints: 90 ms against 300 000). Finished states
/// are most of the history, and the listings' index is the right one for them.
fn sqlite_live_index(state: Option<TodoState>, queue_named: bool) -> Option<&'static str> {
    match (state?, queue_named) {
        (TodoState::Pending, false) => Some("todos_pending_by_endpoint"),
        (TodoState::Pending, true) => Some("todos_pending_by_queue"),
        (TodoState::Claimed, _) => Some("todos_claimed_by_endpoint"),
        _ => None,
    }
}

/// `todos`, naming the live state's index on SQLite ([`sqlite_live_index`]).
fn listing_source(dialect: Dialect, state: Option<TodoState>, queue_named: bool) -> String {
    match sqlite_live_index(state, queue_named) {
        Some(index) => dialect.todos_by_index(index),
        None => "todos".to_owned(),
    }
}

/// An agent's listing: `$1` the endpoint, `$2` the limit, `$3` the queue
/// when named. The state, one of a closed set, is written as a literal so
/// that the planner can match it to a partial index's predicate (a bound
/// value cannot).
fn list_todos_sql(dialect: Dialect, queue_named: bool, state: Option<TodoState>) -> String {
    let from = listing_source(dialect, state, queue_named);
    let mut sql = format!(
        concat!(
            "SELECT ",
            todo_columns!(),
            " FROM {} WHERE endpoint_id = $1"
        ),
        from
    );
    if queue_named {
        sql.push_str(" AND queue = $3");
    }
    if let Some(state) = state {
        sql.push_str(&format!(" AND state = '{}'", state.as_str()));
    }
    sql.push_str(" ORDER BY created_at DESC, id DESC LIMIT $2");
    sql
}

/// A human's listing across their endpoints, newest first: `$1` the human,
/// `$2` and `$3` the cursor, `$4` the limit, then the filter's values
/// (returned beside the text, in order).
///
/// No index gives the order across several endpoints: the listings' index
/// is ordered within each. PostgreSQL would read every todo of the human's
/// endpoints and sort them for each page (a parallel sequential scan and a
/// top-N sort, 65 ms over 300 000 todos — and the board's live fingerprint
/// reads the newest todo every two seconds per open page), so it takes the
/// page's worth from each endpoint's end of the index and sorts only those
/// (0.6 ms for 10 endpoints; the cost grows with the human's endpoints, not
/// their history). SQLite does that by itself for an `IN` list ordered by
/// the index's next column with a `LIMIT`: each endpoint's range stops once
/// it has filled the page.
fn human_list_todos_sql(
    dialect: Dialect,
    filter: &TodoFilter,
) -> StoreResult<(String, Vec<String>)> {
    let mut conditions = filter::Conditions::starting_at(5);
    let from = listing_source(dialect, filter.state, filter.queue.is_some());
    let sql = match dialect {
        Dialect::Postgres => {
            conditions.push("(created_at, id) < ($2, $3)");
            conditions.filter(dialect, filter)?;
            // Filtered to one endpoint (the board's endpoint page), only
            // that endpoint is visited, not every one of the human's.
            let only = match &filter.endpoint_id {
                Some(endpoint_id) => {
                    format!(" AND e.id = {}", conditions.bind(endpoint_id.clone()))
                }
                None => String::new(),
            };
            format!(
                concat!(
                    "SELECT t.* FROM endpoints e CROSS JOIN LATERAL (SELECT ",
                    todo_columns!(),
                    " FROM {} WHERE endpoint_id = e.id AND {} ",
                    "ORDER BY created_at DESC, id DESC LIMIT $4) t ",
                    "WHERE e.human_id = $1{} ORDER BY t.created_at DESC, t.id DESC LIMIT $4"
                ),
                from,
                conditions.joined(),
                only
            )
        }
        Dialect::Sqlite => {
            conditions.push("endpoint_id IN (SELECT id FROM endpoints WHERE human_id = $1)");
            conditions.push("(created_at < $2 OR (created_at = $2 AND id < $3))");
            conditions.filter(dialect, filter)?;
            format!(
                concat!(
                    "SELECT ",
                    todo_columns!(),
                    " FROM {} WHERE {} ORDER BY created_at DESC, id DESC LIMIT $4"
                ),
                from,
                conditions.joined()
            )
        }
    };
    Ok((sql, conditions.binds))
}

/// A live todo: not finished (the `todos_live_key` index's predicate, word
/// for word, so that SQLite matches the index to it; comparisons, not an
/// `IN` list, which SQLite's row checks evaluate with a temporary b-tree:
/// SQLite migration 0028).
const LIVE_CONDITION: &str = "(state = 'pending' OR state = 'claimed' OR state = 'delayed' \
     OR (state = 'failed' AND next_retry_at IS NOT NULL))";

fn encode_result(result: Option<&serde_json::Value>) -> StoreResult<Option<String>> {
    match result {
        None => Ok(None),
        Some(value) => {
            let text = value.to_string();
            if text.len() > rules::MAX_PAYLOAD_BYTES {
                return Err(Invalid::new(
                    "result",
                    format!(
                        "is {} bytes of JSON; the limit is {}",
                        text.len(),
                        rules::MAX_PAYLOAD_BYTES
                    ),
                )
                .into());
            }
            Ok(Some(text))
        }
    }
}

/// Checks a todo to create; returns its encoded payload and its attempt budget.
pub(in crate::store::sql) fn checked(new: &NewTodo) -> StoreResult<(Option<String>, i64)> {
    rules::validate_queue_name(&new.queue, "queue")?;
    rules::validate_title(&new.title)?;
    if let Some(kind) = &new.kind {
        rules::validate_label(kind, "kind")?;
    }
    if let Some(source) = &new.source {
        rules::validate_label(source, "source")?;
    }
    let payload = new
        .payload
        .as_ref()
        .map(rules::encode_payload)
        .transpose()?;
    if let Some(key) = &new.idempotency_key {
        rules::validate_idempotency_key(key)?;
    }
    let max_attempts = new.max_attempts.unwrap_or(rules::DEFAULT_MAX_ATTEMPTS);
    rules::validate_max_attempts(max_attempts)?;
    rules::validate_priority(new.priority)?;
    Ok((payload, max_attempts))
}

impl SqlStore {
    /// `complete`, `fail` or `release` on the agent loop's fast path: PostgreSQL's one
    /// statement (`postgres/transitions.rs`) or SQLite's writer lane. `Err`
    /// with what the transaction path binds without one, or when its guard
    /// matched nothing (the transaction path then re-checks and says why).
    async fn finish_fast(
        &self,
        caller: &Caller,
        id: &str,
        ending: Ending,
        finish: &Finish,
    ) -> StoreResult<Result<Todo, FinishBinds>> {
        let binds = FinishBinds::of(finish, self.now())?;
        let finished = self
            .finish_specialised(caller, id, ending, finish, &binds)
            .await?;
        Ok(finished.ok_or(binds))
    }

    /// [`Self::finish_fast`] on the backend's specialisation: `None` without
    /// one, or when its guard matched nothing.
    async fn finish_specialised(
        &self,
        caller: &Caller,
        id: &str,
        ending: Ending,
        finish: &Finish,
        binds: &FinishBinds,
    ) -> StoreResult<Option<Todo>> {
        let FinishBinds {
            result,
            summary,
            now,
        } = binds;
        let now = *now;
        match self.specialised() {
            Specialised::Postgres => {
                let hash = finish.lease_token.as_deref().map(sha256_hex);
                let (result, summary) = (result.clone(), summary.clone());
                self.finish_at_once(ending, caller, id, result, hash, summary, now)
                    .await
            }
            Specialised::SqliteLane(writer) => {
                let finish = lane::LaneFinish {
                    holder: lane::LaneHolder::new(caller, id, finish.lease_token.as_deref()),
                    result: result.clone(),
                    summary: summary.clone(),
                    now,
                };
                match ending {
                    Ending::Complete => writer.run(move |conn| lane::complete(conn, finish)).await,
                    Ending::Fail => writer.run(move |conn| lane::fail(conn, finish)).await,
                    Ending::Release => {
                        let lane::LaneFinish {
                            holder,
                            summary,
                            now,
                            ..
                        } = finish;
                        writer
                            .run(move |conn| lane::release(conn, holder, summary, now))
                            .await
                    }
                }
            }
            Specialised::None => Ok(None),
        }
    }

    /// `create_todo`, with a delivery written in the todo's transaction.
    pub(crate) async fn create_todo_writing(
        &self,
        new: NewTodo,
        write: Option<&DeliveryWrite>,
    ) -> StoreResult<(CreatedTodo, Option<DeliveryRecord>)> {
        let (payload, max_attempts) = checked(&new)?;

        // A dedup hit on a todo that finishes between our insert and our read
        // frees the key; trying again then creates. Twice is plenty.
        for _ in 0..3 {
            if let Some(outcome) = self
                .try_insert_todo(&new, payload.as_deref(), max_attempts, write)
                .await?
            {
                return Ok(outcome);
            }
        }
        Err(StoreError::conflict(
            "the idempotency key is contended; try again",
        ))
    }
}

/// A named queue a claim may look in: a valid name, in the caller's scope.
fn check_claim_queue(caller: &Caller, queue: Option<&str>) -> StoreResult<()> {
    let Some(queue) = queue else {
        return Ok(());
    };
    rules::validate_queue_name(queue, "queue")?;
    if !caller.queues.iter().any(|q| q == queue) {
        return Err(StoreError::Forbidden(format!(
            "queue {queue:?} is not in this endpoint's scope"
        )));
    }
    Ok(())
}

/// What `complete`, `fail` and `release` bind, on their fast path and on the
/// transaction path alike.
struct FinishBinds {
    /// The finish's result, encoded.
    result: Option<String>,
    /// The finish's summary, clipped.
    summary: Option<(String, bool)>,
    now: Timestamp,
}

impl FinishBinds {
    fn of(finish: &Finish, now: Timestamp) -> StoreResult<Self> {
        Ok(Self {
            result: encode_result(finish.result.as_ref())?,
            summary: finish.summary.as_deref().map(rules::clip_summary),
            now,
        })
    }
}

#[async_trait]
impl TodoStore for SqlStore {
    async fn create_todo(&self, new: NewTodo) -> StoreResult<CreatedTodo> {
        Ok(self.create_todo_writing(new, None).await?.0)
    }

    async fn get_todo(&self, caller: &Caller, id: &str) -> StoreResult<Todo> {
        let row = sqlx::query(concat!(
            "SELECT ",
            todo_columns!(),
            " FROM todos WHERE id = $1 AND endpoint_id = $2"
        ))
        .bind(id)
        .bind(&caller.endpoint_id)
        .fetch_optional(self.reader()?)
        .await?;
        match row {
            Some(row) => rows::todo(&row),
            None => Err(StoreError::NotFound),
        }
    }

    async fn list_attempts(
        &self,
        caller: &Caller,
        todo_id: &str,
        limit: i64,
    ) -> StoreResult<Vec<Attempt>> {
        // Scoped through the todo: a foreign todo's history reads as missing.
        self.get_todo(caller, todo_id).await?;
        let rows = sqlx::query(concat!(
            "SELECT ",
            attempt_columns!(),
            " FROM todo_attempts WHERE todo_id = $1 ORDER BY seq DESC LIMIT $2"
        ))
        .bind(todo_id)
        .bind(limit.clamp(1, rules::KEPT_ATTEMPTS))
        .fetch_all(self.reader()?)
        .await?;
        rows.iter().map(rows::attempt).collect()
    }

    async fn claim(&self, caller: &Caller, id: &str, opts: ClaimOptions) -> StoreResult<Claimed> {
        match self
            .claim_target(caller, ClaimTarget::ById(id), opts)
            .await?
        {
            Some(claimed) => Ok(claimed),
            None => Err(StoreError::internal("a claim by id returned nothing")),
        }
    }

    async fn claim_next(
        &self,
        caller: &Caller,
        queue: Option<&str>,
        opts: ClaimOptions,
    ) -> StoreResult<Option<Claimed>> {
        check_claim_queue(caller, queue)?;
        self.claim_target(caller, ClaimTarget::Oldest(queue), opts)
            .await
    }

    async fn heartbeat(
        &self,
        caller: &Caller,
        id: &str,
        opts: HeartbeatOptions,
    ) -> StoreResult<Todo> {
        // A bare heartbeat resets to the endpoint's default, not to what the claim asked.
        let lease_secs =
            resolve_lease_seconds(opts.lease_ttl_seconds, caller.default_lease_ttl_seconds)?;
        let note = opts.note.as_deref().map(rules::clean_note);
        let now = self.now();
        if let Specialised::SqliteLane(writer) = self.specialised() {
            let beat = lane::LaneHeartbeat {
                holder: lane::LaneHolder::new(caller, id, opts.lease_token.as_deref()),
                note: note.clone(),
                now,
                expires: now.add_secs(lease_secs),
            };
            if let Some(todo) = writer.run(move |conn| lane::heartbeat(conn, beat)).await? {
                return Ok(todo);
            }
            // Nothing matched: the transaction below re-checks and says why.
        }
        let holding = Holding::new(caller, id, opts.lease_token.as_deref(), now);
        let beat = sqlx::query(AssertSqlSafe(statements::HEARTBEAT.as_str()))
            .bind(now.add_secs(lease_secs).as_millis())
            .bind(now.as_millis())
            .bind(note.clone());
        let (mut tx, row) = Self::held_row(self.begin().await?, beat, &holding).await?;
        sqlx::query(statements::HEARTBEAT_ATTEMPT)
            .bind(now.as_millis())
            .bind(note.clone())
            .bind(id)
            .execute(&mut *tx)
            .await?;
        if let Some(note) = &note {
            sqlx::query(statements::ENDPOINT_NOTE)
                .bind(note)
                .bind(now.as_millis())
                .bind(&caller.endpoint_id)
                .execute(&mut *tx)
                .await?;
        }
        let todo = rows::todo(&row)?;
        tx.commit().await?;
        Ok(todo)
    }

    async fn complete(&self, caller: &Caller, id: &str, finish: Finish) -> StoreResult<Todo> {
        let fast = self
            .finish_fast(caller, id, Ending::Complete, &finish)
            .await?;
        // Nothing matched: the transaction below re-checks and says why.
        let FinishBinds {
            result,
            summary,
            now,
        } = match fast {
            Ok(todo) => return Ok(todo),
            Err(binds) => binds,
        };
        let holding = Holding::new(caller, id, finish.lease_token.as_deref(), now);
        let complete = sqlx::query(AssertSqlSafe(statements::COMPLETE.as_str()))
            .bind(result)
            .bind(now.as_millis());
        let (tx, row) = Self::held_row(self.begin().await?, complete, &holding).await?;
        Self::end_lease_and_commit(
            tx,
            &row,
            now,
            Outcome::Completed,
            Disposition::Done,
            summary,
        )
        .await
    }

    async fn complete_then_claim_next(
        &self,
        caller: &Caller,
        id: &str,
        finish: Finish,
        queue: Option<&str>,
        opts: ClaimOptions,
    ) -> StoreResult<(Todo, Option<Claimed>)> {
        self.complete_then_claim(caller, id, finish, queue, opts)
            .await
    }

    async fn fail(&self, caller: &Caller, id: &str, finish: Finish) -> StoreResult<Todo> {
        let fast = self.finish_fast(caller, id, Ending::Fail, &finish).await?;
        // Nothing matched: the transaction below re-checks and says why.
        let FinishBinds {
            result,
            summary,
            now,
        } = match fast {
            Ok(todo) => return Ok(todo),
            Err(binds) => binds,
        };
        let holding = Holding::new(caller, id, finish.lease_token.as_deref(), now);
        // Read the attempt under the row lock: the backoff depends on it.
        let read = sqlx::query(AssertSqlSafe(format!(
            "{}{}",
            statements::FAIL_HELD.as_str(),
            self.dialect.for_update()
        )));
        let (mut tx, held) = Self::held_row(self.begin().await?, read, &holding).await?;
        let after = after_failure(held.get("attempt"), held.get("max_attempts"), now);
        let row = sqlx::query(statements::FAIL)
            .bind(result)
            .bind(after.next_retry_at().map(Timestamp::as_millis))
            .bind(after.completed_at(now).map(Timestamp::as_millis))
            .bind(now.as_millis())
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
        Self::end_lease_and_commit(tx, &row, now, Outcome::Failed, after.disposition(), summary)
            .await
    }

    async fn release(&self, caller: &Caller, id: &str, opts: ReleaseOptions) -> StoreResult<Todo> {
        let finish = Finish {
            result: None,
            summary: opts.summary,
            lease_token: opts.lease_token,
        };
        let fast = self
            .finish_fast(caller, id, Ending::Release, &finish)
            .await?;
        // Nothing matched: the transaction below re-checks and says why.
        let FinishBinds { summary, now, .. } = match fast {
            Ok(todo) => return Ok(todo),
            Err(binds) => binds,
        };
        let holding = Holding::new(caller, id, finish.lease_token.as_deref(), now);
        let release =
            sqlx::query(AssertSqlSafe(statements::RELEASE.as_str())).bind(now.as_millis());
        let (tx, row) = Self::held_row(self.begin().await?, release, &holding).await?;
        Self::end_lease_and_commit(
            tx,
            &row,
            now,
            Outcome::Released,
            Disposition::Requeued,
            summary,
        )
        .await
    }

    async fn complete_many(
        &self,
        caller: &Caller,
        ids: &[String],
        finish: Finish,
    ) -> StoreResult<Vec<StoreResult<Todo>>> {
        self.complete_each(caller, ids, finish).await
    }

    async fn queue_summary(
        &self,
        caller: &Caller,
        queue: Option<&str>,
        top: i64,
    ) -> StoreResult<QueueSummary> {
        if let Some(queue) = queue {
            rules::validate_queue_name(queue, "queue")?;
            if !caller.queues.iter().any(|q| q == queue) {
                return Err(StoreError::Forbidden(format!(
                    "queue {queue:?} is not in this endpoint's scope"
                )));
            }
        }
        self.summarise_queues(caller, queue, top).await
    }

    async fn human_retry(&self, human_id: &str, id: &str) -> StoreResult<Todo> {
        let now = self.now();
        let mut tx = self.begin().await?;
        let updated = sqlx::query(concat!(
            "UPDATE todos SET state = 'pending', attempt = 0, result = NULL, ",
            "next_retry_at = NULL, owner = NULL, lease_expires_at = NULL, ",
            "lease_token_hash = NULL, completed_at = NULL, ring_attempts = 0, ",
            "last_ringed_at = NULL, cancelled_by = NULL, updated_at = $1 ",
            "WHERE id = $2 AND state IN ('failed', 'cancelled') AND endpoint_id IN ",
            "(SELECT id FROM endpoints WHERE human_id = $3 AND state = 'active') RETURNING ",
            todo_columns!()
        ))
        .bind(now.as_millis())
        .bind(id)
        .bind(human_id)
        .fetch_optional(&mut *tx)
        .await;
        let row = match updated {
            Ok(row) => row,
            Err(e) if is_unique_violation(&e) => {
                tx.rollback().await?;
                return Err(Taken::IdempotencyKey.into());
            }
            Err(e) => return Err(e.into()),
        };
        let Some(row) = row else {
            let err = Self::human_refusal(&mut tx, human_id, id, "failed or cancelled").await;
            tx.rollback().await?;
            return Err(err);
        };
        let todo = rows::todo(&row)?;
        tx.commit().await?;
        Ok(todo)
    }

    async fn human_set_priority(
        &self,
        human_id: &str,
        id: &str,
        priority: i64,
    ) -> StoreResult<Todo> {
        rules::validate_priority(priority)?;
        let mut tx = self.begin().await?;
        let row = sqlx::query(concat!(
            "UPDATE todos SET priority = $1, updated_at = $2 ",
            "WHERE id = $3 AND state IN ('pending', 'claimed', 'failed', 'delayed') AND endpoint_id IN ",
            "(SELECT id FROM endpoints WHERE human_id = $4 AND state = 'active') RETURNING ",
            todo_columns!()
        ))
        .bind(priority)
        .bind(self.now().as_millis())
        .bind(id)
        .bind(human_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            let err = Self::human_refusal(&mut tx, human_id, id, "live").await;
            tx.rollback().await?;
            return Err(err);
        };
        let todo = rows::todo(&row)?;
        tx.commit().await?;
        Ok(todo)
    }

    async fn human_release(&self, human_id: &str, id: &str) -> StoreResult<Todo> {
        let now = self.now();
        let mut tx = self.begin().await?;
        let row = sqlx::query(concat!(
            "UPDATE todos SET state = 'pending', owner = NULL, lease_expires_at = NULL, ",
            "lease_token_hash = NULL, updated_at = $1 ",
            "WHERE id = $2 AND state = 'claimed' AND endpoint_id IN ",
            "(SELECT id FROM endpoints WHERE human_id = $3 AND state = 'active') RETURNING ",
            todo_columns!()
        ))
        .bind(now.as_millis())
        .bind(id)
        .bind(human_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            let err = Self::human_refusal(&mut tx, human_id, id, "claimed").await;
            tx.rollback().await?;
            return Err(err);
        };
        let summary = Some(("released by a human".to_owned(), false));
        Self::end_lease_and_commit(
            tx,
            &row,
            now,
            Outcome::Released,
            Disposition::Requeued,
            summary,
        )
        .await
    }

    async fn human_cancel(&self, human_id: &str, id: &str) -> StoreResult<Todo> {
        self.cancel_one(human_id, id).await
    }

    async fn human_bulk_count(
        &self,
        human_id: &str,
        target: &BulkTarget,
        retry: bool,
    ) -> StoreResult<BulkCount> {
        self.bulk_count(human_id, target, retry).await
    }

    async fn human_delete_todo(&self, human_id: &str, id: &str) -> StoreResult<Todo> {
        self.delete_one(human_id, id).await
    }

    async fn human_bulk_cancel(
        &self,
        human_id: &str,
        target: &BulkTarget,
    ) -> StoreResult<BulkOutcome> {
        self.bulk_cancel(human_id, target).await
    }

    async fn human_bulk_retry(
        &self,
        human_id: &str,
        target: &BulkTarget,
    ) -> StoreResult<BulkOutcome> {
        self.bulk_retry(human_id, target).await
    }

    async fn human_list_todos(
        &self,
        human_id: &str,
        filter: &TodoFilter,
        page: &PageRequest,
    ) -> StoreResult<Page<Todo>> {
        let (limit, cursor) = paging::decode(page)?;
        let (sql, binds) = human_list_todos_sql(self.dialect, filter)?;
        let mut q = sqlx::query(AssertSqlSafe(sql))
            .bind(human_id)
            .bind(cursor.created_at)
            .bind(cursor.id.clone())
            .bind(limit + 1);
        for value in binds {
            q = q.bind(value);
        }
        let rows = q.fetch_all(self.reader()?).await?;
        let items = rows
            .iter()
            .map(rows::todo)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok(paging::page(items, limit, |t| {
            Cursor::new(t.created_at, &t.id)
        }))
    }

    async fn human_get_todo(&self, human_id: &str, id: &str) -> StoreResult<Todo> {
        let row = sqlx::query(concat!(
            "SELECT ",
            todo_columns!(),
            " FROM todos WHERE id = $1 AND endpoint_id IN \
              (SELECT id FROM endpoints WHERE human_id = $2)"
        ))
        .bind(id)
        .bind(human_id)
        .fetch_optional(self.reader()?)
        .await?;
        row.as_ref()
            .map(rows::todo)
            .unwrap_or(Err(StoreError::NotFound))
    }

    async fn human_list_attempts(
        &self,
        human_id: &str,
        todo_id: &str,
        limit: i64,
    ) -> StoreResult<Vec<Attempt>> {
        self.human_get_todo(human_id, todo_id).await?;
        let rows = sqlx::query(concat!(
            "SELECT ",
            attempt_columns!(),
            " FROM todo_attempts WHERE todo_id = $1 ORDER BY seq DESC LIMIT $2"
        ))
        .bind(todo_id)
        .bind(limit.clamp(1, crate::domain::todo::KEPT_ATTEMPTS))
        .fetch_all(self.reader()?)
        .await?;
        rows.iter().map(rows::attempt).collect()
    }

    async fn human_last_attempts(
        &self,
        human_id: &str,
        todo_ids: &[String],
    ) -> StoreResult<std::collections::HashMap<String, Attempt>> {
        let mut out = std::collections::HashMap::new();
        if todo_ids.is_empty() {
            return Ok(out);
        }
        let ids: Vec<String> = todo_ids.iter().take(200).cloned().collect();
        let sql = format!(
            concat!(
                "SELECT todo_id AS last_of, ",
                attempt_columns!(),
                " FROM todo_attempts WHERE todo_id IN ({ids}) AND ended_at IS NOT NULL \
                  AND seq = (SELECT MAX(b.seq) FROM todo_attempts b \
                    WHERE b.todo_id = todo_attempts.todo_id AND b.ended_at IS NOT NULL) \
                  AND todo_id IN (SELECT t.id FROM todos t JOIN endpoints e \
                    ON e.id = t.endpoint_id WHERE e.human_id = $2)"
            ),
            ids = self.dialect.json_text_list(1)
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(crate::store::dialect::json_list(&ids))
            .bind(human_id)
            .fetch_all(self.reader()?)
            .await?;
        for row in &rows {
            let id: String = row.try_get("last_of")?;
            out.insert(id, rows::attempt(row)?);
        }
        Ok(out)
    }

    async fn human_get_intake_event(
        &self,
        human_id: &str,
        todo_id: &str,
    ) -> StoreResult<IntakeEvent> {
        let row = sqlx::query(
            "SELECT ev.id, ev.endpoint_id, ev.webhook_id, ev.trust_mode, ev.actor, \
               ev.received_at, ev.headers, ev.content_type, ev.body, ev.body_size \
             FROM todos t JOIN intake_events ev ON ev.id = t.event_id \
             JOIN endpoints e ON e.id = t.endpoint_id \
             WHERE t.id = $1 AND e.human_id = $2",
        )
        .bind(todo_id)
        .bind(human_id)
        .fetch_optional(self.reader()?)
        .await?;
        row.as_ref()
            .map(rows::intake_event)
            .unwrap_or(Err(StoreError::NotFound))
    }

    /// Listing for an agent: its endpoint's todos, newest first.
    async fn list_todos(
        &self,
        caller: &Caller,
        queue: Option<&str>,
        state: Option<TodoState>,
        limit: i64,
    ) -> StoreResult<Vec<Todo>> {
        let sql = list_todos_sql(self.dialect, queue.is_some(), state);
        let mut q = sqlx::query(AssertSqlSafe(sql))
            .bind(caller.endpoint_id.clone())
            .bind(limit.clamp(1, paging::MAX_LIMIT));
        if let Some(queue) = queue {
            q = q.bind(queue.to_owned());
        }
        let rows = q.fetch_all(self.reader()?).await?;
        rows.iter().map(rows::todo).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sql::sqlite_plan;

    #[test]
    fn on_sqlite_a_takeover_reads_the_live_claims_and_retries_not_the_history() {
        for filter in [ClaimScope::AnyQueue, ClaimScope::OneQueue] {
            let plan = sqlite_plan(statements::oldest_takeover(Dialect::Sqlite, filter));
            let uses = |index: &str| plan.iter().any(|step| step.contains(index));
            assert!(uses("todos_claimed_by_endpoint"), "{filter:?}: {plan:#?}");
            assert!(uses("todos_retry_by_endpoint"), "{filter:?}: {plan:#?}");
            assert!(
                !uses("todos_by_endpoint_created") && !uses("SCAN todos"),
                "{filter:?} walks more than the candidates: {plan:#?}"
            );
        }
    }

    #[test]
    fn on_sqlite_a_listing_of_live_todos_reads_their_index_not_the_history() {
        for (state, queue_named, index) in [
            (TodoState::Pending, false, "todos_pending_by_endpoint"),
            (TodoState::Pending, true, "todos_pending_by_queue"),
            (TodoState::Claimed, false, "todos_claimed_by_endpoint"),
            (TodoState::Claimed, true, "todos_claimed_by_endpoint"),
        ] {
            let plan = sqlite_plan(&list_todos_sql(Dialect::Sqlite, queue_named, Some(state)));
            assert!(
                plan.iter().any(|step| step.contains(index)),
                "{state:?}, queue named {queue_named}: {plan:#?}"
            );
        }
    }

    #[test]
    fn on_sqlite_a_humans_listing_of_live_todos_reads_their_index_not_the_history() {
        for (state, queue, endpoint, index) in [
            (TodoState::Pending, None, None, "todos_pending_by_endpoint"),
            (
                TodoState::Pending,
                Some("inbox"),
                None,
                "todos_pending_by_queue",
            ),
            (TodoState::Claimed, None, None, "todos_claimed_by_endpoint"),
            (
                TodoState::Claimed,
                Some("inbox"),
                Some("ep_1"),
                "todos_claimed_by_endpoint",
            ),
        ] {
            let filter = TodoFilter {
                state: Some(state),
                queue: queue.map(str::to_owned),
                endpoint_id: endpoint.map(str::to_owned),
                ..TodoFilter::default()
            };
            let (sql, _) = human_list_todos_sql(Dialect::Sqlite, &filter).unwrap();
            let plan = sqlite_plan(&sql);
            let uses = |index: &str| plan.iter().any(|step| step.contains(index));
            assert!(uses(index), "{filter:?}: {plan:#?}");
            assert!(
                !uses("todos_by_endpoint_created") && !uses("SCAN todos"),
                "{filter:?} walks the history: {plan:#?}"
            );
        }
    }
}
