//! `verification.json`: the verification commands specbridge ran after an execute
//! attempt, and how each ended.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::evidence::status::VerificationResult;

/// `verification.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerificationRecord {
    pub schema_version: u32,
    pub commands: Vec<CommandResult>,
}

/// One verification command as run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandResult {
    pub name: String,
    pub argv: Vec<String>,
    pub required: bool,
    pub passed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    pub timed_out: bool,
    pub duration_ms: u64,
    /// Why it did not pass, in one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Log files, relative to the attempt folder.
    pub stdout_log: String,
    pub stderr_log: String,
    /// The sandbox it ran in; absent when it never started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::sandbox::AppliedSandbox>,
}

impl VerificationRecord {
    pub fn results(&self) -> Vec<VerificationResult> {
        self.commands
            .iter()
            .map(|c| VerificationResult {
                name: c.name.clone(),
                required: c.required,
                passed: c.passed,
            })
            .collect()
    }
}
