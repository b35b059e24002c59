//! Choosing a run: a full id, a unique prefix, or `latest`. Run ids are UUID v7, so
//! their text order is their creation order.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum RunSelectError {
    #[error("no runs recorded yet in {0}")]
    NoRuns(PathBuf),
    #[error("no run matches `{selector}` in {dir}")]
    NotFound { selector: String, dir: PathBuf },
    #[error("`{selector}` matches {count} runs ({examples}); give more characters")]
    Ambiguous {
        selector: String,
        count: usize,
        examples: String,
    },
    #[error("`{0}` is not a run id: use a run id, a unique prefix of one, or `latest`")]
    Invalid(String),
    #[error("failed to read {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The longest stage id or fan-out instance id (`<stage>.<item>`), in bytes. Each
/// becomes a folder name under `stages/`; file systems allow 255 bytes, and the
/// rest is room for what may be put around one (`.tmp-`, `.torn-N`, a branch or
/// worktree prefix).
pub const MAX_ID_BYTES: usize = 200;

/// The longest name a file system allows for one path component.
pub const MAX_NAME_BYTES: usize = 255;

/// A path component that cannot escape its folder: `[A-Za-z0-9._-]`, not empty,
/// not starting with a dot (so never `.` or `..`), and short enough to be a name.
pub fn is_safe_component(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAME_BYTES
        && !s.starts_with('.')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Every run id in `runs_dir`, oldest first.
pub(crate) fn run_ids(runs_dir: &Path) -> Result<Vec<String>, RunSelectError> {
    let entries = match std::fs::read_dir(runs_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(RunSelectError::Io {
                path: runs_dir.to_path_buf(),
                source,
            })
        }
    };
    let mut ids: Vec<String> = entries
        .filter_map(std::result::Result::ok)
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| uuid::Uuid::parse_str(n).is_ok())
        .collect();
    ids.sort();
    Ok(ids)
}

/// For each of `ids` (sorted, as [`run_ids`] gives them), its shortest prefix of at
/// least `min` characters that no other id shares. Sorted ids share their longest
/// prefix with a neighbour, so this is linear in the ids.
pub fn shortest_unique_prefixes(ids: &[String], min: usize) -> Vec<String> {
    let common = |a: &str, b: &str| a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    (0..ids.len())
        .map(|i| {
            let id = &ids[i];
            let before = i.checked_sub(1).map_or(0, |j| common(id, &ids[j]));
            let after = ids.get(i + 1).map_or(0, |next| common(id, next));
            let mut n = min.max(before.max(after) + 1).min(id.len());
            while !id.is_char_boundary(n) {
                n += 1;
            }
            id[..n].to_string()
        })
        .collect()
}

/// Resolve a selector to a run id.
pub(crate) fn select(runs_dir: &Path, selector: &str) -> Result<String, RunSelectError> {
    let ids = run_ids(runs_dir)?;
    if selector == "latest" {
        return ids
            .last()
            .cloned()
            .ok_or_else(|| RunSelectError::NoRuns(runs_dir.to_path_buf()));
    }
    if !is_safe_component(selector) || selector.contains("..") {
        return Err(RunSelectError::Invalid(selector.to_string()));
    }
    let matches: Vec<&String> = ids.iter().filter(|id| id.starts_with(selector)).collect();
    match matches.as_slice() {
        [] => Err(RunSelectError::NotFound {
            selector: selector.to_string(),
            dir: runs_dir.to_path_buf(),
        }),
        [one] => Ok((*one).clone()),
        many => Err(RunSelectError::Ambiguous {
            selector: selector.to_string(),
            count: many.len(),
            examples: many
                .iter()
                .take(3)
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selects_by_full_id_prefix_and_latest() {
        let dir = tempfile::tempdir().unwrap();
        let a = "01900000-0000-7000-8000-000000000001";
        let b = "01900000-0000-7000-8000-000000000002";
        let c = "01910000-0000-7000-8000-000000000003";
        for id in [a, b, c] {
            std::fs::create_dir(dir.path().join(id)).unwrap();
        }
        std::fs::create_dir(dir.path().join("not-a-run")).unwrap();
        assert_eq!(select(dir.path(), "latest").unwrap(), c);
        assert_eq!(select(dir.path(), a).unwrap(), a);
        assert_eq!(select(dir.path(), "0191").unwrap(), c);
        let e = select(dir.path(), "0190").unwrap_err();
        assert!(e.to_string().contains("matches 2 runs"), "{e}");
        assert!(matches!(
            select(dir.path(), "ff"),
            Err(RunSelectError::NotFound { .. })
        ));
        assert!(matches!(
            select(dir.path(), "../x"),
            Err(RunSelectError::Invalid(_))
        ));
    }

    #[test]
    fn shortest_prefixes_are_unique_and_at_least_the_minimum() {
        let ids: Vec<String> = [
            "01900000-0000-7000-8000-000000000001",
            "01900000-0000-7000-8000-000000000002",
            "01900000-1000-7000-8000-000000000003",
            "01910000-0000-7000-8000-000000000004",
        ]
        .map(String::from)
        .to_vec();
        let short = shortest_unique_prefixes(&ids, 8);
        assert_eq!(
            short,
            [
                "01900000-0000-7000-8000-000000000001",
                "01900000-0000-7000-8000-000000000002",
                "01900000-1",
                "01910000",
            ]
        );
        for (i, s) in short.iter().enumerate() {
            let matching = ids.iter().filter(|id| id.starts_with(s.as_str())).count();
            assert_eq!(matching, 1, "{s} must name only {}", ids[i]);
        }
        assert!(shortest_unique_prefixes(&[], 8).is_empty());
        assert_eq!(shortest_unique_prefixes(&["abc".to_string()], 8), ["abc"]);
    }

    #[test]
    fn latest_of_nothing_says_so() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            select(&dir.path().join("missing"), "latest"),
            Err(RunSelectError::NoRuns(_))
        ));
    }

    #[test]
    fn safe_components() {
        for ok in ["implement.task-1", "a_b", "A9"] {
            assert!(is_safe_component(ok), "{ok}");
        }
        for bad in ["", ".", "..", ".hidden", "a/b", "a b", "x\0"] {
            assert!(!is_safe_component(bad), "{bad:?}");
        }
    }
}
