//! A temporary folder of its own for each invocation of the CLI.
//!
//! Claude Code keeps its temporary files in `$CLAUDE_CODE_TMPDIR/claude-<uid>/`
//! (`/tmp/claude-<uid>/` without the variable), shared by every process of the
//! user. Among them is the file its sandbox mounts for a `--settings` value,
//! named after the value's hash: two invocations with the same settings (two
//! agent stages at once, or two runs) share one file, and the first to end
//! removes it while the other's sandbox still mounts it, which fails the other's
//! shell command. Each invocation gets a fresh folder instead, removed when the
//! invocation ends, so nothing one agent leaves there is seen by another.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The variable the CLI reads its temporary folder's parent from.
pub(super) const VAR: &str = "CLAUDE_CODE_TMPDIR";

/// The folder, removed when dropped.
#[derive(Debug)]
pub(super) struct PrivateTmp(tempfile::TempDir);

impl PrivateTmp {
    /// A fresh folder (mode 0700) inside the one the user named with
    /// `CLAUDE_CODE_TMPDIR` (in `runner.env`, else inherited), else inside the
    /// system's temporary folder.
    pub(super) fn create(env: &BTreeMap<String, String>) -> Result<Self, PrivateTmpError> {
        let base = env
            .get(VAR)
            .map(PathBuf::from)
            .or_else(|| std::env::var_os(VAR).map(PathBuf::from))
            .unwrap_or_else(std::env::temp_dir);
        tempfile::Builder::new()
            .prefix("specbridge-agent-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(&base)
            .map(PrivateTmp)
            .map_err(|source| PrivateTmpError { base, source })
    }

    pub(super) fn path(&self) -> &Path {
        self.0.path()
    }

    /// Starts removing the folder on a thread of its own, or removes it now
    /// where no thread can be had. The removal is waited for when the returned
    /// [`Removing`] is dropped.
    pub(super) fn remove_aside(self) -> Removing {
        // A refused spawn drops the closure, and with it the folder, here.
        Removing(
            std::thread::Builder::new()
                .name("specbridge-tmp".into())
                .spawn(move || drop(self))
                .ok(),
        )
    }
}

/// A folder being removed on a thread of its own; dropping this waits for it.
#[derive(Debug)]
pub(super) struct Removing(Option<std::thread::JoinHandle<()>>);

impl Drop for Removing {
    fn drop(&mut self) {
        if let Some(thread) = self.0.take() {
            // Removing a folder does not panic (its errors are ignored).
            let _ = thread.join();
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("failed to create a temporary folder for the CLI in {}", base.display())]
pub(super) struct PrivateTmpError {
    base: PathBuf,
    #[source]
    source: std::io::Error,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_invocation_gets_a_private_folder_removed_at_the_end() {
        let base = tempfile::tempdir().unwrap();
        let env = BTreeMap::from([(VAR.to_string(), base.path().display().to_string())]);
        let (a, b) = (
            PrivateTmp::create(&env).unwrap(),
            PrivateTmp::create(&env).unwrap(),
        );
        assert_ne!(a.path(), b.path());
        assert_eq!(a.path().parent(), Some(base.path()));
        let mode = std::fs::metadata(a.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let kept = a.path().to_path_buf();
        std::fs::write(kept.join("claude-settings-x.json"), "{}").unwrap();
        drop(a);
        assert!(!kept.exists());
        assert!(b.path().is_dir());
    }

    #[test]
    fn a_folder_removed_aside_is_gone_once_its_removal_is_dropped() {
        let base = tempfile::tempdir().unwrap();
        let env = BTreeMap::from([(VAR.to_string(), base.path().display().to_string())]);
        let tmp = PrivateTmp::create(&env).unwrap();
        let kept = tmp.path().to_path_buf();
        std::fs::create_dir_all(kept.join("claude-0/tasks")).unwrap();
        std::fs::write(kept.join("claude-0/tasks/out.txt"), "x").unwrap();
        let removing = tmp.remove_aside();
        drop(removing);
        assert!(!kept.exists());
    }

    #[test]
    fn a_folder_that_cannot_be_made_says_where() {
        let env = BTreeMap::from([(VAR.to_string(), "/nonexistent/specbridge-tmp".to_string())]);
        let e = PrivateTmp::create(&env).unwrap_err();
        assert_eq!(
            e.to_string(),
            "failed to create a temporary folder for the CLI in /nonexistent/specbridge-tmp"
        );
    }
}
