//! Whether this machine can confine commands in an operating-system sandbox.
//!
//! Two things depend on it (docs/claude-code-runner.md, "Shell inside the sandbox"): the Claude Code
//! CLI's own sandbox, which specbridge turns on for every stage that allows Bash
//! (on Linux the CLI runs commands under bubblewrap and proxies network through
//! socat), and the commands specbridge itself runs after an agent changed the tree
//! (verification commands, downstream checks), which it wraps in bubblewrap. Both
//! ask this module, so "the sandbox works here" means one thing everywhere.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

mod bwrap;

pub use bwrap::{
    expand_writable, home_dir, writable_form_problem, AppliedSandbox, Confinement, SandboxError,
    SandboxMode, READ_ONLY_IN_REPOSITORY,
};

/// The Debian package names, for install hints.
pub(crate) const INSTALL_HINT: &str =
    "install bubblewrap and socat (Debian/Ubuntu: `apt-get install bubblewrap socat`)";

/// [`SandboxSupport`] found on first use: a run whose agent stages never offer
/// Bash (generate stages never do) starts no bubblewrap to learn it.
#[derive(Debug, Default)]
pub struct SandboxProbe(std::sync::OnceLock<SandboxSupport>);

impl SandboxProbe {
    /// Detected when first asked.
    pub fn lazy() -> Self {
        Self::default()
    }

    /// Already known (tests, or a caller that detected it).
    pub fn known(support: SandboxSupport) -> Self {
        SandboxProbe(std::sync::OnceLock::from(support))
    }

    /// The support, detecting it now if nobody asked before.
    pub fn get(&self) -> &SandboxSupport {
        self.0.get_or_init(SandboxSupport::detect)
    }
}

/// What the sandbox needs on this machine, found on `PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSupport {
    /// The `bwrap` executable, if found.
    pub bubblewrap: Option<PathBuf>,
    /// The `socat` executable, if found (the CLI's sandbox needs it for its proxy).
    pub socat: Option<PathBuf>,
    /// Why bubblewrap cannot confine a command here, when it is found but fails
    /// (no user namespaces, a seccomp policy, …).
    pub failure: Option<String>,
}

impl SandboxSupport {
    /// Looks on `PATH` and runs bubblewrap once with a read-only root and no network.
    pub fn detect() -> Self {
        let bubblewrap = find_on_path("bwrap");
        let socat = find_on_path("socat");
        let failure = bubblewrap.as_deref().and_then(|b| probe(b).err());
        SandboxSupport {
            bubblewrap,
            socat,
            failure,
        }
    }

    #[cfg(test)]
    /// bubblewrap is present and confines a command.
    pub(crate) fn bubblewrap_works(&self) -> bool {
        self.bubblewrap.is_some() && self.failure.is_none()
    }

    /// The bubblewrap to confine specbridge's own commands with, or why there is
    /// none.
    pub fn bubblewrap_for_commands(&self) -> Result<PathBuf, String> {
        match (&self.bubblewrap, self.problem(false)) {
            (Some(b), None) => Ok(b.clone()),
            (_, Some(problem)) => Err(problem),
            (None, None) => Err(format!(
                "bubblewrap (`bwrap`) is not on PATH; {INSTALL_HINT}"
            )),
        }
    }

    #[cfg(test)]
    /// Everything the Claude Code CLI's sandbox needs on Linux.
    pub(crate) fn cli_sandbox_works(&self) -> bool {
        self.bubblewrap_works() && self.socat.is_some()
    }

    /// Why the sandbox cannot run, for an error message; `None` when it can.
    pub fn problem(&self, need_socat: bool) -> Option<String> {
        match (&self.bubblewrap, &self.failure) {
            (None, _) => Some(format!(
                "bubblewrap (`bwrap`) is not on PATH; {INSTALL_HINT}"
            )),
            (Some(b), Some(f)) => Some(format!("bubblewrap at {} cannot run: {f}", b.display())),
            (Some(_), None) if need_socat && self.socat.is_none() => {
                Some(format!("socat is not on PATH; {INSTALL_HINT}"))
            }
            _ => None,
        }
    }
}

/// An executable named `name` in `PATH`.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// Runs `true` in a bubblewrap sandbox with the namespaces and mounts the command
/// sandbox uses (a container may allow bubblewrap but not a new `/proc`); the
/// error is bubblewrap's own words.
fn probe(bwrap: &Path) -> Result<(), String> {
    let output = Command::new(bwrap)
        .args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
            "--unshare-pid",
            "--unshare-net",
            "--die-with-parent",
            "true",
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    if output.status.success() {
        Ok(())
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr);
        Err(stderr
            .trim()
            .lines()
            .next()
            .unwrap_or("exited with an error")
            .to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_bubblewrap_is_named_with_the_install_hint() {
        let s = SandboxSupport {
            bubblewrap: None,
            socat: None,
            failure: None,
        };
        assert!(!s.bubblewrap_works());
        let p = s.problem(false).unwrap();
        assert!(
            p.contains("bwrap") && p.contains("apt-get install bubblewrap"),
            "{p}"
        );
    }

    #[test]
    fn socat_is_needed_only_for_the_cli_sandbox() {
        let s = SandboxSupport {
            bubblewrap: Some("/usr/bin/bwrap".into()),
            socat: None,
            failure: None,
        };
        assert!(s.bubblewrap_works());
        assert!(!s.cli_sandbox_works());
        assert_eq!(s.problem(false), None);
        assert!(s.problem(true).unwrap().contains("socat"));
    }
}
