//! The scheduler: runs the stages of a plan in dependency order with at most
//! `concurrency` at once (docs/stage-kinds.md).
//!
//! It knows stages only as nodes with needs and a kind; what a stage does is the
//! [`StageExecutor`]'s business. The scheduler owns `stage.json` (every status
//! change goes through it; a reused stage's status does not change, and its record
//! is left as it is), the stage events, the run totals and the run budget.

mod behind;
mod node;
pub mod retry;
mod spawn;
mod state;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::events::{RunEvent, StageExpanded, StageFinished, StageRetrying};
use tokio::sync::RwLock;

use behind::Flushes;
pub use node::{Node, StageReport};
use spawn::{start_attempt, Spawn};
use state::SchedState;

use crate::pipeline::StageKind;
use crate::status::StageStatus;
use crate::store::{InputParts, RunHandle, StoreError, StoreFailure, Totals};

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// Everything a stage needs from the run it belongs to.
#[derive(Clone)]
pub struct StageRun {
    pub node: Node,
    /// 1 for a first attempt; resume continues the numbering.
    pub attempt: u32,
    pub run: Arc<RunHandle>,
}

/// What the scheduler asks of stage kinds.
pub trait StageExecutor: Send + Sync + 'static {
    /// Run one stage (or fan-out instance) to the end and report how it went.
    /// Attempt records are the executor's; `stage.json` is the scheduler's.
    fn execute(self: Arc<Self>, stage: StageRun) -> BoxFuture<StageReport>;

    /// Grow a fan-out placeholder into its instances once everything it needs has
    /// succeeded. The instances' `needs` must already name sibling instances.
    fn expand(&self, placeholder: &Node, run: &RunHandle) -> Result<Vec<Node>, String> {
        let _ = run;
        Err(format!(
            "stage `{}` cannot be expanded by this executor",
            placeholder.id
        ))
    }

    /// `resume --reverify`: run only the verification of an execute stage again, on
    /// the working tree as it is now, spawning no agent. `None` when this executor
    /// cannot (the stage then runs as usual).
    fn reverify(self: Arc<Self>, stage: StageRun) -> Option<BoxFuture<StageReport>> {
        let _ = stage;
        None
    }

    /// Whether the run has been cancelled: no new stage starts once it has.
    fn cancelled(&self) -> bool {
        false
    }

    /// End the running stages as a cancel does (agents' groups get SIGTERM, then
    /// SIGKILL after their grace): the run's records can no longer be written.
    fn stop(&self) {}

    /// Whether attempt `attempt` of `node` reads records of the run before its
    /// process starts (its needs' outputs, the attempt before it). What is queued
    /// — the records that ended the stages it needs, and its own start — is then
    /// written before it starts; otherwise it starts beside that batch
    /// (docs/run-directory.md, "Writing rules").
    fn reads_records_at_start(&self, node: &Node, attempt: u32) -> bool {
        !node.needs.is_empty() || attempt > 1
    }

    /// `node` was settled from its record without running (a resume's reuse): its
    /// record stays byte for byte as it is, holding `parts`.
    fn kept(&self, node: &Node, parts: Option<&InputParts>) {
        let _ = (node, parts);
    }

    /// The input hash this node would run with now, and its parts, computed from
    /// the run folder `run_dir` (resume). `recorded` is the input hash of the
    /// node's record, which the caller holds: a record made with an earlier
    /// input-hash layout is matched in that layout. `None` when the stage kind
    /// cannot tell.
    fn inputs(
        &self,
        node: &Node,
        run_dir: &std::path::Path,
        recorded: Option<&str>,
    ) -> Option<Result<(String, InputParts), String>> {
        let _ = (node, run_dir, recorded);
        None
    }

    /// A recorded result to use instead of running `node`, asked just before it
    /// would start (resume). A reused stage spends nothing and gets no attempt.
    fn reuse(&self, node: &Node, run: &RunHandle) -> Option<StageReport> {
        let _ = (node, run);
        None
    }

    /// For `--dry-run`: what this stage would run (each argv as one line), spawning
    /// nothing.
    fn describe(&self, node: &Node) -> Vec<String> {
        let _ = node;
        Vec::new()
    }
}

/// How a run is scheduled.
#[derive(Debug, Clone)]
pub struct SchedulerOptions {
    pub concurrency: usize,
    pub fail_fast: bool,
    /// No new agent invocation starts once the run has spent at least this much.
    pub budget_usd: Option<f64>,
    /// What earlier processes of this run spent (resume): the budget is the whole
    /// run's, not each process's.
    pub spent_before_usd: f64,
}

/// The end state of every node, and what was spent.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub statuses: BTreeMap<String, StageStatus>,
    pub reports: BTreeMap<String, StageReport>,
    pub totals: Totals,
    pub cancelled: bool,
    /// Nodes as finally scheduled (fan-out placeholders replaced by instances).
    pub nodes: Vec<Node>,
    /// Each fan-out placeholder that grew, with its instance ids.
    pub expansions: Vec<(String, Vec<String>)>,
}

/// Errors that stop the scheduler itself (a stage failing is not one).
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run's records could not be written (its folder vanished, a full disk):
    /// nothing more was started, and the stages running were ended.
    #[error("{}", failure.message)]
    RecordsFailed {
        failure: StoreFailure,
        /// What the run spent before it stopped, the ended stages included.
        spent: Totals,
    },
}

/// Run `nodes` to completion. When the run's records stop being written (see
/// [`StoreFailure`]), no stage starts any more, the running ones are ended as on a
/// cancel, and the error says why. The records that ended the last stages may
/// still be queued on return: the caller's next write (or [`RunHandle::flush`])
/// writes them, in order, with its own. No batch the scheduler wrote behind it
/// (`behind.rs`) is still being written on return.
pub async fn run_plan(
    nodes: Vec<Node>,
    executor: Arc<dyn StageExecutor>,
    run: Arc<RunHandle>,
    opts: SchedulerOptions,
) -> Result<RunOutcome, SchedulerError> {
    let mut st = SchedState::new(nodes);
    let mut running = tokio::task::JoinSet::new();
    let mut flushes = Flushes::default();
    let scheduled = schedule(&mut st, &mut running, &mut flushes, &executor, &run, &opts).await;
    // Failed or not, no batch is left being written when the caller writes.
    let settled = flushes.settle().await;
    let error = match (scheduled, settled) {
        (Ok(cancelled), Ok(())) => return Ok(st.into_outcome(cancelled)),
        (Err(e), _) | (Ok(_), Err(e)) => e,
    };
    executor.stop();
    while let Some(joined) = running.join_next().await {
        // Their records cannot be written; what they spent still counts.
        if let Ok((_, _, report)) = joined {
            add_totals(&mut st, &report);
        }
    }
    let failure = run.failure().unwrap_or_else(|| StoreFailure {
        message: error.to_string(),
        vanished: false,
        in_event_log: false,
    });
    Err(SchedulerError::RecordsFailed {
        failure,
        spent: st.totals,
    })
}

/// Whether what is queued is left for the one stage just started: an agent
/// stage running alone (nothing else holds the working tree's lock, and it is
/// not a retry waiting out its backoff) writes everything queued, its own start
/// included, in the batch it flushes before it spawns anything — with its
/// prompt and request, or beside its snapshot (`stages/src/flow.rs`) — or,
/// where it ends first, the scheduler's next turn does. One wait for the disk
/// less on its way to the agent. Anything else is written now, behind the
/// scheduler (`behind.rs`): a check stage's start beside its command, the
/// records that ended stages while others go on.
fn agent_flushes_first(started: &[StageKind], running: usize) -> bool {
    running == 1 && matches!(started, [kind] if kind.is_agent())
}

/// How often the run folder is checked while nothing is written (agents at work).
const WATCH_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The scheduling loop; `Ok(cancelled)` once every node has settled.
async fn schedule(
    st: &mut SchedState,
    running: &mut spawn::Attempts,
    flushes: &mut Flushes,
    executor: &Arc<dyn StageExecutor>,
    run: &Arc<RunHandle>,
    opts: &SchedulerOptions,
) -> Result<bool, StoreError> {
    // Execute stages change the working tree: they take the tree lock for writing,
    // generate stages for reading (their before/after snapshots must not interleave
    // with a writer), check stages not at all.
    let tree = Arc::new(RwLock::new(()));
    let concurrency = opts.concurrency.max(1);
    let mut halted = false;

    loop {
        // A write a stage made (and reported only in its outcome) may have failed.
        run.records_ok()?;
        if !halted && executor.cancelled() {
            halted = true;
        }
        if halted || (opts.fail_fast && st.any_failed()) {
            for id in st.pending_ids() {
                let status = if halted {
                    StageStatus::Cancelled
                } else {
                    StageStatus::Skipped
                };
                let reason = if halted {
                    "the run was cancelled before this stage started".to_string()
                } else {
                    "not started: --fail-fast after a failure".to_string()
                };
                finish_unstarted(st, run, &id, status, reason)?;
            }
        }
        // A blocked stage blocks its own dependents in turn: down a chain, until
        // nothing more is.
        loop {
            let blocked = st.blocked();
            if blocked.is_empty() {
                break;
            }
            for (id, blocker, status) in blocked {
                let reason = st.block(&id, &blocker, status);
                finish_unstarted(st, run, &id, StageStatus::Blocked, reason)?;
            }
        }
        // The kinds of the stages started from the ready list in this turn.
        let mut started: Vec<StageKind> = Vec::new();
        while running.len() < concurrency {
            let Some(id) = st.next_ready() else { break };
            let node = st.node(&id).clone();
            if node.placeholder {
                // The instances come from upstream outputs: what is queued is
                // written before the executor reads them.
                run.flush()?;
                match executor.expand(&node, run) {
                    Ok(instances) => {
                        let ids: Vec<String> = instances.iter().map(|n| n.id.clone()).collect();
                        run.event(RunEvent::StageExpanded(StageExpanded {
                            stage: node.id.clone(),
                            instances: ids,
                        }))?;
                        st.expand(&id, instances);
                    }
                    Err(reason) => {
                        st.set(&id, StageStatus::Failed);
                        let report = StageReport::failed(StageStatus::Failed, reason);
                        write_stage(run, &node, StageStatus::Failed, Some(&report), 0)?;
                        run.defer_event(RunEvent::StageFinished(StageFinished {
                            stage: id.clone(),
                            attempt: None,
                            status: StageStatus::Failed,
                            outcome: report.reason.clone(),
                            evidence_status: None,
                            recovered: false,
                        }))?;
                        st.record(&id, report);
                    }
                }
                continue;
            }
            if let Some(report) = executor.reuse(&node, run) {
                // Its cost was spent by an earlier process: not counted again.
                // Its `stage.json` already says what is true (succeeded, same
                // attempt, same input hash and output): rewriting it would cost
                // a durable write per stage and add nothing. The reuse itself is
                // recorded once, by the executor's `resume-decision` event and
                // the resume entry of `run.json` (docs/resume.md).
                st.set(&id, report.status);
                st.record(&id, report);
                continue;
            }
            if node.kind.is_agent() {
                if let Some(limit) = opts.budget_usd {
                    let spent = opts.spent_before_usd + st.totals.cost_usd;
                    if spent >= limit {
                        let reason = format!(
                            "not started: the run budget of ${limit:.2} is spent (${spent:.2} over the run and its resumes; raise it with --run-budget-usd)"
                        );
                        finish_unstarted(st, run, &id, StageStatus::BudgetExceeded, reason)?;
                        continue;
                    }
                }
            }
            let attempt = st.next_attempt(&id);
            start_attempt(
                st,
                run,
                &node,
                attempt,
                Spawn {
                    running,
                    executor,
                    tree: &tree,
                    delay: None,
                },
            )?;
            started.push(node.kind);
        }
        if running.is_empty() {
            if st.all_done() {
                break;
            }
            // Nothing running and nothing ready: only possible if the graph had a
            // dependency on a node that does not exist; validation prevents that.
            for id in st.pending_ids() {
                let reason = "never became ready (missing dependency)".to_string();
                finish_unstarted(st, run, &id, StageStatus::Skipped, reason)?;
            }
            break;
        }
        if !agent_flushes_first(&started, running.len()) {
            flushes.start(run);
        }
        let joined = loop {
            tokio::select! {
                joined = running.join_next() => break joined.expect("a task is running"),
                ended = flushes.next_ended(), if flushes.any_out() => ended?,
                _ = tokio::time::sleep(WATCH_EVERY) => {
                    if run.watch().is_some() {
                        run.records_ok()?;
                    }
                }
            }
        };
        let (id, attempt, mut report) = match joined {
            Ok(v) => v,
            Err(e) => {
                // A panicking executor is a bug; record it against no stage and go on
                // failing loudly rather than hanging.
                panic!("stage task failed: {e}");
            }
        };
        let node = st.node(&id).clone();
        // Over the run, from the attempts' records: a resume does not start the
        // count of `runner.retries` again.
        let transient_before = retry::transient_attempts(run, &id, attempt - 1);
        // Only a plain failure is retried: a safety violation or a gate found after
        // a transient-looking invocation settles the stage.
        if let Some(hint) = report
            .retry
            .take()
            .filter(|_| report.status == StageStatus::Failed)
        {
            let count = transient_before + 1;
            let spent = opts.spent_before_usd + st.totals.cost_usd + report.cost_usd;
            let budget_spent = opts.budget_usd.is_some_and(|limit| spent >= limit);
            if count <= hint.retries && !budget_spent && !executor.cancelled() {
                add_totals(st, &report);
                let delay = retry::delay(count, &hint);
                run.event(RunEvent::StageRetrying(StageRetrying {
                    stage: id.clone(),
                    attempt,
                    outcome: report.reason.clone(),
                    retry: count,
                    delay_ms: delay.as_millis() as u64,
                }))?;
                st.set_prior_attempts(&id, attempt);
                start_attempt(
                    st,
                    run,
                    &node,
                    attempt + 1,
                    Spawn {
                        running,
                        executor,
                        tree: &tree,
                        delay: Some(delay),
                    },
                )?;
                continue;
            }
            report.transient_attempts = count;
            let why = if budget_spent {
                "not retried: the run budget is spent".to_string()
            } else if hint.retries == 0 {
                "not retried: runner.retries is 0".to_string()
            } else {
                format!(
                    "{count} transient failure(s), runner.retries is {}",
                    hint.retries
                )
            };
            report.reason = Some(match report.reason.take() {
                Some(o) => format!("{o} ({why})"),
                None => why,
            });
        } else if transient_before > 0 {
            report.transient_attempts = transient_before;
            let note = format!("after {transient_before} transient failure(s), retried");
            report.reason = Some(match report.reason.take() {
                Some(o) => format!("{o} ({note})"),
                None => note,
            });
        }
        st.totals.cost_usd += report.cost_usd;
        st.totals.tokens += report.tokens;
        st.totals.turns += report.turns;
        st.totals.invocations += report.invocations;
        st.set(&id, report.status);
        write_stage(run, &node, report.status, Some(&report), attempt)?;
        run.defer_event(RunEvent::StageFinished(StageFinished {
            stage: id.clone(),
            attempt: Some(attempt),
            status: report.status,
            outcome: report.reason.clone(),
            evidence_status: report.evidence_status,
            recovered: false,
        }))?;
        st.record(&id, report);
    }

    // The last records stay queued: the run's settle writes them in one batch
    // with `plan.json`, `run.json` and `run-finished`.
    Ok(halted || executor.cancelled())
}

fn add_totals(st: &mut SchedState, report: &StageReport) {
    st.totals.cost_usd += report.cost_usd;
    st.totals.tokens += report.tokens;
    st.totals.turns += report.turns;
    st.totals.invocations += report.invocations;
}

fn finish_unstarted(
    st: &mut SchedState,
    run: &RunHandle,
    id: &str,
    status: StageStatus,
    reason: String,
) -> Result<(), StoreError> {
    let node = st.node(id).clone();
    let report = StageReport::failed(status, reason);
    st.set(id, status);
    write_stage(run, &node, status, Some(&report), 0)?;
    run.defer_event(RunEvent::StageFinished(StageFinished {
        stage: id.to_string(),
        attempt: None,
        status,
        outcome: report.reason.clone(),
        evidence_status: None,
        recovered: false,
    }))?;
    st.record(id, report);
    Ok(())
}

fn write_stage(
    run: &RunHandle,
    node: &Node,
    status: StageStatus,
    report: Option<&StageReport>,
    attempt: u32,
) -> Result<(), StoreError> {
    let rel = crate::store::layout::stage_record_rel(&node.id);
    let record = node::stage_record(node, status, report, attempt);
    // Queued: written with the other records of this turn of the scheduler, in
    // one batch, before anything starts or is waited for (`store/batch.rs`);
    // made into bytes by that batch's writer, not on the way to the next stage.
    run.defer_json_behind(&rel, record)?;
    Ok(())
}
