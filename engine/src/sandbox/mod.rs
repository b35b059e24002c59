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
use std::sync::{Mutex, OnceLock, PoisonError};
use std::thread::JoinHandle;

mod bwrap;
mod probe_cache;

use crate::CacheUse;

pub use bwrap::{
    expand_writable, home_dir, writable_form_problem, AppliedSandbox, Confinement, SandboxError,
    SandboxMode, READ_ONLY_IN_REPOSITORY,
};
pub use probe_cache::CACHE_FILE as PROBE_CACHE_FILE;

/// The Debian package names, for install hints.
pub(crate) const INSTALL_HINT: &str =
    "install bubblewrap and socat (Debian/Ubuntu: `apt-get install bubblewrap socat`)";

/// [`SandboxSupport`] found on first use: a run whose agent stages never offer
/// Bash (generate stages never do) starts no bubblewrap to learn it. A resume
/// starts it [`ahead`](SandboxProbe::ahead), beside the audit that gates it.
/// A pass remembered for this environment answers without a probe
/// (`probe_cache.rs`), unless `--refresh-runner` asked for a fresh one.
#[derive(Debug)]
pub struct SandboxProbe {
    found: OnceLock<SandboxSupport>,
    /// Detection started ahead and not yet taken.
    ahead: Mutex<Option<JoinHandle<SandboxSupport>>>,
    cache: CacheUse,
}

impl SandboxProbe {
    /// Detected when first asked.
    pub fn lazy(cache: CacheUse) -> Self {
        SandboxProbe {
            found: OnceLock::new(),
            ahead: Mutex::new(None),
            cache,
        }
    }

    /// Detected from now on, on a thread of its own: the first [`get`](Self::get)
    /// waits for it. The probe only reads (`true` in a read-only sandbox), so
    /// what it finds is what a later probe would have found; one nobody asks
    /// for is waited for when the probe is dropped, so no `bwrap` outlives it.
    pub fn ahead(cache: CacheUse) -> Self {
        let handle = std::thread::Builder::new()
            .name("specbridge-bwrap".into())
            .spawn(move || SandboxSupport::detect(cache))
            // Best effort: a refused thread leaves the first caller to detect.
            .ok();
        SandboxProbe {
            found: OnceLock::new(),
            ahead: Mutex::new(handle),
            cache,
        }
    }

    /// Already known (tests, or a caller that detected it).
    pub fn known(support: SandboxSupport) -> Self {
        SandboxProbe {
            found: OnceLock::from(support),
            ahead: Mutex::new(None),
            cache: CacheUse::Use,
        }
    }

    /// The support, detecting it now if nobody asked before.
    pub fn get(&self) -> &SandboxSupport {
        self.found.get_or_init(|| {
            let ahead = self.take_ahead();
            ahead
                .and_then(|h| h.join().ok())
                .unwrap_or_else(|| SandboxSupport::detect(self.cache))
        })
    }

    fn take_ahead(&self) -> Option<JoinHandle<SandboxSupport>> {
        self.ahead
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

impl Drop for SandboxProbe {
    fn drop(&mut self) {
        if let Some(handle) = self.take_ahead() {
            let _ = handle.join();
        }
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
    /// Looks on `PATH` and runs bubblewrap once with a read-only root and no
    /// network — unless `cache` is `Use` and a pass is remembered for this
    /// bubblewrap in this environment (`probe_cache.rs`). A pass found now is
    /// remembered unless `cache` is `Never` (`runner doctor`).
    pub fn detect(cache: CacheUse) -> Self {
        let bubblewrap = find_on_path("bwrap");
        let socat = find_on_path("socat");
        let failure = bubblewrap
            .as_deref()
            .and_then(|b| probe_cache::probe_remembered(b, cache, || probe(b)).err());
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
    fn a_probe_started_ahead_finds_what_one_asked_later_finds() {
        let ahead = SandboxProbe::ahead(CacheUse::Never);
        assert_eq!(ahead.get(), SandboxProbe::lazy(CacheUse::Never).get());
        // Asked again, the same answer, without a second probe.
        assert!(std::ptr::eq(ahead.get(), ahead.get()));
        assert!(ahead.take_ahead().is_none());
    }

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
