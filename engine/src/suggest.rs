//! "Did you mean" for names the user got almost right.

/// The closest candidate to `name`, when it is close enough to be a likely typo.
pub fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(name, c), c))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        let names = ["requirements", "design", "tasks"];
        assert_eq!(did_you_mean("requirments", names), Some("requirements"));
        assert_eq!(did_you_mean("desgin", names), Some("design"));
        assert_eq!(did_you_mean("zzz", names), None);
    }
}
