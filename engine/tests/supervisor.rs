//! The process supervisor against real child processes (`sh -c` scripts).

mod supervisor_common;

use std::future::Future;
use std::time::Duration;

use specbridge_engine::supervisor::{
    kill_group_if_alive, run, run_until_ended, CancelToken, OutputSink, OutputStream,
    ProcessRecord, SpawnSpec, SupervisorError,
};
use supervisor_common::{alive, assert_group_gone, live_group_members, sh, ResultOnLine};
use tokio::sync::mpsc;

/// Fails instead of hanging when the supervisor misses a stop.
async fn bounded<T>(work: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), work)
        .await
        .expect("the supervised run should have ended long ago")
}

async fn run_plain(spec: SpawnSpec) -> ProcessRecord {
    bounded(run(spec, CancelToken::new(), None, |_, _| {}))
        .await
        .unwrap()
}

fn read(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[tokio::test]
async fn exit_code_argv_and_ids_are_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let mut spawned = None;
    let record = bounded(run(
        sh(dir.path(), "echo out; echo err >&2; exit 7"),
        CancelToken::new(),
        None,
        |pid, pgid| spawned = Some((pid, pgid)),
    ))
    .await
    .unwrap();

    assert_eq!(record.exit_code, Some(7));
    assert_eq!(record.signal, None);
    assert_eq!(spawned, Some((record.pid, record.pgid)));
    assert_eq!(record.pgid, record.pid as i32);
    assert!(record.executable.ends_with("/sh"), "{}", record.executable);
    assert_eq!(record.redacted_argv, ["sh", "-c", "<script>"]);
    assert_eq!(read(&dir.path().join("raw-stdout.log")), "out\n");
    assert_eq!(read(&dir.path().join("raw-stderr.log")), "err\n");
    assert_eq!((record.stdout_bytes, record.stderr_bytes), (4, 4));
    assert!(!record.timed_out && !record.cancelled && !record.hung_after_result);
    assert!(!record.stdout_truncated && !record.stderr_truncated && !record.orphans_killed);
    assert_eq!(record.limit_exceeded, None);
    assert!(record.ended_at >= record.started_at);
}

#[tokio::test]
async fn a_terminating_signal_is_recorded_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let record = run_plain(sh(dir.path(), "kill -USR1 $$")).await;
    assert_eq!(record.exit_code, None);
    assert_eq!(record.signal.as_deref(), Some("SIGUSR1"));
}

#[tokio::test]
async fn stdin_is_delivered_then_closed() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = sh(dir.path(), "cat; echo eof");
    spec.stdin = Some(b"the prompt\n".to_vec());
    let record = run_plain(spec).await;
    // `cat` only ends at end of input, so `eof` proves stdin was closed.
    assert_eq!(
        read(&dir.path().join("raw-stdout.log")),
        "the prompt\neof\n"
    );
    assert_eq!(record.exit_code, Some(0));
}

/// A child that writes `got` with its first line of input, in `dir`, and
/// starts a background member of its group first.
fn reads_one_line(dir: &std::path::Path) -> SpawnSpec {
    let mut spec = sh(
        dir,
        "sleep 1000 & echo $!; IFS= read -r line && printf %s \"$line\" > got",
    );
    spec.stdin = Some(b"the prompt\n".to_vec());
    spec
}

// Two workers: an input written early would be written while `on_spawn`
// blocks its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_input_waits_for_on_spawn() {
    let dir = tempfile::tempdir().unwrap();
    let got = dir.path().join("got");
    let record = bounded(run_until_ended(
        reads_one_line(dir.path()),
        CancelToken::new(),
        None,
        |_, _| {
            // Long enough for the child to have read its input, had it any.
            std::thread::sleep(Duration::from_millis(300));
            assert!(
                !got.exists(),
                "the child got its input before on_spawn returned"
            );
            Ok(())
        },
        || {},
    ))
    .await
    .unwrap();
    assert_eq!(read(&got), "the prompt");
    assert_eq!(record.exit_code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_withheld_by_on_spawn_is_never_written_and_the_group_ends() {
    let dir = tempfile::tempdir().unwrap();
    let pgid = std::sync::OnceLock::new();
    let ended = std::sync::atomic::AtomicBool::new(false);
    let error = bounded(run_until_ended(
        reads_one_line(dir.path()),
        CancelToken::new(),
        None,
        |_, group| {
            pgid.set(group).unwrap();
            // Time for an input written too early to be read.
            std::thread::sleep(Duration::from_millis(300));
            Err("the disk is full".to_string())
        },
        || ended.store(true, std::sync::atomic::Ordering::SeqCst),
    ))
    .await
    .unwrap_err();
    assert!(
        matches!(&error, SupervisorError::Withheld { reason, .. } if reason == "the disk is full"),
        "{error}"
    );
    assert_eq!(
        error.to_string(),
        "failed to give `sh` its input: the disk is full; it was stopped before it was given \
         any"
    );
    assert_group_gone(*pgid.get().unwrap());
    assert!(!dir.path().join("got").exists(), "the input was written");
    assert!(!ended.load(std::sync::atomic::Ordering::SeqCst));
}

/// A cancel that comes while `on_spawn` holds the input withholds it: the
/// child, killed, never had it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_while_on_spawn_holds_the_input_withholds_it() {
    let dir = tempfile::tempdir().unwrap();
    let cancel = CancelToken::new();
    let pgid = std::sync::OnceLock::new();
    let error = bounded(run_until_ended(
        reads_one_line(dir.path()),
        cancel.clone(),
        None,
        |_, group| {
            pgid.set(group).unwrap();
            cancel.cancel_graceful();
            Ok(())
        },
        || {},
    ))
    .await
    .unwrap_err();
    assert!(
        matches!(&error, SupervisorError::CancelledBeforeInput { .. }),
        "{error}"
    );
    assert_group_gone(*pgid.get().unwrap());
    // Time for an input written anyway to be read.
    std::thread::sleep(Duration::from_millis(100));
    assert!(!dir.path().join("got").exists(), "the input was written");
}

#[tokio::test]
async fn without_stdin_the_child_reads_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let record = run_plain(sh(dir.path(), "cat; echo eof")).await;
    assert_eq!(read(&dir.path().join("raw-stdout.log")), "eof\n");
    assert_eq!(record.exit_code, Some(0));
}

#[tokio::test]
async fn env_is_added_and_cwd_used() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = sh(
        dir.path(),
        "printf '%s %s' \"$SPECBRIDGE_TEST_VALUE\" \"$(pwd -P)\"",
    );
    spec.env = vec![("SPECBRIDGE_TEST_VALUE".into(), "hello".into())];
    run_plain(spec).await;
    let cwd = dir.path().canonicalize().unwrap();
    assert_eq!(
        read(&dir.path().join("raw-stdout.log")),
        format!("hello {}", cwd.display())
    );
}

#[tokio::test]
async fn a_missing_executable_is_not_found_and_nothing_spawns() {
    let dir = tempfile::tempdir().unwrap();
    for program in ["specbridge-no-such-program", "./no-such-script"] {
        let mut spec = sh(dir.path(), "");
        spec.program = program.into();
        let mut spawned = false;
        let error = run(spec, CancelToken::new(), None, |_, _| spawned = true)
            .await
            .unwrap_err();
        assert!(
            matches!(&error, SupervisorError::NotFound { program: p } if p == program),
            "{error}"
        );
        assert!(!spawned);
    }
}

#[tokio::test]
async fn a_program_already_found_is_run_from_there_under_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let found = which_sh();
    // A name no PATH lookup could find: only the path given can have run it.
    let mut spec = sh(dir.path(), "printf %s \"$0\"");
    spec.program = "specbridge-found-elsewhere".into();
    spec.executable = Some(found);
    let record = run_plain(spec).await;
    assert_eq!(record.exit_code, Some(0));
    assert_eq!(
        read(&dir.path().join("raw-stdout.log")),
        "specbridge-found-elsewhere"
    );
}

/// `sh` as a lookup in the inherited PATH finds it.
fn which_sh() -> std::path::PathBuf {
    specbridge_engine::supervisor::resolve_program("sh", std::path::Path::new("/"), &[]).unwrap()
}

#[tokio::test]
async fn timeout_ends_a_child_that_ignores_sigterm_and_its_grandchild() {
    let dir = tempfile::tempdir().unwrap();
    // The background sleep inherits the ignored SIGTERM, so only SIGKILL ends either.
    let mut spec = sh(dir.path(), "trap '' TERM; sleep 1000 & echo $!; sleep 1000");
    spec.timeout = Some(Duration::from_secs(3));
    let record = run_plain(spec).await;

    assert!(record.timed_out);
    assert!(!record.cancelled);
    assert_eq!(record.signal.as_deref(), Some("SIGKILL"));
    let grandchild: i32 = read(&dir.path().join("raw-stdout.log"))
        .trim()
        .parse()
        .unwrap();
    assert!(!alive(grandchild), "grandchild {grandchild} survived");
    assert_group_gone(record.pgid);
}

#[tokio::test]
async fn a_grandchild_left_behind_by_a_finished_leader_is_ended() {
    let dir = tempfile::tempdir().unwrap();
    let record = run_plain(sh(dir.path(), "sleep 1000 & echo $!")).await;

    assert_eq!(record.exit_code, Some(0));
    assert!(record.orphans_killed);
    assert!(!record.timed_out);
    let grandchild: i32 = read(&dir.path().join("raw-stdout.log"))
        .trim()
        .parse()
        .unwrap();
    assert!(!alive(grandchild), "grandchild {grandchild} survived");
    assert_group_gone(record.pgid);
}

/// A sink that notes when it is completed, for the order of `on_ended`.
struct NotedSink {
    inner: Box<dyn OutputSink>,
    completed: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl OutputSink for NotedSink {
    fn open(&mut self) -> std::io::Result<()> {
        self.inner.open()
    }

    fn write_chunk(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.inner.write_chunk(bytes)
    }

    fn finish(&mut self) -> std::io::Result<()> {
        self.completed
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.inner.finish()
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }
}

/// What reads the state a process left behind (an agent's after-snapshot)
/// starts at `on_ended`: once, when nothing of the group is left — a member
/// the leader left behind included — with all its output read, and before the
/// logs are completed, so that their syncs wait beside it. A process that never
/// started has no end to report.
#[tokio::test]
async fn on_ended_comes_once_the_whole_group_is_gone_and_before_the_logs_complete() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = sh(dir.path(), "sleep 1000 & echo $!; echo last line");
    let completed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    spec.stdout = Box::new(NotedSink {
        inner: spec.stdout,
        completed: completed.clone(),
    });
    let pgid = std::sync::OnceLock::new();
    let seen = std::sync::Mutex::new(Vec::new());
    let record = bounded(run_until_ended(
        spec,
        CancelToken::new(),
        None,
        |_, group| {
            pgid.set(group).unwrap();
            Ok(())
        },
        || {
            let out = read(&dir.path().join("raw-stdout.log"));
            let member: i32 = out.lines().next().unwrap().parse().unwrap();
            seen.lock().unwrap().push((
                alive(member),
                live_group_members(*pgid.get().unwrap()),
                out.ends_with("last line\n"),
                completed.load(std::sync::atomic::Ordering::SeqCst),
            ));
        },
    ))
    .await
    .unwrap();
    assert!(record.orphans_killed);
    assert_eq!(
        *seen.lock().unwrap(),
        [(false, Vec::new(), true, false)],
        "once; the member gone, the group empty, the output read, the logs not completed"
    );

    let mut missing = sh(dir.path(), "true");
    missing.program = dir.path().join("no-such-program").display().to_string();
    let calls = std::sync::atomic::AtomicUsize::new(0);
    let failed = run_until_ended(
        missing,
        CancelToken::new(),
        None,
        |_, _| Ok(()),
        || {
            calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        },
    )
    .await;
    assert!(failed.is_err());
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0);
}

/// What a sink saw when it was opened: the children of this process's threads,
/// each with its command line (the supervisor spawns on a thread of its own,
/// shared by the tests that run at once, so the test's child is among them once
/// it exists; a child that has exited already has an empty one), and whether
/// the spawn had been recorded (`on_spawn` called) by then.
#[derive(Debug, Clone)]
struct Opened {
    children: Vec<(u32, String)>,
    spawn_recorded: bool,
}

/// A sink that notes what it saw when it was opened, and can refuse to open.
struct OpenedSink {
    spawn_recorded: std::sync::Arc<std::sync::atomic::AtomicBool>,
    opened: std::sync::Arc<std::sync::Mutex<Vec<Opened>>>,
    refuse: bool,
}

impl OutputSink for OpenedSink {
    fn open(&mut self) -> std::io::Result<()> {
        let mut children = Vec::new();
        for task in std::fs::read_dir("/proc/self/task").unwrap() {
            // A thread that ends meanwhile has no children file any more.
            if let Ok(text) = std::fs::read_to_string(task.unwrap().path().join("children")) {
                children.extend(text.split_whitespace().map(|pid| {
                    let line = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                    (
                        pid.parse::<u32>().unwrap(),
                        String::from_utf8_lossy(&line).into_owned(),
                    )
                }));
            }
        }
        self.opened.lock().unwrap().push(Opened {
            children,
            spawn_recorded: self
                .spawn_recorded
                .load(std::sync::atomic::Ordering::SeqCst),
        });
        if self.refuse {
            return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
        }
        Ok(())
    }

    fn write_chunk(&mut self, _: &[u8]) -> std::io::Result<()> {
        Ok(())
    }

    fn finish(&mut self) -> std::io::Result<()> {
        Ok(())
    }

    fn describe(&self) -> String {
        "the noted sink".into()
    }
}

type Noted = (
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    std::sync::Arc<std::sync::Mutex<Vec<Opened>>>,
);

fn opened_sinks(spec: &mut SpawnSpec, refuse_stderr: bool) -> Noted {
    let spawn_recorded = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let opened = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = |refuse| {
        Box::new(OpenedSink {
            spawn_recorded: spawn_recorded.clone(),
            opened: opened.clone(),
            refuse,
        })
    };
    spec.stdout = sink(false);
    spec.stderr = sink(refuse_stderr);
    (spawn_recorded, opened)
}

/// A process's logs are made while it starts, not before it, and before its
/// spawn is recorded: each sink is opened once, when the child exists and
/// `on_spawn` has not yet been called (the run store's logs make their file and
/// the attempt's folder there, so a `process-spawned` event never comes
/// without them, even when specbridge dies right after it).
#[tokio::test]
async fn the_sinks_are_opened_once_the_child_has_started_before_its_spawn_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = sh(dir.path(), "echo out; echo err >&2");
    let (spawn_recorded, opened) = opened_sinks(&mut spec, false);
    let child = std::sync::OnceLock::new();
    let record = bounded(run(spec, CancelToken::new(), None, |pid, _| {
        spawn_recorded.store(true, std::sync::atomic::Ordering::SeqCst);
        child.set(pid).unwrap();
    }))
    .await
    .unwrap();
    assert_eq!(record.exit_code, Some(0));
    let child = *child.get().unwrap();
    let opened = opened.lock().unwrap();
    assert_eq!(opened.len(), 2, "each sink opened once: {opened:?}");
    for seen in opened.iter() {
        assert!(!seen.spawn_recorded, "opened after on_spawn: {opened:?}");
        assert!(
            seen.children.iter().any(|(pid, _)| *pid == child),
            "opened before the child existed: {opened:?}"
        );
    }
}

/// A log that cannot be made once the child has started (a full disk) stops
/// the child as a failed write does, and the error names the log; nothing of
/// the group is left, and its spawn is not recorded (the run's records have
/// failed anyway).
#[tokio::test]
async fn a_sink_that_cannot_open_stops_the_child() {
    let dir = tempfile::tempdir().unwrap();
    let command = "trap '' TERM; sleep 1000 & sleep 1000; wait";
    let mut spec = sh(dir.path(), command);
    let (spawn_recorded, opened) = opened_sinks(&mut spec, true);
    let started = std::time::Instant::now();
    let err = bounded(run(spec, CancelToken::new(), None, |_, _| {
        spawn_recorded.store(true, std::sync::atomic::Ordering::SeqCst);
    }))
    .await
    .unwrap_err();
    match &err {
        SupervisorError::Capture { into, source } => {
            assert_eq!(into, "the noted sink");
            assert_eq!(source.raw_os_error(), Some(libc::ENOSPC), "{source}");
        }
        other => panic!("expected a capture error, got {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the child was not stopped"
    );
    assert!(!spawn_recorded.load(std::sync::atomic::Ordering::SeqCst));
    // The child leads its own group: its pid is the group's id.
    let opened = opened.lock().unwrap();
    let ours: Vec<u32> = opened
        .last()
        .unwrap()
        .children
        .iter()
        .filter(|(_, line)| line.contains(command))
        .map(|(pid, _)| *pid)
        .collect();
    let [child] = ours[..] else {
        panic!("one child when the sink was opened: {opened:?}");
    };
    assert_group_gone(i32::try_from(child).unwrap());
}

/// An orphan is reparented to specbridge, the subreaper of what it starts, and
/// reaped there once it exits: nothing of the group is left after the run, not
/// even a zombie waiting for a PID 1 that reaps every few seconds (some
/// containers' do), which made each confined stage scan `/proc`.
#[tokio::test]
async fn an_orphan_that_exits_is_reaped_by_specbridge_not_left_a_zombie() {
    let dir = tempfile::tempdir().unwrap();
    let record = run_plain(sh(dir.path(), "sleep 0.002 & exit 0")).await;

    assert_eq!(record.exit_code, Some(0));
    assert_eq!(nix::sys::prctl::get_child_subreaper(), Ok(true));
    let probe = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(record.pgid), None);
    assert_eq!(
        probe,
        Err(nix::errno::Errno::ESRCH),
        "something of group {} is left, a zombie at least",
        record.pgid
    );
}

/// Runs `spec` in a task, and cancels through `cancel_with` once the child printed
/// its first line.
async fn cancel_after_first_line(
    spec: SpawnSpec,
    cancel_with: impl FnOnce(&CancelToken),
) -> ProcessRecord {
    let cancel = CancelToken::new();
    let (lines, mut seen) = mpsc::unbounded_channel();
    let task = tokio::spawn({
        let cancel = cancel.clone();
        async move {
            let mut observer = ResultOnLine { lines };
            run(spec, cancel, Some(&mut observer), |_, _| {}).await
        }
    });
    bounded(seen.recv())
        .await
        .expect("the child printed a line");
    cancel_with(&cancel);
    bounded(task).await.unwrap().unwrap()
}

#[tokio::test]
async fn graceful_cancel_lets_the_child_clean_up() {
    let dir = tempfile::tempdir().unwrap();
    let spec = sh(
        dir.path(),
        "trap 'echo stopping; exit 3' TERM; echo ready; while :; do sleep 0.05; done",
    );
    let record = cancel_after_first_line(spec, CancelToken::cancel_graceful).await;

    assert!(record.cancelled);
    assert!(!record.timed_out);
    assert_eq!(record.exit_code, Some(3));
    assert_eq!(
        read(&dir.path().join("raw-stdout.log")),
        "ready\nstopping\n"
    );
    assert_group_gone(record.pgid);
}

#[tokio::test]
async fn graceful_cancel_kills_after_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let spec = sh(dir.path(), "trap '' TERM; echo ready; sleep 1000");
    let record = cancel_after_first_line(spec, CancelToken::cancel_graceful).await;

    assert!(record.cancelled);
    assert_eq!(record.signal.as_deref(), Some("SIGKILL"));
    assert_group_gone(record.pgid);
}

#[tokio::test]
async fn immediate_cancel_does_not_wait_for_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = sh(
        dir.path(),
        "trap '' TERM; sleep 1000 & echo ready; sleep 1000",
    );
    // Far beyond the test's own bound: only an immediate SIGKILL ends this in time.
    spec.kill_grace = Duration::from_secs(3600);
    let record = cancel_after_first_line(spec, |cancel| {
        cancel.cancel_graceful();
        cancel.cancel_now();
    })
    .await;

    assert!(record.cancelled);
    assert_eq!(record.signal.as_deref(), Some("SIGKILL"));
    assert_group_gone(record.pgid);
}

#[tokio::test]
async fn a_run_cancelled_before_the_spawn_starts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cancel = CancelToken::new();
    cancel.cancel_graceful();
    let mut spawned = false;
    let error = run(sh(dir.path(), "exit 0"), cancel, None, |_, _| {
        spawned = true;
    })
    .await
    .unwrap_err();
    assert!(
        matches!(error, SupervisorError::CancelledBeforeSpawn { .. }),
        "{error}"
    );
    assert!(!spawned);
}

#[tokio::test]
async fn stdout_past_its_cap_stops_the_process_and_keeps_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = sh(dir.path(), "printf 'one\\ntwo\\nthree\\n'; sleep 1000");
    spec.max_stdout_bytes = 8;
    let (lines, mut seen) = mpsc::unbounded_channel();
    let mut observer = ResultOnLine { lines };
    let record = bounded(run(
        spec,
        CancelToken::new(),
        Some(&mut observer),
        |_, _| {},
    ))
    .await
    .unwrap();

    assert_eq!(read(&dir.path().join("raw-stdout.log")), "one\ntwo\n");
    assert_eq!(record.stdout_bytes, 8);
    assert!(record.stdout_truncated && !record.stderr_truncated);
    assert_eq!(record.limit_exceeded, Some(OutputStream::Stdout));
    assert_eq!(record.signal.as_deref(), Some("SIGTERM"));
    // Only lines within the cap reach the observer.
    let mut observed = Vec::new();
    while let Ok(line) = seen.try_recv() {
        observed.push(String::from_utf8(line).unwrap());
    }
    assert_eq!(observed, ["one", "two"]);
    assert_group_gone(record.pgid);
}

#[tokio::test]
async fn stderr_past_its_cap_stops_the_process() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = sh(dir.path(), "printf 0123456789 >&2; sleep 1000");
    spec.max_stderr_bytes = 5;
    let record = run_plain(spec).await;

    assert_eq!(read(&dir.path().join("raw-stderr.log")), "01234");
    assert_eq!(record.stderr_bytes, 5);
    assert!(record.stderr_truncated && !record.stdout_truncated);
    assert_eq!(record.limit_exceeded, Some(OutputStream::Stderr));
}

#[tokio::test]
async fn output_of_exactly_the_cap_is_not_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = sh(dir.path(), "printf abcd");
    spec.max_stdout_bytes = 4;
    let record = run_plain(spec).await;

    assert_eq!(record.exit_code, Some(0));
    assert_eq!(record.stdout_bytes, 4);
    assert!(!record.stdout_truncated);
    assert_eq!(record.limit_exceeded, None);
}

#[tokio::test]
async fn a_process_hanging_after_its_result_is_terminated() {
    let dir = tempfile::tempdir().unwrap();
    let spec = sh(dir.path(), "echo progress; echo 'result {}'; sleep 1000");
    let (lines, _seen) = mpsc::unbounded_channel();
    let mut observer = ResultOnLine { lines };
    let record = bounded(run(
        spec,
        CancelToken::new(),
        Some(&mut observer),
        |_, _| {},
    ))
    .await
    .unwrap();

    assert!(record.hung_after_result);
    assert!(!record.timed_out && !record.cancelled);
    assert_eq!(record.signal.as_deref(), Some("SIGTERM"));
    assert_group_gone(record.pgid);
}

#[tokio::test]
async fn a_process_exiting_after_its_result_is_not_hung() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = sh(dir.path(), "echo 'result {}'");
    spec.kill_grace = Duration::from_secs(3600);
    let (lines, _seen) = mpsc::unbounded_channel();
    let mut observer = ResultOnLine { lines };
    let record = bounded(run(
        spec,
        CancelToken::new(),
        Some(&mut observer),
        |_, _| {},
    ))
    .await
    .unwrap();

    assert!(!record.hung_after_result);
    assert_eq!(record.exit_code, Some(0));
}

#[test]
fn kill_group_if_alive_ends_a_group_left_from_before() {
    use std::os::unix::process::CommandExt;
    let mut orphan = std::process::Command::new("sh")
        .args(["-c", "trap '' TERM; sleep 1000 & sleep 1000"])
        .process_group(0)
        .spawn()
        .unwrap();
    let pgid = orphan.id() as i32;

    assert!(kill_group_if_alive(pgid, Duration::from_millis(100)));
    orphan.wait().unwrap();
    assert_group_gone(pgid);
    assert!(!kill_group_if_alive(pgid, Duration::from_millis(100)));
}

/// After its result an agent may still act (the CLI takes 10–20 ms to exit
/// after it), and so may a member of its group after the leader has exited.
/// `on_ended` may come before the leader is reaped (`inert.rs`), but never
/// before the last change: here the leader writes 50 ms after its result, a
/// background member 5 ms after the leader has gone, and `on_ended` must find
/// both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_ended_after_a_result_waits_for_what_the_group_still_does() {
    let dir = tempfile::tempdir().unwrap();
    let spec = sh(
        dir.path(),
        "echo result; sleep 0.05; echo late > late; (sleep 0.005; echo later > later) & exit 0",
    );
    let (lines, _seen) = mpsc::unbounded_channel();
    let mut observer = ResultOnLine { lines };
    let found = std::sync::Mutex::new(None);
    let record = bounded(run_until_ended(
        spec,
        CancelToken::new(),
        Some(&mut observer),
        |_, _| Ok(()),
        || {
            *found.lock().unwrap() = Some((
                dir.path().join("late").exists(),
                dir.path().join("later").exists(),
            ));
        },
    ))
    .await
    .unwrap();
    assert_eq!(record.exit_code, Some(0));
    assert!(!record.hung_after_result && !record.orphans_killed);
    assert_eq!(*found.lock().unwrap(), Some((true, true)));
    assert_group_gone(record.pgid);
}
