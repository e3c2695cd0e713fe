//! Why a guarded transition matched nothing: `not_found` outside the
//! caller's scope, otherwise a `conflict` naming the todo's state.

use super::*;

#[derive(Clone, Copy)]
pub(super) enum Refused {
    /// `heartbeat`, `complete`, `fail`, `release`: only the lease holder may.
    Holder,
    /// `claim` by id.
    Claim,
}

/// A holder's verb in its transaction (`heartbeat`, `complete`, `fail`,
/// `release`): whose guard a statement checks ([`statements::holder_guard`],
/// its last four parameters), and when.
#[derive(Clone, Copy)]
pub(super) struct Holding<'a> {
    pub caller: &'a Caller,
    pub id: &'a str,
    pub lease_token: Option<&'a str>,
    pub now: Timestamp,
}

impl<'a> Holding<'a> {
    pub(super) fn new(
        caller: &'a Caller,
        id: &'a str,
        lease_token: Option<&'a str>,
        now: Timestamp,
    ) -> Self {
        Self {
            caller,
            id,
            lease_token,
            now,
        }
    }
}

impl SqlStore {
    /// The row `query` answers once the holder's guard is bound after its
    /// own parameters; when the guard matched nothing, the transaction is
    /// rolled back and the refusal says why.
    pub(super) async fn held_row<'q>(
        mut tx: Transaction<'static, Any>,
        query: sqlx::query::Query<'q, Any, sqlx::any::AnyArguments>,
        holding: &Holding<'q>,
    ) -> StoreResult<(Transaction<'static, Any>, sqlx::any::AnyRow)> {
        let Holding {
            caller,
            id,
            lease_token,
            now,
        } = *holding;
        let row = query
            .bind(id)
            .bind(&caller.endpoint_id)
            .bind(caller.owner())
            .bind(lease_token.map(sha256_hex))
            .fetch_optional(&mut *tx)
            .await?;
        match row {
            Some(row) => Ok((tx, row)),
            None => {
                let err = Self::refusal(&mut tx, caller, id, Refused::Holder, now).await;
                tx.rollback().await?;
                Err(err)
            }
        }
    }

    /// Why an agent's guarded update matched nothing: `not_found` when the
    /// todo is not the caller's (byte-identical to missing), else a conflict
    /// that says which state stood in the way.
    pub(super) async fn refusal(
        tx: &mut Transaction<'static, Any>,
        caller: &Caller,
        id: &str,
        refused: Refused,
        now: Timestamp,
    ) -> StoreError {
        let row = sqlx::query(
            "SELECT state, lease_expires_at, attempt, max_attempts, next_retry_at \
             FROM todos WHERE id = $1 AND endpoint_id = $2",
        )
        .bind(id)
        .bind(&caller.endpoint_id)
        .fetch_optional(&mut **tx)
        .await;
        let row = match row {
            Ok(Some(row)) => row,
            Ok(None) => return StoreError::NotFound,
            Err(e) => return e.into(),
        };
        let state: String = row.get("state");
        let next_retry_at: Option<i64> = row.get("next_retry_at");
        let at_cap = row.get::<i64, _>("attempt") >= row.get::<i64, _>("max_attempts");
        let message = match (refused, state.as_str()) {
            (Refused::Holder, "claimed") => "the lease on this todo is not held by this caller \
                 (it may have been taken over, or the lease_token does not match)"
                .to_owned(),
            (Refused::Holder, state) => format!("the todo is {state}, not claimed"),
            (Refused::Claim, "claimed") if at_cap => {
                "the todo's lease lapsed at its attempt cap; it will be dead-lettered".to_owned()
            }
            (Refused::Claim, "claimed") => {
                let until = row
                    .get::<Option<i64>, _>("lease_expires_at")
                    .map(|ms| Timestamp::from_millis(ms).to_rfc3339())
                    .unwrap_or_default();
                format!("the todo is claimed and its lease runs until {until}")
            }
            (Refused::Claim, "failed") => match next_retry_at {
                None => "the todo is a dead letter; a human can retry it".to_owned(),
                Some(_) if at_cap => "the todo has used all its attempts".to_owned(),
                Some(at) if at > now.as_millis() => format!(
                    "the todo's retry window is open until {}",
                    Timestamp::from_millis(at).to_rfc3339()
                ),
                Some(_) => "the todo cannot be claimed now".to_owned(),
            },
            (Refused::Claim, state) => format!("the todo is {state}"),
        };
        StoreError::Conflict(message)
    }

    /// As [`Self::refusal`], for a human acting on a todo of one of their endpoints.
    pub(super) async fn human_refusal(
        tx: &mut Transaction<'static, Any>,
        human_id: &str,
        id: &str,
        wanted: &str,
    ) -> StoreError {
        let row = sqlx::query(
            "SELECT t.state, t.next_retry_at, e.state AS endpoint_state FROM todos t \
             JOIN endpoints e ON e.id = t.endpoint_id WHERE t.id = $1 AND e.human_id = $2",
        )
        .bind(id)
        .bind(human_id)
        .fetch_optional(&mut **tx)
        .await;
        match row {
            Ok(None) => StoreError::NotFound,
            Err(e) => e.into(),
            Ok(Some(row)) => {
                if row.get::<String, _>("endpoint_state") != "active" {
                    StoreError::EndpointRevoked
                } else {
                    let state: String = row.get("state");
                    let dead =
                        state == "failed" && row.get::<Option<i64>, _>("next_retry_at").is_none();
                    let state = if dead {
                        "a dead letter"
                    } else {
                        state.as_str()
                    };
                    StoreError::Conflict(format!("the todo is {state}, not {wanted}"))
                }
            }
        }
    }
}
