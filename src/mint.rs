//! Minting identifiers and secrets: prefixed, time-ordered ids (`td_…`,
//! `ep_…`), credentials, slugs. This reads the system clock (UUIDv7) and the
//! OS random source, which is why it is not in [`crate::domain`]; how a
//! minted secret is stored is the domain's ([`crate::domain::ids::sha256_hex`]).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// `prefix` + `_` + a UUIDv7, so ids sort by creation time.
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}

pub fn new_todo_id() -> String {
    new_id("td")
}

/// A running instance's id: a UUIDv7 in hex (time-ordered, so logs sort).
pub fn new_instance_id() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

/// A request's id (`X-Request-Id`) when the client sent none: a UUIDv7,
/// hyphenated, so ids sort by time (to the millisecond) in the logs.
///
/// One is minted per request, so not with `Uuid::now_v7`: its process-wide
/// context is a mutex the tokio workers contended for (`futex` waits), and
/// it read the OS random source twice per id (issue 47, B2's profile: 1.4
/// `getrandom` calls per MCP request). The random bits here come from a
/// per-thread buffer of OS randomness; ids of one millisecond are not
/// ordered among themselves, which no log reader relies on.
pub fn new_request_id() -> String {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64);
    let random = pooled_random::<10>();
    let id = uuid::Builder::from_unix_timestamp_millis(millis, &random).into_uuid();
    id.hyphenated()
        .encode_lower(&mut uuid::Uuid::encode_buffer())
        .to_owned()
}

/// Bytes of OS randomness a thread keeps for [`pooled_random`]: one
/// `getrandom` call per 64 request ids.
const RANDOM_POOL: usize = 640;

thread_local! {
    /// OS randomness not handed out yet: the unread part is `pool[next..]`.
    static POOL: std::cell::RefCell<(usize, [u8; RANDOM_POOL])> =
        const { std::cell::RefCell::new((RANDOM_POOL, [0; RANDOM_POOL])) };
}

/// `N` bytes of OS randomness (never handed out twice), from this thread's
/// pool, which is refilled when it runs short. Not for secrets that must
/// not sit in memory before use; for those, `getrandom` directly.
fn pooled_random<const N: usize>() -> [u8; N] {
    const { assert!(N <= RANDOM_POOL) };
    POOL.with_borrow_mut(|(next, pool)| {
        if *next + N > RANDOM_POOL {
            getrandom::fill(pool).expect("the operating system's random source failed");
            *next = 0;
        }
        let mut out = [0; N];
        out.copy_from_slice(&pool[*next..*next + N]);
        *next += N;
        out
    })
}

/// `n` random bytes, base64url without padding.
pub fn random_token(n: usize) -> String {
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf).expect("the operating system's random source failed");
    URL_SAFE_NO_PAD.encode(buf)
}

/// A human API token: `sbh_` + base64url of 32 random bytes.
pub fn new_human_token() -> String {
    format!("sbh_{}", random_token(32))
}

/// An endpoint credential: `sbk_` + base64url of 32 random bytes.
pub fn new_endpoint_credential() -> String {
    format!("sbk_{}", random_token(32))
}

/// The secret part of a webhook ingest URL: 32 lowercase hex characters.
pub fn new_webhook_url_token() -> String {
    random_hex(16)
}

/// A webhook signing secret: 64 lowercase hex characters.
pub fn new_signing_secret() -> String {
    random_hex(32)
}

/// A notify hook's signing secret, as Standard Webhooks writes one:
/// `whsec_` + standard base64 of 32 random bytes (the HMAC key is those bytes).
pub fn new_hook_secret() -> String {
    let mut buf = [0u8; 32];
    getrandom::fill(&mut buf).expect("the operating system's random source failed");
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(buf)
    )
}

/// An endpoint slug: the agent's name, `-`, and 4 random `[a-z0-9]`.
pub fn new_slug(agent_name: &str) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut buf = [0u8; 4];
    getrandom::fill(&mut buf).expect("the operating system's random source failed");
    let suffix: String = buf
        .iter()
        .map(|b| ALPHABET[(*b as usize) % ALPHABET.len()] as char)
        .collect();
    format!("{agent_name}-{suffix}")
}

fn random_hex(n: usize) -> String {
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf).expect("the operating system's random source failed");
    crate::domain::ids::lower_hex(&buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_and_ordered() {
        let a = new_todo_id();
        let b = new_todo_id();
        assert!(a.starts_with("td_") && a.len() == 35, "{a}");
        assert!(a < b);
    }

    #[test]
    fn credentials_have_their_shapes() {
        assert!(new_human_token().starts_with("sbh_") && new_human_token().len() == 47);
        assert!(new_endpoint_credential().starts_with("sbk_"));
        let url = new_webhook_url_token();
        assert!(url.len() == 32 && url.bytes().all(|b| b.is_ascii_hexdigit()));
        let slug = new_slug("reviewer");
        assert!(slug.starts_with("reviewer-") && slug.len() == 13, "{slug}");
    }

    #[test]
    fn request_ids_are_distinct_v7_uuids() {
        let ids: std::collections::HashSet<String> =
            (0..3 * RANDOM_POOL).map(|_| new_request_id()).collect();
        assert_eq!(ids.len(), 3 * RANDOM_POOL);
        let id = uuid::Uuid::parse_str(ids.iter().next().unwrap()).unwrap();
        assert_eq!(id.get_version(), Some(uuid::Version::SortRand));
        let (secs, _) = id.get_timestamp().unwrap().to_unix();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert!(now.abs_diff(secs) < 60, "{secs} vs {now}");
    }

    #[test]
    fn random_tokens_differ() {
        assert_eq!(random_token(16).len(), 22);
        assert_ne!(random_token(16), random_token(16));
    }
}
