//! Where git keeps a repository's files, as git itself resolves them: asked
//! once per root and process, in one `git rev-parse`. A run's preflight, its run
//! store (the exclude file) and every snapshot (the control files) need them, and
//! none of them moves while a run works on the repository; asked one by one they
//! were three processes on the path of a run's start.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use super::git::Git;
use super::EvidenceError;

/// Paths of the repository whose working tree holds a root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepositoryPaths {
    /// The top level of the working tree (`--show-toplevel`), as git prints it.
    pub top: PathBuf,
    /// The common git folder (`--git-common-dir`): the one of the main working
    /// tree for a linked worktree.
    pub common_dir: PathBuf,
    /// `info/exclude` as git resolves it (`--git-path info/exclude`).
    pub exclude_file: PathBuf,
}

const ARGS: &[&str] = &[
    "rev-parse",
    "--show-toplevel",
    "--git-common-dir",
    "--git-path",
    "info/exclude",
];

/// The repository paths of `root`, from git the first time they are asked for
/// `root` in this process. Failures are not remembered: outside a repository
/// (or without git) every call asks again and fails again.
pub fn repository_paths(root: &Path) -> Result<Arc<RepositoryPaths>, EvidenceError> {
    static KNOWN: Mutex<BTreeMap<PathBuf, Arc<RepositoryPaths>>> = Mutex::new(BTreeMap::new());
    let known = || KNOWN.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(paths) = known().get(root) {
        return Ok(Arc::clone(paths));
    }
    let git = Git::new(root);
    let out = git.run(ARGS)?;
    let paths = Arc::new(parse(root, &out).map_err(|d| git.bad_output(ARGS, d))?);
    known().insert(root.to_path_buf(), Arc::clone(&paths));
    Ok(paths)
}

/// Three lines; the relative ones are relative to `root`, where git ran.
fn parse(root: &Path, out: &[u8]) -> Result<RepositoryPaths, String> {
    let lines: Vec<&[u8]> = out
        .strip_suffix(b"\n")
        .unwrap_or(out)
        .split(|b| *b == b'\n')
        .collect();
    let [top, common, exclude] = lines[..] else {
        return Err(format!("expected 3 lines, got {}", lines.len()));
    };
    if [top, common, exclude].iter().any(|l| l.is_empty()) {
        return Err("an empty path".into());
    }
    let path = |l: &[u8]| root.join(OsStr::from_bytes(l));
    Ok(RepositoryPaths {
        top: PathBuf::from(OsStr::from_bytes(top)),
        common_dir: path(common),
        exclude_file: path(exclude),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_lines_relative_to_the_root() {
        let p = parse(Path::new("/r"), b"/r\n.git\n.git/info/exclude\n").unwrap();
        assert_eq!(p.top, Path::new("/r"));
        assert_eq!(p.common_dir, Path::new("/r/.git"));
        assert_eq!(p.exclude_file, Path::new("/r/.git/info/exclude"));
        let abs = parse(
            Path::new("/w"),
            b"/w\n/main/.git\n/main/.git/info/exclude\n",
        )
        .unwrap();
        assert_eq!(abs.common_dir, Path::new("/main/.git"));
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            &b""[..],
            b"/r\n.git\n",
            b"/r\n\n.git/info/exclude\n",
            b"a\nb\nc\nd\n",
        ] {
            assert!(parse(Path::new("/r"), bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_repository_is_asked_once_and_a_folder_outside_one_every_time() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert!(repository_paths(root).is_err());
        let init = std::process::Command::new("git")
            .args(["init", "-q"])
            .current_dir(root)
            .status()
            .unwrap();
        assert!(init.success());
        let paths = repository_paths(root).unwrap();
        assert_eq!(
            std::fs::canonicalize(&paths.top).unwrap(),
            std::fs::canonicalize(root).unwrap()
        );
        assert_eq!(paths.exclude_file, root.join(".git/info/exclude"));
        // Remembered: the same answer even once the repository is gone.
        std::fs::remove_dir_all(root.join(".git")).unwrap();
        assert!(Arc::ptr_eq(&paths, &repository_paths(root).unwrap()));
    }
}
