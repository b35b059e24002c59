//! Why a stage attempt ended before the agent's work could be judged, and the
//! status each reason ends the stage with. The one place that maps a stage's
//! errors to statuses: a safety refusal is `safety-violation` (exit 6), a runner
//! or machine that cannot run the policy `runner-unavailable` (exit 3), an output
//! that breaks its contract `malformed-output`, anything else `failed`.
//!
//! Messages never embed their source; the stage's reason is the whole chain
//! ([`StageError::reason`]).

use specbridge_engine::evidence::EvidenceError;
use specbridge_engine::replay::ReplayError;
use specbridge_engine::runner::claude_code::argv::AssemblyError;
use specbridge_engine::scheduler::StageReport;
use specbridge_engine::store::{ConfinedWriteError, StoreError};
use specbridge_engine::StageStatus;

use crate::prompt::PromptError;
use crate::schema::SchemaError;

#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// A file the stage reads is outside the repository now (an earlier stage may
    /// have replaced it with a symlink since validation).
    #[error("refusing the {file} of stage `{stage}`: it {why}")]
    FileOutside {
        file: &'static str,
        stage: String,
        why: String,
    },
    /// A definition that skipped validation lacks what its kind needs.
    #[error("{kind} stage `{stage}` has no {missing}")]
    Incomplete {
        kind: &'static str,
        stage: String,
        missing: &'static str,
    },
    #[error(transparent)]
    Schema(#[from] SchemaError),
    #[error(transparent)]
    Prompt(#[from] PromptError),
    /// What the stage may see of its upstream stages could not be read.
    #[error(transparent)]
    Upstream(#[from] crate::upstream::UpstreamError),
    #[error("the runner `{0}` was not detected before the run")]
    RunnerNotDetected(String),
    /// The recording that should answer this stage cannot (its text is the reason).
    #[error("replay: {0}")]
    Replay(ReplayError),
    #[error(transparent)]
    Assembly(#[from] AssemblyError),
    #[error("the recorded session id `{session}` is not a UUID")]
    SessionId {
        session: String,
        #[source]
        source: uuid::Error,
    },
    #[error("failed to take a git snapshot")]
    Snapshot(#[source] EvidenceError),
    /// Evidence that cannot be gathered or refuses the start (a dirty tree).
    #[error(transparent)]
    Evidence(#[from] EvidenceError),
    /// A record of the attempt could not be written.
    #[error("failed to write {name}")]
    Record {
        name: String,
        #[source]
        source: StoreError,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A log of a command could not be created.
    #[error("failed to create {name}")]
    Log {
        name: String,
        #[source]
        source: StoreError,
    },
    /// A command specbridge runs itself cannot run confined as asked.
    #[error(transparent)]
    Confine(#[from] crate::confine::ConfineError),
    #[error("the invocation succeeded without structured output")]
    NoOutput,
    #[error("the invocation succeeded without a structured output that validates")]
    NoValidOutput,
    #[error("the output does not match the schema: {0}")]
    OutputMismatch(String),
    /// The items a fan-out stage would grow from this output are unusable.
    #[error(transparent)]
    FanOut(#[from] crate::fanout::FanOutError),
    #[error("the output has no `markdown` text to write to {0}")]
    NoMarkdown(String),
    #[error("refusing to write document `{doc}`: line {line} holds {kind}; the output is kept redacted in {kept}")]
    SecretInDocument {
        doc: String,
        line: u64,
        kind: String,
        kept: String,
    },
    #[error("document of stage `{stage}`")]
    Document {
        stage: String,
        #[source]
        source: ConfinedWriteError,
    },
}

impl StageError {
    /// The status a stage ends with for this error.
    pub fn status(&self) -> StageStatus {
        match self {
            StageError::FileOutside { .. } => StageStatus::SafetyViolation,
            StageError::RunnerNotDetected(_) => StageStatus::RunnerUnavailable,
            StageError::Assembly(e) => match e {
                AssemblyError::Incompatible(_) | AssemblyError::SandboxUnavailable(_) => {
                    StageStatus::RunnerUnavailable
                }
                e if e.is_safety() => StageStatus::SafetyViolation,
                _ => StageStatus::Failed,
            },
            StageError::NoOutput
            | StageError::NoValidOutput
            | StageError::OutputMismatch(_)
            | StageError::NoMarkdown(_) => StageStatus::MalformedOutput,
            StageError::Document { source, .. } => match source {
                ConfinedWriteError::Io { .. } => StageStatus::Failed,
                _ => StageStatus::SafetyViolation,
            },
            _ => StageStatus::Failed,
        }
    }

    /// The reason a record gives: the message with its sources, on one line.
    pub fn reason(&self) -> String {
        crate::error_chain(self)
    }

    /// `record` failed to be written as `name` (a file of the attempt).
    pub fn record(name: impl Into<String>) -> impl FnOnce(StoreError) -> StageError {
        let name = name.into();
        move |source| StageError::Record { name, source }
    }

    /// Ends `report` with this error: its status, and its reason redacted (a
    /// reason is shown on the terminal too).
    pub fn end(&self, report: &mut StageReport, redactor: &specbridge_engine::redact::Redactor) {
        report.status = self.status();
        report.reason = Some(redactor.redact_str(&self.reason()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_ends_the_stage_with_its_status() {
        let outside = StageError::FileOutside {
            file: "prompt file",
            stage: "spec".into(),
            why: "is outside the repository".into(),
        };
        assert_eq!(outside.status(), StageStatus::SafetyViolation);
        assert_eq!(
            StageError::RunnerNotDetected("claude".into()).status(),
            StageStatus::RunnerUnavailable
        );
        for e in [
            StageError::NoOutput,
            StageError::NoValidOutput,
            StageError::OutputMismatch("x".into()),
            StageError::NoMarkdown("SPEC.md".into()),
        ] {
            assert_eq!(e.status(), StageStatus::MalformedOutput, "{e}");
        }
        assert_eq!(
            StageError::Upstream(crate::upstream::UpstreamError::UnsafeId("..".into())).status(),
            StageStatus::Failed
        );
    }

    #[test]
    fn a_reason_is_the_message_and_each_cause_once() {
        let dir = tempfile::tempdir().unwrap();
        let e = StageError::from(crate::schema::load("missing.json", dir.path()).unwrap_err());
        let io = std::fs::read(dir.path().join("missing.json"))
            .unwrap_err()
            .to_string();
        let reason = e.reason();
        assert!(reason.starts_with("failed to read schema file"), "{reason}");
        assert_eq!(reason.matches(&io).count(), 1, "{reason}");
        assert_eq!(e.status(), StageStatus::Failed);
    }
}
