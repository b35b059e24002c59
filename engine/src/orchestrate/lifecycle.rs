//! A run folder from its start to its settled `run.json`. A fresh run starts in
//! [`begin_run`], a resumed one in `resume::OpenedRun::begin`; both become an
//! [`ActiveRun`], which schedules the nodes and settles the records in one place,
//! so that run and resume never disagree on what a finished run records.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde_json::json;

use super::{
    count_statuses, expansions, final_nodes, lock_working_tree, status_of, OrchestrateError,
    PipelineSource,
};
use crate::events::{RunEvent, RunFinished, RunStarted};
use crate::pipeline::PipelineFile;
use crate::resume::executor::ResumeExecutor;
use crate::resume::{Action, Forced, Orphan, ReuseDecision};
use crate::scheduler::{self, Node, RunOutcome, SchedulerOptions, StageExecutor};
use crate::status::RunStatus;
use crate::store::{
    layout, now_rfc3339, PipelineRef, PlanRecord, RunHandle, RunOptions, RunRecord, RunStore,
    RunnerInfo, StageRecord, Totals, TreeLock, SCHEMA_VERSION,
};

/// How a run (or a resume of it) ended.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub run_id: String,
    pub run_dir: PathBuf,
    pub status: RunStatus,
    pub exit_code: i32,
    pub outcome: RunOutcome,
    /// What a resume decided and recovered; `None` for a fresh run.
    pub resume: Option<ResumeReport>,
}

/// What a resume did besides scheduling: its decisions and crash recovery.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumeReport {
    pub decisions: Vec<ReuseDecision>,
    pub orphans: Vec<Orphan>,
    pub interrupted: Vec<String>,
    /// Where a torn last event line was kept.
    pub torn_tail: Option<String>,
}

/// What a resume hands to scheduling: the recorded stages the reuse rule reads.
pub(crate) struct Resumed {
    pub root: PathBuf,
    pub stages: BTreeMap<String, StageRecord>,
    pub forced: Forced,
    pub reverify: bool,
    /// Decisions taken before scheduling (stages removed from the pipeline).
    pub report: ResumeReport,
}

/// A run folder open for scheduling, with the working-tree lock held until it
/// settles.
pub struct ActiveRun {
    pub(crate) run: Arc<RunHandle>,
    pub(crate) record: RunRecord,
    pub(crate) plan: PlanRecord,
    pub(crate) started: Instant,
    pub(crate) nodes: Vec<Node>,
    pub(crate) file: std::sync::Arc<PipelineFile>,
    pub(crate) tree_lock: Option<TreeLock>,
    pub(crate) resumed: Option<Resumed>,
}

/// Create a run folder for `nodes` and write its first records. The
/// working-tree lock is taken before the folder exists: a refused run leaves
/// nothing behind.
pub fn begin_run(
    root: &Path,
    source: &PipelineSource,
    options: RunOptions,
    runner: Option<RunnerInfo>,
    warnings: Vec<String>,
    nodes: Vec<Node>,
) -> Result<ActiveRun, OrchestrateError> {
    let mut tree_lock = lock_working_tree(root, "run", None, &nodes)?;
    let store = RunStore::new(root);
    // The one redactor of this run: the store applies it to every byte it writes.
    let run = Arc::new(store.create(crate::redact::Redactor::for_pipeline(&source.file))?);
    if let Some(lock) = &mut tree_lock {
        lock.set_run(run.id())?;
    }
    let started = Instant::now();
    // The run's first records are queued and written together, in one batch
    // (`store/batch.rs`).
    run.defer_event(RunEvent::RunStarted(RunStarted {
        run_id: run.id().to_string(),
        specbridge_version: Some(env!("CARGO_PKG_VERSION").to_string()),
    }))?;
    // As loaded, except secrets (a token in `commandArgs`, say), which the store
    // redacts: run.json keeps the sha256 of the original bytes.
    run.defer_bytes(layout::PIPELINE, &source.bytes)?;
    let record = RunRecord {
        schema_version: SCHEMA_VERSION,
        run_id: run.id().to_string(),
        status: RunStatus::Running,
        pipeline: PipelineRef {
            name: source.file.name.clone(),
            path: source.path_in(root),
            sha256: crate::store::sha256_hex(&source.bytes),
        },
        specbridge_version: env!("CARGO_PKG_VERSION").to_string(),
        root: root.display().to_string(),
        started_at: now_rfc3339(),
        ended_at: None,
        duration_ms: None,
        exit_code: None,
        totals: Totals::default(),
        stage_counts: BTreeMap::new(),
        options,
        runner,
        warnings,
        resumes: Vec::new(),
    };
    run.defer_json(layout::RUN, &record)?;
    let plan = PlanRecord {
        schema_version: SCHEMA_VERSION,
        nodes: nodes.iter().map(|n| n.to_plan_node(None)).collect(),
        expansions: Vec::new(),
    };
    // Queued: written with the first stage's start (or the run's first direct
    // write), before anything is spawned.
    run.defer_json(layout::PLAN, &plan)?;
    Ok(ActiveRun {
        run,
        record,
        plan,
        started,
        nodes,
        file: source.file.clone(),
        tree_lock,
        resumed: None,
    })
}

impl ActiveRun {
    pub fn id(&self) -> &str {
        self.run.id()
    }

    pub fn dir(&self) -> &Path {
        self.run.dir()
    }

    /// Hand every event appended from now on (and agents' live progress) to
    /// `subscriber`, in the order of the log.
    pub fn subscribe(&self, subscriber: crate::events::Subscriber) {
        self.run.subscribe(subscriber);
    }

    /// Schedule the nodes with `executor` (behind the reuse rule when resuming)
    /// and settle the records. Who wants to follow it subscribes to the run's
    /// events ([`ActiveRun::subscribe`]) before.
    pub async fn run(
        mut self,
        executor: Arc<dyn StageExecutor>,
    ) -> Result<RunResult, OrchestrateError> {
        let resume_executor = self.resumed.as_mut().map(|r| {
            ResumeExecutor::new(
                executor.clone(),
                r.root.clone(),
                std::mem::take(&mut r.stages),
                std::mem::take(&mut r.forced),
                r.reverify,
            )
        });
        let scheduled: Arc<dyn StageExecutor> = match &resume_executor {
            Some(r) => r.clone(),
            None => executor,
        };
        let options = &self.record.options;
        let opts = SchedulerOptions {
            concurrency: options.concurrency.max(1) as usize,
            fail_fast: options.fail_fast,
            budget_usd: options.budget_usd,
            // The budget holds over the run and its resumes.
            spent_before_usd: self.record.totals.cost_usd,
        };
        let nodes = std::mem::take(&mut self.nodes);
        let scheduled = scheduler::run_plan(nodes, scheduled, self.run.clone(), opts).await;
        if let (Some(resumed), Some(r)) = (self.resumed.as_mut(), resume_executor) {
            resumed.report.decisions.extend(r.decisions());
        }
        match scheduled {
            Ok(outcome) => self.settle(outcome),
            Err(e) => {
                let (failure, spent) = crate::run_failure::records_failed(e)?;
                let mut record = self.record.clone();
                Err(self.records_failed(&mut record, failure, spent))
            }
        }
    }

    /// The one path of a run or resume whose records stopped being written
    /// (`crate::run_failure`): `record` (as it stood before this settle) is
    /// settled as failed where it still can be.
    fn records_failed(
        &mut self,
        record: &mut RunRecord,
        failure: crate::store::StoreFailure,
        spent: Totals,
    ) -> OrchestrateError {
        let failed =
            crate::run_failure::settle(&self.run, record, self.started.elapsed(), spent, failure);
        drop(self.tree_lock.take());
        OrchestrateError::RecordsFailed(failed)
    }

    /// The one place a finished run's records are written: `plan.json` as it
    /// finally stood, `run.json` with the status, totals (over the run and its
    /// resumes) and exit code, and the `run-finished` event.
    fn settle(mut self, outcome: RunOutcome) -> Result<RunResult, OrchestrateError> {
        let run = self.run.clone();
        self.plan.nodes = final_nodes(&outcome);
        self.plan
            .expansions
            .extend(expansions(&outcome, &self.file));
        let unsettled = self.record.clone();

        let (status, exit_code) = status_of(&outcome);
        let report = self.resumed.take().map(|r| r.report);
        let retired = report.as_ref().map_or(0, |r| {
            r.decisions
                .iter()
                .filter(|d| d.action == Action::Retire)
                .count() as u32
        });
        let mut counts = count_statuses(outcome.statuses.values().copied());
        if retired > 0 {
            *counts.entry("retired".into()).or_insert(0) += retired;
        }
        let record = &mut self.record;
        record.stage_counts = counts;
        let entry = record.settle(status, exit_code, self.started.elapsed(), &outcome.totals);
        if let (Some(report), Some(entry)) = (&report, entry) {
            entry.insert("decisions".into(), json!(report.decisions));
        }
        let finished = RunEvent::RunFinished(RunFinished {
            status,
            exit_code,
            totals: record.totals.clone(),
            error: None,
        });
        // `plan.json`, `run.json` and `run-finished`, in one batch.
        let written = run
            .defer_json(layout::PLAN, &self.plan)
            .and_then(|_| run.defer_json(layout::RUN, &*record))
            .and_then(|_| run.event(finished));
        if let Err(e) = written {
            let failure = crate::run_failure::failure_of(&e);
            let mut record = unsettled;
            return Err(self.records_failed(&mut record, failure, outcome.totals.clone()));
        }
        drop(self.tree_lock.take());
        Ok(RunResult {
            run_id: run.id().to_string(),
            run_dir: run.dir().to_path_buf(),
            status,
            exit_code,
            outcome,
            resume: report,
        })
    }
}
