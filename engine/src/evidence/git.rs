//! Running git for evidence: argv arrays, never a shell, always in the repository root.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use super::EvidenceError;

/// The git specbridge runs, found in `PATH` once a process.
///
/// Given the bare name, the child searches `PATH` itself, one failed `execve` for
/// every folder before git's: behind a version manager's shims and tool folders
/// (a dozen entries is common) that was about 1 ms of each git call, and an agent
/// stage makes three to five. Only absolute folders are searched: a relative
/// entry (`.`, or an empty one) would find a `git` inside the repository, which
/// an agent may have written. When no folder holds an executable `git`, the
/// answer is [`NOT_FOUND`]: an absolute path, so that the spawn fails with "not
/// found" as a bare name would, without the child searching `PATH`'s relative
/// entries itself.
pub(crate) fn program() -> &'static OsStr {
    static PROGRAM: OnceLock<PathBuf> = OnceLock::new();
    PROGRAM
        .get_or_init(|| resolve(std::env::var_os("PATH").as_deref()))
        .as_os_str()
}

/// What [`program`] answers when `PATH` has no `git` in an absolute folder.
const NOT_FOUND: &str = "/nonexistent/git-not-in-an-absolute-PATH-folder/git";

fn resolve(path: Option<&OsStr>) -> PathBuf {
    path.and_then(find_in)
        .unwrap_or_else(|| PathBuf::from(NOT_FOUND))
}

/// The first `git` in the absolute folders of `path` that is a file someone may
/// execute (as `execvp` takes it; a folder or an unexecutable file is passed over).
fn find_in(path: &OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join("git"))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// A git command as evidence runs it ([`Git::command`]: the git [`program`]
/// finds, no fsmonitor hook, no optional locks), in `root`, with `index` as its
/// index file when given. For the stage kinds' own git calls, so that every
/// git specbridge runs on the repository is set up in this one place.
pub fn command(root: &Path, index: Option<&Path>, args: &[&str]) -> Command {
    let git = Git::new(root);
    match index {
        Some(index) => git.with_index(index.to_path_buf()).command(args),
        None => git.command(args),
    }
}

pub(crate) struct Git<'a> {
    root: &'a Path,
    index_file: Option<PathBuf>,
}

impl<'a> Git<'a> {
    pub(crate) fn new(root: &'a Path) -> Self {
        Git {
            root,
            index_file: None,
        }
    }

    /// Point git at another index file, so the user's real index is never touched.
    pub(crate) fn with_index(mut self, index_file: PathBuf) -> Self {
        self.index_file = Some(index_file);
        self
    }

    pub(crate) fn root(&self) -> &Path {
        self.root
    }

    pub(crate) fn command<S: AsRef<OsStr>>(&self, args: &[S]) -> Command {
        let mut cmd = Command::new(program());
        cmd.current_dir(self.root)
            // Raw UTF-8 names in output; no fsmonitor hook (a command the agent could
            // have configured) runs on our behalf.
            .args(["-c", "core.quotepath=off", "-c", "core.fsmonitor=false"])
            .args(args)
            // Reading must not take index.lock or refresh the index as a side effect.
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdin(Stdio::null());
        match &self.index_file {
            Some(index) => cmd.env("GIT_INDEX_FILE", index),
            None => cmd.env_remove("GIT_INDEX_FILE"),
        };
        cmd
    }

    /// Run and collect the output, whatever the exit status.
    pub(crate) fn output<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<Output, EvidenceError> {
        self.command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .map_err(|source| EvidenceError::GitSpawn {
                args: describe(args),
                root: self.root.to_path_buf(),
                source,
            })
    }

    /// Run and return stdout; a nonzero exit is an error carrying stderr.
    pub(crate) fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<Vec<u8>, EvidenceError> {
        let out = self.output(args)?;
        if !out.status.success() {
            return Err(self.failed(args, &out.stderr));
        }
        Ok(out.stdout)
    }

    pub(crate) fn failed<S: AsRef<OsStr>>(&self, args: &[S], stderr: &[u8]) -> EvidenceError {
        EvidenceError::GitFailed {
            args: describe(args),
            root: self.root.to_path_buf(),
            stderr: String::from_utf8_lossy(stderr).trim().to_string(),
        }
    }

    pub(crate) fn bad_output<S: AsRef<OsStr>>(&self, args: &[S], detail: String) -> EvidenceError {
        EvidenceError::GitOutput {
            args: describe(args),
            root: self.root.to_path_buf(),
            detail,
        }
    }
}

/// The subcommand alone: enough to tell which step failed, without paths.
fn describe<S: AsRef<OsStr>>(args: &[S]) -> String {
    args.iter()
        .map(|a| a.as_ref().to_string_lossy())
        .take_while(|a| a != "--")
        .filter(|a| !a.starts_with(":("))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs git in `dir` for a test's setup, as a user would (an identity given,
/// nothing of [`Git::command`]'s), and fails the test if git does.
#[cfg(test)]
pub(crate) fn git_for_test(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.email=t@e.com", "-c", "user.name=t"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn executable(path: &Path, mode: u32) {
        std::fs::write(path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn git_is_the_first_executable_file_in_an_absolute_folder() {
        let dir = tempfile::tempdir().unwrap();
        let [folder, plain, runnable, later] = ["folder", "plain", "runnable", "later"].map(|d| {
            let d = dir.path().join(d);
            std::fs::create_dir(&d).unwrap();
            d
        });
        std::fs::create_dir(folder.join("git")).unwrap();
        executable(&plain.join("git"), 0o644);
        executable(&runnable.join("git"), 0o755);
        executable(&later.join("git"), 0o755);
        let path = std::env::join_paths([&folder, &plain, &runnable, &later]).unwrap();
        assert_eq!(find_in(&path), Some(runnable.join("git")));
    }

    #[test]
    fn a_relative_folder_is_never_searched() {
        // A `git` in the folder git would run in (the repository) or below it.
        let dir = tempfile::tempdir().unwrap();
        executable(&dir.path().join("git"), 0o755);
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        executable(&dir.path().join("bin/git"), 0o755);
        let cwd = std::env::current_dir().unwrap();
        let rel = pathdiff(dir.path(), &cwd);
        for path in [".", "", "bin", rel.to_str().unwrap()] {
            assert_eq!(find_in(OsStr::new(path)), None, "PATH={path:?}");
            // Nor by the child: the name given to the spawn is a path.
            let program = resolve(Some(OsStr::new(path)));
            assert!(program.is_absolute() && !program.exists(), "{program:?}");
        }
        assert!(resolve(None).is_absolute());
    }

    /// `to` relative to `from` (both absolute), through `..` as needed.
    fn pathdiff(to: &Path, from: &Path) -> PathBuf {
        let mut rel = PathBuf::new();
        for _ in from.components().skip(1) {
            rel.push("..");
        }
        rel.join(to.strip_prefix("/").unwrap())
    }

    #[test]
    fn the_git_found_is_the_one_a_spawn_runs() {
        let git = Path::new(program());
        assert!(git.is_absolute(), "git is on this machine's PATH: {git:?}");
        let out = Command::new(git).arg("--version").output().unwrap();
        assert!(out.status.success());
    }
}
