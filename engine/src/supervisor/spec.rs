//! What to run and under which limits.

use std::path::PathBuf;
use std::time::Duration;

use super::sink::OutputSink;

/// One child process to run. `env` is never recorded.
pub struct SpawnSpec {
    /// A program name looked up in `PATH` (never through a shell), or a path.
    pub program: String,
    /// Where `program` was already found, by whoever just looked it up; `None`
    /// looks it up at the spawn.
    pub executable: Option<PathBuf>,
    pub args: Vec<String>,
    /// What `process.json` records as the argv, program first; the run store
    /// redacts it when it writes `process.json`.
    pub redacted_argv: Vec<String>,
    pub cwd: PathBuf,
    /// Added to the inherited environment; a `PATH` here is also used to find
    /// `program`.
    pub env: Vec<(String, String)>,
    /// Inherited variables removed from the child's environment (names only).
    pub env_remove: Vec<String>,
    /// Written to the child's stdin, which is then closed; `None` gives `/dev/null`.
    pub stdin: Option<Vec<u8>>,
    /// Where stdout and stderr go: for a run, logs of the run store
    /// (`RunHandle::log`), redacted as they are written.
    pub stdout: Box<dyn OutputSink>,
    pub stderr: Box<dyn OutputSink>,
    /// Bytes kept of each stream; more stops the process.
    pub max_stdout_bytes: u64,
    pub max_stderr_bytes: u64,
    /// Counted from the spawn.
    pub timeout: Option<Duration>,
    /// How long a process group gets between SIGTERM and SIGKILL, and how long a
    /// process may linger after its result has been seen.
    pub kill_grace: Duration,
}

impl std::fmt::Debug for SpawnSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpawnSpec")
            .field("program", &self.program)
            .field("redacted_argv", &self.redacted_argv)
            .field("cwd", &self.cwd)
            .field("stdout", &self.stdout.describe())
            .field("stderr", &self.stderr.describe())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}
