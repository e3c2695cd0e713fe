//! A human's view of todos: filtered listings, full reads with attempt
//! history, and the intake event behind a todo.

use sqlx::AssertSqlSafe;

use super::SqlStore;
use super::paging::{self, Cursor};
use crate::domain::todo::TodoState;
use crate::store::model::*;
use crate::store::rows::{self, attempt_columns, todo_columns};
use crate::store::{StoreError, StoreResult};

impl SqlStore {
    pub(super) async fn select_todos_for_human(
        &self,
        human_id: &str,
        filter: &TodoFilter,
        page: &PageRequest,
    ) -> StoreResult<Page<Todo>> {
        let (limit, cursor) = paging::decode(page)?;
        let mut conditions = vec![
            "endpoint_id IN (SELECT id FROM endpoints WHERE human_id = $1)".to_owned(),
            "(created_at < $2 OR (created_at = $2 AND id < $3))".to_owned(),
        ];
        let mut binds: Vec<String> = Vec::new();
        let mut next = 5; // $4 is the limit
        if let Some(endpoint_id) = &filter.endpoint_id {
            conditions.push(format!("endpoint_id = ${next}"));
            binds.push(endpoint_id.clone());
            next += 1;
        }
        if let Some(queue) = &filter.queue {
            conditions.push(format!("queue = ${next}"));
            binds.push(queue.clone());
            next += 1;
        }
        if let Some(state) = filter.state {
            conditions.push(format!("state = ${next}"));
            binds.push(state.as_str().to_owned());
        }
        match filter.dead_letter {
            Some(true) => conditions.push("(state = 'failed' AND next_retry_at IS NULL)".into()),
            Some(false) => {
                conditions.push("NOT (state = 'failed' AND next_retry_at IS NULL)".into())
            }
            None => {}
        }
        let sql = format!(
            concat!(
                "SELECT ",
                todo_columns!(),
                " FROM todos WHERE {} ORDER BY created_at DESC, id DESC LIMIT $4"
            ),
            conditions.join(" AND ")
        );
        let mut q = sqlx::query(AssertSqlSafe(sql))
            .bind(human_id)
            .bind(cursor.created_at)
            .bind(cursor.id.clone())
            .bind(limit + 1);
        for value in binds {
            q = q.bind(value);
        }
        let rows = q.fetch_all(&self.reader).await?;
        let items = rows
            .iter()
            .map(rows::todo)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok(paging::page(items, limit, |t| {
            Cursor::new(t.created_at, &t.id)
        }))
    }

    /// Listing for an agent: its endpoint's todos, newest first.
    pub(super) async fn select_todos_for_caller(
        &self,
        caller: &Caller,
        queue: Option<&str>,
        state: Option<TodoState>,
        limit: i64,
    ) -> StoreResult<Vec<Todo>> {
        let mut sql = String::from(concat!(
            "SELECT ",
            todo_columns!(),
            " FROM todos WHERE endpoint_id = $1"
        ));
        let mut next = 3;
        if queue.is_some() {
            sql.push_str(&format!(" AND queue = ${next}"));
            next += 1;
        }
        if state.is_some() {
            sql.push_str(&format!(" AND state = ${next}"));
        }
        sql.push_str(" ORDER BY created_at DESC, id DESC LIMIT $2");
        let mut q = sqlx::query(AssertSqlSafe(sql))
            .bind(caller.endpoint_id.clone())
            .bind(limit.clamp(1, paging::MAX_LIMIT));
        if let Some(queue) = queue {
            q = q.bind(queue.to_owned());
        }
        if let Some(state) = state {
            q = q.bind(state.as_str());
        }
        let rows = q.fetch_all(&self.reader).await?;
        rows.iter().map(rows::todo).collect()
    }

    pub(super) async fn select_todo_for_human(
        &self,
        human_id: &str,
        id: &str,
    ) -> StoreResult<Todo> {
        let row = sqlx::query(concat!(
            "SELECT ",
            todo_columns!(),
            " FROM todos WHERE id = $1 AND endpoint_id IN \
              (SELECT id FROM endpoints WHERE human_id = $2)"
        ))
        .bind(id)
        .bind(human_id)
        .fetch_optional(&self.reader)
        .await?;
        row.as_ref()
            .map(rows::todo)
            .unwrap_or(Err(StoreError::NotFound))
    }

    pub(super) async fn select_attempts_for_human(
        &self,
        human_id: &str,
        todo_id: &str,
        limit: i64,
    ) -> StoreResult<Vec<Attempt>> {
        self.select_todo_for_human(human_id, todo_id).await?;
        let rows = sqlx::query(concat!(
            "SELECT ",
            attempt_columns!(),
            " FROM todo_attempts WHERE todo_id = $1 ORDER BY seq DESC LIMIT $2"
        ))
        .bind(todo_id)
        .bind(limit.clamp(1, crate::domain::todo::KEPT_ATTEMPTS))
        .fetch_all(&self.reader)
        .await?;
        rows.iter().map(rows::attempt).collect()
    }

    pub(super) async fn select_event_for_human(
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
        .fetch_optional(&self.reader)
        .await?;
        row.as_ref()
            .map(rows::intake_event)
            .unwrap_or(Err(StoreError::NotFound))
    }
}
