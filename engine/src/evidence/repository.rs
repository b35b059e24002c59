//! Where git keeps a repository's files, as git itself resolves them: asked
//! once per root and process, in one `git rev-parse`. A run's preflight, its run
//! store (the exclude file), every snapshot (the control files) and every copy
//! of the index that evidence makes need them, and none of them moves while a
//! run works on the repository; asked one by one they were three processes on
//! the path of a run's start, and one more for each attempt's diff.

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
    /// The user's index as git resolves it (`--git-path index`), never a
    /// `GIT_INDEX_FILE` specbridge was started with: the copies that evidence
    /// makes of it (`evidence::diff`, the working tree's object).
    pub index_file: PathBuf,
}

const ARGS: &[&str] = &[
    "rev-parse",
    "--show-toplevel",
    "--git-common-dir",
    "--git-path",
    "info/exclude",
    "--git-path",
    "index",
];

/// The repository paths of `root`, from git the first time they are asked for
/// `root` in this process. Failures are not remembered: outside a repository
/// (or without git) every call asks again and fails again.
///
/// A call made while another is asking git about the same root waits for that
/// answer instead of starting a second git ([`ask_ahead`]).
pub fn repository_paths(root: &Path) -> Result<Arc<RepositoryPaths>, EvidenceError> {
    remembered(root, |root| {
        let git = Git::new(root);
        let out = git.run(ARGS)?;
        parse(root, &out).map_err(|d| git.bad_output(ARGS, d))
    })
}

/// `root`'s remembered paths, else what `ask` finds, remembered when found.
fn remembered(
    root: &Path,
    ask: impl FnOnce(&Path) -> Result<RepositoryPaths, EvidenceError>,
) -> Result<Arc<RepositoryPaths>, EvidenceError> {
    let slot = slot_of(root);
    let mut known = slot.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(paths) = known.as_ref() {
        return Ok(Arc::clone(paths));
    }
    let paths = Arc::new(ask(root)?);
    *known = Some(Arc::clone(&paths));
    Ok(paths)
}

/// Asks git for `root`'s paths on a thread of its own, so that the first caller
/// finds them known (or waits for less). A run starts this before loading its
/// pipeline: its preflight, its run store and every snapshot need the answer,
/// and the `git rev-parse` (about 1.5-2.5 ms) was otherwise waited for between
/// the load and detection. What it finds is what the first call would have
/// found; a failure is not remembered, so the caller that needs the answer
/// asks again and reports the error itself.
pub fn ask_ahead(root: &Path) {
    let root = root.to_path_buf();
    // Best effort: a refused thread leaves the first caller to ask, as before.
    let _ = std::thread::Builder::new()
        .name("specbridge-repo".into())
        .spawn(move || {
            let _ = repository_paths(&root);
        });
}

/// The one slot per root that remembers its paths; its lock is held while git
/// is asked.
fn slot_of(root: &Path) -> Arc<Mutex<Option<Arc<RepositoryPaths>>>> {
    type Slots = BTreeMap<PathBuf, Arc<Mutex<Option<Arc<RepositoryPaths>>>>>;
    static SLOTS: Mutex<Slots> = Mutex::new(BTreeMap::new());
    let mut slots = SLOTS.lock().unwrap_or_else(PoisonError::into_inner);
    Arc::clone(slots.entry(root.to_path_buf()).or_default())
}

/// Four lines; the relative ones are relative to `root`, where git ran.
fn parse(root: &Path, out: &[u8]) -> Result<RepositoryPaths, String> {
    let lines: Vec<&[u8]> = out
        .strip_suffix(b"\n")
        .unwrap_or(out)
        .split(|b| *b == b'\n')
        .collect();
    let [top, common, exclude, index] = lines[..] else {
        return Err(format!("expected 4 lines, got {}", lines.len()));
    };
    if [top, common, exclude, index].iter().any(|l| l.is_empty()) {
        return Err("an empty path".into());
    }
    let path = |l: &[u8]| root.join(OsStr::from_bytes(l));
    Ok(RepositoryPaths {
        top: PathBuf::from(OsStr::from_bytes(top)),
        common_dir: path(common),
        exclude_file: path(exclude),
        index_file: path(index),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_lines_relative_to_the_root() {
        let p = parse(
            Path::new("/r"),
            b"/r\n.git\n.git/info/exclude\n.git/index\n",
        )
        .unwrap();
        assert_eq!(p.top, Path::new("/r"));
        assert_eq!(p.common_dir, Path::new("/r/.git"));
        assert_eq!(p.exclude_file, Path::new("/r/.git/info/exclude"));
        assert_eq!(p.index_file, Path::new("/r/.git/index"));
        // A linked worktree: the common folder is the main one's, the index its own.
        let abs = parse(
            Path::new("/w"),
            b"/w\n/main/.git\n/main/.git/info/exclude\n/main/.git/worktrees/w/index\n",
        )
        .unwrap();
        assert_eq!(abs.common_dir, Path::new("/main/.git"));
        assert_eq!(abs.index_file, Path::new("/main/.git/worktrees/w/index"));
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            &b""[..],
            b"/r\n.git\n.git/info/exclude\n",
            b"/r\n\n.git/info/exclude\n.git/index\n",
            b"a\nb\nc\nd\ne\n",
        ] {
            assert!(parse(Path::new("/r"), bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_caller_while_git_is_asked_waits_for_that_answer() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Barrier;
        let root = Path::new("/specbridge-test/asked-once");
        let asked = AtomicUsize::new(0);
        let barrier = Barrier::new(2);
        let ask = |root: &Path| {
            asked.fetch_add(1, Ordering::SeqCst);
            // The other caller starts while this one is asking.
            barrier.wait();
            std::thread::sleep(std::time::Duration::from_millis(50));
            Ok(parse(root, b"/r\n.git\n.git/info/exclude\n.git/index\n").unwrap())
        };
        let (first, second) = std::thread::scope(|s| {
            let first = s.spawn(|| remembered(root, ask).unwrap());
            barrier.wait();
            let second = remembered(root, |root| {
                asked.fetch_add(1, Ordering::SeqCst);
                Ok(parse(root, b"/other\n.git\n.git/info/exclude\n.git/index\n").unwrap())
            })
            .unwrap();
            (first.join().unwrap(), second)
        });
        assert_eq!(asked.load(Ordering::SeqCst), 1, "git asked twice");
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(second.top, Path::new("/r"));
    }

    #[test]
    fn a_failed_ask_is_not_remembered() {
        let root = Path::new("/specbridge-test/failed-once");
        let failed = remembered(root, |root| {
            Err(EvidenceError::GitSpawn {
                args: "rev-parse".into(),
                root: root.to_path_buf(),
                source: std::io::Error::other("no git"),
            })
        });
        assert!(failed.is_err());
        let found = remembered(root, |root| {
            Ok(parse(root, b"/f\n.git\n.git/info/exclude\n.git/index\n").unwrap())
        });
        assert_eq!(found.unwrap().top, Path::new("/f"));
    }

    #[test]
    fn asked_ahead_the_answer_is_the_one_a_later_call_gets() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let init = std::process::Command::new("git")
            .args(["init", "-q"])
            .current_dir(root)
            .status()
            .unwrap();
        assert!(init.success());
        ask_ahead(root);
        let paths = repository_paths(root).unwrap();
        assert_eq!(paths.exclude_file, root.join(".git/info/exclude"));
        std::fs::remove_dir_all(root.join(".git")).unwrap();
        assert!(Arc::ptr_eq(&paths, &repository_paths(root).unwrap()));
    }

    #[test]
    fn a_linked_worktree_has_its_own_index_and_the_main_repository_s_common_folder() {
        let dir = tempfile::tempdir().unwrap();
        let (main, linked) = (dir.path().join("main"), dir.path().join("linked"));
        std::fs::create_dir(&main).unwrap();
        let git = |args: &[&str]| crate::evidence::git::git_for_test(&main, args);
        git(&["init", "-q"]);
        git(&["commit", "-q", "--allow-empty", "-m", "first"]);
        git(&["worktree", "add", "-q", linked.to_str().unwrap()]);
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap();
        let paths = repository_paths(&linked).unwrap();
        assert_eq!(canon(&paths.top), canon(&linked));
        assert_eq!(canon(&paths.common_dir), canon(&main.join(".git")));
        assert!(paths.exclude_file.ends_with("info/exclude"));
        let info = paths.exclude_file.parent().unwrap();
        assert_eq!(canon(info.parent().unwrap()), canon(&main.join(".git")));
        assert_eq!(
            canon(&paths.index_file),
            canon(&main.join(".git/worktrees/linked/index"))
        );
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
        assert_eq!(paths.index_file, root.join(".git/index"));
        // Remembered: the same answer even once the repository is gone.
        std::fs::remove_dir_all(root.join(".git")).unwrap();
        assert!(Arc::ptr_eq(&paths, &repository_paths(root).unwrap()));
    }
}
