//! A human's todo filter as SQL conditions: one builder shared by the listing
//! and the bulk operator actions, so "what the table shows" and "what retry
//! all / cancel all acts on" can never drift apart.

use super::*;
use crate::store::dialect::{Dialect, json_list};

/// SQL conditions and the string values they bind, numbered from a given
/// placeholder on.
pub(super) struct Conditions {
    pub(super) sql: Vec<String>,
    pub(super) binds: Vec<String>,
    next: usize,
}

impl Conditions {
    /// Conditions whose first bound value will be `$first`.
    pub(super) fn starting_at(first: usize) -> Self {
        Self {
            sql: Vec::new(),
            binds: Vec::new(),
            next: first,
        }
    }

    /// Binds `value`, returning its placeholder.
    pub(super) fn bind(&mut self, value: String) -> String {
        let placeholder = format!("${}", self.next);
        self.next += 1;
        self.binds.push(value);
        placeholder
    }

    pub(super) fn push(&mut self, condition: impl Into<String>) {
        self.sql.push(condition.into());
    }

    /// `a AND b AND …`, or `TRUE` when there is none.
    pub(super) fn joined(&self) -> String {
        if self.sql.is_empty() {
            "1 = 1".to_owned()
        } else {
            self.sql.join(" AND ")
        }
    }

    /// Adds the filter's conditions (columns of `todos`, unqualified).
    pub(super) fn filter(&mut self, dialect: Dialect, filter: &TodoFilter) -> StoreResult<()> {
        if let Some(endpoint_id) = &filter.endpoint_id {
            let p = self.bind(endpoint_id.clone());
            self.push(format!("endpoint_id = {p}"));
        }
        if let Some(queue) = &filter.queue {
            let p = self.bind(queue.clone());
            self.push(format!("queue = {p}"));
        }
        // A literal (the state is one of a closed set), so that the planner
        // can match it to a live state's partial index; a bound value cannot.
        if let Some(state) = filter.state {
            self.push(format!("state = '{}'", state.as_str()));
        }
        match filter.dead_letter {
            Some(true) => self.push("(state = 'failed' AND next_retry_at IS NULL)"),
            Some(false) => self.push("NOT (state = 'failed' AND next_retry_at IS NULL)"),
            None => {}
        }
        if let Some(kind) = &filter.kind {
            let p = self.bind(kind.clone());
            self.push(format!("kind = {p}"));
        }
        if let Some(source) = &filter.source {
            let p = self.bind(source.clone());
            self.push(format!("source = {p}"));
        }
        if let Some(q) = &filter.q {
            rules::validate_search(q, "q")?;
            let p = self.bind(q.to_ascii_lowercase());
            self.push(dialect.contains_ascii_ci("title", &p));
        }
        Ok(())
    }

    /// Only these ids.
    pub(super) fn ids(&mut self, dialect: Dialect, ids: &[String]) {
        let p = self.next;
        self.bind(json_list(ids));
        self.push(format!("id IN ({})", dialect.json_text_list(p)));
    }
}
