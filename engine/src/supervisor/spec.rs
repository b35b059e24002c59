//! What to run and under which limits.

use std::path::PathBuf;
use std::time::Duration;

/// One child process to run. The caller redacts `redacted_argv`; `env` is never
/// recorded.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    /// A program name looked up in `PATH` (never through a shell), or a path.
    pub program: String,
    pub args: Vec<String>,
    /// What `process.json` records as the argv, program first.
    pub redacted_argv: Vec<String>,
    pub cwd: PathBuf,
    /// Added to the inherited environment; a `PATH` here is also used to find
    /// `program`.
    pub env: Vec<(String, String)>,
    /// Inherited variables removed from the child's environment (names only).
    pub env_remove: Vec<String>,
    /// Written to the child's stdin, which is then closed; `None` gives `/dev/null`.
    pub stdin: Option<Vec<u8>>,
    pub stdout_path: PathBuf,
    pub stderr_path: PathBuf,
    /// Bytes kept of each stream; more stops the process.
    pub max_stdout_bytes: u64,
    pub max_stderr_bytes: u64,
    /// Counted from the spawn.
    pub timeout: Option<Duration>,
    /// How long a process group gets between SIGTERM and SIGKILL, and how long a
    /// process may linger after its result has been seen.
    pub kill_grace: Duration,
}
