//! `RunHandle::flush_job`: the scheduler's batches written behind it. What it
//! relies on: a write queued before it asks for a job is written once every job
//! it was handed has run, whether its own request got a job or found one out.

use std::sync::Arc;

use proptest::prelude::*;

use crate::redact::Redactor;
use crate::store::{RunHandle, RunStore, StoreError};

pub(super) fn new_run() -> (tempfile::TempDir, Arc<RunHandle>) {
    let base = tempfile::tempdir().unwrap();
    let run = RunStore::new(base.path())
        .create(Redactor::default())
        .unwrap();
    (base, Arc::new(run))
}

/// A new run with `a.json` queued and not yet written.
fn run_with_a_queued() -> (tempfile::TempDir, Arc<RunHandle>) {
    let (base, run) = new_run();
    run.defer_bytes("a.json", b"1\n").unwrap();
    (base, run)
}

fn on_disk(run: &RunHandle, rel: &str) -> bool {
    run.dir().join(rel).exists()
}

#[test]
fn a_job_out_takes_what_is_queued_when_it_runs_and_no_second_is_handed_out_meanwhile() {
    let (_base, run) = run_with_a_queued();
    let job = run.flush_job().expect("none out yet");
    run.defer_bytes("b.json", b"2\n").unwrap();
    assert!(
        run.flush_job().is_none(),
        "the job out has not taken the queue"
    );
    assert!(!on_disk(&run, "a.json"), "queued, not written");
    job().unwrap();
    assert!(on_disk(&run, "a.json") && on_disk(&run, "b.json"));
    run.defer_bytes("c.json", b"3\n").unwrap();
    let again = run.flush_job().expect("the last job took the queue");
    again().unwrap();
    assert!(on_disk(&run, "c.json"));
}

#[test]
fn a_job_waiting_behind_a_batch_takes_what_is_queued_while_it_waits() {
    let (_base, run) = run_with_a_queued();
    let job = run.flush_job().unwrap();
    // Another thread writing a batch: the job waits for the writer.
    let writer = run.written.lock().unwrap();
    let waiting = std::thread::spawn(job);
    run.defer_bytes("b.json", b"2\n").unwrap();
    assert!(run.flush_job().is_none(), "the waiting job will take it");
    drop(writer);
    waiting.join().unwrap().unwrap();
    assert!(on_disk(&run, "a.json") && on_disk(&run, "b.json"));
}

#[test]
fn a_write_queued_while_a_jobs_batch_is_written_gets_a_job_of_its_own() {
    let (_base, run) = run_with_a_queued();
    let job = run.flush_job().unwrap();
    // The batch stops at its first append, once it has taken the queue.
    let log = run.events.lock();
    let writing = std::thread::spawn(job);
    while !run.queue.lock().unwrap().items.is_empty() {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    run.defer_bytes("b.json", b"2\n").unwrap();
    let second = run
        .flush_job()
        .expect("the job out took the queue before b was queued");
    drop(log);
    writing.join().unwrap().unwrap();
    assert!(
        !on_disk(&run, "b.json"),
        "not in the batch that was written"
    );
    second().unwrap();
    assert!(on_disk(&run, "b.json"));
}

#[test]
fn a_job_whose_batch_fails_says_why_and_stops_the_records() {
    let (_base, run) = run_with_a_queued();
    std::fs::remove_dir_all(run.dir()).unwrap();
    let err = run.flush_job().unwrap()().unwrap_err();
    assert!(matches!(err, StoreError::FolderVanished { .. }), "{err}");
    assert!(run.failure().is_some_and(|f| f.vanished));
    let later = run.defer_bytes("b.json", b"2\n").unwrap_err();
    assert!(matches!(later, StoreError::Stopped { .. }), "{later}");
}

#[derive(Debug, Clone, Copy)]
enum Step {
    /// Queue a record.
    Queue,
    /// Ask for a job, as the scheduler does after a turn.
    Ask,
    /// Run the oldest job handed out and not yet run.
    RunOldest,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![Just(Step::Queue), Just(Step::Ask), Just(Step::RunOldest)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Against a model of what the scheduler needs: whenever no job handed
    /// out is left to run, every record queued before the last request is on
    /// disk, in the order queued.
    #[test]
    fn no_record_queued_before_a_request_is_left_once_the_jobs_out_have_run(
        steps in prop::collection::vec(step(), 1..40),
    ) {
        let (_base, run) = new_run();
        let mut queued = 0usize;
        let mut asked_through = 0usize;
        let mut out = std::collections::VecDeque::new();
        for s in steps.iter().copied().chain([Step::Ask, Step::RunOldest, Step::RunOldest]) {
            match s {
                Step::Queue => {
                    run.defer_bytes(&format!("r{queued}.json"), b"{}\n").unwrap();
                    queued += 1;
                }
                Step::Ask => {
                    asked_through = queued;
                    if let Some(job) = run.flush_job() {
                        out.push_back(job);
                    }
                }
                Step::RunOldest => {
                    if let Some(job) = out.pop_front() {
                        job().unwrap();
                    }
                }
            }
            if out.is_empty() {
                for i in 0..asked_through {
                    prop_assert!(on_disk(&run, &format!("r{i}.json")), "r{i} after {steps:?}");
                }
            }
        }
        let log = std::fs::read_to_string(run.dir().join("events.jsonl")).unwrap();
        let written: Vec<usize> = log
            .lines()
            .filter(|l| l.contains("\"record-written\""))
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                let path = v["path"].as_str().unwrap();
                path.trim_start_matches('r').trim_end_matches(".json").parse().unwrap()
            })
            .collect();
        prop_assert!(written.windows(2).all(|w| w[0] < w[1]), "in order: {written:?}");
    }
}
