//! `evidence.json`, and the JSON Schemas of the evidence records in `schemas/`.

use schemars::schema::RootSchema;
use schemars::{schema_for, JsonSchema};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::attribute::ChangedFiles;
use super::diff::DiffInfo;
use super::protect::Violation;
use super::snapshot::GitSnapshot;
use super::status::VerificationResult;
use crate::status::EvidenceStatus;
use crate::store::SCHEMA_VERSION;

fn schema_version() -> u32 {
    SCHEMA_VERSION
}

/// Which kind of agent stage the evidence is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum EvidenceKind {
    /// Read-only: any change is a violation; there is no evidence status.
    Generate,
    Execute,
    /// `resume --reverify`: an execute stage's verification run again on the
    /// working tree as changed by hand; no agent ran in this attempt.
    Reverify,
}

/// `evidence.json`: the outcome of one attempt as shown by git, protected paths and
/// verification — with the model's own report kept apart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvidenceRecord {
    #[serde(default = "schema_version")]
    pub schema_version: u32,
    pub stage: String,
    pub attempt: u32,
    pub kind: EvidenceKind,
    /// The evidence status of an execute attempt; none for a generate stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<EvidenceStatus>,
    pub reasons: Vec<String>,
    pub violations: Vec<Violation>,
    pub head_before: Option<String>,
    pub head_after: Option<String>,
    pub changed: ChangeCounts,
    pub verification: VerificationSummary,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<DiffInfo>,
    /// What else the evidence shows: `secret-in-change` (a secret in the lines the
    /// agent added; `diff.patch` holds it redacted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<super::secrets::EvidenceFinding>,
    /// What the model reported (`builtin:task-result`): a claim, never proof.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims: Option<Claims>,
}

/// How many paths of each kind `changed-files.json` lists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangeCounts {
    pub added: u32,
    pub modified: u32,
    pub deleted: u32,
    pub pre_existing: u32,
    pub ambiguous: u32,
    pub own_writes: u32,
}

impl From<&ChangedFiles> for ChangeCounts {
    fn from(c: &ChangedFiles) -> Self {
        let n = |v: &Vec<String>| u32::try_from(v.len()).unwrap_or(u32::MAX);
        ChangeCounts {
            added: n(&c.added),
            modified: n(&c.modified),
            deleted: n(&c.deleted),
            pre_existing: n(&c.pre_existing),
            ambiguous: n(&c.ambiguous),
            own_writes: n(&c.own_writes),
        }
    }
}

/// The verification commands specbridge ran (their logs are in `verification.json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerificationSummary {
    pub required: u32,
    pub required_passed: u32,
    pub optional: u32,
    pub optional_passed: u32,
    /// Names of the commands that failed, required or not.
    pub failed: Vec<String>,
}

impl From<&[VerificationResult]> for VerificationSummary {
    fn from(results: &[VerificationResult]) -> Self {
        let mut s = VerificationSummary::default();
        for r in results {
            let (total, passed) = if r.required {
                (&mut s.required, &mut s.required_passed)
            } else {
                (&mut s.optional, &mut s.optional_passed)
            };
            *total += 1;
            if r.passed {
                *passed += 1;
            } else {
                s.failed.push(r.name.clone());
            }
        }
        s
    }
}

/// The model's report, stored apart from the evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Claims {
    /// Always false: what the model says is recorded, never counted.
    pub counts_toward_status: bool,
    pub report: Value,
}

impl Claims {
    pub fn new(report: Value) -> Self {
        Claims {
            counts_toward_status: false,
            report,
        }
    }
}

/// The schema file name under `schemas/` and the schema of each evidence record.
pub fn record_schemas() -> Vec<(&'static str, RootSchema)> {
    vec![
        ("git-snapshot.schema.json", schema_for!(GitSnapshot)),
        ("changed-files.schema.json", schema_for!(ChangedFiles)),
        ("evidence.schema.json", schema_for!(EvidenceRecord)),
    ]
}
