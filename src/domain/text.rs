//! Bounded text: cutting on UTF-8 boundaries and stripping control characters.

/// The longest prefix of `s` that is at most `max_bytes` long and ends on a
/// character boundary.
pub fn cut_to_bytes(s: &str, max_bytes: usize) -> &str {
    if s.len() <= max_bytes {
        return s;
    }
    let mut end = max_bytes;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Cuts `s` to `max_bytes`, reporting whether anything was cut.
pub fn truncate_reporting(s: &str, max_bytes: usize) -> (String, bool) {
    let cut = cut_to_bytes(s, max_bytes);
    (cut.to_owned(), cut.len() < s.len())
}

/// Removes control characters, then cuts to `max_bytes`.
pub fn strip_controls_and_cut(s: &str, max_bytes: usize) -> String {
    let clean: String = s.chars().filter(|c| !c.is_control()).collect();
    cut_to_bytes(&clean, max_bytes).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_on_char_boundaries() {
        assert_eq!(cut_to_bytes("héllo", 2), "h");
        assert_eq!(cut_to_bytes("héllo", 3), "hé");
        assert_eq!(cut_to_bytes("abc", 10), "abc");
        assert_eq!(truncate_reporting("€€", 4), ("€".to_owned(), true));
        assert_eq!(truncate_reporting("€", 3), ("€".to_owned(), false));
    }

    #[test]
    fn strips_controls() {
        assert_eq!(strip_controls_and_cut("a\u{0}b\nc\u{7f}", 10), "abc");
        assert_eq!(strip_controls_and_cut("worker-1", 3), "wor");
    }
}
