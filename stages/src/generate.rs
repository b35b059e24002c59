//! `generate` stages (DESIGN §3): spec generation, always read-only.
//!
//! One attempt: render the prompt from the upstream outputs and documents, assemble
//! the read-only argv (`Operation::Generate` ignores the runner's tools and mode),
//! snapshot the working tree, invoke the agent, snapshot it again — any change the
//! agent made is a safety violation, recorded in `evidence.json` — then, on success,
//! validate the structured output again, check the items of any fan-out it feeds,
//! keep it as `stages/<id>/output.json` (redacted) and, when `output.document` is
//! set, write its `markdown` field to that path. The agent itself never writes.

use serde_json::{json, Value};
use specbridge_engine::evidence::{
    attempt_diff, attribute, generate_violations, ChangeCounts, EvidenceKind, EvidenceRecord,
    GitSnapshot, Violation, DEFAULT_DIFF_MAX_BYTES,
};
use specbridge_engine::pipeline::StageDef;
use specbridge_engine::runner::claude_code::outcome::validate_output;
use specbridge_engine::runner::claude_code::Operation;
use specbridge_engine::scheduler::{StageReport, StageRun};
use specbridge_engine::store::layout::{self, attempt};
use specbridge_engine::store::{
    now_rfc3339, sha256_hex, write_confined, ConfinedWriteError, FileRef, RunHandle, SCHEMA_VERSION,
};
use specbridge_engine::StageStatus;

use crate::agent::AgentSetup;
use crate::attempt::{prepare, report_of, run_agent, stopped};
use crate::context::RunContext;
use crate::working_tree::{
    run_store_violations, snapshot, write_snapshot, RunStoreState, TreeLedger,
};

/// Runs one attempt of a generate stage.
pub async fn run_generate(
    ctx: &RunContext,
    agent: &AgentSetup,
    ledger: &TreeLedger,
    stage: &StageDef,
    sr: &StageRun,
) -> StageReport {
    let p = match prepare(ctx, agent, stage, sr, Operation::Generate) {
        Ok(p) => p,
        Err(report) => return *report,
    };
    let run = &sr.run;
    let node = &sr.node;
    let attempt_rel = layout::attempt_rel(&node.id, sr.attempt);
    let before = match snapshot(&ctx.root)
        .and_then(|b| write_snapshot(run, &attempt_rel, attempt::GIT_BEFORE, &b).map(|_| b))
    {
        Ok(before) => before,
        Err(e) => {
            let mut report = stopped(&now_rfc3339(), StageStatus::Failed, e);
            report.input_hash = Some(p.input_hash.clone());
            return report;
        }
    };
    let store_before = RunStoreState::take(&ctx.root, run);
    let outcome = run_agent(ctx, agent, &p, sr).await;
    let mut report = report_of(&outcome, &p);
    let store_changed = RunStoreState::take(&ctx.root, run).changed_since(&store_before);
    let evidence = read_only_evidence(
        ctx,
        ledger,
        run,
        &attempt_rel,
        sr.attempt,
        &node.id,
        &before,
        &store_changed,
    );
    let violations = match evidence {
        Ok(violations) => violations,
        Err(e) => {
            report.status = StageStatus::Failed;
            report.outcome = Some(e);
            return report;
        }
    };
    if let Some(first) = violations.first() {
        report.status = StageStatus::SafetyViolation;
        report.outcome = Some(if violations.len() == 1 {
            first.message.clone()
        } else {
            format!(
                "{} (and {} more safety violation(s), see evidence.json)",
                first.message,
                violations.len() - 1
            )
        });
        return report;
    }
    if outcome.status != StageStatus::Succeeded {
        return report;
    }
    let Some(output) = outcome.structured_output else {
        report.status = StageStatus::MalformedOutput;
        report.outcome = Some("the invocation succeeded without structured output".into());
        return report;
    };
    match accept_output(ctx, ledger, stage, &node.id, run, &p.schema.value, output) {
        Ok((output_ref, document_ref)) => {
            report.output = Some(output_ref);
            report.document = document_ref;
        }
        Err((status, reason)) => {
            report.status = status;
            report.outcome = Some(reason);
        }
    }
    report
}

/// The after-snapshot and its records: `git-after.json`, `changed-files.json`,
/// `diff.patch` and `evidence.json`. Every change made during the attempt (other
/// than specbridge's own documents) is a violation: a generate stage is read-only.
#[allow(clippy::too_many_arguments)]
fn read_only_evidence(
    ctx: &RunContext,
    ledger: &TreeLedger,
    run: &RunHandle,
    attempt_rel: &str,
    attempt: u32,
    node_id: &str,
    before: &GitSnapshot,
    store_changed: &[String],
) -> Result<Vec<Violation>, String> {
    let after = snapshot(&ctx.root)?;
    write_snapshot(run, attempt_rel, attempt::GIT_AFTER, &after)?;
    let changed = attribute(before, &after, &ledger.own_writes());
    run.write_json(
        &layout::in_attempt(attempt_rel, attempt::CHANGED_FILES),
        &changed,
    )
    .map_err(|e| format!("failed to write changed-files.json: {e}"))?;
    let diff = attempt_diff(&ctx.root, &changed, &after, DEFAULT_DIFF_MAX_BYTES)
        .map_err(|e| crate::error_chain(&e))?;
    let (diff_info, findings) = crate::secrets::keep_diff(ctx, run, attempt_rel, diff)?;
    let mut violations = run_store_violations(store_changed);
    violations.extend(generate_violations(&changed, before, &after));
    let reasons = if violations.is_empty() {
        vec!["the working tree is as it was before the attempt".to_string()]
    } else {
        vec![format!(
            "the agent changed the working tree during a read-only generate stage: {} violation(s)",
            violations.len()
        )]
    };
    let record = EvidenceRecord {
        schema_version: SCHEMA_VERSION,
        stage: node_id.to_string(),
        attempt,
        kind: EvidenceKind::Generate,
        status: None,
        reasons,
        violations: violations.clone(),
        head_before: before.head.clone(),
        head_after: after.head.clone(),
        changed: ChangeCounts::from(&changed),
        verification: Default::default(),
        diff: Some(diff_info),
        findings,
        claims: None,
    };
    run.write_json(&layout::in_attempt(attempt_rel, attempt::EVIDENCE), &record)
        .map_err(|e| format!("failed to write evidence.json: {e}"))?;
    Ok(violations)
}

/// Validates the output once more, keeps it as `output.json` (redacted by the
/// store), and writes the document — unless the document would hold a secret.
#[allow(clippy::too_many_arguments)]
fn accept_output(
    ctx: &RunContext,
    ledger: &TreeLedger,
    stage: &StageDef,
    node_id: &str,
    run: &RunHandle,
    schema: &Value,
    output: Value,
) -> Result<(FileRef, Option<FileRef>), (StageStatus, String)> {
    let redactor = run.redactor();
    // The classifier validated it; this guards the record against any path that
    // would skip that, since downstream stages and resume trust output.json.
    if let Err(errors) = validate_output(schema, &output) {
        return Err((
            StageStatus::MalformedOutput,
            redactor.redact_str(&format!(
                "the output does not match the schema: {}",
                errors.join("; ")
            )),
        ));
    }
    // An unsafe or duplicate item id fails this stage, before any instance exists.
    crate::fanout::check_consumers(&ctx.pipeline, node_id, &output)
        .map_err(|e| (StageStatus::Failed, redactor.redact_str(&e)))?;
    let rel = layout::output_rel(node_id);
    let sha = run
        .write_json(&rel, &output)
        .map_err(|e| (StageStatus::Failed, format!("failed to write {rel}: {e}")))?;
    let output_ref = FileRef {
        path: rel,
        sha256: sha,
    };

    let Some(doc) = stage.output.as_ref().and_then(|o| o.document.as_ref()) else {
        return Ok((output_ref, None));
    };
    let Some(markdown) = output.get("markdown").and_then(Value::as_str) else {
        return Err((
            StageStatus::MalformedOutput,
            format!("the output has no `markdown` text to write to {doc}"),
        ));
    };
    // A document lands in the user's repository: it is never altered silently,
    // and never written with a secret in it.
    if let Some(found) = redactor.find(markdown.as_bytes()).first() {
        return Err((
            StageStatus::Failed,
            format!(
                "refusing to write document `{doc}`: line {} holds {}; the output is kept redacted in {}",
                found.line, found.kind, output_ref.path
            ),
        ));
    }
    // Known before it lands, so that no generate stage running beside this one
    // mistakes it for its agent's write.
    ledger.document(doc, &sha256_hex(markdown.as_bytes()));
    // The agent has exited; an earlier stage may still have left a symlink on the
    // way, which `write_confined` refuses component by component.
    let sha = write_confined(&ctx.root, doc, markdown.as_bytes()).map_err(|e| {
        let status = match e {
            ConfinedWriteError::Io { .. } => StageStatus::Failed,
            _ => StageStatus::SafetyViolation,
        };
        (
            status,
            format!("document of stage `{node_id}`: {}", crate::error_chain(&e)),
        )
    })?;
    if let Err(e) = run.event(
        "document-written",
        json!({ "stage": node_id, "path": doc, "sha256": sha }),
    ) {
        return Err((StageStatus::Failed, e.to_string()));
    }
    Ok((
        output_ref,
        Some(FileRef {
            path: doc.clone(),
            sha256: sha,
        }),
    ))
}

/// What a generate stage would run, for `--dry-run`.
pub fn describe(ctx: &RunContext, agent: &AgentSetup, stage: &StageDef) -> Vec<String> {
    crate::attempt::describe(ctx, agent, stage, Operation::Generate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;

    use specbridge_engine::pipeline::StageKind;
    use specbridge_engine::pipeline::{PipelineFile, RunOverrides};
    use specbridge_engine::scheduler::Node;
    use specbridge_engine::store::RunStore;
    use specbridge_engine::supervisor::CancelToken;

    use std::sync::Arc;

    use crate::agent::{assumed_capabilities, DetectedRunner};

    /// A pipeline that never went through validation, with `extra` runner keys, and
    /// an agent stand-in that leaves a marker file if it is ever started.
    fn unvalidated(extra: &str) -> (tempfile::TempDir, RunContext, AgentSetup, PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let marker = root.path().join("spawned");
        let agent = root.path().join("agent");
        std::fs::write(&agent, format!("#!/bin/sh\ntouch '{}'\n", marker.display())).unwrap();
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
        let yaml = format!(
            "version: 1\nname: t\nrunner:\n  command: {}\n{extra}stages:\n  - id: requirements\n    kind: generate\n    prompt: |\n      Write it.\n      Now.\n    output: {{ schema: builtin:document }}\n",
            agent.display()
        );
        let pipeline: PipelineFile = serde_yaml::from_str(&yaml).unwrap();
        let ctx = RunContext {
            root: root.path().to_path_buf(),
            pipeline_dir: root.path().to_path_buf(),
            stage_index: crate::context::index_stages(&pipeline),
            pipeline: Arc::new(pipeline),
            overrides: RunOverrides::default(),
            cancel: CancelToken::new(),
            allow_dirty: false,
            bubblewrap: None,
        };
        let mut setup = AgentSetup::default();
        setup.runners.insert(
            agent.display().to_string(),
            DetectedRunner {
                version: None,
                capabilities: assumed_capabilities(),
                assumed: false,
            },
        );
        (root, ctx, setup, marker)
    }

    #[tokio::test]
    async fn assembly_refuses_a_forbidden_flag_that_skipped_validation() {
        for extra in [
            "  commandArgs: [\"--dangerously-skip-permissions\"]\n",
            "  commandArgs: [\"--permission-mode=bypassPermissions\"]\n",
            "  commandArgs: [\"--settings\", '{\"permissions\":{\"defaultMode\":\"bypassPermissions\"}}']\n",
        ] {
            let (root, ctx, setup, marker) = unvalidated(extra);
            let run = Arc::new(RunStore::new(root.path()).create(Default::default()).unwrap());
            let sr = StageRun {
                node: Node::stage("requirements", StageKind::Generate, Vec::new()),
                attempt: 1,
                run: run.clone(),
            };
            let stage = ctx.stage("requirements").unwrap().clone();
            let report = run_generate(&ctx, &setup, &TreeLedger::default(), &stage, &sr).await;
            assert_eq!(report.status, StageStatus::SafetyViolation, "{extra}: {report:?}");
            assert!(report.outcome.unwrap().contains("`commandArgs` passes"));
            assert_eq!(report.invocations, 0);
            assert!(!marker.exists(), "{extra}: the agent was started");
        }
    }
}
