//! Throughput counters of the event path, kept as the `/metrics` families
//! themselves (the server's registry holds clones):
//! `switchboard_attempts_finished_total{outcome}`,
//! `switchboard_todos_created_total{trust_mode}` and
//! `switchboard_todo_actions_total{action}`.
//!
//! They are counted where [`super::Delivery`] is told (by `crate::ops` and
//! the maintenance loop), so every surface counts alike.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use crate::store::{Todo, TrustMode};

/// How an attempt (a claim) ended, as the metric counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptEnd {
    /// `complete`: the todo is done.
    Completed,
    /// `fail` with attempts left: a retry is scheduled.
    Failed,
    /// The todo became a dead letter (`fail` on the last attempt, or a
    /// lapsed lease with no attempt left).
    DeadLetter,
    /// `release` by the holder or a human: back to pending.
    Released,
    /// The lease lapsed and the reaper requeued the todo.
    Expired,
}

impl AttemptEnd {
    pub const ALL: [Self; 5] = [
        Self::Completed,
        Self::Failed,
        Self::DeadLetter,
        Self::Released,
        Self::Expired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::DeadLetter => "dead_letter",
            Self::Released => "released",
            Self::Expired => "expired",
        }
    }

    /// How a `fail` ended, from the row it returned.
    pub fn of_failed(todo: &Todo) -> Self {
        if todo.dead_letter {
            Self::DeadLetter
        } else {
            Self::Failed
        }
    }
}

/// What a human did to todos (API or board, one or in bulk), as
/// `switchboard_todo_actions_total{action}` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HumanAction {
    Retry,
    Release,
    Cancel,
    /// A todo deleted for good.
    Delete,
}

impl HumanAction {
    pub const ALL: [Self; 4] = [Self::Retry, Self::Release, Self::Cancel, Self::Delete];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Retry => "retry",
            Self::Release => "release",
            Self::Cancel => "cancel",
            Self::Delete => "delete",
        }
    }
}

/// What happened in the OAuth authorization server, as
/// `switchboard_oauth_events_total{event}` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OAuthEvent {
    /// A client registered itself (RFC 7591).
    ClientRegistered,
    /// A human consented: a code went to the client.
    CodeIssued,
    /// A code was redeemed for a first pair of tokens.
    TokensIssued,
    /// A refresh token was rotated.
    TokensRefreshed,
    /// A spent refresh token came back: its grant is revoked.
    RefreshReused,
    /// A human revoked a connection.
    ConnectionRevoked,
    /// The token endpoint refused a request (any RFC 6749 error).
    TokenRefused,
}

impl OAuthEvent {
    pub const ALL: [Self; 7] = [
        Self::ClientRegistered,
        Self::CodeIssued,
        Self::TokensIssued,
        Self::TokensRefreshed,
        Self::RefreshReused,
        Self::ConnectionRevoked,
        Self::TokenRefused,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClientRegistered => "client_registered",
            Self::CodeIssued => "code_issued",
            Self::TokensIssued => "tokens_issued",
            Self::TokensRefreshed => "tokens_refreshed",
            Self::RefreshReused => "refresh_reused",
            Self::ConnectionRevoked => "connection_revoked",
            Self::TokenRefused => "token_refused",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabels {
    pub event: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActionLabels {
    pub action: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TrustModeLabels {
    pub trust_mode: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    pub decision: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HeldLabels {
    pub reason: &'static str,
}

#[derive(Debug)]
pub struct EventCounters {
    /// `switchboard_claims_held_total{reason}`.
    pub claims_held: Family<HeldLabels, Counter>,
    pub attempts_finished: Family<OutcomeLabels, Counter>,
    /// `switchboard_intake_deliveries_total{decision}`.
    pub intake_deliveries: Family<DecisionLabels, Counter>,
    pub todos_created: Family<TrustModeLabels, Counter>,
    pub todo_actions: Family<ActionLabels, Counter>,
    /// `switchboard_oauth_events_total{event}`.
    pub oauth_events: Family<EventLabels, Counter>,
}

impl Default for EventCounters {
    /// Every series exists (at 0) from the start.
    fn default() -> Self {
        let counters = Self {
            claims_held: Family::default(),
            attempts_finished: Family::default(),
            intake_deliveries: Family::default(),
            todos_created: Family::default(),
            todo_actions: Family::default(),
            oauth_events: Family::default(),
        };
        for event in OAuthEvent::ALL {
            let _ = counters.oauth_events.get_or_create(&EventLabels {
                event: event.as_str(),
            });
        }
        for action in HumanAction::ALL {
            let _ = counters.todo_actions.get_or_create(&ActionLabels {
                action: action.as_str(),
            });
        }
        for reason in crate::domain::admission::HeldReason::ALL {
            let _ = counters.claims_held.get_or_create(&HeldLabels {
                reason: reason.as_str(),
            });
        }
        for end in AttemptEnd::ALL {
            let _ = counters.attempts_finished.get_or_create(&OutcomeLabels {
                outcome: end.as_str(),
            });
        }
        for decision in crate::domain::intake::Decision::ALL {
            let _ = counters.intake_deliveries.get_or_create(&DecisionLabels {
                decision: decision.as_str(),
            });
        }
        for mode in [TrustMode::Operator, TrustMode::Token, TrustMode::Signed] {
            let _ = counters.todos_created.get_or_create(&TrustModeLabels {
                trust_mode: mode.as_str(),
            });
        }
        counters
    }
}

impl EventCounters {
    pub fn count_attempts(&self, end: AttemptEnd, n: u64) {
        if n > 0 {
            self.attempts_finished
                .get_or_create(&OutcomeLabels {
                    outcome: end.as_str(),
                })
                .inc_by(n);
        }
    }

    pub fn count_created(&self, mode: TrustMode) {
        self.todos_created
            .get_or_create(&TrustModeLabels {
                trust_mode: mode.as_str(),
            })
            .inc();
    }

    pub fn count_decision(&self, decision: crate::domain::intake::Decision) {
        self.intake_deliveries
            .get_or_create(&DecisionLabels {
                decision: decision.as_str(),
            })
            .inc();
    }

    pub fn count_oauth(&self, event: OAuthEvent) {
        self.oauth_events
            .get_or_create(&EventLabels {
                event: event.as_str(),
            })
            .inc();
    }

    pub fn count_held(&self, reason: crate::domain::admission::HeldReason) {
        self.claims_held
            .get_or_create(&HeldLabels {
                reason: reason.as_str(),
            })
            .inc();
    }

    pub fn count_action(&self, action: HumanAction, n: u64) {
        if n > 0 {
            self.todo_actions
                .get_or_create(&ActionLabels {
                    action: action.as_str(),
                })
                .inc_by(n);
        }
    }

    pub fn attempts(&self, end: AttemptEnd) -> u64 {
        let labels = OutcomeLabels {
            outcome: end.as_str(),
        };
        self.attempts_finished.get(&labels).map_or(0, |c| c.get())
    }
}
