//! Running one child process under supervision.

use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::Utc;
use nix::sys::signal::Signal;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, Command};
use tokio::sync::mpsc::{self, UnboundedReceiver};
use tokio::time::{sleep_until, Instant};

use super::cancel::{CancelLevel, CancelToken};
use super::capture::{Capture, CaptureEvent, StdoutObserver};
use super::error::SupervisorError;
use super::group::{end_group, signal_group, wait_gone};
use super::inert::group_inert;
use super::record::{signal_name, OutputStream, ProcessRecord, PROCESS_SCHEMA_VERSION};
use super::resolve::resolve_program;
use super::spawner::on_spawner_thread;
use super::spec::SpawnSpec;
use crate::time::now_millis;

/// How long reading what is left in the pipes may take once the group is gone.
/// All that is left then sits in the pipe buffers; only a process that escaped the
/// group (`setsid`) can keep a pipe open, and it is not waited for.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);
/// How long a group may take to empty after its leader exits before what is left
/// counts as orphans. A member exiting at the same time is not one: bubblewrap's
/// namespace init outlives the confined command's leader for about a
/// millisecond, and counting it recorded `orphansKilled: true` for a third of
/// confined stages that left nothing behind (and cost each a 10 ms poll).
const SETTLE: Duration = Duration::from_millis(15);
/// How often, once the agent's result has been read, its group is looked at to
/// tell whether it can still act (`inert.rs`): about 15 µs a look while the
/// leader runs, against the CLI's 10 to 20 ms from its result to its exit.
const INERT_POLL: Duration = Duration::from_millis(1);

/// How many processes this process has started (or tried to) through [`run`].
/// Whoever compares state around one child can tell from it whether another
/// child started in between (`stages/src/store_check.rs`).
static SPAWNED: AtomicU64 = AtomicU64::new(0);

/// The number of children [`run`] has tried to start so far in this process.
pub fn spawned() -> u64 {
    SPAWNED.load(Ordering::SeqCst)
}

/// Runs `spec` to completion and returns its record. `on_spawn` gets the pid and
/// process group id as soon as the process exists, before anything else happens,
/// so the caller can record them for recovery after a crash.
///
/// Every member of the process group is gone when this returns, including when it
/// returns an error after the spawn. If the returned future is dropped before it
/// completes, the group is killed with SIGKILL.
pub async fn run(
    spec: SpawnSpec,
    cancel: CancelToken,
    observer: Option<&mut dyn StdoutObserver>,
    on_spawn: impl FnOnce(u32, i32),
) -> Result<ProcessRecord, SupervisorError> {
    let on_spawn = |pid, pgid| {
        on_spawn(pid, pgid);
        Ok(())
    };
    run_until_ended(spec, cancel, observer, on_spawn, || {}).await
}

/// [`run`], with two more hooks.
///
/// `on_spawn` decides whether the process gets its input: `spec.stdin` is
/// written only once it has returned `Ok`, so what it does — an agent's
/// records made durable — is done before the process can act on its input,
/// while the process starts up. On `Err(reason)` nothing is written, the
/// group is killed and waited for, and [`SupervisorError::Withheld`] carries
/// the reason.
///
/// `on_ended` is called once no member of the process group can act any more,
/// before its logs are completed (each synced and announced): what reads the
/// state the process left behind can start while the logs wait for the disk.
/// That is once the group has ended and its pipes are drained, or earlier,
/// once the observer has seen a result and every thread of every member is
/// exiting (`inert.rs`): the kernel tears a large process down for tens of
/// milliseconds before it can be reaped, and whoever waits for the reap waits
/// for that. Not called when the process was not started, nor when
/// supervising it failed before the group could no longer act.
pub async fn run_until_ended(
    mut spec: SpawnSpec,
    cancel: CancelToken,
    observer: Option<&mut dyn StdoutObserver>,
    on_spawn: impl FnOnce(u32, i32) -> Result<(), String>,
    on_ended: impl FnOnce() + Send,
) -> Result<ProcessRecord, SupervisorError> {
    // Whatever happens, the sinks are completed: an empty log is recorded like
    // any other, never left behind unannounced.
    let found = match spec.executable.take() {
        Some(executable) => Ok(executable),
        None => resolve_program(&spec.program, &spec.cwd, &spec.env),
    };
    let executable = match found {
        Ok(executable) => executable,
        Err(e) => {
            complete_unused(&mut spec);
            return Err(e);
        }
    };
    if cancel.is_cancelled() {
        complete_unused(&mut spec);
        return Err(SupervisorError::CancelledBeforeSpawn {
            program: spec.program,
        });
    }
    let stdout_sink = std::mem::replace(&mut spec.stdout, Box::new(super::sink::Discard));
    let stderr_sink = std::mem::replace(&mut spec.stderr, Box::new(super::sink::Discard));
    let mut stdout = Capture::new(
        OutputStream::Stdout,
        stdout_sink,
        spec.max_stdout_bytes,
        observer,
    );
    let mut stderr = Capture::new(
        OutputStream::Stderr,
        stderr_sink,
        spec.max_stderr_bytes,
        None,
    );

    let mut command = Command::new(&executable);
    for name in &spec.env_remove {
        command.env_remove(name);
    }
    command
        .arg0(&spec.program)
        .args(&spec.args)
        .current_dir(&spec.cwd)
        .envs(spec.env.iter().map(|(name, value)| (name, value)))
        .process_group(0)
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());

    let started_at = now_millis();
    let started = Instant::now();
    // Counted before the child exists: a walk that reads the count after this
    // cannot have begun before the child could act.
    SPAWNED.fetch_add(1, Ordering::SeqCst);
    super::group::adopt_orphans();
    // From the thread that outlives every child (`spawner.rs`), under the
    // policy specbridge was started with, not the engine's. The runtime's
    // handle goes with it: the child is reaped by this runtime.
    let runtime = tokio::runtime::Handle::current();
    let spawned = on_spawner_thread(move || {
        let _runtime = runtime.enter();
        command.spawn()
    });
    let mut child = match spawned.and_then(|spawned| spawned) {
        Ok(child) => child,
        Err(source) => {
            stdout.finish();
            stderr.finish();
            return Err(SupervisorError::Spawn {
                program: spec.program.clone(),
                source,
            });
        }
    };
    let pid = child
        .id()
        .expect("a child that was not waited for has a pid");
    let pgid = i32::try_from(pid).expect("pids fit in pid_t");
    let mut guard = GroupGuard { pgid, armed: true };
    // The logs are made while the child starts, and before its spawn is
    // recorded: a `process-spawned` event always has its attempt's folder
    // beside it, even when specbridge dies right after it (a reader lists a
    // running check stage by that folder, `store/started.rs`). One that cannot
    // be made (a full disk) stops the child as a failed write does, unrecorded
    // like its input: the run's records have failed anyway.
    let opened = stdout
        .open()
        .map_err(|e| (stdout.describe(), e))
        .and_then(|()| stderr.open().map_err(|e| (stderr.describe(), e)));
    let refused = match opened {
        Err((into, source)) => Some(SupervisorError::Capture { into, source }),
        Ok(()) => on_spawn(pid, pgid)
            .err()
            .map(|reason| SupervisorError::Withheld {
                program: spec.program.clone(),
                reason,
            }),
    };
    // A cancel that came while `on_spawn` held the input (an agent's
    // before-snapshot in a large tree can hold it for tens of milliseconds)
    // withholds it too: the process has had nothing to act on.
    let refused = refused.or_else(|| {
        (spec.stdin.is_some() && cancel.is_cancelled()).then(|| {
            SupervisorError::CancelledBeforeInput {
                program: spec.program.clone(),
            }
        })
    });
    if let Some(error) = refused {
        // Its input never written, the process has had nothing to act on; it
        // and anything it started go before the error is returned: the leader
        // reaped first, as below, then the rest of its group ended.
        signal_group(pgid, Signal::SIGKILL);
        let _ = child.wait().await;
        end_group(pgid, spec.kill_grace, true, &cancel).await;
        guard.armed = false;
        stdout.finish();
        stderr.finish();
        return Err(error);
    }

    let stdin_writer = spec.stdin.take().and_then(|input| {
        let mut pipe = child.stdin.take()?;
        Some(tokio::spawn(async move {
            // A child that exits without reading all of its input is its own
            // business; the broken pipe is not an error of ours.
            let _ = pipe.write_all(&input).await;
        }))
    });
    let stdout_pipe = child.stdout.take().expect("stdout is piped");
    let stderr_pipe = child.stderr.take().expect("stderr is piped");

    let (events, mut event_rx) = mpsc::unbounded_channel();
    let mut on_ended = Some(on_ended);
    let mut end = || {
        if let Some(on_ended) = on_ended.take() {
            on_ended();
        }
    };
    let ended;
    {
        let stdout_pump = stdout.pump(stdout_pipe, events.clone());
        let stderr_pump = stderr.pump(stderr_pipe, events);
        let control = supervise(
            &mut child,
            pid,
            started,
            &spec,
            &cancel,
            &mut event_rx,
            &mut end,
        );
        tokio::pin!(stdout_pump, stderr_pump, control);
        let (mut stdout_done, mut stderr_done) = (false, false);
        ended = loop {
            tokio::select! {
                () = &mut stdout_pump, if !stdout_done => stdout_done = true,
                () = &mut stderr_pump, if !stderr_done => stderr_done = true,
                ended = &mut control => break ended,
            }
        };
        let drain = async {
            if !stdout_done {
                (&mut stdout_pump).await;
            }
            if !stderr_done {
                (&mut stderr_pump).await;
            }
        };
        if tokio::time::timeout(DRAIN_LIMIT, drain).await.is_err() {
            tracing::warn!(
                pid,
                "output pipes stayed open after the process group ended"
            );
        }
    }
    if let Some(writer) = stdin_writer {
        writer.abort();
    }
    if ended.is_ok() {
        end();
    }
    stdout.finish();
    stderr.finish();
    // Past an error of its own the supervise loop may not have ended the group;
    // leaving the guard armed kills it on return.
    let ended = ended?;
    guard.armed = false;
    for capture in [&mut stdout, &mut stderr] {
        if let Some(source) = capture.error.take() {
            return Err(SupervisorError::Capture {
                into: capture.describe(),
                source,
            });
        }
    }
    Ok(ProcessRecord {
        schema_version: PROCESS_SCHEMA_VERSION,
        executable: executable.display().to_string(),
        redacted_argv: spec.redacted_argv,
        cwd: spec.cwd.display().to_string(),
        started_at,
        ended_at: ended.at,
        duration_ms: u64::try_from(ended.after.as_millis()).unwrap_or(u64::MAX),
        exit_code: ended.status.code(),
        signal: ended.status.signal().map(signal_name),
        pid,
        pgid,
        timed_out: ended.stops.timed_out,
        cancelled: ended.stops.cancelled,
        hung_after_result: ended.stops.hung_after_result,
        stdout_bytes: stdout.kept,
        stderr_bytes: stderr.kept,
        stdout_truncated: stdout.truncated,
        stderr_truncated: stderr.truncated,
        limit_exceeded: ended.stops.limit_exceeded,
        orphans_killed: ended.orphans_killed,
        stopped_by_observer: ended.stops.stopped_by_observer,
        sandbox: None,
    })
}

/// Completes the sinks of a process that was never started.
fn complete_unused(spec: &mut SpawnSpec) {
    for sink in [&mut spec.stdout, &mut spec.stderr] {
        if let Err(e) = sink.finish() {
            tracing::warn!("failed to complete {}: {e}", sink.describe());
        }
    }
}

/// Why the supervisor stopped the process, as recorded.
#[derive(Debug, Default)]
struct Stops {
    timed_out: bool,
    cancelled: bool,
    hung_after_result: bool,
    limit_exceeded: Option<OutputStream>,
    stopped_by_observer: bool,
}

struct Ended {
    status: ExitStatus,
    at: chrono::DateTime<Utc>,
    after: Duration,
    stops: Stops,
    orphans_killed: bool,
}

/// Waits for the leader while acting on timeout, cancel, output limits and the
/// result; then ends whatever is left of the group. `on_inert` is called if,
/// after a result, the group is seen unable to act before the leader is reaped.
async fn supervise(
    child: &mut Child,
    pid: u32,
    started: Instant,
    spec: &SpawnSpec,
    cancel: &CancelToken,
    events: &mut UnboundedReceiver<CaptureEvent>,
    on_inert: &mut (dyn FnMut() + Send),
) -> Result<Ended, SupervisorError> {
    let pgid = pid as i32;
    let grace = spec.kill_grace;
    let timeout_at = spec.timeout.map(|timeout| started + timeout);
    let mut stops = Stops::default();
    let mut seen_cancel = CancelLevel::None;
    let mut hang_at: Option<Instant> = None;
    // Looked at from the first result on, until the group is seen inert.
    let mut inert_at: Option<Instant> = None;
    let mut inert_looked_for = false;
    let mut kill_at: Option<Instant> = None;
    let mut killed = false;
    let mut events_open = true;

    // The first reason to stop sends SIGTERM and arms the SIGKILL; later reasons
    // are recorded but change nothing.
    let terminate = |kill_at: &mut Option<Instant>, killed: bool| {
        if kill_at.is_none() && !killed {
            signal_group(pgid, Signal::SIGTERM);
            *kill_at = Some(Instant::now() + grace);
        }
    };

    let status = loop {
        tokio::select! {
            status = child.wait() => break status.map_err(|source| SupervisorError::Wait { pid, source })?,
            () = sleep_until_some(timeout_at), if !stops.timed_out => {
                stops.timed_out = true;
                terminate(&mut kill_at, killed);
            }
            level = cancel.wait_until(next_level(seen_cancel)), if seen_cancel < CancelLevel::Immediate => {
                seen_cancel = level;
                stops.cancelled = true;
                if level == CancelLevel::Immediate {
                    signal_group(pgid, Signal::SIGKILL);
                    killed = true;
                } else {
                    terminate(&mut kill_at, killed);
                }
            }
            () = sleep_until_some(inert_at) => {
                inert_at = if group_inert(pgid, pid) {
                    on_inert();
                    None
                } else {
                    Some(Instant::now() + INERT_POLL)
                };
            }
            () = sleep_until_some(hang_at) => {
                hang_at = None;
                stops.hung_after_result = true;
                terminate(&mut kill_at, killed);
            }
            () = sleep_until_some(kill_at), if !killed => {
                signal_group(pgid, Signal::SIGKILL);
                killed = true;
            }
            event = events.recv(), if events_open => match event {
                Some(CaptureEvent::LimitExceeded(stream)) => {
                    stops.limit_exceeded.get_or_insert(stream);
                    terminate(&mut kill_at, killed);
                }
                Some(CaptureEvent::Failed(_)) => terminate(&mut kill_at, killed),
                Some(CaptureEvent::Stop) => {
                    // No grace: every moment the agent keeps running it can act.
                    stops.stopped_by_observer = true;
                    if !killed {
                        signal_group(pgid, Signal::SIGKILL);
                        killed = true;
                    }
                }
                Some(CaptureEvent::ResultSeen) => {
                    let now = Instant::now();
                    if !inert_looked_for {
                        inert_looked_for = true;
                        inert_at = Some(now + INERT_POLL);
                    }
                    hang_at.get_or_insert(now + grace);
                }
                None => events_open = false,
            },
        }
    };
    let after = started.elapsed();
    let at = now_millis();

    // The leader is gone; anything of its group still running is an orphan, once
    // the members that were exiting with it have had a moment to go.
    let orphans_killed = !wait_gone(pgid, SETTLE).await;
    if orphans_killed {
        end_group(pgid, grace, killed, cancel).await;
    }
    Ok(Ended {
        status,
        at,
        after,
        stops,
        orphans_killed,
    })
}

fn next_level(level: CancelLevel) -> CancelLevel {
    match level {
        CancelLevel::None => CancelLevel::Graceful,
        CancelLevel::Graceful | CancelLevel::Immediate => CancelLevel::Immediate,
    }
}

async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Kills the process group if `run` is abandoned half-way, so that dropping the
/// future cannot leave processes behind.
struct GroupGuard {
    pgid: i32,
    armed: bool,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            signal_group(self.pgid, Signal::SIGKILL);
        }
    }
}
