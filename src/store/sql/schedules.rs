//! Schedules, and the one guarded statement that moves a schedule to its
//! next occurrence and creates the occurrence's todo in the same transaction.

use super::SqlStore;
use super::todos::checked;
use crate::domain::Timestamp;
use crate::mint::new_id;
use crate::store::model::*;
use crate::store::prelude::*;
use crate::store::{StoreError, StoreResult};
use async_trait::async_trait;
use sqlx::Row;
use sqlx::any::AnyRow;

const COLUMNS: &str = "s.id, s.endpoint_id, s.human_id, s.queue, s.cron, s.tz, s.title, s.kind, \
    s.payload, s.catch_up, s.paused, s.next_at, s.last_at, s.created_at";

fn schedule(row: &AnyRow) -> StoreResult<Schedule> {
    let payload: Option<String> = row.try_get("payload")?;
    Ok(Schedule {
        id: row.try_get("id")?,
        endpoint_id: row.try_get("endpoint_id")?,
        human_id: row.try_get("human_id")?,
        queue: row.try_get("queue")?,
        cron: row.try_get("cron")?,
        tz: row.try_get("tz")?,
        title: row.try_get("title")?,
        kind: row.try_get("kind")?,
        payload: payload.and_then(|p| serde_json::from_str(&p).ok()),
        catch_up: row.try_get("catch_up")?,
        paused: row.try_get::<i64, _>("paused")? != 0,
        next_at: Timestamp::from_millis(row.try_get("next_at")?),
        last_at: row
            .try_get::<Option<i64>, _>("last_at")?
            .map(Timestamp::from_millis),
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
    })
}

#[async_trait]
impl ScheduleStore for SqlStore {
    async fn create_schedule(&self, human_id: &str, new: NewSchedule) -> StoreResult<Schedule> {
        let id = new_id("sc");
        let payload = new.payload.as_ref().map(|p| p.to_string());
        // Guarded on the endpoint being the human's and active, in the one statement.
        let inserted = sqlx::query(
            "INSERT INTO schedules (id, endpoint_id, human_id, queue, cron, tz, title, kind, \
               payload, catch_up, paused, next_at, created_at) \
             SELECT $1, e.id, e.human_id, $2, $3, $4, $5, $6, $7, $8, 0, $9, $10 \
             FROM endpoints e WHERE e.id = $11 AND e.human_id = $12 AND e.state = 'active'",
        )
        .bind(&id)
        .bind(&new.queue)
        .bind(&new.cron)
        .bind(&new.tz)
        .bind(&new.title)
        .bind(&new.kind)
        .bind(payload)
        .bind(&new.catch_up)
        .bind(new.next_at.as_millis())
        .bind(self.now().as_millis())
        .bind(&new.endpoint_id)
        .bind(human_id)
        .execute(self.writer()?)
        .await?;
        if inserted.rows_affected() == 0 {
            let endpoint = self.get_endpoint(human_id, &new.endpoint_id).await?;
            if !endpoint.is_active() {
                return Err(StoreError::EndpointRevoked);
            }
            return Err(StoreError::NotFound);
        }
        self.get_schedule(human_id, &id).await
    }

    async fn get_schedule(&self, human_id: &str, id: &str) -> StoreResult<Schedule> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM schedules s WHERE s.id = $1 AND s.human_id = $2"
        )))
        .bind(id)
        .bind(human_id)
        .fetch_optional(self.writer()?)
        .await?;
        row.as_ref()
            .map(schedule)
            .unwrap_or(Err(StoreError::NotFound))
    }

    async fn list_schedules(
        &self,
        human_id: &str,
        endpoint_id: &str,
    ) -> StoreResult<Vec<Schedule>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM schedules s WHERE s.endpoint_id = $1 AND s.human_id = $2 \
             ORDER BY s.created_at, s.id"
        )))
        .bind(endpoint_id)
        .bind(human_id)
        .fetch_all(self.reader()?)
        .await?;
        rows.iter().map(schedule).collect()
    }

    async fn delete_schedule(&self, human_id: &str, id: &str) -> StoreResult<()> {
        let deleted = sqlx::query("DELETE FROM schedules WHERE id = $1 AND human_id = $2")
            .bind(id)
            .bind(human_id)
            .execute(self.writer()?)
            .await?;
        if deleted.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    async fn set_schedule_paused(
        &self,
        human_id: &str,
        id: &str,
        paused: bool,
        next_at: Timestamp,
    ) -> StoreResult<Schedule> {
        let updated = sqlx::query(
            "UPDATE schedules SET paused = $1, next_at = $2 WHERE id = $3 AND human_id = $4",
        )
        .bind(i64::from(paused))
        .bind(next_at.as_millis())
        .bind(id)
        .bind(human_id)
        .execute(self.writer()?)
        .await?;
        if updated.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        self.get_schedule(human_id, id).await
    }

    async fn unscoped_due_schedules(
        &self,
        now: Timestamp,
        limit: i64,
    ) -> StoreResult<Vec<Schedule>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM schedules s JOIN endpoints e ON e.id = s.endpoint_id \
             WHERE s.paused = 0 AND s.next_at <= $1 AND e.state = 'active' \
             ORDER BY s.next_at, s.id LIMIT $2"
        )))
        .bind(now.as_millis())
        .bind(limit)
        .fetch_all(self.reader()?)
        .await?;
        rows.iter().map(schedule).collect()
    }

    async fn unscoped_fire_schedule(
        &self,
        id: &str,
        from: Timestamp,
        to: Timestamp,
        occurrence: Timestamp,
        todo: Option<NewTodo>,
    ) -> StoreResult<Fired> {
        let checked = todo.as_ref().map(checked).transpose()?;
        let mut tx = self.begin().await?;
        // The guard: only the caller that read `from` moves it on; a second
        // caller (another instance, a tick after a restart) matches no row.
        let last_at = todo.as_ref().map(|_| occurrence.as_millis());
        let moved = sqlx::query(
            "UPDATE schedules SET next_at = $1, last_at = COALESCE($2, last_at) \
             WHERE id = $3 AND next_at = $4 AND paused = 0",
        )
        .bind(to.as_millis())
        .bind(last_at)
        .bind(id)
        .bind(from.as_millis())
        .execute(&mut *tx)
        .await?;
        if moved.rows_affected() == 0 {
            tx.rollback().await?;
            return Ok(Fired::Lost);
        }
        let (Some(new), Some((payload, max_attempts))) = (todo, checked) else {
            tx.commit().await?;
            return Ok(Fired::Advanced);
        };
        match self
            .insert_todo_in(&mut tx, &new, payload.as_deref(), max_attempts)
            .await?
        {
            Some(todo) => {
                tx.commit().await?;
                Ok(Fired::Created(Box::new(CreatedTodo {
                    todo,
                    created: true,
                })))
            }
            None => {
                tx.rollback().await?;
                Err(StoreError::conflict(
                    "a live todo holds the schedule's idempotency key",
                ))
            }
        }
    }
}
