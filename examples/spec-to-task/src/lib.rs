//! Statistics about a text.

/// The number of lines of `text`; a final line without a newline counts.
pub fn count_lines(text: &str) -> usize {
    text.lines().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_lines() {
        assert_eq!(count_lines(""), 0);
        assert_eq!(count_lines("one\ntwo\n"), 2);
        assert_eq!(count_lines("one\ntwo"), 2);
    }
}
