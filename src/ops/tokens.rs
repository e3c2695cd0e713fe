//! A human's API tokens: issued (the secret shown once, only its hash
//! kept) and revoked.

use crate::delivery::Delivery;
use crate::domain::Timestamp;
use crate::domain::duration::parse_positive_duration;
use crate::store::{ApiToken, StoreResult, issue_api_token, issue_session_token};

/// Issues a token for the human: `expires_in` is a lifetime such as `30d`
/// (none = no expiry), but never past `bound`, when the authority of the
/// token that asks for it ends (issue 48: a token of 1 h minted one that
/// never expired). Returns the plain token (shown once) and its record.
pub async fn issue(
    delivery: &Delivery,
    human_id: &str,
    bound: Option<Timestamp>,
    label: Option<String>,
    expires_in: Option<&str>,
) -> StoreResult<(String, ApiToken)> {
    let store = delivery.store();
    let asked = match expires_in {
        None => None,
        Some(text) => Some(
            store
                .clock()
                .now()
                .saturating_add(parse_positive_duration(text, "expires_in")?),
        ),
    };
    let expires_at = no_later_than(asked, bound);
    issue_api_token(store, human_id, label, expires_at).await
}

/// Signs a board session in with the live token `with` of the human: the
/// session's own token lives `lifetime` from now but never past `bound`
/// (when `with` expires), and only while `with` is not revoked
/// (`NotFound` once it is not live).
pub async fn issue_board_session(
    delivery: &Delivery,
    human_id: &str,
    with: &ApiToken,
    bound: Option<Timestamp>,
    label: Option<String>,
    lifetime: std::time::Duration,
) -> StoreResult<(String, ApiToken)> {
    let store = delivery.store();
    let wanted = store.clock().now().saturating_add(lifetime);
    let expires_at = no_later_than(Some(wanted), bound);
    // A session is bound to the token pasted, never to another session.
    let of = with.session_of.as_deref().unwrap_or(&with.id);
    issue_session_token(store, human_id, of, label, expires_at).await
}

/// The earlier of two expiries (`None`: never).
fn no_later_than(asked: Option<Timestamp>, bound: Option<Timestamp>) -> Option<Timestamp> {
    match (asked, bound) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Revokes one of the human's tokens (`Conflict` when already revoked).
pub async fn revoke(delivery: &Delivery, human_id: &str, id: &str) -> StoreResult<ApiToken> {
    delivery.store().revoke_api_token(human_id, id).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minted_token_never_outlives_its_minter() {
        let t = Timestamp::from_millis;
        assert_eq!(no_later_than(None, None), None);
        assert_eq!(no_later_than(Some(t(5)), None), Some(t(5)));
        assert_eq!(
            no_later_than(None, Some(t(7))),
            Some(t(7)),
            "no expiry asked"
        );
        assert_eq!(no_later_than(Some(t(9)), Some(t(7))), Some(t(7)));
        assert_eq!(no_later_than(Some(t(3)), Some(t(7))), Some(t(3)));
    }
}
