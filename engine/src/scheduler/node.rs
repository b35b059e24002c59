//! Nodes of a scheduled plan, and what an executor reports for one.

use serde::{Deserialize, Serialize};

use crate::pipeline::StageKind;
use crate::status::{EvidenceStatus, StageStatus};
use crate::store::{FileRef, InputParts, PlanNode, StageRecord, SCHEMA_VERSION};

/// One schedulable unit: a stage, a fan-out instance, or a fan-out placeholder
/// that becomes instances when it is reached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Node {
    pub id: String,
    pub kind: StageKind,
    pub needs: Vec<String>,
    /// For an instance: the `forEach` stage it was expanded from.
    pub instance_of: Option<String>,
    pub item_id: Option<String>,
    /// A `forEach` stage not yet expanded.
    pub placeholder: bool,
    /// Attempts recorded by earlier processes (resume); the next is one more.
    pub prior_attempts: u32,
}

impl Node {
    pub fn stage(id: &str, kind: StageKind, needs: Vec<String>) -> Self {
        Node {
            id: id.to_string(),
            kind,
            needs,
            instance_of: None,
            item_id: None,
            placeholder: false,
            prior_attempts: 0,
        }
    }

    pub(crate) fn to_plan_node(&self, input_hash: Option<String>) -> PlanNode {
        PlanNode {
            id: self.id.clone(),
            kind: self.kind,
            needs: self.needs.clone(),
            input_hash,
            instance_of: self.instance_of.clone(),
            item_id: self.item_id.clone(),
            excluded: false,
        }
    }
}

/// How one stage went, as its executor saw it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageReport {
    pub status: StageStatus,
    /// One line on why it did not succeed (`outcome` in records and events).
    #[serde(rename = "outcome")]
    pub reason: Option<String>,
    pub evidence_status: Option<EvidenceStatus>,
    pub input_hash: Option<String>,
    pub input_parts: Option<InputParts>,
    pub output: Option<FileRef>,
    pub document: Option<FileRef>,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    pub duration_ms: Option<u64>,
    pub cost_usd: f64,
    pub tokens: crate::tokens::TokenUsage,
    pub turns: u32,
    pub invocations: u32,
    /// The exit code this stage contributes when it is not its status's default
    /// (execute stages: evidence gates).
    pub exit_code: Option<i32>,
    pub reused: bool,
    /// Set by the executor when the attempt failed transiently (overloaded,
    /// rate-limited, unreachable API): the scheduler may run another attempt.
    pub retry: Option<crate::scheduler::retry::RetryHint>,
    /// How many attempts of this stage in this process failed transiently before
    /// this report (set by the scheduler).
    pub transient_attempts: u32,
}

impl StageReport {
    pub fn failed(status: StageStatus, reason: String) -> Self {
        StageReport {
            status,
            reason: Some(reason),
            ..Default::default()
        }
    }

    /// The exit code this stage contributes to the run's.
    pub fn exit_code(&self) -> i32 {
        let base = self.status.exit_code();
        let gate = self.evidence_status.map_or(
            crate::exit::OK,
            super::super::status::EvidenceStatus::exit_code,
        );
        crate::exit::most_severe([base, gate, self.exit_code.unwrap_or(crate::exit::OK)])
    }
}

pub(crate) fn stage_record(
    node: &Node,
    status: StageStatus,
    report: Option<&StageReport>,
    attempt: u32,
) -> StageRecord {
    let r = report.cloned().unwrap_or_default();
    StageRecord {
        schema_version: SCHEMA_VERSION,
        stage_id: node.id.clone(),
        kind: node.kind,
        status,
        needs: node.needs.clone(),
        instance_of: node.instance_of.clone(),
        item_id: node.item_id.clone(),
        input_hash: r.input_hash,
        input_parts: r.input_parts,
        attempts: attempt.max(node.prior_attempts),
        reason: r.reason,
        evidence_status: r.evidence_status,
        output: r.output,
        document: r.document,
        started_at: r.started_at,
        ended_at: r.ended_at,
        duration_ms: r.duration_ms,
        cost_usd: r.cost_usd,
        turns: r.turns,
        tokens: r.tokens,
        // A reused stage's record is never rewritten (scheduler): the flag is
        // only read back from records of older versions.
        reused: None,
        transient_attempts: (r.transient_attempts > 0).then_some(r.transient_attempts),
    }
}
