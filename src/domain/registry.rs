//! The registry's closed vocabularies (`docs/api.md`): what kind an agent
//! is, and whether an endpoint still works. Stored as text; these are the
//! only spellings.

use serde::Serialize;

/// How often an agent is expected to be heard from (`docs/api.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentKind {
    Heartbeat,
    Session,
    Task,
}

impl AgentKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Heartbeat => "heartbeat",
            Self::Session => "session",
            Self::Task => "task",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::Heartbeat, Self::Session, Self::Task]
            .into_iter()
            .find(|k| k.as_str() == s)
    }
}

/// Whether an endpoint's credential works.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EndpointState {
    Active,
    Revoked,
}

impl EndpointState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Revoked => "revoked",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::Active, Self::Revoked]
            .into_iter()
            .find(|state| state.as_str() == s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_round_trips() {
        for kind in [AgentKind::Heartbeat, AgentKind::Session, AgentKind::Task] {
            assert_eq!(AgentKind::parse(kind.as_str()), Some(kind));
        }
        for state in [EndpointState::Active, EndpointState::Revoked] {
            assert_eq!(EndpointState::parse(state.as_str()), Some(state));
        }
        assert_eq!(EndpointState::parse("Active"), None);
    }
}
