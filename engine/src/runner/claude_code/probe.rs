//! Running a short detection command (`--version`, `--help`, `auth status`) with a
//! hard time limit.
//!
//! Kept apart from the agent supervisor on purpose: a probe needs no streaming, no
//! output limits and no grace period, only a guarantee that it ends. It runs in its
//! own process group so that a timeout kills whatever it started as well.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// What a finished probe printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeOutput {
    /// `None` when ended by a signal.
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl ProbeOutput {
    pub fn success(&self) -> bool {
        self.exit_code == Some(0)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("failed to start {program}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to read the output of {program}")]
    Wait {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to finish within {}s (the executable may be hanging or waiting for input); it was killed", .after.as_secs_f64())]
    TimedOut { after: Duration },
}

/// Runs `program args…` with stdin closed, killing its process group after `timeout`.
pub async fn probe(
    program: &Path,
    args: &[&str],
    timeout: Duration,
) -> Result<ProbeOutput, ProbeError> {
    let name = program.display().to_string();
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let child = cmd.spawn().map_err(|source| ProbeError::Spawn {
        program: name.clone(),
        source,
    })?;
    let pgid = child.id();
    match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(Ok(out)) => Ok(ProbeOutput {
            exit_code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }),
        Ok(Err(source)) => Err(ProbeError::Wait {
            program: name,
            source,
        }),
        Err(_) => {
            if let Some(pgid) = pgid {
                // The child is killed on drop; its descendants go with the group.
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pgid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            Err(ProbeError::TimedOut { after: timeout })
        }
    }
}

/// Finds `command` the way the runner spawns it: a name with a slash is a path
/// (relative to the current directory), any other name is looked up in `PATH`.
/// Never through a shell.
pub(crate) fn resolve_executable(
    command: &str,
    path_var: Option<&std::ffi::OsStr>,
) -> Option<PathBuf> {
    if command.is_empty() {
        return None;
    }
    if command.contains('/') {
        let p = PathBuf::from(command);
        return is_executable(&p).then_some(p);
    }
    std::env::split_paths(path_var?)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(command))
        .find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    #[test]
    fn resolves_names_through_path_and_paths_directly() {
        let dir = tempfile::tempdir().unwrap();
        let exe = script(dir.path(), "claude", "exit 0");
        std::fs::write(dir.path().join("plain"), "not executable").unwrap();
        let path_var =
            std::env::join_paths(["/nonexistent", dir.path().to_str().unwrap()]).unwrap();
        assert_eq!(
            resolve_executable("claude", Some(&path_var)),
            Some(exe.clone())
        );
        assert_eq!(resolve_executable("plain", Some(&path_var)), None);
        assert_eq!(resolve_executable("missing", Some(&path_var)), None);
        assert_eq!(resolve_executable(exe.to_str().unwrap(), None), Some(exe));
    }

    #[tokio::test]
    async fn returns_output_and_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        let exe = script(dir.path(), "p", "echo out; echo err >&2; exit 3");
        let out = probe(&exe, &[], Duration::from_secs(20)).await.unwrap();
        assert_eq!(out.exit_code, Some(3));
        assert_eq!(out.stdout, "out\n");
        assert_eq!(out.stderr, "err\n");
    }

    #[tokio::test]
    async fn a_hanging_probe_is_killed_with_its_children() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("child.pid");
        // The grandchild keeps the output pipe open: only a group kill ends it.
        let exe = script(
            dir.path(),
            "hang",
            &format!("sleep 300 & echo $! > {}; wait", pidfile.display()),
        );
        let err = probe(&exe, &[], Duration::from_millis(1500))
            .await
            .unwrap_err();
        assert!(matches!(err, ProbeError::TimedOut { .. }), "{err}");
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // Give the kill a moment to land, with a generous bound.
        let mut gone = false;
        for _ in 0..100 {
            let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
                && !is_zombie(pid);
            if !alive {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(gone, "grandchild {pid} survived the timeout");
    }

    fn is_zombie(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
            s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
    }
}
