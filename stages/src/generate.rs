//! `generate` stages (DESIGN §3): spec generation, always read-only.
//!
//! One attempt: render the prompt from the upstream outputs and documents, assemble
//! the read-only argv (`Operation::Generate` ignores the runner's tools and mode),
//! invoke the agent, then — on success — validate the structured output again,
//! keep it as `stages/<id>/output.json` (redacted) and, when `output.document` is
//! set, write its `markdown` field to that path. The agent itself never writes.

use std::path::{Component, Path};
use std::sync::Arc;

use serde_json::{json, Value};
use specbridge_engine::pipeline::StageDef;
use specbridge_engine::redact::Redactor;
use specbridge_engine::runner::claude_code::argv::AssemblyError;
use specbridge_engine::runner::claude_code::outcome::validate_output;
use specbridge_engine::runner::claude_code::stream::Progress;
use specbridge_engine::runner::claude_code::{
    assemble, invoke, InvocationInput, InvokeSpec, Operation, ProgressCallback,
};
use specbridge_engine::scheduler::{Node, StageReport, StageRun};
use specbridge_engine::store::{now_rfc3339, write_atomic, FileRef, InputParts, RunHandle};
use specbridge_engine::StageStatus;

use crate::agent::{assumed_capabilities, AgentSetup};
use crate::context::RunContext;
use crate::input_hash::{agent_settings, input_hash, input_parts, HashInputs};
use crate::prompt::{render, PromptSource};
use crate::schema;
use crate::upstream::stage_inputs_in;

/// When [`snapshot_hook`] is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotPhase {
    /// Just before the agent is spawned.
    Before,
    /// Just after it ended, before specbridge writes the document.
    After,
}

/// Where git evidence plugs in (DESIGN §3, §7). `Before` will snapshot the working
/// tree (HEAD, branch, each changed path with its sha256) into `git-before.json`;
/// `After` will snapshot it again into `git-after.json`, write `changed-files.json`,
/// `diff.patch` and `evidence.json`, and return a violation for any change the
/// agent made — a generate stage may change nothing, and specbridge's own writes
/// (the document, `.specbridge/`) come after this call.
///
/// For now it records nothing and finds nothing.
fn snapshot_hook(
    _ctx: &RunContext,
    _run: &RunHandle,
    _attempt_rel: &str,
    _phase: SnapshotPhase,
) -> Option<String> {
    None
}

/// Runs one attempt of a generate stage.
pub async fn run_generate(
    ctx: &RunContext,
    agent: &AgentSetup,
    stage: &StageDef,
    sr: &StageRun,
) -> StageReport {
    let started_at = now_rfc3339();
    let stopped = |status: StageStatus, reason: String| StageReport {
        status,
        outcome: Some(reason),
        started_at: Some(started_at.clone()),
        ended_at: Some(now_rfc3339()),
        duration_ms: Some(0),
        ..Default::default()
    };
    let run = &sr.run;
    let node = &sr.node;
    let runner = ctx.runner_for(stage);
    let redactor = Redactor::from_env(&runner.env);

    let Some(detected) = agent.runner(&runner.command) else {
        return stopped(
            StageStatus::RunnerUnavailable,
            format!(
                "the runner `{}` was not detected before the run",
                runner.command
            ),
        );
    };
    let Prepared {
        schema,
        prompt,
        hash,
        parts,
        ..
    } = match prepare(ctx, stage, node, run.dir()) {
        Ok(p) => p,
        Err((status, reason)) => return stopped(status, reason),
    };
    let with_hash = |mut report: StageReport| {
        report.input_hash = Some(hash.clone());
        report.input_parts = Some(parts.clone());
        report
    };

    let request = match assemble(&InvocationInput {
        runner: &runner,
        capabilities: &detected.capabilities,
        operation: Operation::Generate,
        schema: Some(&schema.value),
        repo_root: &ctx.root,
        session_id: None,
    }) {
        Ok(request) => request,
        Err(e) => {
            let status = match e {
                AssemblyError::Incompatible(_) => StageStatus::RunnerUnavailable,
                AssemblyError::Forbidden { .. } | AssemblyError::Unsafe(_) => {
                    StageStatus::SafetyViolation
                }
                _ => StageStatus::Failed,
            };
            return with_hash(stopped(status, redactor.redact_str(&e.to_string())));
        }
    };

    let attempt_rel = RunHandle::attempt_rel(&node.id, sr.attempt);
    let before = snapshot_hook(ctx, run, &attempt_rel, SnapshotPhase::Before);
    let outcome = invoke(InvokeSpec {
        run,
        stage_id: &node.id,
        attempt: sr.attempt,
        request: &request,
        runner: &runner,
        prompt: &prompt,
        schema: Some(&schema.value),
        cwd: &ctx.root,
        redactor: &redactor,
        cancel: ctx.cancel.clone(),
        cli_version: detected.version.as_deref(),
        on_progress: progress_for(agent, &node.id),
    })
    .await;
    let after = snapshot_hook(ctx, run, &attempt_rel, SnapshotPhase::After);

    let mut report = StageReport {
        status: outcome.status,
        outcome: outcome.failure_reason.clone(),
        input_hash: Some(hash.clone()),
        input_parts: Some(parts.clone()),
        started_at: Some(outcome.started_at.clone()),
        ended_at: Some(outcome.ended_at.clone()),
        duration_ms: Some(outcome.duration_ms),
        cost_usd: outcome.cost_usd,
        turns: outcome.turns,
        invocations: u32::from(outcome.spawned()),
        ..Default::default()
    };
    if let Some(violation) = before.or(after) {
        report.status = StageStatus::SafetyViolation;
        report.outcome = Some(violation);
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
    match accept_output(ctx, stage, &node.id, run, &schema.value, output, &redactor) {
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

/// What one attempt of a generate stage is asked, before anything is spawned.
pub struct Prepared {
    pub schema: schema::StageSchema,
    pub prompt: String,
    pub hash: String,
    pub parts: InputParts,
}

/// Load the schema, render the prompt from the upstream records in `run_dir`, and
/// compute the input hash. Resume calls this to decide whether a recorded result
/// can be reused.
pub fn prepare(
    ctx: &RunContext,
    stage: &StageDef,
    node: &Node,
    run_dir: &Path,
) -> Result<Prepared, (StageStatus, String)> {
    let runner = ctx.runner_for(stage);
    let redactor = Redactor::from_env(&runner.env);
    let schema = match schema::for_stage(stage, &ctx.pipeline_dir) {
        Ok(Some(schema)) => schema,
        Ok(None) => {
            return Err((
                StageStatus::Failed,
                format!("generate stage `{}` has no output schema", stage.id),
            ))
        }
        Err(e) => return Err((StageStatus::Failed, crate::error_chain(&e))),
    };
    let inputs =
        stage_inputs_in(ctx, stage, node, run_dir).map_err(|e| (StageStatus::Failed, e))?;
    let Some(prompt_value) = stage.prompt.as_deref() else {
        return Err((
            StageStatus::Failed,
            format!("generate stage `{}` has no prompt", stage.id),
        ));
    };
    let source = PromptSource::from_value(prompt_value, &ctx.pipeline_dir);
    let prompt = render(
        &source,
        &format!("of stage `{}`", stage.id),
        &inputs.context,
    )
    .map_err(|e| (StageStatus::Failed, redactor.redact_str(&e.to_string())))?;
    let hash_inputs = HashInputs {
        stage,
        settings: agent_settings(&runner),
        prompt: Some(prompt.as_bytes()),
        schema: Some(&schema.bytes),
        upstream: &inputs.upstream_hashes,
        item_id: node.item_id.as_deref(),
        item: inputs.context.item.as_ref(),
    };
    Ok(Prepared {
        hash: input_hash(&hash_inputs),
        parts: input_parts(&hash_inputs),
        schema,
        prompt,
    })
}

/// Validates the output once more, keeps it redacted as `output.json`, and writes
/// the document.
fn accept_output(
    ctx: &RunContext,
    stage: &StageDef,
    node_id: &str,
    run: &RunHandle,
    schema: &Value,
    output: Value,
    redactor: &Redactor,
) -> Result<(FileRef, Option<FileRef>), (StageStatus, String)> {
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
    let mut kept = output;
    redactor.redact_json(&mut kept);
    let rel = format!("{}/output.json", RunHandle::stage_rel(node_id));
    let sha = run
        .write_json(&rel, &kept)
        .map_err(|e| (StageStatus::Failed, format!("failed to write {rel}: {e}")))?;
    let output_ref = FileRef {
        path: rel,
        sha256: sha,
    };

    let Some(doc) = stage.output.as_ref().and_then(|o| o.document.as_ref()) else {
        return Ok((output_ref, None));
    };
    let Some(markdown) = kept.get("markdown").and_then(Value::as_str) else {
        return Err((
            StageStatus::MalformedOutput,
            format!("the output has no `markdown` text to write to {doc}"),
        ));
    };
    if !is_inside(doc) {
        return Err((
            StageStatus::SafetyViolation,
            format!("refusing to write document `{doc}`: it is not a path inside the repository"),
        ));
    }
    let sha = write_atomic(&ctx.root.join(doc), markdown.as_bytes())
        .map_err(|e| (StageStatus::Failed, crate::error_chain(&e)))?;
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

/// Validation already refuses such paths; this keeps the write itself safe.
fn is_inside(rel: &str) -> bool {
    let path = Path::new(rel);
    !rel.is_empty()
        && path
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

fn progress_for(agent: &AgentSetup, node_id: &str) -> Option<ProgressCallback> {
    let sink = agent.progress.clone()?;
    let id = node_id.to_string();
    Some(Arc::new(move |p: &Progress| sink(&id, p)))
}

/// What a generate stage would run, for `--dry-run`: the argv, with the detected
/// capabilities or, when the runner was not detected, with every flag assumed.
/// The session id is fresh for every invocation, so it is shown as a placeholder.
pub fn describe(ctx: &RunContext, agent: &AgentSetup, stage: &StageDef) -> Vec<String> {
    let runner = ctx.runner_for(stage);
    let assumed = assumed_capabilities();
    let caps = agent
        .runner(&runner.command)
        .map(|d| &d.capabilities)
        .unwrap_or(&assumed);
    let schema = match schema::for_stage(stage, &ctx.pipeline_dir) {
        Ok(schema) => schema,
        Err(e) => return vec![format!("# cannot be assembled: {e}")],
    };
    let request = match assemble(&InvocationInput {
        runner: &runner,
        capabilities: caps,
        operation: Operation::Generate,
        schema: schema.as_ref().map(|s| &s.value),
        repo_root: &ctx.root,
        session_id: Some(uuid_nil()),
    }) {
        Ok(request) => request,
        Err(e) => return vec![format!("# cannot be assembled: {e}")],
    };
    let mut argv = vec![request.program.clone()];
    argv.extend(request.argv.iter().map(|a| {
        if *a == uuid_nil().to_string() {
            "<fresh-session-id>".to_string()
        } else {
            a.clone()
        }
    }));
    let redactor = Redactor::from_env(&runner.env);
    vec![format!(
        "{} < rendered-prompt",
        redactor.redact_str(&crate::shell_words(&argv))
    )]
}

fn uuid_nil() -> uuid::Uuid {
    uuid::Uuid::nil()
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

    use crate::agent::DetectedRunner;

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
            pipeline: Arc::new(pipeline),
            overrides: RunOverrides::default(),
            cancel: CancelToken::new(),
            allow_dirty: false,
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
            let run = Arc::new(RunStore::new(root.path()).create().unwrap());
            let sr = StageRun {
                node: Node::stage("requirements", StageKind::Generate, Vec::new()),
                attempt: 1,
                run: run.clone(),
            };
            let stage = ctx.stage("requirements").unwrap().clone();
            let report = run_generate(&ctx, &setup, &stage, &sr).await;
            assert_eq!(report.status, StageStatus::SafetyViolation, "{extra}: {report:?}");
            assert!(report.outcome.unwrap().contains("turns off permission checks"));
            assert_eq!(report.invocations, 0);
            assert!(!marker.exists(), "{extra}: the agent was started");
        }
    }

    #[test]
    fn documents_stay_inside_the_repository() {
        assert!(is_inside("docs/spec.md"));
        assert!(is_inside("./spec.md"));
        for bad in ["", "/etc/passwd", "../x.md", "docs/../../x.md"] {
            assert!(!is_inside(bad), "{bad}");
        }
    }
}
