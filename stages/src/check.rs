//! `check` stages: a command with a timeout, no model. Used as gates.

use std::time::Duration;

use std::path::Path;

use serde_json::json;
use specbridge_engine::events::RunEvent;
use specbridge_engine::pipeline::resolve::DEFAULT_CHECK_TIMEOUT_MS;
use specbridge_engine::pipeline::{ResolvedRunner, StageDef};
use specbridge_engine::sandbox::AppliedSandbox;
use specbridge_engine::scheduler::{Node, StageReport, StageRun};
use specbridge_engine::store::layout::{self, attempt};
use specbridge_engine::store::{InputParts, RunHandle};
use specbridge_engine::supervisor::{self, ProcessRecord, SpawnSpec, SupervisorError};
use specbridge_engine::StageStatus;

use crate::context::RunContext;
use crate::error::StageError;
use crate::input_hash::{input_hash, input_parts, matching_layout, HashInputs};
use crate::upstream::upstream_for;

fn timeout(stage: &StageDef) -> Duration {
    stage.timeout.map_or(
        Duration::from_millis(DEFAULT_CHECK_TIMEOUT_MS),
        specbridge_engine::pipeline::DurationSpec::as_duration,
    )
}

/// A check stage's input hash and its parts: the definition (argv, timeout after
/// its default) and the upstream outputs. No prompt, no schema, no runner.
/// `recorded` is the hash of the stage's record, when one is compared
/// ([`matching_layout`]).
pub fn inputs(
    ctx: &RunContext,
    stage: &StageDef,
    node: &Node,
    run_dir: &Path,
    recorded: Option<&str>,
) -> Result<(String, InputParts), StageError> {
    matching_layout(recorded, |layout| {
        let upstream = upstream_for(layout, ctx, stage, run_dir)?;
        let hash_inputs = HashInputs {
            layout,
            stage,
            settings: json!({ "timeoutMs": timeout(stage).as_millis() as u64 }),
            prompt: None,
            schema: None,
            upstream: &upstream,
            item_id: node.item_id.as_deref(),
            item: None,
        };
        Ok((input_hash(&hash_inputs), input_parts(&hash_inputs)))
    })
}

/// What a check stage would run, for `--dry-run`.
pub fn describe(stage: &StageDef) -> Vec<String> {
    stage
        .argv
        .as_ref()
        .and_then(|a| a.as_list())
        .map(|argv| vec![crate::shell_words(argv)])
        .unwrap_or_default()
}

/// The spawn of a check command: argv as given, in the repository root, confined
/// as the stage's `sandbox` says ([`crate::confine`]), output streamed into the
/// attempt folder through the run store's redacting logs; with the sandbox to
/// record. `Ok(None)` when the stage has no argv to run.
pub(crate) fn spawn_spec(
    ctx: &RunContext,
    stage: &StageDef,
    runner: &ResolvedRunner,
    run: &RunHandle,
    attempt_rel: &str,
) -> Result<Option<(SpawnSpec, AppliedSandbox)>, StageError> {
    let Some(argv) = stage
        .argv
        .as_ref()
        .and_then(|a| a.as_list())
        .map(<[String]>::to_vec)
    else {
        return Ok(None);
    };
    if argv.is_empty() {
        return Ok(None);
    }
    let wrapped = crate::confine::wrap(ctx, stage.sandbox.as_ref(), &argv)?;
    let (stdout, stderr) = (
        layout::in_attempt(attempt_rel, attempt::RAW_STDOUT),
        layout::in_attempt(attempt_rel, attempt::RAW_STDERR),
    );
    let logs = crate::confine::CommandLogs {
        run,
        stdout: &stdout,
        stderr: &stderr,
        max_stdout_bytes: runner.max_stdout_bytes.bytes(),
        max_stderr_bytes: runner.max_stderr_bytes.bytes(),
    };
    crate::confine::spawn_spec(
        ctx,
        wrapped,
        argv,
        logs,
        timeout(stage),
        runner.kill_grace.as_duration(),
    )
    .map(Some)
}

/// Run a check stage's command once and report. `runner` is the pipeline's
/// (a check stage has none of its own): its output caps and kill grace apply.
pub(crate) async fn run_check(
    ctx: &RunContext,
    stage: &StageDef,
    runner: &ResolvedRunner,
    sr: &StageRun,
) -> StageReport {
    let run = &sr.run;
    let (hash, parts) = match inputs(ctx, stage, &sr.node, run.dir(), None) {
        Ok(x) => x,
        Err(e) => return failed(&e),
    };
    // The stages that need this one read what it stands for from memory, not
    // from its `stage.json`, which may still be in the batch being written.
    crate::upstream::remember_digest(ctx, &sr.node.id, Some(&parts));
    let mut report = run_command(ctx, stage, runner, sr).await;
    report.input_hash = Some(hash);
    report.input_parts = Some(parts);
    report
}

fn failed(e: &StageError) -> StageReport {
    StageReport::failed(e.status(), e.reason())
}

async fn run_command(
    ctx: &RunContext,
    stage: &StageDef,
    runner: &ResolvedRunner,
    sr: &StageRun,
) -> StageReport {
    let run = &sr.run;
    // A stage without needs is among the first of its run: the run's first
    // records, its start and whatever was queued before are on disk before its
    // logs exist and its command starts. One with needs had them written before
    // it started, when it read them; or else (its needs are check stages that
    // ended in this process) its command starts beside the batch that records
    // their end and its start: a check is confined read-only (unless `sandbox:
    // off`), and a crash before that batch is on disk runs it again either way
    // (docs/run-directory.md).
    let first = sr.node.needs.is_empty();
    if let Err(e) = if first { run.flush() } else { run.records_ok() } {
        return failed(&StageError::from(e));
    }
    let attempt_rel = layout::attempt_rel(&sr.node.id, sr.attempt);
    let (spec, applied) = match spawn_spec(ctx, stage, runner, run, &attempt_rel) {
        Ok(Some(x)) => x,
        Ok(None) => {
            return StageReport::failed(
                StageStatus::Failed,
                format!("stage `{}` has no argv array to run", stage.id),
            )
        }
        Err(e) => return failed(&e),
    };
    let node_id = sr.node.id.clone();
    let attempt = sr.attempt;
    let result = supervisor::run(spec, ctx.cancel.clone(), None, |pid, pgid| {
        // Behind the batch that may still be recording the needs' end and this
        // stage's start, in order; the command is supervised meanwhile, and its
        // logs are announced behind it too (`confine::spawn_spec`).
        if let Err(e) = run.record_behind(RunEvent::stage_spawned(&node_id, attempt, pid, pgid)) {
            // Recorded by the store as the run's failure: the scheduler ends the run.
            tracing::debug!("failed to record the spawn of pid {pid}: {e}");
        }
    })
    .await;
    let mut report = match result {
        Ok(mut record) => {
            record.sandbox = Some(applied);
            let mut r = classify(&record, runner);
            r.started_at = Some(crate::rfc3339(record.started_at));
            r.ended_at = Some(crate::rfc3339(record.ended_at));
            r.duration_ms = Some(record.duration_ms);
            if let Err(e) = write_process(run, &attempt_rel, record) {
                return failed(&e);
            }
            r
        }
        Err(SupervisorError::CancelledBeforeSpawn { .. }) => StageReport::failed(
            StageStatus::Cancelled,
            "the run was cancelled before the command started".into(),
        ),
        Err(e) => StageReport::failed(StageStatus::Failed, crate::error_chain(&e)),
    };
    report.invocations = 0;
    report
}

/// `process.json`, its argv redacted by the store (the logs announced themselves).
/// Queued: the scheduler writes it in one batch with the `stage.json` that ends
/// the stage (`store/batch.rs`), and that batch's writer makes its bytes;
/// nothing reads it before.
fn write_process(
    run: &RunHandle,
    attempt_rel: &str,
    record: ProcessRecord,
) -> Result<(), StageError> {
    run.defer_json_behind(&layout::in_attempt(attempt_rel, attempt::PROCESS), record)?;
    Ok(())
}

/// A finished command's status: timeouts and cancels first (their exit codes are
/// the signal's), then output limits, then the exit code.
pub fn classify(p: &ProcessRecord, runner: &ResolvedRunner) -> StageReport {
    let (status, reason) = if p.timed_out {
        (
            StageStatus::TimedOut,
            Some(format!("timed out after {}ms", p.duration_ms)),
        )
    } else if p.cancelled {
        (StageStatus::Cancelled, Some("cancelled".to_string()))
    } else if let Some(stream) = p.truncated_stream() {
        (
            StageStatus::Failed,
            Some(format!("stopped: {}", runner.output_limit_reason(stream))),
        )
    } else if p.exit_code == Some(0) {
        (StageStatus::Succeeded, None)
    } else if let Some(code) = p.exit_code {
        (StageStatus::CheckFailed, Some(format!("exit code {code}")))
    } else {
        (
            StageStatus::Failed,
            Some(format!(
                "killed by {}",
                p.signal.as_deref().unwrap_or("a signal")
            )),
        )
    };
    StageReport {
        status,
        reason,
        ..Default::default()
    }
}
