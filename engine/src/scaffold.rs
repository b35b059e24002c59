//! Scaffold workspaces: a copy of a folder in a fresh temporary git repository with
//! one commit, so a pipeline can run against it without touching the original.

use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    #[error("--scaffold {0}: not a folder")]
    NotAFolder(PathBuf),
    #[error("failed to copy {from} into the scaffold")]
    Copy {
        from: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to create the scaffold folder")]
    Create(#[source] std::io::Error),
    #[error("failed to run `git {args}` in the scaffold: {message}")]
    Git { args: String, message: String },
}

/// Folders never copied: another repository's metadata, build output, old runs.
const SKIPPED: &[&str] = &[".git", ".specbridge", "target", "node_modules"];

/// Copy `src` into a new folder under the system's temporary folder, make it a git
/// repository with one commit, and return its path. The folder is kept: the user
/// looks at it afterwards.
pub fn create(src: &Path) -> Result<PathBuf, ScaffoldError> {
    if !src.is_dir() {
        return Err(ScaffoldError::NotAFolder(src.to_path_buf()));
    }
    let name = src
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("workspace");
    let dir = tempfile::Builder::new()
        .prefix(&format!("specbridge-{name}-"))
        .tempdir()
        .map_err(ScaffoldError::Create)?
        .keep();
    copy_tree(src, &dir)?;
    git(&dir, &["init", "-q", "-b", "main"])?;
    // A scaffold must commit on any machine, configured or not; the identity is
    // local to the scaffold.
    git(&dir, &["config", "user.name", "specbridge scaffold"])?;
    git(
        &dir,
        &["config", "user.email", "scaffold@specbridge.invalid"],
    )?;
    git(&dir, &["config", "commit.gpgsign", "false"])?;
    git(&dir, &["add", "-A"])?;
    git(
        &dir,
        &[
            "commit",
            "-q",
            "--no-verify",
            "-m",
            &format!("scaffold of {name}"),
        ],
    )?;
    Ok(dir)
}

fn copy_tree(from: &Path, to: &Path) -> Result<(), ScaffoldError> {
    let err = |source| ScaffoldError::Copy {
        from: from.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(to).map_err(err)?;
    for entry in std::fs::read_dir(from).map_err(err)? {
        let entry = entry.map_err(err)?;
        let name = entry.file_name();
        if SKIPPED.iter().any(|s| name == *s) {
            continue;
        }
        let src = entry.path();
        let dst = to.join(&name);
        let ty = entry.file_type().map_err(err)?;
        if ty.is_dir() {
            copy_tree(&src, &dst)?;
        } else if ty.is_symlink() {
            let target = std::fs::read_link(&src).map_err(err)?;
            std::os::unix::fs::symlink(target, &dst).map_err(err)?;
        } else {
            std::fs::copy(&src, &dst).map_err(err)?;
        }
    }
    Ok(())
}

fn git(dir: &Path, args: &[&str]) -> Result<(), ScaffoldError> {
    let out = Command::new(crate::evidence::git_program())
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .map_err(|e| ScaffoldError::Git {
            args: args.join(" "),
            message: e.to_string(),
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(ScaffoldError::Git {
            args: args.join(" "),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_into_a_committed_repository_without_build_output() {
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(src.path().join("src")).unwrap();
        std::fs::create_dir_all(src.path().join("target/debug")).unwrap();
        std::fs::create_dir_all(src.path().join(".specbridge/runs")).unwrap();
        std::fs::write(src.path().join("src/lib.rs"), "pub fn x() {}\n").unwrap();
        std::fs::write(src.path().join("target/debug/big"), "x").unwrap();
        let dir = create(src.path()).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("src/lib.rs")).unwrap(),
            "pub fn x() {}\n"
        );
        assert!(!dir.join("target").exists());
        assert!(!dir.join(".specbridge").exists());
        let status = Command::new("git")
            .args(["status", "--porcelain"])
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(status.stdout.is_empty(), "the scaffold starts clean");
        let log = Command::new("git")
            .args(["log", "--oneline"])
            .current_dir(&dir)
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&log.stdout).lines().count(), 1);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_missing_folder_is_refused() {
        assert!(matches!(
            create(Path::new("/nonexistent/folder")),
            Err(ScaffoldError::NotAFolder(_))
        ));
    }
}
