//! One Claude Code invocation, from an assembled request to the records of its
//! attempt folder (docs/claude-code-runner.md Invocation, docs/run-directory.md):
//!
//! - `prompt.md`, `request.json`, `output-schema.json` queued before the spawn
//!   and written, with the attempt's start and the spawn event, before the
//!   agent is given its prompt (below, "The prompt waits for the records");
//! - the last safety assertion on the argv (docs/claude-code-runner.md, third layer): a forbidden
//!   flag or mode here spawns nothing and ends `safety-violation`;
//! - the process under the supervisor, its stdout read line by line as stream-json
//!   for live progress and the result event;
//! - `process.json`, `raw-stdout.log` and `raw-stderr.log`, and `result.json`.
//!
//! Every record goes through the run store, which redacts it. stdout and stderr
//! stream into the store's logs, redacted as they are written; the stream-json is
//! parsed from the lines the supervisor hands over in memory, never from a file,
//! so no unredacted byte the agent printed is ever on disk.

use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::events::RunEvent;

use super::argv::InvocationRequest;
use super::observe::{
    check_calls, check_init, describe_violation, CallContext, InitExpectation, InitMismatch,
};
use super::outcome::{classify, Classification, ClassifyInput, SchemaDelivery};
use super::private_tmp::{self, PrivateTmp};
use super::prompt_hold::{self, PromptHold};
use super::record::ResultRecord;
use super::request::{RequestContext, RequestRecord};
use super::stream::{LineKind, Progress, StreamState};
use super::transient::{self, Transient};
use crate::pipeline::ResolvedRunner;
use crate::replay::RecordedAttempt;
use crate::safety::assert_argv_safe;
use crate::status::StageStatus;
use crate::store::layout::{self, attempt};
use crate::store::{now_rfc3339, sha256_hex, RunHandle, RunLog};
use crate::supervisor::{
    self, CancelToken, ObserverControl, ProcessRecord, SpawnSpec, StdoutObserver, SupervisorError,
};
use crate::tokens::TokenUsage;

/// Called with a fresh snapshot whenever the stream shows progress (a turn, a tool
/// call, the result). Runs on the supervisor's task: keep it quick.
pub type ProgressCallback = Arc<dyn Fn(&Progress) + Send + Sync>;

/// Most stdout kept in memory for a result envelope printed over several lines
/// (`--output-format json`); stream-json never needs it.
const FALLBACK_STDOUT_BYTES: usize = 16 << 20;

/// Everything one invocation needs.
#[derive(Clone)]
pub struct InvokeSpec<'a> {
    pub run: &'a RunHandle,
    /// The stage or fan-out instance id (the attempt folder's stage).
    pub stage_id: &'a str,
    pub attempt: u32,
    /// The assembled argv and policy (see [`super::argv::assemble`]).
    pub request: &'a InvocationRequest,
    /// Timeout, kill grace, output limits and the extra environment.
    pub runner: &'a ResolvedRunner,
    /// Sent on stdin, byte for byte.
    pub prompt: &'a str,
    /// The stage's output schema, when it has one.
    pub schema: Option<&'a Value>,
    /// The repository root: the working directory.
    pub cwd: &'a Path,
    /// Paths relative to the root that no file tool may change (checked on every
    /// tool call in the stream, beside the policy's own deny rules).
    pub protected: &'a [String],
    pub cancel: CancelToken,
    /// The detected CLI version, for `request.json`.
    pub cli_version: Option<&'a str>,
    pub on_progress: Option<ProgressCallback>,
    /// Answer from this recorded attempt instead of spawning the agent: its output
    /// is played back and its changes applied (see [`crate::replay`]).
    pub replay: Option<&'a RecordedAttempt>,
    /// Called once no member of the agent's process group can act any more
    /// (the supervisor's `on_ended`: the group gone, or after the result every
    /// member exiting while the kernel tears it down), before its records are
    /// read and written: the caller may read the working tree from here on
    /// (the after-snapshot), beside the rest of the invocation. Nothing
    /// specbridge does after the call changes the working tree: the CLI's
    /// private temporary folder, where it lies inside `cwd`, is removed before
    /// it. Not called for a playback (it changes the tree) or when nothing was
    /// spawned.
    pub on_exit: Option<&'a (dyn Fn() + Sync)>,
    /// Called once the agent has been spawned (its `exec` done), before its
    /// spawn is recorded and before it is given its prompt: what must be on
    /// record before the agent can act, and need not be before its spawn, is
    /// finished and queued here, while the CLI starts up (the caller's
    /// before-snapshot). `Err(reason)` withholds the prompt: the CLI is ended
    /// having asked nothing, and the invocation ends `failed` with the reason.
    /// Called before the spawn instead (an `Err` then spawns nothing) where the
    /// CLI may write inside `cwd` from its start: its home, configuration or
    /// temporary folder lies there. Not called when nothing is spawned for
    /// another reason.
    pub before_prompt: Option<&'a (dyn Fn() -> Result<(), String> + Sync)>,
    /// Called once the agent has been spawned (its `exec` done) and its spawn
    /// recorded: what the caller runs beside the agent starts here, not
    /// before, so that it never holds the cores the spawn waits for.
    pub on_spawn: Option<&'a (dyn Fn() + Sync)>,
    /// Called once, with the structured output of the first result envelope
    /// in the stream that has one, the moment it is read: while the agent may
    /// still be ending (the CLI takes tens of milliseconds to exit after it),
    /// and before the output is checked. What the caller prepares from it must
    /// be checked again once the agent has ended. Not called for a playback.
    pub on_result: Option<&'a (dyn Fn(&Value) + Sync)>,
}

/// How one invocation ended. Texts that came from the agent (the failure reason) are
/// redacted; the structured output is as produced, for the caller to validate (the
/// run store redacts it when it is kept).
#[derive(Debug, Clone)]
pub struct InvocationOutcome {
    pub status: StageStatus,
    pub failure_reason: Option<String>,
    /// The accepted structured output (only on success, and only with a schema).
    pub structured_output: Option<Value>,
    /// `None` when nothing was classified (nothing spawned).
    pub classification: Option<Classification>,
    /// `None` when nothing was spawned.
    pub process: Option<ProcessRecord>,
    /// `stages/<id>/attempt-NNN`.
    pub attempt_rel: String,
    pub started_at: String,
    pub ended_at: String,
    pub duration_ms: u64,
    pub cost_usd: f64,
    pub tokens: TokenUsage,
    pub turns: u32,
    /// Answered from a recording: nothing was spawned and nothing was spent.
    pub replayed: bool,
    /// A `failed` invocation whose cause may pass (overloaded, rate-limited,
    /// unreachable API): another attempt may succeed.
    pub transient: Option<Transient>,
}

impl InvocationOutcome {
    pub fn spawned(&self) -> bool {
        self.process.is_some()
    }

    fn not_spawned(attempt_rel: String, status: StageStatus, reason: String) -> Self {
        let now = now_rfc3339();
        InvocationOutcome {
            status,
            failure_reason: Some(reason),
            structured_output: None,
            classification: None,
            process: None,
            attempt_rel,
            started_at: now.clone(),
            ended_at: now,
            duration_ms: 0,
            cost_usd: 0.0,
            tokens: TokenUsage::default(),
            turns: 0,
            replayed: false,
            transient: None,
        }
    }
}

/// Feeds stdout lines to the stream parser, reports progress, and stops the agent
/// the moment its `init` event shows another policy than the one asked for.
struct StreamObserver<'a> {
    state: StreamState,
    on_progress: Option<ProgressCallback>,
    /// stdout while no line was a stream-json event: a result envelope printed
    /// over several lines is parsed from it at the end. `None` once not needed.
    fallback: Option<Vec<u8>>,
    expected: InitExpectation<'a>,
    mismatch: Option<InitMismatch>,
    /// `InvokeSpec::on_result`, taken when called.
    on_result: Option<&'a (dyn Fn(&Value) + Sync)>,
    /// The stdout cap (`maxStdoutBytes`): every line is parsed whole. The
    /// result line carries the structured output twice (`result` and
    /// `structured_output`: 1.84 MB for a 0.9 MB document, Claude Code
    /// 2.1.332), so the supervisor's default line length would cut the
    /// envelope of any output over half a mebibyte; and no line is longer
    /// than the stdout kept, past which the agent is stopped anyway.
    max_line: usize,
}

impl<'a> StreamObserver<'a> {
    fn new(
        on_progress: Option<ProgressCallback>,
        expected: InitExpectation<'a>,
        on_result: Option<&'a (dyn Fn(&Value) + Sync)>,
        max_stdout_bytes: u64,
    ) -> Self {
        StreamObserver {
            state: StreamState::new(),
            on_progress,
            fallback: Some(Vec::new()),
            expected,
            mismatch: None,
            on_result,
            max_line: usize::try_from(max_stdout_bytes).unwrap_or(usize::MAX),
        }
    }

    fn keep_for_fallback(&mut self, kind: LineKind, line: &[u8]) {
        if !matches!(kind, LineKind::Blank | LineKind::NotJson | LineKind::Result) {
            self.fallback = None;
        }
        if let Some(kept) = &mut self.fallback {
            if kept.len() + line.len() < FALLBACK_STDOUT_BYTES {
                kept.extend_from_slice(line);
                kept.push(b'\n');
            } else {
                self.fallback = None;
            }
        }
    }
}

impl StdoutObserver for StreamObserver<'_> {
    fn max_line_bytes(&self) -> usize {
        self.max_line
    }

    fn on_line(&mut self, line: &[u8]) -> ObserverControl {
        let kind = self.state.feed_line(line);
        self.keep_for_fallback(kind, line);
        if kind == LineKind::Init && self.mismatch.is_none() {
            if let Some(init) = self.state.init() {
                self.mismatch = check_init(init, &self.expected);
            }
            if self.mismatch.is_some() {
                return ObserverControl::Stop;
            }
        }
        if matches!(
            kind,
            LineKind::Init | LineKind::Assistant | LineKind::ApiRetry | LineKind::Result
        ) {
            if let Some(report) = &self.on_progress {
                report(&self.state.progress());
            }
        }
        if kind == LineKind::Result {
            if let Some(output) = self
                .state
                .result()
                .and_then(|r| r.structured_output.as_ref())
            {
                if let Some(on_result) = self.on_result.take() {
                    on_result(output);
                }
            }
            ObserverControl::ResultSeen
        } else {
            ObserverControl::Continue
        }
    }
}

/// Runs one invocation and writes its attempt records. Never panics on a failing
/// agent or store: every failure becomes the outcome's status and reason.
pub async fn invoke(spec: InvokeSpec<'_>) -> InvocationOutcome {
    let attempt_rel = layout::attempt_rel(spec.stage_id, spec.attempt);
    let redactor = spec.run.redactor().clone();
    let store_failed = |what: &str, e: &dyn std::error::Error| {
        InvocationOutcome::not_spawned(
            attempt_rel.clone(),
            StageStatus::Failed,
            format!("failed to write {what}: {}", crate::error_chain(e)),
        )
    };
    let rel = |name: &str| layout::in_attempt(&attempt_rel, name);

    // The prompt, the schema and the request are queued, and written in one
    // batch with the attempt's start once the agent has been spawned: the
    // spawn event's write (`store/batch.rs`, and below).
    if let Err(e) = spec
        .run
        .defer_bytes(&rel(attempt::PROMPT), spec.prompt.as_bytes())
    {
        return store_failed(attempt::PROMPT, &e);
    }
    let mut schema_sha256 = None;
    if let Some(schema) = spec.schema {
        match spec.run.defer_json(&rel(attempt::OUTPUT_SCHEMA), schema) {
            Ok(sha) => schema_sha256 = Some(sha),
            Err(e) => return store_failed(attempt::OUTPUT_SCHEMA, &e),
        }
    }
    let cwd = spec.cwd.display().to_string();
    // Inherited names that would move the CLI's settings or loosen its checks: the
    // agent never sees them (docs/claude-code-runner.md, "Confinement").
    let scrubbed = crate::policy::env::inherited_widening(
        std::env::vars_os().map(|(k, _)| k.to_string_lossy().into_owned()),
    );
    let request = RequestRecord::new(
        spec.request,
        RequestContext {
            stage: spec.stage_id,
            attempt: spec.attempt,
            runner: spec.runner,
            cli_version: spec.cli_version,
            has_schema: spec.schema.is_some(),
            schema_sha256: schema_sha256.as_deref(),
            prompt_sha256: &sha256_hex(spec.prompt.as_bytes()),
            cwd: &cwd,
            scrubbed_env: &scrubbed,
        },
    );
    if let Err(e) = spec.run.defer_json(&rel(attempt::REQUEST), &request) {
        return store_failed(attempt::REQUEST, &e);
    }

    // The third safety layer: whatever assembled this argv, it is checked here.
    let mut full_argv = vec![spec.request.program.clone()];
    full_argv.extend(spec.request.argv.iter().cloned());
    if let Err(e) = assert_argv_safe(&full_argv) {
        return unspawned(
            &spec,
            &attempt_rel,
            StageStatus::SafetyViolation,
            e.to_string(),
        );
    }

    // Made before the logs, so that a folder that cannot be made ends the
    // attempt with nothing opened; none for a playback, which starts nothing.
    let private_tmp = match spec.replay {
        Some(_) => None,
        None => match PrivateTmp::create(&spec.runner.env) {
            Ok(tmp) => Some(tmp),
            Err(e) => {
                let reason = redactor.redact_str(&crate::error_chain(&e));
                return unspawned(&spec, &attempt_rel, StageStatus::Failed, reason);
            }
        },
    };
    let logs = spec
        .run
        .log(&rel(attempt::RAW_STDOUT))
        .and_then(|out| Ok((out, spec.run.log(&rel(attempt::RAW_STDERR))?)));
    let (stdout_log, stderr_log) = match logs {
        Ok(logs) => logs,
        Err(e) => return store_failed("the agent's logs", &e),
    };
    if let Some(recorded) = spec.replay {
        return match play_back(&spec, recorded, &attempt_rel, stdout_log, stderr_log) {
            Ok((record, state)) => {
                let mut outcome = finish(&spec, attempt_rel, record, state, None);
                // The recorded cost was spent when it was recorded, not now.
                outcome.cost_usd = 0.0;
                outcome.tokens = TokenUsage::default();
                outcome.replayed = true;
                outcome
            }
            Err(reason) => unspawned(
                &spec,
                &attempt_rel,
                StageStatus::Failed,
                redactor.redact_str(&reason),
            ),
        };
    }
    let runner = spec.runner;
    let spawn = SpawnSpec {
        program: spec.request.program.clone(),
        executable: None,
        args: spec.request.argv.clone(),
        redacted_argv: full_argv,
        cwd: spec.cwd.to_path_buf(),
        // The private folder last: it wins over a `CLAUDE_CODE_TMPDIR` given
        // in `runner.env`, which is where it was made.
        env: runner
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .chain(private_tmp.as_ref().map(|tmp| {
                (
                    private_tmp::VAR.to_string(),
                    tmp.path().display().to_string(),
                )
            }))
            .collect(),
        env_remove: scrubbed.clone(),
        stdin: Some(spec.prompt.as_bytes().to_vec()),
        stdout: Box::new(stdout_log),
        stderr: Box::new(stderr_log),
        max_stdout_bytes: runner.max_stdout_bytes.bytes(),
        max_stderr_bytes: runner.max_stderr_bytes.bytes(),
        timeout: Some(runner.timeout.as_duration()),
        kill_grace: runner.kill_grace.as_duration(),
    };
    let mut observer = StreamObserver::new(
        spec.on_progress.clone(),
        init_expectation(&spec),
        spec.on_result,
        runner.max_stdout_bytes.bytes(),
    );
    let run = spec.run;
    let (stage_id, attempt) = (spec.stage_id.to_string(), spec.attempt);
    // The caller's after-snapshot starts as soon as the agent's group can no
    // longer act, while it is torn down and its logs are synced, and the CLI's
    // temporary folder is removed from then on too, on a thread beside the
    // teardown (removed after the reap, it was waited for on the way to the
    // attempt's records: 0.7-1 ms, docs/performance.md). A folder inside the
    // working tree changes both: it is removed after the reap, and only then
    // does the snapshot start, so that the snapshot never sees it.
    let tmp_in_tree = private_tmp
        .as_ref()
        .is_some_and(|tmp| inside(tmp.path(), spec.cwd));
    let ((at_end, tmp_at_end), (after_tmp, tmp_after)) = if tmp_in_tree {
        ((None, None), (spec.on_exit, private_tmp))
    } else {
        ((spec.on_exit, private_tmp), (None, None))
    };
    // The caller's part of the batch the prompt waits for (a before-snapshot)
    // is finished while the CLI starts up, unless the CLI may write inside the
    // working tree before it has its prompt: from its first milliseconds it
    // rewrites `~/.claude.json` through temporary files and a lock folder, and
    // a snapshot taken meanwhile would hold them half-written. Then it is
    // finished before the spawn; so it is, and everything queued written,
    // once a slow hold has withheld a prompt in this process: the hold is
    // then the spawn's event alone (`prompt_hold.rs`).
    let write_ahead = prompt_hold::write_ahead();
    let (before_spawn, before_prompt) =
        if tmp_in_tree || cli_writes_in_tree(&spawn, spec.cwd) || write_ahead {
            (spec.before_prompt, None)
        } else {
            (None, spec.before_prompt)
        };
    let ahead = || -> Result<(), String> {
        if let Some(before_spawn) = before_spawn {
            before_spawn()?;
        }
        if write_ahead {
            spec.run.flush().map_err(|e| crate::error_chain(&e))?;
        }
        Ok(())
    };
    if let Err(reason) = ahead() {
        let reason = format!(
            "failed to start `{}`: {reason}; it was not started",
            spawn.program
        );
        return unspawned(
            &spec,
            &attempt_rel,
            StageStatus::Failed,
            redactor.redact_str(&reason),
        );
    }
    let mut removing = None;
    let program = spawn.program.clone();
    let hold = std::sync::OnceLock::new();
    let result = supervisor::run_until_ended(
        spawn,
        spec.cancel.clone(),
        Some(&mut observer),
        |pid, pgid| {
            let hold = hold.get_or_init(PromptHold::begin);
            // The prompt waits for the records. The CLI reads its input only
            // after about 100 ms of its own start-up (docs/performance.md), so
            // the batch queued for this attempt — its start, `git-before.json`,
            // the prompt, schema and request — and the spawn event, by which a
            // resume after a crash ends the group, are written meanwhile: an
            // agent acts only on a prompt, and gets none before they are on
            // disk. One that cannot be recorded is stopped without its prompt
            // (the CLI given no input exits once it has started up, asking
            // nothing). The caller's part of that batch may still be in the
            // making (`before_prompt`); it is waited for off the runtime's
            // worker, as the batch's own syncs are.
            if let Some(before_prompt) = before_prompt {
                crate::store::off_the_worker(before_prompt)?;
            }
            run.event(RunEvent::stage_spawned(&stage_id, attempt, pid, pgid))
                .map_err(|e| crate::error_chain(&e))?;
            if let Some(on_spawn) = spec.on_spawn {
                on_spawn();
            }
            // Past the CLI's own wait for its input, the prompt would come too
            // late for it: withheld, as a transient failure (`prompt_hold.rs`).
            hold.release(spec.cancel.is_cancelled())
        },
        || {
            if let Some(on_exit) = at_end {
                on_exit();
            }
            removing = tmp_at_end.map(PrivateTmp::remove_aside);
        },
    )
    .await;

    let record = match result {
        Ok(record) => record,
        Err(e) => {
            let (status, reason) = match &e {
                SupervisorError::NotFound { .. } => (
                    StageStatus::RunnerUnavailable,
                    format!("{e}: is Claude Code installed, and is runner.command right?"),
                ),
                SupervisorError::CancelledBeforeSpawn { .. } => (
                    StageStatus::Cancelled,
                    "the run was cancelled before the agent started".to_string(),
                ),
                SupervisorError::CancelledBeforeInput { .. } => (
                    StageStatus::Cancelled,
                    "the run was cancelled before the agent was given its prompt".to_string(),
                ),
                SupervisorError::Withheld { .. } => {
                    if let Some(held) = hold.get().and_then(PromptHold::overdue) {
                        prompt_hold::remember_overdue();
                        let reason = prompt_hold::withheld_reason(&program, held);
                        // Another attempt may not meet it: `transient: true`.
                        return not_given_a_prompt(
                            &spec,
                            &attempt_rel,
                            StageStatus::Failed,
                            redactor.redact_str(&reason),
                            Some(Transient { retry_after: None }),
                        );
                    }
                    (StageStatus::Failed, crate::error_chain(&e))
                }
                other => (StageStatus::Failed, crate::error_chain(other)),
            };
            return unspawned(&spec, &attempt_rel, status, redactor.redact_str(&reason));
        }
    };

    let fallback = observer.fallback.take();
    // Inside the tree (above): the folder first, then the snapshot.
    drop(tmp_after);
    if let Some(on_exit) = after_tmp {
        on_exit();
    }
    let outcome = finish(&spec, attempt_rel, record, observer.state, fallback);
    // Long done by now: it began before the reap.
    drop(removing);
    outcome
}

/// The folders the CLI writes in from its start, before it has its prompt:
/// its home (`~/.claude.json`, `~/.claude/`), its configuration folder, and
/// the XDG folders a tool may keep its files in.
const CLI_FOLDERS: [&str; 6] = [
    "HOME",
    "CLAUDE_CONFIG_DIR",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
];

/// Whether a folder the CLI writes in from its start lies inside `cwd`, as
/// the CLI spawned by `spawn` will see it.
fn cli_writes_in_tree(spawn: &SpawnSpec, cwd: &Path) -> bool {
    CLI_FOLDERS.iter().any(|name| {
        let given = spawn.env.iter().rev().find(|(k, _)| k == name);
        let value = match given {
            Some((_, value)) => Some(std::ffi::OsString::from(value)),
            None if spawn.env_remove.iter().any(|k| k == name) => None,
            None => std::env::var_os(name),
        };
        value.is_some_and(|v| !v.is_empty() && inside(Path::new(&v), cwd))
    })
}

/// Whether `path` lies inside `root`, through any symlink; a path either side
/// cannot resolve counts as inside (the cautious answer: its folder is then
/// removed before the working tree is read).
fn inside(path: &Path, root: &Path) -> bool {
    match (path.canonicalize(), root.canonicalize()) {
        (Ok(path), Ok(root)) => path.starts_with(root),
        _ => true,
    }
}

/// Everything after the process (or its playback) ended: the logs kept redacted,
/// the classification, `process.json` and `result.json`.
fn finish(
    spec: &InvokeSpec<'_>,
    attempt_rel: String,
    record: ProcessRecord,
    mut state: StreamState,
    fallback: Option<Vec<u8>>,
) -> InvocationOutcome {
    let run = spec.run;
    let redactor = run.redactor();
    let rel = |name: &str| layout::in_attempt(&attempt_rel, name);
    if !state.result_seen() && !record.stdout_truncated {
        // `--output-format json` may pretty-print its envelope over several lines.
        if let Some(stdout) = fallback {
            state.finish(&stdout);
        }
    }

    let observed = observe(spec, &attempt_rel, &state);
    let classification = classify(ClassifyInput {
        exit_code: record.exit_code,
        envelope: state.result(),
        schema: spec.schema,
        schema_delivery: if spec.request.json_schema_inline {
            SchemaDelivery::Flag
        } else {
            SchemaDelivery::ResultText
        },
        output_limit: record
            .truncated_stream()
            .map(|s| spec.runner.output_limit_reason(s)),
        timed_out: record.timed_out,
        cancelled: record.cancelled,
        hung_after_result: record.hung_after_result,
        stream_error: state.assistant_error(),
    });

    let mut status = classification.status;
    let mut failure_reason = classification
        .failure_reason
        .as_deref()
        .map(|r| redactor.redact_str(r));
    match observed {
        Ok(None) => {}
        Ok(Some(violation)) => {
            status = StageStatus::SafetyViolation;
            failure_reason = Some(redactor.redact_str(&violation));
        }
        Err(e) => {
            status = StageStatus::Failed;
            failure_reason = Some(e);
        }
    }
    // Queued with result.json: both are written with the evidence that follows
    // (`store/batch.rs`); a failure to queue either fails the attempt below.
    if let Err(e) = run.defer_json(&rel(attempt::PROCESS), &record) {
        status = StageStatus::Failed;
        failure_reason = Some(format!(
            "failed to write process.json: {}",
            crate::error_chain(&e)
        ));
    }
    // A recording answers the same way every time: never worth another attempt.
    let transient = (status == StageStatus::Failed
        && classification.status == StageStatus::Failed
        && spec.replay.is_none())
    .then(|| {
        let stderr = stderr_tail(&run.dir().join(rel(attempt::RAW_STDERR)));
        transient::detect(state.result(), state.progress().api_retries, &stderr)
    })
    .flatten();
    let offered_tools = state.init().map(|init| init.tools.clone());
    let mut result_record = ResultRecord::new(&classification, state.result(), offered_tools);
    result_record.status = status;
    result_record.failure_reason = failure_reason.clone();
    result_record.transient = transient.is_some();
    if let Err(e) = run.defer_json(&rel(attempt::RESULT), &result_record) {
        status = StageStatus::Failed;
        failure_reason = Some(format!(
            "failed to write result.json: {}",
            crate::error_chain(&e)
        ));
    }

    let structured_output = if status == StageStatus::Succeeded {
        classification.structured_output.clone()
    } else {
        None
    };
    InvocationOutcome {
        status,
        failure_reason,
        structured_output,
        cost_usd: classification.total_cost_usd.unwrap_or(0.0),
        tokens: classification.tokens.unwrap_or_default(),
        turns: classification
            .num_turns
            .map_or(0, |t| u32::try_from(t).unwrap_or(u32::MAX)),
        classification: Some(classification),
        attempt_rel,
        started_at: crate::time::format_rfc3339(record.started_at),
        ended_at: crate::time::format_rfc3339(record.ended_at),
        duration_ms: record.duration_ms,
        process: Some(record),
        replayed: false,
        transient,
    }
}

/// The end of the kept stderr: where a CLI that died without an envelope says why.
fn stderr_tail(path: &std::path::Path) -> String {
    use std::io::{Read, Seek, SeekFrom};
    const TAIL: u64 = 64 << 10;
    let Ok(mut file) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(TAIL)));
    let mut bytes = Vec::new();
    let _ = file.take(TAIL).read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes).into_owned()
}

fn init_expectation<'a>(spec: &InvokeSpec<'a>) -> InitExpectation<'a> {
    InitExpectation {
        policy: &spec.request.tool_policy,
        tools_restricted: spec.request.argv.iter().any(|a| a == "--tools"),
        schema: spec.request.json_schema_inline,
    }
}

/// What the stream and the run folder show after the attempt (docs/claude-code-runner.md,
/// "Observed, not assumed"): `tool-calls.jsonl` is written, and the first safety
/// violation is returned — an `init` event that differs from the request, a tool
/// call the policy refuses that ran, or a record of the run that changed.
fn observe(
    spec: &InvokeSpec<'_>,
    attempt_rel: &str,
    state: &StreamState,
) -> Result<Option<String>, String> {
    let calls = check_calls(
        state.tool_calls(),
        &CallContext {
            policy: &spec.request.tool_policy,
            root: spec.cwd,
            protected: spec.protected,
            recorded_root: spec
                .replay
                .and(state.init())
                .and_then(|init| init.cwd.as_deref()),
        },
    );
    let mut lines = Vec::new();
    for call in &calls {
        let mut value = serde_json::to_value(call).expect("records serialise");
        spec.run.redactor().redact_json(&mut value);
        lines.extend(serde_json::to_vec(&value).expect("records serialise"));
        lines.push(b'\n');
    }
    // Queued, and written with the attempt's next batch: the agent's group has
    // ended, so nothing of it can touch the file before it lands, and the records
    // already on disk are re-hashed below.
    let written = spec
        .run
        .defer_bytes(
            &layout::in_attempt(attempt_rel, attempt::TOOL_CALLS),
            &lines,
        )
        .map_err(|e| {
            format!(
                "failed to write tool-calls.jsonl: {}",
                crate::error_chain(&e)
            )
        });
    let mut violations: Vec<String> = Vec::new();
    if let Some(mismatch) = state
        .init()
        .and_then(|i| check_init(i, &init_expectation(spec)))
    {
        violations.push(mismatch.to_string());
    }
    violations.extend(calls.iter().filter(|c| c.violation).map(describe_violation));
    violations.extend(
        spec.run
            .changed_records()
            .iter()
            .map(|c| format!("{c}: the agent touched its own run's records")),
    );
    written?;
    Ok(match violations.len() {
        0 => None,
        1 => violations.pop(),
        n => Some(format!(
            "{} (and {} more safety violation(s), see tool-calls.jsonl and result.json)",
            violations[0],
            n - 1
        )),
    })
}

/// Plays a recorded attempt back in place of the agent: `replay.json` says where it
/// came from; the recorded stdout goes into this attempt's log and is read as the
/// stream would have been.
fn play_back(
    spec: &InvokeSpec<'_>,
    recorded: &RecordedAttempt,
    attempt_rel: &str,
    mut stdout_log: RunLog,
    mut stderr_log: RunLog,
) -> Result<(ProcessRecord, StreamState), String> {
    let source = json!({
        "schemaVersion": 1,
        "replayed": true,
        "from": recorded.dir.display().to_string(),
        "stage": recorded.stage,
        "attempt": recorded.attempt,
        "recordedInputHash": recorded.record.input_hash,
        "recordedStatus": recorded.record.status,
    });
    let played = spec
        .run
        .write_json(&layout::in_attempt(attempt_rel, attempt::REPLAY), &source)
        .map_err(|e| format!("failed to write replay.json: {}", crate::error_chain(&e)))
        .and_then(|_| {
            recorded
                .play(&mut stdout_log, &mut stderr_log, spec.cwd)
                .map_err(|e| e.to_string())
        });
    for log in [&mut stdout_log, &mut stderr_log] {
        log.complete().map_err(|e| {
            format!(
                "failed to keep the played-back output: {}",
                crate::error_chain(&e)
            )
        })?;
    }
    let record = played?;
    let mut state = StreamState::new();
    let stdout = recorded.dir.join(attempt::RAW_STDOUT);
    if stdout.is_file() {
        let file = std::fs::File::open(&stdout)
            .map_err(|e| format!("failed to read the played-back output: {e}"))?;
        use std::io::BufRead;
        for line in std::io::BufReader::new(file).split(b'\n') {
            let line = line.map_err(|e| format!("failed to read the played-back output: {e}"))?;
            state.feed_line(&line);
            if let Some(report) = &spec.on_progress {
                report(&state.progress());
            }
        }
    }
    Ok((record, state))
}

/// The outcome of an invocation that never ran, with its `result.json` saying
/// why. `reason` as it is to be recorded (redacted by the caller where it may
/// hold a secret).
fn unspawned(
    spec: &InvokeSpec<'_>,
    attempt_rel: &str,
    status: StageStatus,
    reason: String,
) -> InvocationOutcome {
    not_given_a_prompt(spec, attempt_rel, status, reason, None)
}

/// [`unspawned`]; a `transient` one says so in its `result.json`, which
/// `runner.retries` counts.
fn not_given_a_prompt(
    spec: &InvokeSpec<'_>,
    attempt_rel: &str,
    status: StageStatus,
    reason: String,
    transient: Option<Transient>,
) -> InvocationOutcome {
    let mut outcome = InvocationOutcome::not_spawned(attempt_rel.to_string(), status, reason);
    let classification = Classification {
        status: outcome.status,
        failure_reason: outcome.failure_reason.clone(),
        structured_output: None,
        degraded: false,
        subtype: None,
        is_error: None,
        terminal_reason: None,
        num_turns: None,
        total_cost_usd: None,
        tokens: None,
        session_id: None,
        api_error_status: None,
    };
    let mut record = ResultRecord::new(&classification, None, None);
    record.transient = transient.is_some();
    outcome.transient = transient;
    if let Err(e) = spec
        .run
        .write_json(&layout::in_attempt(attempt_rel, attempt::RESULT), &record)
    {
        tracing::warn!("failed to write {} of {attempt_rel}: {e}", attempt::RESULT);
    }
    outcome
}

#[cfg(test)]
#[path = "invoke_tests.rs"]
mod tests;
