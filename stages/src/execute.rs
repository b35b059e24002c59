//! `execute` stages (DESIGN §3, §7): task execution, judged by evidence.
//!
//! One attempt: check that the working tree holds no change the run did not make
//! (unless `--allow-dirty`), snapshot it, invoke the agent with the execute tool
//! policy, snapshot it again, attribute what changed, check protected paths and
//! HEAD, keep the attempt's `diff.patch`, run the verification commands, and judge
//! the evidence status. The model's `builtin:task-result` is kept as the stage's
//! output and, in `evidence.json`, as a claim that never counts.

use serde_json::Value;
use specbridge_engine::evidence::verification::VerificationRecord;
use specbridge_engine::evidence::{
    attempt_diff, attribute, judge, ChangeCounts, ChangedFiles, Claims, EvidenceError,
    EvidenceFinding, EvidenceInput, EvidenceKind, EvidenceRecord, EvidenceVerdict, GitSnapshot,
    VerificationSummary, Violation, DEFAULT_DIFF_MAX_BYTES,
};
use specbridge_engine::pipeline::StageDef;
use specbridge_engine::runner::claude_code::outcome::validate_output;
use specbridge_engine::runner::claude_code::{
    assemble, InvocationInput, InvocationOutcome, Operation,
};
use specbridge_engine::scheduler::{StageReport, StageRun};
use specbridge_engine::store::layout::{self, attempt};
use specbridge_engine::store::{now_rfc3339, FileRef, SCHEMA_VERSION};
use specbridge_engine::{EvidenceStatus, StageStatus};

use crate::agent::AgentSetup;
use crate::attempt::{prepare, report_of, run_agent, stopped, Prepared};
use crate::context::RunContext;
use crate::continuation;
use crate::verify::run_verification;
use crate::working_tree::{
    attribute_run_made, foreign_changes, protected_paths, run_store_violations, snapshot,
    working_tree_object, write_snapshot, RunStoreState, TreeLedger,
};

/// After an attempt cut off by timeout, cancel or crash: continue its session when
/// possible (docs/resume.md), judging evidence from the chain's first snapshot.
/// Records `continuation.json` either way.
fn continue_session(
    ctx: &RunContext,
    agent_sandbox: Option<&specbridge_engine::sandbox::SandboxSupport>,
    sr: &StageRun,
    attempt_rel: &str,
    mut p: Prepared,
    before: GitSnapshot,
) -> Result<(Prepared, GitSnapshot), String> {
    if sr.attempt <= 1 || p.replay.is_some() {
        return Ok((p, before));
    }
    let can_resume = p.detected.capabilities.resume && !p.detected.assumed;
    let Some(c) = continuation::plan(&sr.run, &sr.node.id, sr.attempt, can_resume, &before) else {
        return Ok((p, before));
    };
    sr.run
        .write_json(&layout::in_attempt(attempt_rel, attempt::CONTINUATION), &c)
        .map_err(|e| format!("failed to write continuation.json: {e}"))?;
    let Some(session) = c.session_id.as_deref() else {
        return Ok((p, before));
    };
    let session_id = uuid::Uuid::parse_str(session)
        .map_err(|e| format!("the recorded session id `{session}` is not a UUID: {e}"))?;
    p.request = assemble(&InvocationInput {
        runner: &p.runner,
        capabilities: &p.detected.capabilities,
        operation: Operation::Continue { session_id },
        schema: Some(&p.schema.value),
        repo_root: &ctx.root,
        session_id: None,
        protected: Some(&protected_paths(ctx, &sr.run)),
        sandbox_support: agent_sandbox,
    })
    .map_err(|e| sr.run.redactor().redact_str(&e.to_string()))?;
    p.prompt = continuation::prompt(&c, &before, &p.prompt);
    let baseline = continuation::baseline(&sr.run, &sr.node.id, &c).unwrap_or(before);
    Ok((p, baseline))
}

/// Runs one attempt of an execute stage (or fan-out instance).
pub async fn run_execute(
    ctx: &RunContext,
    agent: &AgentSetup,
    ledger: &TreeLedger,
    stage: &StageDef,
    sr: &StageRun,
) -> StageReport {
    let p = match prepare(ctx, agent, stage, sr, Operation::Execute) {
        Ok(p) => p,
        Err(report) => return *report,
    };
    let run = &sr.run;
    let attempt_rel = layout::attempt_rel(&sr.node.id, sr.attempt);
    let input_hash = p.input_hash.clone();
    let not_started = |reason: String| {
        let mut report = stopped(&now_rfc3339(), StageStatus::Failed, reason);
        report.input_hash = Some(input_hash.clone());
        report
    };
    let before = match snapshot(&ctx.root) {
        Ok(before) => before,
        Err(e) => return not_started(e),
    };
    if let Err(e) = write_snapshot(run, &attempt_rel, attempt::GIT_BEFORE, &before) {
        return not_started(e);
    }
    let (p, before) =
        match continue_session(ctx, agent.sandbox.as_ref(), sr, &attempt_rel, p, before) {
            Ok(x) => x,
            Err(e) => return not_started(e),
        };
    // The run refuses a dirty tree before it starts; this catches changes made
    // behind its back while it went on.
    let foreign = foreign_changes(&before, ledger);
    if !ctx.allow_dirty && !foreign.is_empty() {
        return not_started(EvidenceError::DirtyTree { paths: foreign }.to_string());
    }
    // Starting from changes an earlier stage made, the patch is taken against the
    // tree as it is now, so that it shows this attempt's change alone.
    let diff_base = (before.entries.len() > foreign.len())
        .then(|| working_tree_object(&ctx.root, &before))
        .flatten();

    let store_before = RunStoreState::take(&ctx.root, run);
    let outcome = run_agent(ctx, agent, &p, sr).await;
    let mut report = report_of(&outcome, &p);
    let store_changed = RunStoreState::take(&ctx.root, run).changed_since(&store_before);
    let gathered = match gather(
        ctx,
        ledger,
        stage,
        sr,
        &attempt_rel,
        &p,
        &outcome,
        &before,
        diff_base,
        &store_changed,
    )
    .await
    {
        Ok(g) => g,
        Err(e) => {
            report.status = StageStatus::Failed;
            report.outcome = Some(e);
            report.evidence_status = Some(EvidenceStatus::Failed);
            return report;
        }
    };
    report.evidence_status = Some(gathered.decision.status);

    if outcome.status != StageStatus::Succeeded {
        return report;
    }
    if let Some(first) = gathered.violations.first() {
        report.status = StageStatus::SafetyViolation;
        report.outcome = Some(if gathered.violations.len() == 1 {
            first.message.clone()
        } else {
            format!(
                "{} (and {} more safety violation(s), see evidence.json)",
                first.message,
                gathered.violations.len() - 1
            )
        });
        return report;
    }
    let Some(output) = gathered.output else {
        report.status = StageStatus::MalformedOutput;
        report.outcome =
            Some("the invocation succeeded without a structured output that validates".into());
        return report;
    };
    let rel = layout::output_rel(&sr.node.id);
    match run.write_json(&rel, &output) {
        Ok(sha) => {
            report.output = Some(FileRef {
                path: rel,
                sha256: sha,
            })
        }
        Err(e) => {
            report.status = StageStatus::Failed;
            report.outcome = Some(format!("failed to write {rel}: {e}"));
            return report;
        }
    }
    // The gate: only verified evidence passes; anything else is its own status
    // and blocks what depends on this stage.
    report.status = gathered.decision.status.stage_status();
    if gathered.decision.status != EvidenceStatus::Verified {
        report.outcome = Some(gathered.decision.reasons.join("; "));
    }
    crate::secrets::gate_on_secrets(&mut report, &gathered.findings);
    report
}

/// What the evidence of an attempt came to.
struct Gathered {
    decision: EvidenceVerdict,
    violations: Vec<Violation>,
    /// The validated task-result (the store redacts it when it keeps it).
    output: Option<Value>,
    /// `secret-in-change` findings.
    findings: Vec<EvidenceFinding>,
}

/// Everything after the agent ended: the after-snapshot, attribution, violations,
/// the patch, verification, and `evidence.json`.
#[allow(clippy::too_many_arguments)]
async fn gather(
    ctx: &RunContext,
    ledger: &TreeLedger,
    stage: &StageDef,
    sr: &StageRun,
    attempt_rel: &str,
    p: &Prepared,
    outcome: &InvocationOutcome,
    before: &GitSnapshot,
    diff_base: Option<String>,
    store_changed: &[String],
) -> Result<Gathered, String> {
    let run = &sr.run;
    let after = snapshot(&ctx.root)?;
    write_snapshot(run, attempt_rel, attempt::GIT_AFTER, &after)?;
    let mut changed = attribute(before, &after, &ledger.own_writes());
    attribute_run_made(&mut changed, before, ledger);
    run.write_json(
        &layout::in_attempt(attempt_rel, attempt::CHANGED_FILES),
        &changed,
    )
    .map_err(|e| format!("failed to write changed-files.json: {e}"))?;
    ledger.record(&changed, &after);
    let mut violations = run_store_violations(store_changed);
    violations.extend(protected_paths(ctx, run).violations(&changed, before, &after));

    let mut base = after.clone();
    if diff_base.is_some() {
        base.head = diff_base;
    }
    let diff = attempt_diff(&ctx.root, &changed, &base, DEFAULT_DIFF_MAX_BYTES)
        .map_err(|e| crate::error_chain(&e))?;
    let (diff_info, findings) = crate::secrets::keep_diff(ctx, run, attempt_rel, diff)?;

    let runner_succeeded = outcome.status == StageStatus::Succeeded;
    // Kept as produced: the store redacts output.json and evidence.json.
    let output = outcome
        .structured_output
        .as_ref()
        .filter(|o| validate_output(&p.schema.value, o).is_ok())
        .cloned();
    let claims = outcome.structured_output.clone().map(Claims::new);

    let commands = stage
        .verification
        .clone()
        .unwrap_or_else(|| ctx.pipeline.verification.clone());
    let skipped = skip_verification(runner_succeeded, &violations, &changed);
    let verification = match skipped {
        Some(_) => VerificationRecord {
            schema_version: SCHEMA_VERSION,
            commands: Vec::new(),
        },
        None => {
            run_verification(
                ctx,
                &commands,
                run,
                attempt_rel,
                p.runner.kill_grace.as_duration(),
            )
            .await?
        }
    };
    let results = verification.results();
    let mut decision = judge(EvidenceInput {
        runner_succeeded,
        output_valid: output.is_some(),
        changed: &changed,
        violations: &violations,
        verification: &results,
    });
    if decision.status == EvidenceStatus::Verified && !results.iter().any(|r| r.required) {
        // Nothing specbridge ran shows that the change works.
        decision.status = EvidenceStatus::ImplementedUnverified;
        decision.reasons = vec![
            "no required verification command is configured, so nothing shows the change works"
                .to_string(),
        ];
    }
    if let Some(why) = skipped {
        decision
            .reasons
            .push(format!("verification skipped: {why}"));
    }
    let record = EvidenceRecord {
        schema_version: SCHEMA_VERSION,
        stage: sr.node.id.clone(),
        attempt: sr.attempt,
        kind: EvidenceKind::Execute,
        status: Some(decision.status),
        reasons: decision.reasons.clone(),
        violations: violations.clone(),
        head_before: before.head.clone(),
        head_after: after.head.clone(),
        changed: ChangeCounts::from(&changed),
        verification: VerificationSummary::from(results.as_slice()),
        diff: Some(diff_info),
        findings: findings.clone(),
        claims,
    };
    run.write_json(&layout::in_attempt(attempt_rel, attempt::EVIDENCE), &record)
        .map_err(|e| format!("failed to write evidence.json: {e}"))?;
    Ok(Gathered {
        decision,
        violations,
        output,
        findings,
    })
}

/// Verification proves a change works; there is nothing to run it on when the
/// runner failed, a safety rule was broken, or nothing changed.
fn skip_verification(
    runner_succeeded: bool,
    violations: &[Violation],
    changed: &ChangedFiles,
) -> Option<&'static str> {
    if !runner_succeeded {
        Some("the runner did not succeed")
    } else if !violations.is_empty() {
        Some("the attempt broke a safety rule")
    } else if changed.attributed_count() + changed.ambiguous.len() == 0 {
        Some("the attempt changed nothing")
    } else {
        None
    }
}

/// What an execute stage would run, for `--dry-run`.
pub fn describe(ctx: &RunContext, agent: &AgentSetup, stage: &StageDef) -> Vec<String> {
    let mut lines = crate::attempt::describe(ctx, agent, stage, Operation::Execute);
    let commands = stage
        .verification
        .as_ref()
        .unwrap_or(&ctx.pipeline.verification);
    for c in commands {
        if let Some(argv) = c.argv.as_list() {
            lines.push(format!(
                "{}   # verification `{}`",
                crate::shell_words(argv),
                c.name
            ));
        }
    }
    lines
}
