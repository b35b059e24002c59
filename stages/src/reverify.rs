//! `resume --reverify` (docs/resume.md): accept a hand fix. An execute stage that
//! ended `unverified` gets a new attempt that spawns no agent: the change made
//! since its last attempt is recorded as the human's (`changed-files.json`
//! `attributedTo: human`), its verification commands run on the working tree as it
//! is now, and it becomes `verified` (stage `succeeded`) only if they pass.

use specbridge_engine::evidence::{
    attribute, ChangeAuthor, ChangeCounts, EvidenceKind, EvidenceRecord, GitSnapshot,
    VerificationSummary,
};
use specbridge_engine::pipeline::{ResolvedRunner, StageDef};
use specbridge_engine::scheduler::{StageReport, StageRun};
use specbridge_engine::store::layout::{self, attempt};
use specbridge_engine::store::{now_rfc3339, sha256_file, FileRef, RunReader};
use specbridge_engine::{EvidenceStatus, StageStatus};

use crate::attempt::{attempt_inputs, stopped};
use crate::context::RunContext;
use crate::error::StageError;
use crate::verify::run_verification;
use crate::working_tree::{snapshot, write_snapshot, TreeLedger};

/// One verification-only attempt of an execute stage.
pub(crate) async fn run_reverify(
    ctx: &RunContext,
    ledger: &TreeLedger,
    stage: &StageDef,
    runner: &ResolvedRunner,
    sr: &StageRun,
) -> StageReport {
    let started_at = now_rfc3339();
    let fail = |reason: String| stopped(&started_at, StageStatus::Failed, reason);
    let run = &sr.run;
    // Compared with the stage's record, in the input-hash layout it was made with.
    let recorded = crate::executor::recorded_hash(run.dir(), &sr.node.id);
    let inputs = match attempt_inputs(ctx, stage, runner, &sr.node, run.dir(), recorded.as_deref())
    {
        Ok(i) => i,
        Err(e) => {
            let reason = run.redactor().redact_str(&e.reason());
            return stopped(&started_at, e.status(), reason);
        }
    };
    let Some(last) = sr.attempt.checked_sub(1).filter(|n| *n >= 1) else {
        return fail(format!(
            "stage `{}` has no earlier attempt to re-verify",
            sr.node.id
        ));
    };
    let attempt_rel = layout::attempt_rel(&sr.node.id, sr.attempt);
    // The tree as the last attempt left it: what changed since is the human's.
    let last_attempt = RunReader::at(run.dir()).attempt(&sr.node.id, last);
    let before: GitSnapshot = match last_attempt.json(attempt::GIT_AFTER) {
        Ok(s) => s,
        Err(e) => return fail(crate::error_chain(&e)),
    };
    let after = match snapshot(&ctx.root) {
        Ok(s) => s,
        Err(e) => return fail(e.reason()),
    };
    for (name, snap) in [(attempt::GIT_BEFORE, &before), (attempt::GIT_AFTER, &after)] {
        if let Err(e) = write_snapshot(run, &attempt_rel, name, snap) {
            return fail(e.reason());
        }
    }
    let mut changed = attribute(&before, &after, &ledger.own_writes());
    // A path the run had changed and the human changed again is the human's.
    changed.modified.append(&mut changed.ambiguous);
    changed.modified.sort();
    changed.attributed_to = Some(ChangeAuthor::Human);
    if let Err(e) = run.write_json(
        &layout::in_attempt(&attempt_rel, attempt::CHANGED_FILES),
        &changed,
    ) {
        return fail(StageError::record(attempt::CHANGED_FILES)(e).reason());
    }
    // Later stages must not take the hand fix for a foreign change.
    ledger.record(&changed, &after);

    let commands = stage
        .verification
        .clone()
        .unwrap_or_else(|| ctx.pipeline.verification.clone());
    let verification = match run_verification(
        ctx,
        &commands,
        run,
        &attempt_rel,
        runner.kill_grace.as_duration(),
    )
    .await
    {
        Ok(v) => v,
        Err(e) => return fail(e.reason()),
    };
    let results = verification.results();
    let required = results.iter().filter(|r| r.required).count();
    let failed: Vec<&str> = results
        .iter()
        .filter(|r| r.required && !r.passed)
        .map(|r| r.name.as_str())
        .collect();
    let (status, reasons) = if required == 0 {
        (
            EvidenceStatus::ImplementedUnverified,
            vec![
                "no required verification command is configured, so nothing shows the change works"
                    .to_string(),
            ],
        )
    } else if !failed.is_empty() {
        (
            EvidenceStatus::ImplementedUnverified,
            failed
                .iter()
                .map(|n| {
                    format!("re-verified on the working tree: required verification {n} failed")
                })
                .collect(),
        )
    } else {
        (
            EvidenceStatus::Verified,
            vec![format!(
                "re-verified on the working tree after a change by hand ({} path(s)): {required} required verification(s) passed",
                changed.attributed_count()
            )],
        )
    };
    let record = EvidenceRecord {
        schema_version: specbridge_engine::store::SCHEMA_VERSION,
        stage: sr.node.id.clone(),
        attempt: sr.attempt,
        kind: EvidenceKind::Reverify,
        status: Some(status),
        reasons: reasons.clone(),
        violations: Vec::new(),
        findings: Vec::new(),
        head_before: before.head.clone(),
        head_after: after.head.clone(),
        changed: ChangeCounts::from(&changed),
        verification: VerificationSummary::from(results.as_slice()),
        diff: None,
        claims: None,
    };
    if let Err(e) = run.write_json(
        &layout::in_attempt(&attempt_rel, attempt::EVIDENCE),
        &record,
    ) {
        return fail(StageError::record(attempt::EVIDENCE)(e).reason());
    }
    // The task result the agent reported stays the stage's output.
    let output_rel = layout::output_rel(&sr.node.id);
    let output = sha256_file(&run.dir().join(&output_rel))
        .ok()
        .map(|sha256| FileRef {
            path: output_rel,
            sha256,
        });
    StageReport {
        status: status.stage_status(),
        reason: (status != EvidenceStatus::Verified).then(|| reasons.join("; ")),
        evidence_status: Some(status),
        input_hash: Some(inputs.input_hash),
        input_parts: Some(inputs.input_parts),
        output,
        started_at: Some(started_at.clone()),
        ..Default::default()
    }
}
