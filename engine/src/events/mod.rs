//! The event vocabulary of a run: every line of `events.jsonl` is one [`RunEvent`]
//! under the envelope the log adds (`seq`, `at`, `prev`; docs/run-directory.md).
//!
//! One enum is the owner of the vocabulary: the store writes it, audit, resume,
//! `runs show` and the report read it back through [`line::parse`], the live
//! display receives it as it is appended, and `schemas/event.schema.json` is
//! generated from it. Payloads deny unknown fields, so a line that is not exactly
//! one of these is an audit finding rather than a silently ignored fact.
//!
//! Field order and the `null`s are part of the format: a payload serializes its
//! fields in declaration order, as the lines written before this type existed.

pub mod line;
pub mod schema;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::resume::reuse::{Action, Reason, ReuseDecision};
use crate::runner::claude_code::stream::Progress;
use crate::status::{EvidenceStatus, RunStatus, StageStatus};
use crate::store::Totals;

pub use line::EventLine;

/// What a subscriber of a run (the live display) is handed: every event as it is
/// appended to the log, and an agent's live progress, which is never written.
#[derive(Debug, Clone, Copy)]
pub enum Observed<'a> {
    /// An event as written: redacted, with its `seq` and `at`.
    Recorded(&'a EventLine),
    /// Live only: a running agent's turns, last tool and cost so far.
    AgentProgress {
        /// The stage (or fan-out instance) id.
        stage: &'a str,
        progress: &'a Progress,
    },
}

/// A consumer of a run's events, called on the writer's thread in the order of the
/// log; it must be quick and must not write to the run.
pub type Subscriber = std::sync::Arc<dyn Fn(&Observed<'_>) + Send + Sync>;

/// One event of a run, tagged by `type` (kebab-case), its payload's fields beside
/// the tag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum RunEvent {
    /// The first event of a run.
    RunStarted(RunStarted),
    /// `specbridge resume` took the run over.
    RunResumed(RunResumed),
    /// The run (or one resume of it) settled.
    RunFinished(RunFinished),
    /// A record is about to be renamed into place with this sha256.
    RecordIntent(RecordAnnounced),
    /// A record is in place with this sha256: what audit checks files against.
    RecordWritten(RecordAnnounced),
    StageStarted(StageStarted),
    /// A transiently failed agent attempt starts again after a backoff.
    StageRetrying(StageRetrying),
    /// A `forEach` placeholder grew into its instances.
    StageExpanded(StageExpanded),
    StageFinished(StageFinished),
    /// A child process started; its group may outlive a crash of specbridge.
    ProcessSpawned(ProcessSpawned),
    /// A generate stage wrote its document into the repository.
    DocumentWritten(DocumentWritten),
    /// What resume does with one stage.
    ResumeDecision(ResumeDecision),
    /// Resume moved an incomplete last line of the log aside.
    TornTailSetAside(TornTailSetAside),
    /// What resume made whole that a crash between a write and its event left.
    CrashRepaired(CrashRepaired),
    /// A process group of a dead specbridge that was still alive and was ended.
    OrphanEnded(Orphan),
    /// A process group of a dead specbridge whose id now belongs to another
    /// process, so it was left alone.
    OrphanLeft(Orphan),
}

impl RunEvent {
    /// The `type` written for this event.
    pub fn kind(&self) -> &'static str {
        match self {
            RunEvent::RunStarted(_) => "run-started",
            RunEvent::RunResumed(_) => "run-resumed",
            RunEvent::RunFinished(_) => "run-finished",
            RunEvent::RecordIntent(_) => "record-intent",
            RunEvent::RecordWritten(_) => "record-written",
            RunEvent::StageStarted(_) => "stage-started",
            RunEvent::StageRetrying(_) => "stage-retrying",
            RunEvent::StageExpanded(_) => "stage-expanded",
            RunEvent::StageFinished(_) => "stage-finished",
            RunEvent::ProcessSpawned(_) => "process-spawned",
            RunEvent::DocumentWritten(_) => "document-written",
            RunEvent::ResumeDecision(_) => "resume-decision",
            RunEvent::TornTailSetAside(_) => "torn-tail-set-aside",
            RunEvent::CrashRepaired(_) => "crash-repaired",
            RunEvent::OrphanEnded(_) => "orphan-ended",
            RunEvent::OrphanLeft(_) => "orphan-left",
        }
    }

    /// `record-written` of `path` with `sha256`.
    pub fn record_written(path: &str, sha256: &str) -> Self {
        RunEvent::RecordWritten(RecordAnnounced {
            path: path.to_string(),
            sha256: sha256.to_string(),
            recovered: false,
        })
    }

    /// `process-spawned` of a stage's own process (a check command, an agent).
    pub fn stage_spawned(stage: &str, attempt: u32, pid: u32, pgid: i32) -> Self {
        RunEvent::ProcessSpawned(ProcessSpawned::Stage(StageProcess {
            stage: stage.to_string(),
            attempt,
            pid,
            pgid,
            start_ticks: crate::supervisor::process_start_ticks(pid),
        }))
    }

    /// `record-intent` of `path` with `sha256`.
    pub(crate) fn record_intent(path: &str, sha256: &str) -> Self {
        RunEvent::RecordIntent(RecordAnnounced {
            path: path.to_string(),
            sha256: sha256.to_string(),
            recovered: false,
        })
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunStarted {
    pub run_id: String,
    /// Absent in logs written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub specbridge_version: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunResumed {
    /// 1 for the first resume.
    pub resume: u32,
    pub previous_status: RunStatus,
    /// sha256 of the pipeline file the resume loaded.
    pub pipeline_sha256: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunFinished {
    pub status: RunStatus,
    pub exit_code: i32,
    /// The run's totals over the run and every resume so far.
    pub totals: Totals,
    /// Why the run ended early: its records could not be written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The path (relative to the run folder) and sha256 of a record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecordAnnounced {
    pub path: String,
    pub sha256: String,
    /// Written by resume's crash recovery, not by the write itself.
    #[serde(default, skip_serializing_if = "is_false")]
    pub recovered: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StageStarted {
    pub stage: String,
    pub attempt: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StageRetrying {
    pub stage: String,
    /// The attempt that failed transiently.
    pub attempt: u32,
    pub outcome: Option<String>,
    /// 1 for the first retry.
    pub retry: u32,
    pub delay_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StageExpanded {
    pub stage: String,
    pub instances: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StageFinished {
    pub stage: String,
    /// Absent for a stage that never started (blocked, skipped, retired).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    pub status: StageStatus,
    #[serde(default)]
    pub outcome: Option<String>,
    #[serde(default)]
    pub evidence_status: Option<EvidenceStatus>,
    /// Logged by resume's crash recovery from a `stage.json` whose finish was
    /// written but not logged.
    #[serde(default, skip_serializing_if = "is_false")]
    pub recovered: bool,
}

/// Which process started: a stage's (check command or agent), or one
/// verification command of an execute stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ProcessSpawned {
    Stage(StageProcess),
    Verification(VerificationProcess),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StageProcess {
    pub stage: String,
    pub attempt: u32,
    pub pid: u32,
    pub pgid: i32,
    /// When the process started, in clock ticks since boot (`/proc/PID/stat`),
    /// read right after the spawn: how a resume tells this process from a later
    /// one that was given the same id. Absent in older logs and where `/proc`
    /// cannot be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_ticks: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VerificationProcess {
    /// The verification command's name.
    pub verification: String,
    /// The attempt folder, relative to the run folder.
    pub attempt: String,
    pub pid: u32,
    pub pgid: i32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DocumentWritten {
    pub stage: String,
    /// Relative to the repository root.
    pub path: String,
    pub sha256: String,
}

/// One stage's resume decision. `reason` and `detail` are `null` when there is
/// none (a reuse).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResumeDecision {
    pub stage: String,
    pub action: Action,
    pub reason: Option<Reason>,
    pub detail: Option<String>,
}

impl From<&ReuseDecision> for ResumeDecision {
    fn from(d: &ReuseDecision) -> Self {
        ResumeDecision {
            stage: d.stage.clone(),
            action: d.action,
            reason: d.reason,
            detail: d.detail.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TornTailSetAside {
    /// The file the bytes were kept in, beside `events.jsonl`.
    pub path: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CrashRepaired {
    /// What was made whole, one line each.
    pub repaired: Vec<String>,
}

/// A process group recorded at spawn whose end specbridge never saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Orphan {
    pub stage: String,
    pub attempt: u32,
    pub pid: i32,
    pub pgid: i32,
    /// Whether something of the group was alive and was ended.
    pub ended: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}
