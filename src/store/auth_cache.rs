//! A short-lived cache of credential → endpoint for the MCP surface, which
//! authenticates every request (issue 14: one lookup per call was a third of
//! the round trips of an MCP loop on PostgreSQL, and a second writer-lane job
//! per call on SQLite).
//!
//! Revocation-safe: an entry is served only while (a) it is younger than
//! [`AUTH_CACHE_TTL`], (b) no write to endpoints, agents or humans happened
//! through this store since it was loaded (a generation counter, bumped by
//! every such write here), (c) the endpoint has not expired by the store's
//! clock, and (d) no instance announced a revocation since (the bus's
//! `EndpointRevoked`, and a bus gap, call [`StoreBase::forget_credentials`]);
//! on SQLite, (e) no other connection committed to the file since the
//! writer lane's last transaction (`PRAGMA data_version`: a tool writing the
//! file beside the server). The age bound caps what a lost bus message, or
//! a write to the file while the lane is idle, could keep alive: such a
//! change is seen here within the TTL at the latest; a revoke through any
//! instance is seen at once.
//!
//! [`StoreBase::forget_credentials`]: crate::store::StoreBase::forget_credentials

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::domain::Timestamp;
use crate::store::Endpoint;

/// How long a cached credential may be served without asking the database.
pub const AUTH_CACHE_TTL: Duration = Duration::from_secs(2);

/// Beyond this many entries the cache is emptied (a flood of distinct
/// credentials must not grow memory; real fleets hold far fewer).
const MAX_ENTRIES: usize = 10_000;

#[derive(Debug, Default)]
pub struct AuthCache {
    generation: AtomicU64,
    entries: Mutex<HashMap<String, Entry>>,
}

#[derive(Debug)]
struct Entry {
    /// Shared with every hit: an MCP request authenticates on each call,
    /// and a copy of the row was a dozen allocations (issue 47).
    endpoint: Arc<Endpoint>,
    loaded_at: Instant,
    generation: u64,
    /// When the credential itself expires, if before its endpoint (an
    /// OAuth access token).
    until: Option<Timestamp>,
}

impl AuthCache {
    /// The generation to tag a load with: read it BEFORE the database
    /// lookup, so a write racing the lookup makes the entry stale at once.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub fn get(&self, credential_hash: &str, now: Timestamp) -> Option<Arc<Endpoint>> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let entry = entries.get(credential_hash)?;
        let fresh = entry.loaded_at.elapsed() < AUTH_CACHE_TTL
            && entry.generation == self.generation()
            && entry.endpoint.expires_at.is_none_or(|at| at > now)
            && entry.until.is_none_or(|at| at > now);
        fresh.then(|| entry.endpoint.clone())
    }

    pub fn put(&self, credential_hash: &str, endpoint: Arc<Endpoint>, generation: u64) {
        self.put_until(credential_hash, endpoint, generation, None);
    }

    /// [`Self::put`] a credential that expires at `until` (by the store's clock).
    pub fn put_until(
        &self,
        credential_hash: &str,
        endpoint: Arc<Endpoint>,
        generation: u64,
        until: Option<Timestamp>,
    ) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(
            credential_hash.to_owned(),
            Entry {
                endpoint,
                loaded_at: Instant::now(),
                generation,
                until,
            },
        );
    }

    /// Every entry is stale from now on: something about endpoints changed.
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::presence::Presence;
    use crate::domain::registry::{AgentKind, EndpointState};

    fn endpoint(expires_at: Option<i64>) -> Arc<Endpoint> {
        Arc::new(Endpoint {
            id: "ep_1".into(),
            agent_id: "ag_1".into(),
            human_id: "hu_1".into(),
            slug: "worker-1".into(),
            credential_prefix: "sbk_12345678".into(),
            scope_queues: vec!["inbox".into()],
            scope_verbs: vec![],
            state: EndpointState::Active,
            created_at: Timestamp::from_millis(0),
            revoked_at: None,
            expires_at: expires_at.map(Timestamp::from_millis),
            last_seen_at: None,
            last_contact_at: None,
            default_lease_ttl_seconds: None,
            last_note: None,
            last_note_at: None,
            shift: None,
            presence_override: None,
            override_until: None,
            override_set_at: None,
            override_by: None,
            presence_seen: Presence::In,
            presence_changed_at: None,
            presence_changed_by: None,
            server_name_set: None,
            agent_name: "worker".into(),
            agent_kind: AgentKind::Task,
            agent_expected_interval_seconds: None,
        })
    }

    const NOW: Timestamp = Timestamp::from_millis(1_000);

    #[test]
    fn a_fresh_entry_is_served_and_an_invalidation_drops_it() {
        let cache = AuthCache::default();
        assert!(cache.get("h", NOW).is_none());
        cache.put("h", endpoint(None), cache.generation());
        assert_eq!(
            cache.get("h", NOW).map(|e| e.id.clone()),
            Some("ep_1".into())
        );
        cache.invalidate();
        assert!(cache.get("h", NOW).is_none());
    }

    #[test]
    fn a_load_that_raced_a_write_is_never_served() {
        let cache = AuthCache::default();
        // The lookup read the generation, then a write invalidated, then
        // the (possibly stale) row was put: it must not be served.
        let generation = cache.generation();
        cache.invalidate();
        cache.put("h", endpoint(None), generation);
        assert!(cache.get("h", NOW).is_none());
    }

    #[test]
    fn an_expired_credential_is_not_served_from_the_cache() {
        let cache = AuthCache::default();
        cache.put_until(
            "h",
            endpoint(None),
            cache.generation(),
            Some(Timestamp::from_millis(1_500)),
        );
        assert!(cache.get("h", NOW).is_some());
        assert!(cache.get("h", Timestamp::from_millis(1_500)).is_none());
    }

    #[test]
    fn an_expired_endpoint_is_not_served_from_the_cache() {
        let cache = AuthCache::default();
        cache.put("h", endpoint(Some(1_500)), cache.generation());
        assert!(cache.get("h", NOW).is_some());
        assert!(cache.get("h", Timestamp::from_millis(1_500)).is_none());
    }
}
