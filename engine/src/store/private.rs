//! Keeping run records to their owner: folders 0700, files 0600, and
//! `.specbridge/` out of git so that no `git add -A` picks a record up.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Creates `dir` and any missing parents as 0700 (existing folders are left as
/// they are).
pub(crate) fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Creates `dir` as 0700, and makes it 0700 when it already exists.
pub(crate) fn ensure_private_dir(dir: &Path) -> std::io::Result<()> {
    create_private_dir(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// The line that keeps the run store out of git.
pub const EXCLUDE_LINE: &str = ".specbridge/";

/// Whether `text` (an exclude or ignore file) already keeps `.specbridge/` out.
pub fn excludes_run_store(text: &str) -> bool {
    text.lines().map(str::trim).any(|l| {
        matches!(
            l,
            ".specbridge" | ".specbridge/" | "/.specbridge" | "/.specbridge/"
        )
    })
}

/// Appends `.specbridge/` to the ignore file at `path` unless it is there already.
/// Returns whether the file changed.
pub fn add_exclude_line(path: &Path) -> std::io::Result<bool> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e),
    };
    if excludes_run_store(&text) {
        return Ok(false);
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    crate::evidence::note_own_write();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let sep = if text.is_empty() || text.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    writeln!(
        f,
        "{sep}# specbridge run records (they may hold logs of your tools)"
    )?;
    writeln!(f, "{EXCLUDE_LINE}")?;
    f.sync_all()?;
    Ok(true)
}

/// `.git/info/exclude` of the repository at `root` (the common one of a worktree),
/// as git itself resolves it; `None` outside a git repository.
pub fn git_exclude_file(root: &Path) -> Option<PathBuf> {
    crate::evidence::repository_paths(root)
        .ok()
        .map(|paths| paths.exclude_file.clone())
}

/// Keeps `.specbridge/` out of git in the repository at `root`, once.
pub(crate) fn exclude_from_git(root: &Path) -> std::io::Result<bool> {
    match git_exclude_file(root) {
        Some(path) => add_exclude_line(&path),
        None => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_is_added_once_and_after_a_missing_newline() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("info/exclude");
        assert!(add_exclude_line(&p).unwrap());
        assert!(!add_exclude_line(&p).unwrap());
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text.matches(EXCLUDE_LINE).count(), 1);
        let q = dir.path().join("other");
        std::fs::write(&q, "*.o").unwrap();
        assert!(add_exclude_line(&q).unwrap());
        let text = std::fs::read_to_string(&q).unwrap();
        assert!(text.starts_with("*.o\n#"), "{text}");
        std::fs::write(&q, "/.specbridge\n").unwrap();
        assert!(!add_exclude_line(&q).unwrap());
    }
}
