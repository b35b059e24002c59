//! What an audit reports: findings, each with a stable code, a severity and where it
//! was found, gathered into one report per run.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where a run-relative path is: one owner of the layout.
pub(crate) use crate::store::layout::{attempt_number, locate};

/// How bad a finding is. Errors mean the run's records cannot be trusted as they
/// stand; warnings are traces of a crash that specbridge itself can leave behind.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Error,
}

/// The kind of a finding. The kebab-case names are stable: scripts match on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FindingCode {
    /// `events.jsonl` is missing, or a line's `prev` does not match the line before.
    ChainBroken,
    /// A line's `seq` is not the next number: an event was deleted, inserted or moved.
    SeqGap,
    /// The log ends in an incomplete line (or one was set aside by crash recovery).
    TornTail,
    /// A `record-written` event names a path that is not a plain path inside the run.
    AnnouncedPathUnsafe,
    /// An announced file no longer exists.
    AnnouncedFileMissing,
    /// A file's bytes differ from the sha256 its last announcement recorded.
    FileHashMismatch,
    /// A JSON record that no `record-written` event announced.
    UnannouncedRecord,
    /// A file in the run could not be read.
    FileUnreadable,
    /// A JSON record that does not parse, or lacks the fields audit needs.
    RecordUnparseable,
    /// A recorded argv holds a permission bypass.
    ForbiddenFlag,
    /// A retained file holds a value shaped like a credential.
    SecretInFile,
    /// A generate stage's argv or offered tools allowed a tool that changes files.
    GenerateMutatingTool,
    /// A generate stage's evidence shows a change attributed to the agent.
    GenerateChangedTree,
    /// A stage output does not validate against the schema recorded for it.
    OutputInvalid,
    /// A stage output has no recorded schema to check it against.
    OutputSchemaMissing,
    /// Evidence says `verified` without every required verification command passing.
    VerifiedWithoutVerification,
    /// Evidence says `verified` but shows no attributed change.
    VerifiedWithoutChange,
    /// `run.json` disagrees with the run's events.
    RunJsonMismatch,
    /// A `stage.json` disagrees with the last event of that stage.
    StageJsonMismatch,
    /// A record matches the sha256 of a `record-intent` event that no
    /// `record-written` confirmed: specbridge stopped between writing it and
    /// logging it. Resume confirms it.
    WriteUnconfirmed,
    /// A line of `events.jsonl` that is not an event this version writes: an
    /// unknown `type`, or a field that is missing, unknown or of the wrong shape.
    EventUnknown,
}

impl FindingCode {
    pub fn as_str(self) -> &'static str {
        match self {
            FindingCode::ChainBroken => "chain-broken",
            FindingCode::SeqGap => "seq-gap",
            FindingCode::TornTail => "torn-tail",
            FindingCode::AnnouncedPathUnsafe => "announced-path-unsafe",
            FindingCode::AnnouncedFileMissing => "announced-file-missing",
            FindingCode::FileHashMismatch => "file-hash-mismatch",
            FindingCode::UnannouncedRecord => "unannounced-record",
            FindingCode::FileUnreadable => "file-unreadable",
            FindingCode::RecordUnparseable => "record-unparseable",
            FindingCode::ForbiddenFlag => "forbidden-flag",
            FindingCode::SecretInFile => "secret-in-file",
            FindingCode::GenerateMutatingTool => "generate-mutating-tool",
            FindingCode::GenerateChangedTree => "generate-changed-tree",
            FindingCode::OutputInvalid => "output-invalid",
            FindingCode::OutputSchemaMissing => "output-schema-missing",
            FindingCode::VerifiedWithoutVerification => "verified-without-verification",
            FindingCode::VerifiedWithoutChange => "verified-without-change",
            FindingCode::RunJsonMismatch => "run-json-mismatch",
            FindingCode::StageJsonMismatch => "stage-json-mismatch",
            FindingCode::WriteUnconfirmed => "write-unconfirmed",
            FindingCode::EventUnknown => "event-unknown",
        }
    }

    /// Every finding is an error except the traces a crash leaves behind.
    pub fn severity(self) -> Severity {
        match self {
            FindingCode::TornTail
            | FindingCode::OutputSchemaMissing
            | FindingCode::WriteUnconfirmed => Severity::Warning,
            _ => Severity::Error,
        }
    }
}

impl std::fmt::Display for FindingCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing audit found wrong with a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    pub severity: Severity,
    pub code: FindingCode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// Relative to the run folder, `/`-separated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// One line.
    pub message: String,
}

impl Finding {
    /// `code[ file]: message`, one line for a terminal.
    pub fn headline(&self) -> String {
        match &self.file {
            Some(file) => format!("{} {file}: {}", self.code, self.message),
            None => format!("{}: {}", self.code, self.message),
        }
    }

    pub fn new(code: FindingCode, message: impl Into<String>) -> Self {
        let message: String = message.into();
        Finding {
            severity: code.severity(),
            code,
            stage: None,
            attempt: None,
            file: None,
            // Findings are printed one a line; a stray newline would split one.
            message: message.replace(['\n', '\r'], " "),
        }
    }

    /// Set the file, and the stage and attempt its path belongs to.
    pub fn file(mut self, rel: &str) -> Self {
        let (stage, attempt) = locate(rel);
        if self.stage.is_none() {
            self.stage = stage;
        }
        if self.attempt.is_none() {
            self.attempt = attempt;
        }
        self.file = Some(rel.to_string());
        self
    }

    pub fn stage(mut self, stage: &str) -> Self {
        self.stage = Some(stage.to_string());
        self
    }

    pub fn attempt(mut self, attempt: Option<u32>) -> Self {
        self.attempt = attempt;
        self
    }
}

/// The audit of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditReport {
    pub run_id: String,
    pub findings: Vec<Finding>,
    /// Files whose bytes were read (hashed and scanned).
    pub checked_files: u64,
    /// Whole events read from `events.jsonl`.
    pub events: u64,
}

impl AuditReport {
    pub fn has_errors(&self) -> bool {
        self.findings.iter().any(|f| f.severity == Severity::Error)
    }

    /// 1 (gate failed) when any finding is an error; warnings alone keep 0, so a
    /// run that crash recovery repaired does not fail every later audit.
    pub fn exit_code(&self) -> i32 {
        if self.has_errors() {
            crate::status::exit::GATE
        } else {
            crate::status::exit::OK
        }
    }

    /// The findings with a given code.
    pub fn with_code(&self, code: FindingCode) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(move |f| f.code == code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_stay_on_one_line() {
        let f = Finding::new(FindingCode::SeqGap, "a\nb\r\nc");
        assert_eq!(f.message, "a b  c");
    }

    #[test]
    fn codes_serialize_as_their_names() {
        for code in [
            FindingCode::ChainBroken,
            FindingCode::VerifiedWithoutVerification,
            FindingCode::StageJsonMismatch,
        ] {
            assert_eq!(
                serde_json::to_value(code).unwrap(),
                serde_json::Value::from(code.as_str())
            );
        }
    }
}
