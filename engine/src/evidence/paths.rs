//! Repository-relative paths as git prints them: `/`-separated, no leading `./`.

/// Normalize a path given by a user or a pipeline file so that it compares equal to
/// the paths git reports: separators unified, `.` components and repeated or trailing
/// slashes removed. `.` (the whole repository) becomes the empty string.
pub fn normalize_rel_path(path: &str) -> String {
    path.replace('\\', "/")
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect::<Vec<_>>()
        .join("/")
}

/// Whether `path` is `prefix` itself or lies under it, by whole components: `db/migrations`
/// covers `db/migrations/001.sql` but not `db/migrations-old`. An empty prefix covers
/// everything.
pub(crate) fn is_under(path: &str, prefix: &str) -> bool {
    prefix.is_empty()
        || path == prefix
        || (path.len() > prefix.len()
            && path.starts_with(prefix)
            && path.as_bytes()[prefix.len()] == b'/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_like_git_prints() {
        assert_eq!(normalize_rel_path("./db//migrations/"), "db/migrations");
        assert_eq!(normalize_rel_path("."), "");
        assert_eq!(normalize_rel_path("a\\b"), "a/b");
    }

    #[test]
    fn prefixes_match_whole_components() {
        assert!(is_under("db/migrations/001.sql", "db/migrations"));
        assert!(is_under("db/migrations", "db/migrations"));
        assert!(!is_under("db/migrations-old/001.sql", "db/migrations"));
        assert!(!is_under("db", "db/migrations"));
        assert!(is_under("anything", ""));
    }
}
