//! Running git for evidence: argv arrays, never a shell, always in the repository root.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use super::EvidenceError;

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
        let mut cmd = Command::new("git");
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
