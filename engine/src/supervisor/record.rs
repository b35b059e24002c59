//! `process.json`: what happened to one child process (docs/run-directory.md).

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub const PROCESS_SCHEMA_VERSION: u32 = 1;

/// One supervised process, from spawn to the end of its whole process group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(title = "specbridge process record (process.json)")]
pub struct ProcessRecord {
    /// Always 1.
    #[schemars(range(min = 1, max = 1))]
    pub schema_version: u32,
    /// The executable actually started, after the `PATH` lookup.
    pub executable: String,
    /// The argv as recorded, program first, with secrets replaced by `<redacted>`.
    pub redacted_argv: Vec<String>,
    pub cwd: String,
    /// When the process was spawned (RFC 3339 UTC, milliseconds).
    #[serde(with = "crate::time::rfc3339")]
    #[schemars(schema_with = "crate::time::rfc3339::schema")]
    pub started_at: DateTime<Utc>,
    /// When the process was seen to exit.
    #[serde(with = "crate::time::rfc3339")]
    #[schemars(schema_with = "crate::time::rfc3339::schema")]
    pub ended_at: DateTime<Utc>,
    /// From spawn to exit, on a monotonic clock.
    pub duration_ms: u64,
    /// The exit code, or null when a signal ended the process.
    pub exit_code: Option<i32>,
    /// The signal that ended the process, by name (`SIGKILL`), or its number when
    /// it has no name here.
    pub signal: Option<String>,
    pub pid: u32,
    /// The process group, equal to `pid`; recorded at spawn so that orphans can be
    /// found after a crash.
    pub pgid: i32,
    /// The timeout ran out before the process exited.
    pub timed_out: bool,
    /// A cancel reached the process before it exited.
    pub cancelled: bool,
    /// The result was seen but the process did not exit within the kill grace.
    pub hung_after_result: bool,
    /// Bytes of stdout kept, as the process wrote them (the log holds them
    /// redacted, so its size may differ).
    pub stdout_bytes: u64,
    /// Bytes of stderr kept, as the process wrote them.
    pub stderr_bytes: u64,
    /// The process wrote more to stdout than was kept.
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    /// The stream whose byte limit stopped the process, if one did.
    pub limit_exceeded: Option<OutputStream>,
    /// Members of the process group outlived the leader and were ended.
    pub orphans_killed: bool,
    /// What the process printed made the caller stop it at once (SIGKILL to the
    /// group), e.g. an agent offered tools it was not asked to have.
    #[serde(default)]
    pub stopped_by_observer: bool,
    /// The sandbox a check command ran in (then `executable` is bubblewrap and
    /// `redactedArgv` the command as written); absent for agents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::sandbox::AppliedSandbox>,
}

impl ProcessRecord {
    /// The stream cut at its limit: the one whose limit stopped the process,
    /// else one cut while the process was being stopped.
    pub fn truncated_stream(&self) -> Option<OutputStream> {
        self.limit_exceeded.or(if self.stdout_truncated {
            Some(OutputStream::Stdout)
        } else if self.stderr_truncated {
            Some(OutputStream::Stderr)
        } else {
            None
        })
    }
}

/// A standard output stream of the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OutputStream {
    Stdout,
    Stderr,
}

impl OutputStream {
    pub fn as_str(self) -> &'static str {
        match self {
            OutputStream::Stdout => "stdout",
            OutputStream::Stderr => "stderr",
        }
    }
}

/// The JSON Schema of `process.json`, as committed in `schemas/process.schema.json`.
pub fn process_record_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(ProcessRecord))
        .expect("a generated schema is always valid JSON")
}

/// A signal's name for the record.
pub(crate) fn signal_name(number: i32) -> String {
    nix::sys::signal::Signal::try_from(number)
        .map_or_else(|_| number.to_string(), |signal| signal.as_str().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_are_named_when_known() {
        assert_eq!(signal_name(libc::SIGKILL), "SIGKILL");
        assert_eq!(signal_name(libc::SIGTERM), "SIGTERM");
        assert_eq!(
            signal_name(libc::SIGRTMIN() + 3),
            (libc::SIGRTMIN() + 3).to_string()
        );
    }
}
