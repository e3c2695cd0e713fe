//! Claims: by id, or the oldest claimable todo (a takeover included).

use super::fast::ClaimBinds;
use super::lane::{self, LaneClaim, LaneClaimed};
use super::*;

pub(super) enum ClaimTarget<'a> {
    ById(&'a str),
    /// The oldest claimable todo; `None` = any of the caller's queues.
    Oldest(Option<&'a str>),
}

impl SqlStore {
    pub(super) async fn claim_target(
        &self,
        caller: &Caller,
        target: ClaimTarget<'_>,
        opts: ClaimOptions,
    ) -> StoreResult<Option<Claimed>> {
        let lease_secs =
            resolve_lease_seconds(opts.lease_ttl_seconds, caller.default_lease_ttl_seconds)?;
        let claimant = opts
            .claimant
            .as_deref()
            .map(rules::clean_claimant)
            .filter(|c| !c.is_empty());
        let lease_token = opts.require_fence.then(|| random_token(16));
        let token_hash = lease_token.as_deref().map(sha256_hex);
        let now = self.now();
        let expires = now.add_secs(lease_secs);
        let owner = caller.owner();

        if let (ClaimTarget::Oldest(queue), Dialect::Postgres) = (&target, self.dialect) {
            let binds = ClaimBinds {
                now,
                owner: &owner,
                expires,
                token_hash: token_hash.as_deref(),
                claimant: claimant.as_deref(),
            };
            if let Some((todo, prior_attempts)) =
                self.claim_pending_at_once(caller, *queue, &binds).await?
            {
                return Ok(Some(Claimed {
                    attempt_seq: todo.attempts_total,
                    todo,
                    prior_attempts,
                    lease_token,
                }));
            }
            // Nothing pending: the transaction below tries a takeover.
        }
        if let (ClaimTarget::Oldest(queue), Some(writer)) = (&target, &self.lane) {
            let claim = LaneClaim {
                endpoint_id: caller.endpoint_id.clone(),
                queue: queue.map(str::to_owned),
                now,
                owner: owner.clone(),
                expires,
                token_hash: token_hash.clone(),
                claimant: claimant.clone(),
            };
            match writer
                .run(move |conn| lane::claim_pending(conn, claim))
                .await?
            {
                LaneClaimed::Claimed(todo, prior_attempts) => {
                    return Ok(Some(Claimed {
                        attempt_seq: todo.attempts_total,
                        todo,
                        prior_attempts,
                        lease_token,
                    }));
                }
                LaneClaimed::Empty => return Ok(None),
                // The transaction below takes it over.
                LaneClaimed::TakeoverDue => {}
            }
        }

        let mut tx = self.begin().await?;
        let bind_claim = |sql: String| {
            sqlx::query(AssertSqlSafe(sql))
                .bind(now.as_millis())
                .bind(owner.clone())
                .bind(expires.as_millis())
                .bind(token_hash.clone())
        };
        let (row, may_be_takeover) = match target {
            ClaimTarget::ById(id) => {
                let sql = format!(
                    concat!(
                        "UPDATE todos SET {} WHERE id = $5 AND endpoint_id = $6 ",
                        "AND (state = 'pending' OR ({})) RETURNING ",
                        todo_columns!()
                    ),
                    CLAIM_SET, TAKEOVER_CONDITION
                );
                let row = bind_claim(sql)
                    .bind(id.to_owned())
                    .bind(caller.endpoint_id.clone())
                    .fetch_optional(&mut *tx)
                    .await?;
                if row.is_none() {
                    let err = Self::refusal(&mut tx, caller, id, Refused::Claim, now).await;
                    tx.rollback().await?;
                    return Err(err);
                }
                (row, true)
            }
            ClaimTarget::Oldest(queue) => {
                let queues: Vec<&str> = match queue {
                    Some(q) => vec![q],
                    None => caller.queues.iter().map(String::as_str).collect(),
                };
                // Todos exist only in scope queues, so claiming across the
                // whole scope needs no queue filter (and uses the endpoint index).
                let queue_filter = if queue.is_none() {
                    String::new()
                } else {
                    format!(" AND queue IN ({})", placeholders(6, queues.len()))
                };
                let pending_sql = format!(
                    concat!(
                        "UPDATE todos SET {set} WHERE id = (SELECT id FROM {from} ",
                        "WHERE endpoint_id = $5 AND state = 'pending'{filter} ",
                        "ORDER BY created_at, id LIMIT 1{skip}) RETURNING ",
                        todo_columns!()
                    ),
                    set = CLAIM_SET,
                    from = if queue.is_none() {
                        self.dialect.pending_todos_by_endpoint()
                    } else {
                        "todos"
                    },
                    filter = queue_filter,
                    skip = self.dialect.skip_locked(),
                );
                let mut q = bind_claim(pending_sql).bind(caller.endpoint_id.clone());
                if queue.is_some() {
                    for name in &queues {
                        q = q.bind((*name).to_owned());
                    }
                }
                let pending = q.fetch_optional(&mut *tx).await?;
                if pending.is_some() {
                    (pending, false)
                } else {
                    // Nothing pending: take over a lapsed lease or an elapsed
                    // retry directly, so recovery never waits for the reaper.
                    let takeover_sql = format!(
                        concat!(
                            "UPDATE todos SET {set} WHERE id = ({oldest}) RETURNING ",
                            todo_columns!()
                        ),
                        set = CLAIM_SET,
                        oldest = oldest_takeover(self.dialect, &queue_filter),
                    );
                    let mut q = bind_claim(takeover_sql).bind(caller.endpoint_id.clone());
                    if queue.is_some() {
                        for name in &queues {
                            q = q.bind((*name).to_owned());
                        }
                    }
                    (q.fetch_optional(&mut *tx).await?, true)
                }
            }
        };
        let Some(row) = row else {
            tx.rollback().await?;
            return Ok(None);
        };
        let mut todo = rows::todo(&row)?;

        if may_be_takeover {
            // A holder that vanished left its attempt open: close it first.
            let closed = Self::close_open_attempt(
                &mut tx,
                &todo.id,
                now,
                Outcome::LeaseExpired,
                Disposition::Requeued,
                None,
            )
            .await?;
            if closed > 0 {
                todo.attempts_pruned += Self::prune_attempts(&mut tx, &todo).await?;
            }
        }
        let attempt_seq = todo.attempts_total;
        sqlx::query(
            "INSERT INTO todo_attempts (todo_id, seq, attempt, claimant, claimed_at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&todo.id)
        .bind(attempt_seq)
        .bind(todo.attempt)
        .bind(claimant)
        .bind(now.as_millis())
        .execute(&mut *tx)
        .await?;
        let prior_attempts = if todo.attempts_total > 1 {
            let rows = sqlx::query(concat!(
                "SELECT ",
                attempt_columns!(),
                " FROM todo_attempts WHERE todo_id = $1 AND ended_at IS NOT NULL \
                 ORDER BY seq DESC LIMIT $2"
            ))
            .bind(&todo.id)
            .bind(rules::PRIOR_ATTEMPTS_ON_CLAIM)
            .fetch_all(&mut *tx)
            .await?;
            rows.iter()
                .map(rows::attempt)
                .collect::<StoreResult<Vec<_>>>()?
        } else {
            Vec::new()
        };
        tx.commit().await?;
        Ok(Some(Claimed {
            todo,
            attempt_seq,
            prior_attempts,
            lease_token,
        }))
    }
}
