//! Names people choose for things.

use super::Invalid;

/// Agent names: lowercase `[a-z0-9][a-z0-9-]{0,62}`.
pub fn validate_agent_name(name: &str) -> Result<(), Invalid> {
    let b = name.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 63
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-');
    if ok {
        Ok(())
    } else {
        Err(Invalid::new(
            "name",
            format!(
                "{name:?} is not an agent name: 1-63 characters of a-z, 0-9 or '-', starting with a letter or digit"
            ),
        ))
    }
}
