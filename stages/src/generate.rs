//! `generate` stages (docs/stage-kinds.md): spec generation, always read-only.
//!
//! One attempt: render the prompt from the upstream outputs and documents, assemble
//! the read-only argv (`Operation::Generate` ignores the runner's tools and mode),
//! snapshot the working tree, invoke the agent, snapshot it again — any change the
//! agent made is a safety violation, recorded in `evidence.json` — then, on success,
//! validate the structured output again, check the items of any fan-out it feeds,
//! keep it as `stages/<id>/output.json` (redacted) and, when `output.document` is
//! set, write its `markdown` field to that path. The agent itself never writes.

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;

use serde_json::Value;
use specbridge_engine::events::{DocumentWritten, RunEvent};
use specbridge_engine::evidence::{
    attempt_diff, attribute, generate_violations, ChangeCounts, EvidenceKind, EvidenceRecord,
    GitSnapshot, Violation, DEFAULT_DIFF_MAX_BYTES,
};
use specbridge_engine::pipeline::{ResolvedRunner, StageDef};
use specbridge_engine::runner::claude_code::outcome::validate_output;
use specbridge_engine::runner::claude_code::{InvocationOutcome, Operation};
use specbridge_engine::scheduler::{StageReport, StageRun};
use specbridge_engine::store::layout::{self, attempt};
use specbridge_engine::store::{
    publish_confined, sha256_hex, write_confined, FileRef, StagedDocument, SCHEMA_VERSION,
};

use crate::agent::AgentSetup;
use crate::attempt::Prepared;
use crate::context::RunContext;
use crate::error::StageError;
use crate::flow::{run_attempt, AfterAgent, Attempt, AttemptKind};
use crate::store_check::run_store_violations;
use crate::working_tree::{write_snapshot, TreeBefore, TreeLedger};

/// Runs one attempt of a generate stage.
pub(crate) async fn run_generate(
    ctx: &RunContext,
    agent: &AgentSetup,
    ledger: &TreeLedger,
    stage: &StageDef,
    runner: &ResolvedRunner,
    sr: &StageRun,
) -> StageReport {
    run_attempt(
        &Attempt::new(ctx, agent, ledger, stage, runner, sr),
        Generate::default(),
    )
    .await
}

/// What a generate attempt adds to the shared flow: read-only evidence, and the
/// output (and document) it keeps.
#[derive(Default)]
struct Generate {
    /// The document's bytes being written and synced in the attempt's folder,
    /// from the moment the stream shows the output; moved into the repository
    /// if the stage passes.
    staging: Mutex<Option<JoinHandle<Option<StagedDocument>>>>,
}

impl Generate {
    /// The staged document, once its writing has ended; `None` when nothing
    /// was staged or staging failed (the document is then written in one step).
    fn staged(&self) -> Option<StagedDocument> {
        let pending = self
            .staging
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()?;
        pending.join().ok().flatten()
    }
}

/// A stage that ends without its document waits for the staging to end, so
/// that the staged file is removed before the stage is recorded, never left
/// for the process's exit to cut off.
impl Drop for Generate {
    fn drop(&mut self) {
        drop(self.staged());
    }
}

impl AttemptKind for Generate {
    const OPERATION: Operation = Operation::Generate;
    const VIOLATION_OUTRANKS_RUNNER: bool = true;

    /// The document is staged while the CLI is still ending (it takes tens of
    /// milliseconds to exit after its result), so that its sync is done before
    /// the stage's path needs it. A document that cannot be staged is written in
    /// one step by `accept_output`, which reports what goes wrong.
    fn on_result(&self, a: &Attempt<'_>, output: &Value) {
        let Some((dir, markdown)) = document_to_stage(a, output) else {
            return;
        };
        let staging = std::thread::Builder::new()
            .name("specbridge-document".into())
            .spawn(move || StagedDocument::stage(&dir, markdown.as_bytes()).ok());
        if let Ok(pending) = staging {
            *self.staging.lock().unwrap_or_else(PoisonError::into_inner) = Some(pending);
        }
    }

    async fn evidence(
        &mut self,
        a: &Attempt<'_>,
        _p: &Prepared,
        _outcome: &InvocationOutcome,
        before: &TreeBefore,
        after: AfterAgent,
        _report: &mut StageReport,
    ) -> Result<Vec<Violation>, StageError> {
        read_only_evidence(a, &before.snapshot, after)
    }

    fn accept(
        &mut self,
        a: &Attempt<'_>,
        p: &Prepared,
        outcome: InvocationOutcome,
        report: &mut StageReport,
    ) -> Result<(), StageError> {
        let output = outcome.structured_output.ok_or(StageError::NoOutput)?;
        let (output_ref, document_ref) = accept_output(a, &p.schema.value, output, self.staged())?;
        report.output = Some(output_ref);
        report.document = document_ref;
        Ok(())
    }
}

/// The after-snapshot and its records: `git-after.json`, `changed-files.json`,
/// `diff.patch` and `evidence.json`. Every change made during the attempt (other
/// than specbridge's own documents) is a violation: a generate stage is read-only.
fn read_only_evidence(
    a: &Attempt<'_>,
    before: &GitSnapshot,
    AfterAgent { tree, store }: AfterAgent,
) -> Result<Vec<Violation>, StageError> {
    let (run, attempt_rel) = (a.run(), a.attempt_rel.as_str());
    let (after, patch_ahead) = tree.take()?;
    write_snapshot(run, attempt_rel, attempt::GIT_AFTER, &after)?;
    let changed = attribute(before, &after, &a.ledger.own_writes());
    run.defer_json(
        &layout::in_attempt(attempt_rel, attempt::CHANGED_FILES),
        &changed,
    )
    .map_err(StageError::record(attempt::CHANGED_FILES))?;
    let diff = attempt_diff(
        patch_ahead,
        &a.ctx.root,
        &changed,
        &after,
        None,
        DEFAULT_DIFF_MAX_BYTES,
    )?;
    let (diff_info, findings) = crate::secrets::keep_diff(a.ctx, run, attempt_rel, diff)?;
    let mut violations = run_store_violations(store);
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
        stage: a.sr.node.id.clone(),
        attempt: a.sr.attempt,
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
    // Queued with the attempt's other records: written with the output, its
    // `document-written` event and the `stage.json` that ends the stage.
    run.defer_json(&layout::in_attempt(attempt_rel, attempt::EVIDENCE), &record)
        .map_err(StageError::record(attempt::EVIDENCE))?;
    Ok(violations)
}

/// The attempt's folder and the document's text, when the stage writes a
/// document and the output holds one with no secret in it: what may be staged
/// before the stage is judged. A staged file lies in the run's own folder,
/// never in the working tree, and is used only if it holds the very bytes
/// `accept_output` would write.
fn document_to_stage(a: &Attempt<'_>, output: &Value) -> Option<(PathBuf, String)> {
    a.stage.output.as_ref()?.document.as_ref()?;
    let markdown = output.get("markdown")?.as_str()?;
    if !a.run().redactor().find(markdown.as_bytes()).is_empty() {
        return None;
    }
    Some((a.run().dir().join(&a.attempt_rel), markdown.to_owned()))
}

/// Validates the output once more, keeps it as `output.json` (redacted by the
/// store), and writes the document — unless the document would hold a secret:
/// the staged one when it holds these bytes, else in one step.
fn accept_output(
    a: &Attempt<'_>,
    schema: &Value,
    output: Value,
    staged: Option<StagedDocument>,
) -> Result<(FileRef, Option<FileRef>), StageError> {
    let (run, node_id) = (a.run(), a.sr.node.id.as_str());
    let redactor = run.redactor();
    // The classifier validated it; this guards the record against any path that
    // would skip that, since downstream stages and resume trust output.json.
    if let Err(errors) = validate_output(schema, &output) {
        return Err(StageError::OutputMismatch(errors.join("; ")));
    }
    // An unsafe or duplicate item id fails this stage, before any instance exists.
    crate::fanout::check_consumers(&a.ctx.pipeline, node_id, &output)?;
    let rel = layout::output_rel(node_id);
    // Queued: written with the stage's end; downstream stages read it only
    // after the scheduler's flush.
    let sha = run
        .defer_json(&rel, &output)
        .map_err(StageError::record(&rel))?;
    let output_ref = FileRef {
        path: rel,
        sha256: sha,
    };

    let Some(doc) = a.stage.output.as_ref().and_then(|o| o.document.as_ref()) else {
        return Ok((output_ref, None));
    };
    let Some(markdown) = output.get("markdown").and_then(Value::as_str) else {
        return Err(StageError::NoMarkdown(doc.clone()));
    };
    // A document lands in the user's repository: it is never altered silently,
    // and never written with a secret in it.
    if let Some(found) = redactor.find(markdown.as_bytes()).first() {
        return Err(StageError::SecretInDocument {
            doc: doc.clone(),
            line: found.line,
            kind: found.kind.clone(),
            kept: output_ref.path,
        });
    }
    // Known before it lands, so that no generate stage running beside this one
    // mistakes it for its agent's write.
    let sha = sha256_hex(markdown.as_bytes());
    a.ledger.document(doc, &sha);
    // The agent has exited; an earlier stage may still have left a symlink on the
    // way, which both writers refuse component by component.
    let failed = |source| StageError::Document {
        stage: node_id.to_string(),
        source,
    };
    let written = |sha256: String| {
        RunEvent::DocumentWritten(DocumentWritten {
            stage: node_id.to_string(),
            path: doc.clone(),
            sha256,
        })
    };
    // Queued behind the attempt's records, and written with them and the
    // `stage.json` that ends the stage, in one batch (docs/run-directory.md):
    // the scheduler flushes it before any stage that needs this one starts. A
    // staged document's folder is synced with that batch's folders, before
    // the event.
    let sha = match staged.filter(|s| s.sha256() == sha) {
        Some(staged) => {
            let published = publish_confined(&a.ctx.root, doc, staged).map_err(failed)?;
            run.defer_event_after_sync(written(published.sha256.clone()), published.folder)?;
            published.sha256
        }
        None => {
            let sha = write_confined(&a.ctx.root, doc, markdown.as_bytes()).map_err(failed)?;
            run.defer_event(written(sha.clone()))?;
            sha
        }
    };
    Ok((
        output_ref,
        Some(FileRef {
            path: doc.clone(),
            sha256: sha,
        }),
    ))
}

/// What a generate stage would run, for `--dry-run`.
pub fn describe(
    ctx: &RunContext,
    agent: &AgentSetup,
    stage: &StageDef,
    runner: &ResolvedRunner,
) -> Vec<String> {
    crate::attempt::describe(ctx, agent, stage, runner, Operation::Generate)
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
    use specbridge_engine::StageStatus;

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
            pipeline_file: "specbridge.yaml".into(),
            stage_index: crate::context::index_stages(&pipeline),
            pipeline: Arc::new(pipeline),
            overrides: RunOverrides::default(),
            cancel: CancelToken::new(),
            allow_dirty: false,
            bubblewrap: None,
            kept_digests: Default::default(),
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
            let runner = ctx.runner_for(&stage);
            let report =
                run_generate(&ctx, &setup, &TreeLedger::default(), &stage, &runner, &sr).await;
            assert_eq!(report.status, StageStatus::SafetyViolation, "{extra}: {report:?}");
            assert!(report.reason.unwrap().contains("`commandArgs` passes"));
            assert_eq!(report.invocations, 0);
            assert!(!marker.exists(), "{extra}: the agent was started");
        }
    }
}
