//! Starting one attempt of a node: `stage.json` and `stage-started` first, then the
//! executor in its own task (a retry waits out its backoff there, so that other
//! stages go on meanwhile).

use std::sync::Arc;

use crate::events::{RunEvent, StageStarted};
use tokio::sync::RwLock;

use super::state::SchedState;
use super::{write_stage, Node, StageExecutor, StageReport, StageRun};
use crate::pipeline::StageKind;
use crate::status::StageStatus;
use crate::store::{writes_running_record, RunHandle, StoreError};

pub(super) type Attempts = tokio::task::JoinSet<(String, u32, StageReport)>;

pub(super) struct Spawn<'a> {
    pub running: &'a mut Attempts,
    pub executor: &'a Arc<dyn StageExecutor>,
    pub tree: &'a Arc<RwLock<()>>,
    /// A retry waits this long (inside its task, so other stages go on) first.
    pub delay: Option<std::time::Duration>,
}

/// Marks `node` running as `attempt` and spawns it.
pub(super) fn start_attempt(
    st: &mut SchedState,
    run: &Arc<RunHandle>,
    node: &Node,
    attempt: u32,
    spawn: Spawn<'_>,
) -> Result<(), StoreError> {
    let id = node.id.clone();
    st.set(&id, StageStatus::Running);
    let started = StageReport {
        status: StageStatus::Running,
        started_at: Some(crate::store::now_rfc3339()),
        ..Default::default()
    };
    // The `running` record, where the attempt has one (a check stage's first
    // does not: `store/started.rs`), is its first write, queued after everything
    // queued before it (the records that ended the stages this one needs). A
    // stage that reads records of the run (its needs' outputs, its previous
    // attempt's result) finds them on disk: the batch is written before it
    // starts. One that reads none has its start written with its own first
    // records, in the batch its executor flushes before it spawns anything, or
    // (a check stage whose needs ended in this process) beside its command, by
    // the batch the scheduler's loop writes behind it (docs/run-directory.md,
    // "Writing rules"): one wait for the disk less, or both off its path.
    if writes_running_record(node.kind, attempt, node.instance_of.is_some()) {
        write_stage(run, node, StageStatus::Running, Some(&started), attempt)?;
    }
    let started_at = started.started_at.clone();
    run.defer_event(RunEvent::StageStarted(StageStarted {
        stage: id.clone(),
        attempt,
    }))?;
    if spawn.executor.reads_records_at_start(node, attempt) {
        run.flush()?;
    }
    let exec = spawn.executor.clone();
    let tree = spawn.tree.clone();
    let delay = spawn.delay;
    let stage = StageRun {
        node: node.clone(),
        attempt,
        run: run.clone(),
    };
    let run_for_redaction = run.clone();
    spawn.running.spawn(async move {
        if let Some(delay) = delay {
            if !wait_unless_cancelled(exec.as_ref(), delay).await {
                let report = StageReport::failed(
                    StageStatus::Cancelled,
                    "the run was cancelled while the stage waited to retry".into(),
                );
                return (id, attempt, report);
            }
        }
        // The stage's duration is the scheduler's to measure: it covers
        // everything the stage did (agent, snapshots, verification), not
        // only its process.
        let clock = std::time::Instant::now();
        let report = match stage.node.kind {
            StageKind::Execute => {
                let _w = tree.write().await;
                exec.clone().execute(stage).await
            }
            StageKind::Generate => {
                let _r = tree.read().await;
                exec.clone().execute(stage).await
            }
            StageKind::Check => exec.clone().execute(stage).await,
        };
        let mut report = report;
        // The outcome is shown on the terminal as well as recorded: the
        // run's redactor applies to both (records are redacted again by
        // the store, which changes nothing).
        report.reason = report
            .reason
            .map(|o| run_for_redaction.redactor().redact_str(&o));
        if report.started_at.is_none() {
            report.started_at = started_at;
        }
        if !report.reused {
            report.duration_ms = Some(clock.elapsed().as_millis() as u64);
            report.ended_at = Some(crate::store::now_rfc3339());
        }
        (id, attempt, report)
    });
    Ok(())
}

/// Sleeps `delay`, waking early when the run is cancelled; false if it was.
async fn wait_unless_cancelled(exec: &dyn StageExecutor, delay: std::time::Duration) -> bool {
    let step = std::time::Duration::from_millis(50);
    let deadline = tokio::time::Instant::now() + delay;
    loop {
        if exec.cancelled() {
            return false;
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return true;
        }
        tokio::time::sleep(step.min(deadline - now)).await;
    }
}
