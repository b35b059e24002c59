//! The evidence status of an attempt (docs/evidence.md): what the evidence shows, whatever
//! the model claims.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::attribute::ChangedFiles;
use super::protect::{head_violations, Violation, ViolationKind};
use super::snapshot::GitSnapshot;
use crate::status::EvidenceStatus;

/// One verification command's result, as run by specbridge itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerificationResult {
    pub name: String,
    pub required: bool,
    pub passed: bool,
}

/// Everything the evidence status of an execute attempt depends on.
#[derive(Debug, Clone, Copy)]
pub struct EvidenceInput<'a> {
    /// The runner's outcome was `succeeded`.
    pub runner_succeeded: bool,
    /// The structured output validated against the stage's schema.
    pub output_valid: bool,
    pub changed: &'a ChangedFiles,
    pub violations: &'a [Violation],
    pub verification: &'a [VerificationResult],
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvidenceVerdict {
    pub status: EvidenceStatus,
    /// Why the status is what it is; for anything short of `verified`, every
    /// condition that was not met.
    pub reasons: Vec<String>,
}

/// `verified` needs all of: the runner succeeded, attributable changes exist, no
/// violation, the output validated, no ambiguous path, and every required
/// verification command passed. A failed runner is `failed` and an attempt that
/// changed nothing is `no-change`, whatever else holds; anything else short of
/// `verified` is `implemented-unverified`.
pub fn judge(input: EvidenceInput<'_>) -> EvidenceVerdict {
    let changed = input.changed;
    let attributed = changed.attributed_count();
    let ambiguous = changed.ambiguous.len();
    if !input.runner_succeeded {
        let mut reasons = vec!["the runner did not succeed".to_string()];
        if attributed + ambiguous > 0 {
            reasons.push(format!(
                "{} path(s) changed before it stopped",
                attributed + ambiguous
            ));
        }
        return verdict(EvidenceStatus::Failed, reasons);
    }
    if attributed + ambiguous == 0 {
        let mut reasons = vec!["the attempt changed no file".to_string()];
        reasons.extend(violation_reasons(input.violations));
        return verdict(EvidenceStatus::NoChange, reasons);
    }

    let mut reasons = Vec::new();
    if attributed == 0 {
        reasons.push("no change can be attributed to the attempt".to_string());
    }
    reasons.extend(violation_reasons(input.violations));
    if !input.output_valid {
        reasons.push("the output did not validate against the stage's schema".to_string());
    }
    if ambiguous > 0 {
        reasons.push(format!(
            "{ambiguous} path(s) were dirty before the attempt and changed again, so their changes cannot be attributed: {}",
            changed.ambiguous.join(", ")
        ));
    }
    for v in input
        .verification
        .iter()
        .filter(|v| v.required && !v.passed)
    {
        reasons.push(format!("required verification {} failed", v.name));
    }
    if !reasons.is_empty() {
        return verdict(EvidenceStatus::ImplementedUnverified, reasons);
    }

    let required = input.verification.iter().filter(|v| v.required).count();
    let mut reasons = vec![format!(
        "{attributed} attributable change(s), no violation, output valid, {required} required verification(s) passed"
    )];
    for v in input
        .verification
        .iter()
        .filter(|v| !v.required && !v.passed)
    {
        reasons.push(format!(
            "optional verification {} failed (not required)",
            v.name
        ));
    }
    verdict(EvidenceStatus::Verified, reasons)
}

fn verdict(status: EvidenceStatus, reasons: Vec<String>) -> EvidenceVerdict {
    EvidenceVerdict { status, reasons }
}

fn violation_reasons(violations: &[Violation]) -> impl Iterator<Item = String> + '_ {
    violations
        .iter()
        .map(|v| format!("safety violation: {}", v.message))
}

/// Generate stages are read-only: every path changed during the attempt (by whoever,
/// specbridge's own writes aside) is a violation, as is a moved HEAD, branch or ref.
pub fn generate_violations(
    changed: &ChangedFiles,
    before: &GitSnapshot,
    after: &GitSnapshot,
) -> Vec<Violation> {
    let mut found: Vec<Violation> = changed
        .changed_during_attempt()
        .map(|path| Violation::new(ViolationKind::ChangedByGenerate { path: path.clone() }))
        .collect();
    found.sort_by(|a, b| a.message.cmp(&b.message));
    found.extend(head_violations(before, after));
    found
}
