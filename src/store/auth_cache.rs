//! A short-lived cache of credential → endpoint for the MCP surface on
//! PostgreSQL (on SQLite the lookup is in process, and local tools may
//! write the file behind the server's back), which
//! authenticates every request (issue 14: one lookup per call was a third of
//! the round trips of an MCP loop).
//!
//! Revocation-safe: an entry is served only while (a) it is younger than
//! [`AUTH_CACHE_TTL`], (b) no write to endpoints, agents or humans happened
//! through this store since it was loaded (a generation counter, bumped by
//! every such write here), (c) the endpoint has not expired by the store's
//! clock, and (d) no instance announced a revocation since (the bus's
//! `EndpointRevoked`, and a bus gap, call [`StoreBase::forget_credentials`]).
//! The age bound caps what a lost bus message could keep alive: a change made
//! on another instance is seen here within the TTL at the latest; a revoke is
//! seen at once.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
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
    endpoint: Endpoint,
    loaded_at: Instant,
    generation: u64,
}

impl AuthCache {
    /// The generation to tag a load with: read it BEFORE the database
    /// lookup, so a write racing the lookup makes the entry stale at once.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub fn get(&self, credential_hash: &str, now: Timestamp) -> Option<Endpoint> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let entry = entries.get(credential_hash)?;
        let fresh = entry.loaded_at.elapsed() < AUTH_CACHE_TTL
            && entry.generation == self.generation()
            && entry.endpoint.expires_at.is_none_or(|at| at > now);
        fresh.then(|| entry.endpoint.clone())
    }

    pub fn put(&self, credential_hash: &str, endpoint: Endpoint, generation: u64) {
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
