//! Writes behind the caller: a command's spawn (`RunHandle::record_behind`)
//! and its logs' announcements (`RunHandle::log_behind`) are queued in the
//! run's order of writes, and the caller never waits for a batch on its way to
//! the disk. What a chain of check stages relies on (docs/run-directory.md).

use std::sync::mpsc;
use std::time::Duration;

use super::flush_job_tests::new_run;
use crate::events::{RunEvent, StageStarted};
use crate::store::RunHandle;

fn started(stage: &str) -> RunEvent {
    RunEvent::StageStarted(StageStarted {
        stage: stage.into(),
        attempt: 1,
    })
}

fn lines(run: &RunHandle) -> Vec<String> {
    super::logged(run.dir())
}

/// The lines after the run's own first ones.
fn since(run: &RunHandle, before: usize) -> Vec<String> {
    lines(run).split_off(before)
}

#[test]
fn a_spawn_recorded_behind_does_not_wait_for_the_batch_being_written() {
    let (_base, run) = new_run();
    let before = lines(&run).len();
    run.defer_event(started("s")).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap();
    // Another thread writing a batch: it holds the writer until let go.
    let writer = run.written.lock().unwrap();
    let (returned, seen) = mpsc::channel();
    let recorder = {
        let run = run.clone();
        let handle = runtime.handle().clone();
        std::thread::spawn(move || {
            let _in_the_runtime = handle.enter();
            let recorded = run.record_behind(RunEvent::stage_spawned("s", 1, 4242, 4242));
            returned.send(recorded.is_ok()).unwrap();
        })
    };
    // A caller that waited for the writer would still be waiting.
    assert_eq!(
        seen.recv_timeout(Duration::from_secs(30)),
        Ok(true),
        "returned while the batch was being written"
    );
    recorder.join().unwrap();
    assert!(
        since(&run, before).is_empty(),
        "nothing appended while the writer is held"
    );
    drop(writer);
    // The job handed to the runtime's blocking threads writes it, in order,
    // with nobody flushing: a runtime shuts down once its blocking jobs end.
    drop(runtime);
    assert_eq!(since(&run, before), ["stage-started", "process-spawned"]);
}

#[test]
fn a_spawn_recorded_behind_outside_a_runtime_is_written_at_once() {
    let (_base, run) = new_run();
    let before = lines(&run).len();
    run.record_behind(RunEvent::stage_spawned("s", 1, 4242, 4242))
        .unwrap();
    assert_eq!(since(&run, before), ["process-spawned"]);
}

#[test]
fn a_log_behind_is_announced_by_the_next_batch_after_what_was_queued_before() {
    let (_base, run) = new_run();
    let before = lines(&run).len();
    let rel = "stages/s/attempt-001/raw-stdout.log";
    let mut log = run.log_behind(rel).unwrap();
    log.open().unwrap();
    run.defer_event(started("s")).unwrap();
    log.write_chunk(b"checked\n").unwrap();
    let sha = log.complete().unwrap();
    assert!(
        since(&run, before).is_empty(),
        "the announcement waits in the queue"
    );
    run.flush().unwrap();
    assert_eq!(
        since(&run, before),
        ["stage-started".to_string(), format!("record-written {rel}")]
    );
    assert_eq!(log.complete().unwrap(), sha, "completed once");
    assert_eq!(run.changed_records(), [], "the log is what was announced");
}

#[test]
fn a_log_named_as_before_is_still_announced_at_once() {
    let (_base, run) = new_run();
    let before = lines(&run).len();
    let rel = "stages/s/attempt-001/raw-stdout.log";
    let mut log = run.log(rel).unwrap();
    run.defer_event(started("s")).unwrap();
    log.complete().unwrap();
    assert_eq!(since(&run, before), [format!("record-written {rel}")]);
}

/// An event is timed when it is queued, not when its batch reaches the log:
/// a stage's `stage-started` says when it started however long the batches
/// before it took (the live display's durations and `runs report`'s timeline
/// are read from these times). The lines a batch adds for its records are
/// timed when they are written.
#[test]
fn a_queued_event_is_timed_when_it_was_queued() {
    let (_base, run) = new_run();
    let before = lines(&run).len();
    let millis = |at: &str| {
        chrono::DateTime::parse_from_rfc3339(at)
            .unwrap()
            .timestamp_millis()
    };
    run.defer_event(started("s")).unwrap();
    let queued_by = chrono::Utc::now().timestamp_millis();
    std::thread::sleep(Duration::from_millis(50));
    let flushed_from = chrono::Utc::now().timestamp_millis();
    run.defer_json("stages/s/stage.json", &serde_json::json!({ "k": 1 }))
        .unwrap();
    run.flush().unwrap();
    let logged: Vec<serde_json::Value> =
        std::fs::read_to_string(run.dir().join(crate::store::layout::EVENTS))
            .unwrap()
            .lines()
            .skip(before)
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    let kinds: Vec<&str> = logged.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["record-intent", "stage-started", "record-written"]);
    let at = |i: usize| millis(logged[i]["at"].as_str().unwrap());
    assert!(
        at(1) <= queued_by,
        "stage-started at {} after {queued_by}",
        at(1)
    );
    assert!(at(0) >= flushed_from && at(2) >= flushed_from);
}
