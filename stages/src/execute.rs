//! `execute` stages (docs/stage-kinds.md, docs/evidence.md): task execution, judged by evidence.
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
use specbridge_engine::pipeline::{ResolvedRunner, StageDef};
use specbridge_engine::runner::claude_code::outcome::validate_output;
use specbridge_engine::runner::claude_code::{
    assemble, InvocationInput, InvocationOutcome, Operation,
};
use specbridge_engine::scheduler::{StageReport, StageRun};
use specbridge_engine::store::layout::{self, attempt};
use specbridge_engine::store::{FileRef, RunReader, SCHEMA_VERSION};
use specbridge_engine::EvidenceStatus;

use crate::agent::AgentSetup;
use crate::attempt::Prepared;
use crate::context::RunContext;
use crate::continuation;
use crate::error::StageError;
use crate::flow::{run_attempt, AfterAgent, Attempt, AttemptKind};
use crate::store_check::run_store_violations;
use crate::verify::run_verification;
use crate::working_tree::{
    attribute_run_made, foreign_changes, protected_paths, working_tree_object, write_snapshot,
    TreeBefore,
};

/// Runs one attempt of an execute stage (or fan-out instance).
pub(crate) async fn run_execute(
    ctx: &RunContext,
    agent: &AgentSetup,
    ledger: &crate::working_tree::TreeLedger,
    stage: &StageDef,
    runner: &ResolvedRunner,
    sr: &StageRun,
) -> StageReport {
    let a = Attempt::new(ctx, agent, ledger, stage, runner, sr);
    run_attempt(&a, Execute::default()).await
}

/// What an execute attempt adds to the shared flow: a session continued after a
/// cut-off attempt, the refusal of foreign changes, evidence judged with
/// verification, and the task result kept as output.
#[derive(Default)]
struct Execute {
    gathered: Option<Gathered>,
}

impl AttemptKind for Execute {
    const OPERATION: Operation = Operation::Execute;
    const VIOLATION_OUTRANKS_RUNNER: bool = false;

    /// An attempt after the first may continue the session of one that was
    /// cut off, judged from where that one began (`continue_session`), which
    /// it learns from its snapshot; a first attempt spawns what it prepared.
    fn decides_spawn(a: &Attempt<'_>) -> bool {
        a.sr.attempt > 1
    }

    fn before_spawn(
        a: &Attempt<'_>,
        p: Prepared,
        before: GitSnapshot,
    ) -> Result<(Prepared, GitSnapshot), StageError> {
        continue_session(a, p, before)
    }

    /// Refuses a tree made dirty behind the run's back, and names the tree the
    /// patch is taken against when the attempt starts from changes an earlier
    /// stage made.
    fn check_before(a: &Attempt<'_>, before: &GitSnapshot) -> Result<Option<String>, StageError> {
        // The run refuses a dirty tree before it starts; this catches changes made
        // behind its back while it went on.
        let foreign = foreign_changes(before, a.ledger);
        if !a.ctx.allow_dirty && !foreign.is_empty() {
            return Err(EvidenceError::DirtyTree { paths: foreign }.into());
        }
        // Starting from changes an earlier stage made, the patch is taken against the
        // tree as it is now, so that it shows this attempt's change alone.
        Ok((before.entries.len() > foreign.len())
            .then(|| working_tree_object(&a.ctx.root, before))
            .flatten())
    }

    async fn evidence(
        &mut self,
        a: &Attempt<'_>,
        p: &Prepared,
        outcome: &InvocationOutcome,
        before: &TreeBefore,
        after: AfterAgent,
        report: &mut StageReport,
    ) -> Result<Vec<Violation>, StageError> {
        // Until it is judged, the evidence has failed.
        report.evidence_status = Some(EvidenceStatus::Failed);
        let gathered = gather(a, p, outcome, before, after).await?;
        report.evidence_status = Some(gathered.decision.status);
        let violations = gathered.violations.clone();
        self.gathered = Some(gathered);
        Ok(violations)
    }

    fn accept(
        &mut self,
        a: &Attempt<'_>,
        _p: &Prepared,
        _outcome: InvocationOutcome,
        report: &mut StageReport,
    ) -> Result<(), StageError> {
        let gathered = self
            .gathered
            .take()
            .expect("accept runs after the evidence was gathered");
        let output = gathered.output.ok_or(StageError::NoValidOutput)?;
        let rel = layout::output_rel(&a.sr.node.id);
        // Queued: written with `stage.json` at the stage's end; downstream
        // stages read it only after the scheduler's flush.
        let sha = a
            .run()
            .defer_json(&rel, &output)
            .map_err(StageError::record(&rel))?;
        report.output = Some(FileRef {
            path: rel,
            sha256: sha,
        });
        // The gate: only verified evidence passes; anything else is its own status
        // and blocks what depends on this stage.
        report.status = gathered.decision.status.stage_status();
        if gathered.decision.status != EvidenceStatus::Verified {
            report.reason = Some(gathered.decision.reasons.join("; "));
        }
        crate::secrets::gate_on_secrets(report, &gathered.findings);
        Ok(())
    }
}

/// After an attempt cut off by timeout, cancel or crash: continue its session when
/// possible (docs/resume.md), judging evidence from the chain's first snapshot.
/// Records `continuation.json` either way.
fn continue_session(
    a: &Attempt<'_>,
    mut p: Prepared,
    before: GitSnapshot,
) -> Result<(Prepared, GitSnapshot), StageError> {
    let sr = a.sr;
    if sr.attempt <= 1 || p.replay.is_some() {
        return Ok((p, before));
    }
    let can_resume = p.detected.capabilities.resume && !p.detected.assumed;
    let Some(c) = continuation::plan(&sr.run, &sr.node.id, sr.attempt, can_resume, &before) else {
        return Ok((p, before));
    };
    // Queued: written with the attempt's start, before the agent is given its
    // prompt (`invoke.rs`).
    sr.run
        .defer_json(
            &layout::in_attempt(&a.attempt_rel, attempt::CONTINUATION),
            &c,
        )
        .map_err(StageError::record(attempt::CONTINUATION))?;
    let Some(session) = c.session_id.as_deref() else {
        // A fresh attempt after one that a crash cut off before it recorded its
        // change goes on from that attempt's partial work, which the resume kept
        // (crate::partial_work): judged, like a continued one, from where the
        // cut-off attempt began.
        if RunReader::at(sr.run.dir())
            .attempt(&sr.node.id, c.previous_attempt)
            .has(attempt::CHANGED_FILES)
        {
            return Ok((p, before));
        }
        let baseline = continuation::baseline(&sr.run, &sr.node.id, &c).unwrap_or(before);
        return Ok((p, baseline));
    };
    let session_id = uuid::Uuid::parse_str(session).map_err(|source| StageError::SessionId {
        session: session.to_string(),
        source,
    })?;
    p.request = assemble(&InvocationInput {
        runner: &p.runner,
        capabilities: &p.detected.capabilities,
        operation: Operation::Continue { session_id },
        schema: Some(&p.schema.value),
        repo_root: &a.ctx.root,
        session_id: None,
        protected: Some(&protected_paths(a.ctx)),
        sandbox_support: a.agent.sandbox.as_deref(),
    })?;
    p.prompt = continuation::prompt(&c, &before, &p.prompt);
    let baseline = continuation::baseline(&sr.run, &sr.node.id, &c).unwrap_or(before);
    Ok((p, baseline))
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
async fn gather(
    a: &Attempt<'_>,
    p: &Prepared,
    outcome: &InvocationOutcome,
    TreeBefore {
        snapshot: before,
        patch_head,
    }: &TreeBefore,
    AfterAgent { tree, store }: AfterAgent,
) -> Result<Gathered, StageError> {
    let (ctx, ledger, sr) = (a.ctx, a.ledger, a.sr);
    let (run, attempt_rel) = (&sr.run, a.attempt_rel.as_str());
    let (after, patch_ahead) = tree.take()?;
    write_snapshot(run, attempt_rel, attempt::GIT_AFTER, &after)?;
    let mut changed = attribute(before, &after, &ledger.own_writes());
    attribute_run_made(&mut changed, before, ledger);
    run.defer_json(
        &layout::in_attempt(attempt_rel, attempt::CHANGED_FILES),
        &changed,
    )
    .map_err(StageError::record(attempt::CHANGED_FILES))?;
    ledger.record(&changed, &after);
    let mut violations = run_store_violations(store);
    violations.extend(protected_paths(ctx).violations(&changed, before, &after));

    let diff = attempt_diff(
        patch_ahead,
        &ctx.root,
        &changed,
        &after,
        patch_head.as_deref(),
        DEFAULT_DIFF_MAX_BYTES,
    )?;
    let (diff_info, findings) = crate::secrets::keep_diff(ctx, run, attempt_rel, diff)?;

    let runner_succeeded = outcome.status == specbridge_engine::StageStatus::Succeeded;
    // Kept as produced: the store redacts output.json and evidence.json.
    let output = outcome
        .structured_output
        .as_ref()
        .filter(|o| validate_output(&p.schema.value, o).is_ok())
        .cloned();
    let claims = outcome.structured_output.clone().map(Claims::new);

    let commands = a
        .stage
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
        .map_err(StageError::record(attempt::EVIDENCE))?;
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
pub fn describe(
    ctx: &RunContext,
    agent: &AgentSetup,
    stage: &StageDef,
    runner: &ResolvedRunner,
) -> Vec<String> {
    let mut lines = crate::attempt::describe(ctx, agent, stage, runner, Operation::Execute);
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
