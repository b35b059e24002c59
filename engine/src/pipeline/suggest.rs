//! "Did you mean" suggestions for misspelt keys and stage ids.

/// The candidate closest to `word`, if it is close enough to be a likely typo.
pub(crate) fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| {
            (
                strsim::jaro_winkler(&word.to_lowercase(), &c.to_lowercase()),
                c,
            )
        })
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0).then_with(|| b.1.cmp(a.1)))
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_words_are_suggested_and_far_ones_not() {
        let keys = ["needs", "kind", "prompt", "output"];
        assert_eq!(did_you_mean("neds", keys), Some("needs"));
        assert_eq!(did_you_mean("promt", keys), Some("prompt"));
        assert_eq!(did_you_mean("zzz", keys), None);
        assert_eq!(did_you_mean("desgin", ["design", "tasks"]), Some("design"));
    }
}
