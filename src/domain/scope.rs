//! An endpoint's immutable scope: which queues it works and which verbs it may call.

use super::Invalid;
use super::todo::validate_queue_name;

/// Verbs a vend may grant (`docs/mcp.md`). The self verbs (`clock_in`,
/// `clock_out`, `presence`) are never part of a scope.
pub const GRANTABLE_VERBS: [&str; 10] = [
    "list_todos",
    "get_todo",
    "claim",
    "claim_next",
    "heartbeat",
    "complete",
    "fail",
    "release",
    "get_default_lease",
    "set_default_lease",
];

pub const MAX_SCOPE_QUEUES: usize = 32;

/// Validates and normalises a scope: queue names checked, duplicates dropped,
/// order kept; no verbs means all grantable verbs.
pub fn normalize_scope(
    queues: &[String],
    verbs: &[String],
) -> Result<(Vec<String>, Vec<String>), Invalid> {
    if queues.is_empty() {
        return Err(Invalid::new(
            "queues",
            "an endpoint needs at least one queue",
        ));
    }
    if queues.len() > MAX_SCOPE_QUEUES {
        return Err(Invalid::new(
            "queues",
            format!("at most {MAX_SCOPE_QUEUES} queues per endpoint"),
        ));
    }
    let mut clean_queues: Vec<String> = Vec::with_capacity(queues.len());
    for q in queues {
        validate_queue_name(q, "queues")?;
        if !clean_queues.contains(q) {
            clean_queues.push(q.clone());
        }
    }
    let mut clean_verbs: Vec<String> = Vec::new();
    for v in verbs {
        if !GRANTABLE_VERBS.contains(&v.as_str()) {
            return Err(Invalid::new(
                "verbs",
                format!(
                    "{v:?} is not a grantable verb; expected one of {}",
                    GRANTABLE_VERBS.join(", ")
                ),
            ));
        }
        if !clean_verbs.contains(v) {
            clean_verbs.push(v.clone());
        }
    }
    if clean_verbs.is_empty() {
        clean_verbs = GRANTABLE_VERBS.iter().map(|v| (*v).to_owned()).collect();
    }
    Ok((clean_queues, clean_verbs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn defaults_and_dedup() {
        let (q, v) = normalize_scope(&s(&["inbox", "inbox", "reviews"]), &[]).unwrap();
        assert_eq!(q, s(&["inbox", "reviews"]));
        assert_eq!(v.len(), GRANTABLE_VERBS.len());
    }

    #[test]
    fn refusals_name_the_field() {
        assert_eq!(normalize_scope(&[], &[]).unwrap_err().field, "queues");
        assert_eq!(
            normalize_scope(&s(&["Bad"]), &[]).unwrap_err().field,
            "queues"
        );
        assert_eq!(
            normalize_scope(&s(&["inbox"]), &s(&["clock_in"]))
                .unwrap_err()
                .field,
            "verbs"
        );
    }
}
