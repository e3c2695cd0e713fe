//! Creating a todo: the insert with its intake event, or the live todo
//! holding the same idempotency key.

use super::*;

impl SqlStore {
    pub(super) async fn try_insert_todo(
        &self,
        new: &NewTodo,
        payload: Option<&str>,
        max_attempts: i64,
        write: Option<&DeliveryWrite>,
    ) -> StoreResult<Option<(CreatedTodo, Option<DeliveryRecord>)>> {
        let mut tx = self.begin().await?;
        if let Some(todo) = self
            .insert_todo_in(&mut tx, new, payload, max_attempts)
            .await?
        {
            // The delivery that made the todo, in the todo's transaction.
            let record = match write {
                None => None,
                Some(write) => Some(
                    self.write_delivery(&mut tx, write, &todo.id, self.now().as_millis())
                        .await?,
                ),
            };
            tx.commit().await?;
            return Ok(Some((
                CreatedTodo {
                    todo,
                    created: true,
                },
                record,
            )));
        }
        // The key matched a live todo: return it, write nothing (the intake
        // event goes with the rollback).
        let existing = sqlx::query(AssertSqlSafe(format!(
            concat!(
                "SELECT ",
                todo_columns!(),
                " FROM todos WHERE endpoint_id = $1 AND idempotency_key = $2 AND {}"
            ),
            LIVE_CONDITION
        )))
        .bind(&new.endpoint_id)
        .bind(&new.idempotency_key)
        .fetch_optional(&mut *tx)
        .await?;
        tx.rollback().await?;
        match existing {
            Some(row) => Ok(Some((
                CreatedTodo {
                    todo: rows::todo(&row)?,
                    created: false,
                },
                None,
            ))),
            None => Ok(None),
        }
    }

    /// Inserts a checked todo (`checked`) with its intake event in `tx`;
    /// `None` when its idempotency key matched a live todo (the caller
    /// rolls back). Schedules create their todos through it too, in the
    /// transaction that moves the schedule on.
    pub(in crate::store::sql) async fn insert_todo_in(
        &self,
        tx: &mut Transaction<'static, Any>,
        new: &NewTodo,
        payload: Option<&str>,
        max_attempts: i64,
    ) -> StoreResult<Option<Todo>> {
        let now = self.now().as_millis();
        // A run_at already reached makes an ordinary pending todo.
        let delayed = new.run_at.is_some_and(|at| at.as_millis() > now);
        // FOR SHARE (PostgreSQL) orders us against a concurrent revoke, which
        // would otherwise miss a todo committed just after its cascade.
        let for_share = match self.dialect {
            crate::store::dialect::Dialect::Postgres => " FOR SHARE",
            crate::store::dialect::Dialect::Sqlite => "",
        };
        let endpoint = sqlx::query(AssertSqlSafe(format!(
            "SELECT state, scope_queues FROM endpoints WHERE id = $1{for_share}"
        )))
        .bind(&new.endpoint_id)
        .fetch_optional(&mut **tx)
        .await?;
        let Some(endpoint) = endpoint else {
            return Err(StoreError::NotFound);
        };
        if endpoint.get::<String, _>("state") != "active" {
            return Err(StoreError::EndpointRevoked);
        }
        let queues: Vec<String> =
            serde_json::from_str(&endpoint.get::<String, _>("scope_queues")).unwrap_or_default();
        if !queues.contains(&new.queue) {
            return Err(Invalid::new(
                "queue",
                format!(
                    "{:?} is not in the endpoint's scope ({})",
                    new.queue,
                    queues.join(", ")
                ),
            )
            .into());
        }

        let event_id = match &new.intake {
            None => None,
            Some(event) => {
                let id = new_id("ev");
                sqlx::query(
                    "INSERT INTO intake_events (id, endpoint_id, webhook_id, trust_mode, actor, \
                       received_at, headers, content_type, body, body_size) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                )
                .bind(&id)
                .bind(&new.endpoint_id)
                .bind(&event.webhook_id)
                .bind(event.trust_mode.as_str())
                .bind(&event.actor)
                .bind(now)
                .bind(event.headers.to_string())
                .bind(&event.content_type)
                .bind(event.body.clone())
                .bind(event.body.len() as i64)
                .execute(&mut **tx)
                .await?;
                Some(id)
            }
        };

        let inserted = sqlx::query(statements::insert_todo(self.dialect))
            .bind(new_todo_id())
            .bind(&new.endpoint_id)
            .bind(&new.queue)
            .bind(&new.title)
            .bind(&new.kind)
            .bind(&new.source)
            .bind(payload)
            .bind(&new.idempotency_key)
            .bind(&event_id)
            .bind(max_attempts)
            .bind(now)
            .bind(new.priority)
            .bind(if delayed { "delayed" } else { "pending" })
            .bind(new.run_at.map(Timestamp::as_millis))
            .fetch_optional(&mut **tx)
            .await?;

        inserted.as_ref().map(rows::todo).transpose()
    }
}
