//! `FAKE_CLAUDE_LOG`: one JSON line per invocation, for tests to assert what the fake
//! was given.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// One logged invocation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggedInvocation {
    /// The arguments after the program name.
    pub argv: Vec<String>,
    /// The prompt read from stdin (empty when stdin was not read).
    pub stdin: String,
    pub cwd: String,
    pub pid: u32,
    /// Names (never values) of the credential-like variables in the environment.
    pub env: Vec<String>,
    /// The scenario played, when print mode got that far.
    pub scenario: Option<String>,
}

/// Whether an environment variable's name is worth recording: Anthropic and Claude
/// settings and anything that looks like a credential.
pub fn is_recorded_env_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if upper.starts_with("FAKE_CLAUDE_") {
        return false;
    }
    upper.starts_with("ANTHROPIC_")
        || upper.starts_with("CLAUDE_")
        || ["KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL"]
            .iter()
            .any(|word| upper.contains(word))
}

pub fn append(path: &Path, entry: &LoggedInvocation) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(entry).expect("log entries serialise");
    line.push(b'\n');
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    // One write of the whole line: O_APPEND keeps concurrent lines whole.
    file.write_all(&line)
}

/// Reads a log back (for tests).
pub fn read(path: &Path) -> Vec<LoggedInvocation> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("log lines are JSON"))
        .collect()
}
