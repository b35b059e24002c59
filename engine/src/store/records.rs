//! The JSON records of a run directory (docs/run-directory.md). Every record is camelCase and
//! carries `schemaVersion`; `schemas/` holds a JSON Schema generated from each type.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::pipeline::model::StageKind;
use crate::status::{EvidenceStatus, RunStatus, StageStatus};
use crate::tokens::TokenUsage;

pub const SCHEMA_VERSION: u32 = 1;

fn schema_version() -> u32 {
    SCHEMA_VERSION
}

/// `run.json`: the state of a whole run.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    #[serde(default = "schema_version")]
    pub schema_version: u32,
    pub run_id: String,
    pub status: RunStatus,
    pub pipeline: PipelineRef,
    pub specbridge_version: String,
    /// The repository root the run worked in.
    pub root: String,
    pub started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    pub totals: Totals,
    /// Count of stages by status.
    #[serde(default)]
    pub stage_counts: BTreeMap<String, u32>,
    pub options: RunOptions,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<RunnerInfo>,
    #[serde(default)]
    pub warnings: Vec<String>,
    /// One entry per `specbridge resume` of this run.
    #[serde(default)]
    pub resumes: Vec<Value>,
}

/// Which pipeline file a run loaded.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PipelineRef {
    pub name: String,
    /// Relative to the repository root when inside it.
    pub path: String,
    /// sha256 of the bytes as loaded (also saved as `pipeline.yaml`).
    pub sha256: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    pub cost_usd: f64,
    pub invocations: u32,
    pub turns: u32,
    /// Tokens over every invocation that was spent (replayed ones spend nothing).
    #[serde(default)]
    pub tokens: TokenUsage,
}

impl Totals {
    /// Adds what another part of the run (a resume, say) spent.
    pub fn add(&mut self, other: &Totals) {
        self.cost_usd += other.cost_usd;
        self.tokens += other.tokens;
        self.invocations += other.invocations;
        self.turns += other.turns;
    }
}

impl RunRecord {
    /// The end of the run (or of this resume of it): its status and exit code,
    /// the time and spend added to what earlier sessions recorded, and the open
    /// resume entry, if any, closed with the same. Returns that entry, for what
    /// else the caller records in it. One owner for a finished run and one whose
    /// records failed (`run_failure`), so that the two never settle differently.
    pub fn settle(
        &mut self,
        status: RunStatus,
        exit_code: i32,
        elapsed: std::time::Duration,
        spent: &Totals,
    ) -> Option<&mut serde_json::Map<String, Value>> {
        self.status = status;
        self.ended_at = Some(crate::store::now_rfc3339());
        self.duration_ms = Some(
            self.duration_ms.unwrap_or(0) + u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        );
        self.exit_code = Some(exit_code);
        self.totals.add(spent);
        let Some(Value::Object(entry)) = self.resumes.last_mut() else {
            return None;
        };
        if entry.contains_key("endedAt") {
            return None;
        }
        entry.insert("endedAt".into(), serde_json::json!(self.ended_at));
        entry.insert("status".into(), serde_json::json!(status));
        entry.insert("exitCode".into(), serde_json::json!(exit_code));
        entry.insert("spent".into(), serde_json::json!(spent));
        Some(entry)
    }
}

/// The options a run was started with, including command-line overrides.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunOptions {
    pub concurrency: u32,
    #[serde(default)]
    pub only: Vec<String>,
    #[serde(default)]
    pub fail_fast: bool,
    #[serde(default)]
    pub allow_dirty: bool,
    /// `--max-turns`, `--max-budget-usd`, `--timeout`, `--model` given for this run.
    #[serde(default)]
    pub overrides: crate::pipeline::RunOverrides,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<f64>,
}

/// The agent runner detected before the run.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunnerInfo {
    pub kind: String,
    pub command: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default)]
    pub capabilities: Value,
    /// How the capabilities were found: `built-in` (a known version, read from its
    /// package), `cache` (a remembered probe) or `probe`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detected_by: Option<crate::runner::claude_code::detection_cache::Source>,
}

/// `stages/<id>/stage.json`: the state of one stage or fan-out instance.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageRecord {
    #[serde(default = "schema_version")]
    pub schema_version: u32,
    pub stage_id: String,
    pub kind: StageKind,
    pub status: StageStatus,
    #[serde(default)]
    pub needs: Vec<String>,
    /// For a fan-out instance: the stage it was expanded from, and its item id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_of: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_hash: Option<String>,
    /// The digests the input hash was computed from, so that resume can say which
    /// input changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_parts: Option<InputParts>,
    pub attempts: u32,
    /// A one-line reason when the stage did not succeed.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "outcome")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence_status: Option<EvidenceStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<FileRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document: Option<FileRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    #[serde(default)]
    pub cost_usd: f64,
    #[serde(default)]
    pub turns: u32,
    /// Tokens of the attempt that settled the stage (as `costUsd`); `runs show`
    /// sums every attempt's `result.json`.
    #[serde(default)]
    pub tokens: TokenUsage,
    /// Written by versions that rewrote a reused stage's record on resume; a
    /// reuse is now recorded by the resume's `resume-decision` event and
    /// `run.json` `resumes[].decisions`, and the record is left as it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reused: Option<bool>,
    /// Attempts that failed transiently (overloaded, rate-limited, unreachable
    /// API) and were retried or, for the last, gave up (`runner.retries`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transient_attempts: Option<u32>,
}

/// The parts of a stage's input hash, each a sha256 (hex), so that a changed hash
/// can be explained (docs/resume.md).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InputParts {
    /// The stage definition, the resolved settings that affect the result, and
    /// the fan-out item id.
    pub definition: String,
    /// The rendered prompt, byte for byte (agent stages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// The output schema's bytes (agent stages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Each visible upstream stage (or fan-out instance) → sha256 of its
    /// `output.json`, null when it wrote none.
    #[serde(default)]
    pub upstream: BTreeMap<String, Option<String>>,
}

/// A file and the sha256 of its bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileRef {
    pub path: String,
    pub sha256: String,
}

/// `plan.json`: the DAG as scheduled, and how fan-out grew it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanRecord {
    #[serde(default = "schema_version")]
    pub schema_version: u32,
    pub nodes: Vec<PlanNode>,
    #[serde(default)]
    pub expansions: Vec<Expansion>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanNode {
    pub id: String,
    pub kind: StageKind,
    pub needs: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_of: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_id: Option<String>,
    /// Excluded by `--only`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub excluded: bool,
}

/// One fan-out expansion: stage `stage` grew into `instances` from `source`'s output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Expansion {
    pub stage: String,
    pub source: String,
    pub items_pointer: String,
    pub instances: Vec<String>,
    pub at: String,
}
