//! What generate and execute attempts share: everything decided before the agent
//! is spawned (runner, schema, rendered prompt, input hash, argv), the invocation
//! itself, and the report it starts.

use std::path::Path;
use std::sync::Arc;

use specbridge_engine::pipeline::{ResolvedRunner, StageDef};
use specbridge_engine::redact::Redactor;
use specbridge_engine::replay::RecordedAttempt;
use specbridge_engine::runner::claude_code::stream::Progress;
use specbridge_engine::runner::claude_code::{
    assemble, invoke, InvocationInput, InvocationOutcome, InvocationRequest, InvokeSpec, Operation,
    ProgressCallback,
};
use specbridge_engine::scheduler::retry::RetryHint;
use specbridge_engine::scheduler::{Node, StageReport, StageRun};
use specbridge_engine::store::{now_rfc3339, InputParts};
use specbridge_engine::StageStatus;

use crate::agent::{AgentSetup, DetectedRunner};
use crate::context::RunContext;
use crate::error::StageError;
use crate::input_hash::{agent_settings, input_hash, input_parts, matching_layout, HashInputs};
use crate::prompt::{render, PromptContext, PromptSource};
use crate::schema::{self, StageSchema};
use crate::upstream::{prompt_context, upstream_for};

/// An attempt ready to spawn.
pub struct Prepared {
    pub runner: ResolvedRunner,
    pub detected: DetectedRunner,
    pub schema: StageSchema,
    pub prompt: String,
    pub input_hash: String,
    pub input_parts: InputParts,
    pub request: InvocationRequest,
    /// The recorded attempt that answers this one instead of a live agent.
    pub replay: Option<RecordedAttempt>,
}

/// What an attempt is asked, computed from the run folder alone.
pub struct AttemptInputs {
    pub schema: StageSchema,
    /// The prompt rendered with `attempt.previous` null: what the hash covers.
    pub prompt: String,
    pub input_hash: String,
    pub input_parts: InputParts,
    /// Where the prompt came from and what it was rendered with, to render it
    /// again with `attempt.previous` for a re-run.
    pub source: PromptSource,
    pub context: PromptContext,
}

/// The schema, rendered prompt and input hash of an agent stage with its resolved
/// `runner`, from the upstream records in `run_dir`. Resume calls this to decide
/// whether a recorded result can be reused, before anything would be spawned;
/// `recorded` is the hash it is compared with, if any ([`matching_layout`]).
pub(crate) fn attempt_inputs(
    ctx: &RunContext,
    stage: &StageDef,
    runner: &ResolvedRunner,
    node: &Node,
    run_dir: &Path,
    recorded: Option<&str>,
) -> Result<AttemptInputs, StageError> {
    let kind = stage.kind.as_str();
    if let Some(file) = stage
        .output
        .as_ref()
        .map(|o| o.schema.as_str())
        .filter(|s| !s.starts_with(specbridge_engine::builtin_schemas::PREFIX))
    {
        let path = ctx.pipeline_dir.join(file);
        if let Err(why) = specbridge_engine::pipeline::inside::check_inside(&ctx.root, &path) {
            return Err(StageError::FileOutside {
                file: "schema file",
                stage: stage.id.clone(),
                why: why.clone(),
            });
        }
    }
    let schema = schema::for_stage(stage, &ctx.pipeline_dir)?.ok_or(StageError::Incomplete {
        kind,
        stage: stage.id.clone(),
        missing: "output schema",
    })?;
    let context = prompt_context(ctx, stage, node, run_dir)?;
    let Some(prompt_value) = stage.prompt.as_deref() else {
        return Err(StageError::Incomplete {
            kind,
            stage: stage.id.clone(),
            missing: "prompt",
        });
    };
    let source = PromptSource::from_value(prompt_value, &ctx.pipeline_dir);
    // Validated before the run; asked again because an earlier stage may have
    // replaced the file with a symlink since.
    if let PromptSource::File(path) = &source {
        if let Err(why) = specbridge_engine::pipeline::inside::check_inside(&ctx.root, path) {
            return Err(StageError::FileOutside {
                file: "prompt file",
                stage: stage.id.clone(),
                why: why.clone(),
            });
        }
    }
    let prompt = render(&source, &prompt_name(stage), &context)?;
    let (input_hash, input_parts) = matching_layout(recorded, |layout| {
        let upstream = upstream_for(layout, ctx, stage, run_dir)?;
        let hash_inputs = HashInputs {
            layout,
            stage,
            settings: agent_settings(runner),
            prompt: Some(prompt.as_bytes()),
            schema: Some(&schema.bytes),
            upstream: &upstream,
            item_id: node.item_id.as_deref(),
            item: context.item.as_ref(),
        };
        Ok::<_, StageError>((input_hash(&hash_inputs), input_parts(&hash_inputs)))
    })?;
    Ok(AttemptInputs {
        input_hash,
        input_parts,
        schema,
        prompt,
        source,
        context,
    })
}

fn prompt_name(stage: &StageDef) -> String {
    format!("of stage `{}`", stage.id)
}

/// A stage that stopped before anything was spawned.
pub fn stopped(started_at: &str, status: StageStatus, reason: String) -> StageReport {
    StageReport {
        status,
        reason: Some(reason),
        started_at: Some(started_at.to_string()),
        ended_at: Some(now_rfc3339()),
        duration_ms: Some(0),
        ..Default::default()
    }
}

/// Everything up to the argv; a report of why not when the stage cannot start
/// (boxed: it is large, and the path is rare).
pub(crate) fn prepare(
    ctx: &RunContext,
    agent: &AgentSetup,
    stage: &StageDef,
    runner: &ResolvedRunner,
    sr: &StageRun,
    operation: Operation,
) -> Result<Prepared, Box<StageReport>> {
    let started_at = now_rfc3339();
    // Reasons are shown on the terminal too: redacted like every record.
    let redactor: &Redactor = sr.run.redactor();
    let stop = |e: StageError, hash: Option<&String>| {
        let mut report = stopped(&started_at, e.status(), redactor.redact_str(&e.reason()));
        report.input_hash = hash.cloned();
        Box::new(report)
    };
    let recording = agent.replay.recording_for(runner);
    // A recording made with an earlier input-hash layout is matched in its layout.
    let recorded = recording
        .and_then(|r| r.attempt(&sr.node.id, None).ok())
        .and_then(|a| a.record.input_hash);
    let AttemptInputs {
        schema,
        prompt,
        input_hash: hash,
        input_parts: parts,
        source,
        context,
    } = attempt_inputs(
        ctx,
        stage,
        runner,
        &sr.node,
        sr.run.dir(),
        recorded.as_deref(),
    )
    .map_err(|e| stop(e, None))?;
    // A re-run is told why the attempt before it did not pass.
    let prompt = match crate::previous::read(sr.run.dir(), &sr.node.id, sr.attempt, redactor) {
        None => prompt,
        Some(previous) => {
            crate::previous::prompt_with(&source, &prompt_name(stage), &context, prompt, previous)
                .map_err(|e| stop(e.into(), None))?
        }
    };
    // A replayed stage needs its recording (same input hash); without one it fails
    // with the reason, or runs live when the user asked for that.
    let replay = match recording.map(|r| r.attempt(&sr.node.id, Some(&hash))) {
        None => None,
        Some(Ok(attempt)) => Some(attempt),
        Some(Err(e)) if agent.replay.live_when_missing && e.is_missing() => None,
        Some(Err(e)) => return Err(stop(StageError::Replay(e), Some(&hash))),
    };
    let detected = match (agent.runner(&runner.command), &replay) {
        (Some(d), _) => d.clone(),
        // Replayed stages spawn nothing: the argv is assembled for the record only.
        (None, Some(_)) => DetectedRunner {
            version: None,
            capabilities: crate::agent::assumed_capabilities(),
            assumed: true,
        },
        (None, None) => {
            return Err(stop(
                StageError::RunnerNotDetected(runner.command.clone()),
                None,
            ))
        }
    };
    let protected =
        (operation != Operation::Generate).then(|| crate::working_tree::protected_paths(ctx));
    let request = assemble(&InvocationInput {
        runner,
        capabilities: &detected.capabilities,
        operation,
        schema: Some(&schema.value),
        repo_root: &ctx.root,
        session_id: None,
        protected: protected.as_ref(),
        // A replayed stage spawns nothing, so nothing needs the sandbox.
        sandbox_support: if replay.is_some() {
            None
        } else {
            agent.sandbox.as_deref()
        },
    })
    .map_err(|e| stop(e.into(), Some(&hash)))?;
    Ok(Prepared {
        runner: runner.clone(),
        detected,
        schema,
        prompt,
        input_hash: hash,
        input_parts: parts,
        request,
        replay,
    })
}

/// What the caller does at each point of an invocation (`InvokeSpec`'s hooks
/// of the same names).
pub(crate) struct AgentHooks<'a> {
    pub(crate) before_prompt: Option<&'a (dyn Fn() -> Result<(), String> + Sync)>,
    pub(crate) on_spawn: &'a (dyn Fn() + Sync),
    pub(crate) on_exit: &'a (dyn Fn() + Sync),
    pub(crate) on_result: &'a (dyn Fn(&serde_json::Value) + Sync),
}

/// Spawn the agent and wait for it.
pub(crate) async fn run_agent(
    ctx: &RunContext,
    p: &Prepared,
    sr: &StageRun,
    hooks: AgentHooks<'_>,
) -> InvocationOutcome {
    let protected: Vec<String> = crate::working_tree::protected_paths(ctx)
        .rules()
        .iter()
        .map(|r| r.path.clone())
        .collect();
    invoke(InvokeSpec {
        protected: &protected,
        run: &sr.run,
        stage_id: &sr.node.id,
        attempt: sr.attempt,
        request: &p.request,
        runner: &p.runner,
        prompt: &p.prompt,
        schema: Some(&p.schema.value),
        cwd: &ctx.root,
        cancel: ctx.cancel.clone(),
        cli_version: p.detected.version.as_deref(),
        on_progress: Some(live_progress(sr)),
        replay: p.replay.as_ref(),
        on_exit: Some(hooks.on_exit),
        before_prompt: hooks.before_prompt,
        on_spawn: Some(hooks.on_spawn),
        on_result: Some(hooks.on_result),
    })
    .await
}

/// The report of an invocation, before evidence and output have their say.
pub(crate) fn report_of(outcome: &InvocationOutcome, p: &Prepared) -> StageReport {
    StageReport {
        status: outcome.status,
        reason: outcome.failure_reason.clone(),
        input_hash: Some(p.input_hash.clone()),
        input_parts: Some(p.input_parts.clone()),
        started_at: Some(outcome.started_at.clone()),
        ended_at: Some(outcome.ended_at.clone()),
        duration_ms: Some(outcome.duration_ms),
        cost_usd: outcome.cost_usd,
        tokens: outcome.tokens,
        turns: outcome.turns,
        invocations: u32::from(outcome.spawned() && !outcome.replayed),
        retry: outcome.transient.as_ref().map(|t| RetryHint {
            retries: p.runner.retries,
            retry_after_ms: t
                .retry_after
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        }),
        ..Default::default()
    }
}

/// An agent's live progress goes to the run's subscribers (the live display)
/// beside its events; it is not recorded.
fn live_progress(sr: &StageRun) -> ProgressCallback {
    let run = sr.run.clone();
    let id = sr.node.id.clone();
    Arc::new(move |p: &Progress| run.live_progress(&id, p))
}

/// What an agent stage would run, for `--dry-run`: the argv, with the detected
/// capabilities or, when the runner was not detected, with every flag assumed.
/// The session id is fresh for every invocation, so it is shown as a placeholder.
pub fn describe(
    ctx: &RunContext,
    agent: &AgentSetup,
    stage: &StageDef,
    runner: &ResolvedRunner,
    operation: Operation,
) -> Vec<String> {
    let assumed = crate::agent::assumed_capabilities();
    let caps = agent
        .runner(&runner.command)
        .map_or(&assumed, |d| &d.capabilities);
    let schema = match schema::for_stage(stage, &ctx.pipeline_dir) {
        Ok(schema) => schema,
        Err(e) => return vec![format!("# cannot be assembled: {}", crate::error_chain(&e))],
    };
    let placeholder = uuid::Uuid::nil();
    let protected =
        (operation != Operation::Generate).then(|| crate::working_tree::protected_paths(ctx));
    let request = match assemble(&InvocationInput {
        runner,
        capabilities: caps,
        operation,
        schema: schema.as_ref().map(|s| &s.value),
        repo_root: &ctx.root,
        session_id: Some(placeholder),
        protected: protected.as_ref(),
        sandbox_support: agent.sandbox.as_deref(),
    }) {
        Ok(request) => request,
        Err(e) => return vec![format!("# cannot be assembled: {}", crate::error_chain(&e))],
    };
    let mut argv = vec![request.program.clone()];
    // The schema is shown by its digest: inline it is kilobytes of JSON that hide
    // the flags around it (request.json and process.json keep it whole).
    let mut after_schema_flag = false;
    argv.extend(request.argv.iter().map(|a| {
        let shown = if *a == placeholder.to_string() {
            "<fresh-session-id>".to_string()
        } else if after_schema_flag {
            format!(
                "<schema sha256:{}>",
                specbridge_engine::store::sha256_hex(a.as_bytes())
            )
        } else {
            a.clone()
        };
        after_schema_flag = a == "--json-schema";
        shown
    }));
    // Printed, not recorded: the same redactor a run of this pipeline would use.
    let redactor = Redactor::for_pipeline(&ctx.pipeline);
    vec![format!(
        "{} < rendered-prompt",
        redactor.redact_str(&crate::shell_words(&argv))
    )]
}
