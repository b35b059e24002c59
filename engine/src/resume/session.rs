//! Opening a run for resume, and beginning the resume in its own folder: the
//! resume-only steps of the run lifecycle (docs/architecture.md).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::audit::events::EventFacts;
use crate::audit::files::RunFiles;
use crate::audit::{audit_run_with, AuditError, Finding, FindingCode};
use crate::events::{CrashRepaired, RunEvent, RunResumed, TornTailSetAside};
use crate::orchestrate::lifecycle::{ResumeReport, Resumed};
use crate::orchestrate::{plan_nodes, ActiveRun, OrchestrateError, PipelineSource};
use crate::pipeline::load::CheckedBefore;
use crate::resume::executor::retire;
use crate::resume::force::Forced;
use crate::resume::recover::{
    count_unrecorded_attempts, end_orphans, mark_interrupted, repair_unlogged, AttemptFolders,
    Spawns,
};
use crate::resume::reuse::Reason;
use crate::scheduler::{self, Node};
use crate::status::{RunStatus, StageStatus};
use crate::store::events::{set_aside_torn_tail, EventError};
use crate::store::{
    layout, now_rfc3339, sha256_hex, PlanRecord, RunLock, RunOptions, RunReader, RunRecord,
    RunStore, RunnerInfo, StageRecord, StoreError,
};

#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("failed to check run {run} before resuming it")]
    Audit {
        run: String,
        #[source]
        source: AuditError,
    },
    #[error("refusing to resume run {run}: its records fail the integrity checks ({} finding{}); `specbridge runs audit {run}` shows them", findings.len(), if findings.len() == 1 { "" } else { "s" })]
    Tampered { run: String, findings: Vec<Finding> },
    #[error("failed to resume run {run}: {message}")]
    Unreadable { run: String, message: String },
    #[error(transparent)]
    Events(#[from] EventError),
    #[error(transparent)]
    Orchestrate(#[from] OrchestrateError),
    #[error(transparent)]
    Scheduler(#[from] scheduler::SchedulerError),
}

/// Whether a finding means the records themselves cannot be trusted (tampering,
/// or damage beyond what a crash leaves). Findings about what happened in the run
/// — a secret in a log, a generate stage that changed the tree — are audit's to
/// report and do not stop a resume. Neither do the traces of a crash between a
/// write and its event: a record confirmed only by its `record-intent`
/// (`write-unconfirmed`), and a `run.json` or `stage.json` whose finish was
/// written but not logged (`run-json-mismatch`, `stage-json-mismatch` — their
/// bytes are what specbridge announced, or `file-hash-mismatch` would refuse
/// them). [`repair_unlogged`] and the resume's own records make those whole.
pub(crate) fn is_integrity(code: FindingCode) -> bool {
    matches!(
        code,
        FindingCode::ChainBroken
            | FindingCode::SeqGap
            | FindingCode::AnnouncedPathUnsafe
            | FindingCode::AnnouncedFileMissing
            | FindingCode::FileHashMismatch
            | FindingCode::UnannouncedRecord
            | FindingCode::FileUnreadable
            | FindingCode::RecordUnparseable
            | FindingCode::EventUnknown
            | FindingCode::OutputInvalid
            | FindingCode::ForbiddenFlag
    )
}

/// A run, locked and checked, with its records read.
#[derive(Debug)]
pub struct OpenedRun {
    pub id: String,
    pub dir: PathBuf,
    lock: RunLock,
    pub record: RunRecord,
    pub stages: BTreeMap<String, StageRecord>,
    pub plan: PlanRecord,
    /// Bytes of an incomplete last event line, which the resume sets aside.
    pub torn_tail: Option<usize>,
    /// Audit findings that do not stop the resume (torn tails, …).
    pub findings: Vec<Finding>,
    /// What the audit's one read of the log found: announcements and stage
    /// events (crash recovery), the chain's head, and the agents spawned.
    log: EventFacts,
    spawns: Spawns,
    /// The audit's walk of the run folder (without the records' bytes), for
    /// crash recovery's questions about attempt folders: the lock held since
    /// before the walk means nothing else has changed them.
    files: RunFiles,
}

/// Take the run's lock (a second process gets "run … is in use"), audit it, and
/// read its records. Nothing is written.
pub fn open_for_resume(root: &Path, selector: &str) -> Result<OpenedRun, ResumeError> {
    let store = RunStore::new(root);
    let (id, dir, lock) = store.lock(selector)?;
    let mut spawns = Spawns::default();
    let (report, log, mut files) =
        audit_run_with(&dir, |event| spawns.visit(event)).map_err(|source| ResumeError::Audit {
            run: id.clone(),
            source,
        })?;
    let (blocking, findings): (Vec<Finding>, Vec<Finding>) = report
        .findings
        .into_iter()
        .partition(|f| is_integrity(f.code));
    if !blocking.is_empty() {
        return Err(ResumeError::Tampered {
            run: id,
            findings: blocking,
        });
    }
    let unreadable = |e: StoreError| ResumeError::Unreadable {
        run: id.clone(),
        message: crate::error_chain(&e),
    };
    let reader = RunReader::at(&dir);
    let record: RunRecord = reader.run().map_err(unreadable)?;
    let plan: PlanRecord = reader.plan().map_err(unreadable)?.unwrap_or_default();
    let stages = stage_records_from(&dir, &files, &plan).map_err(unreadable)?;
    files.forget_bytes();
    Ok(OpenedRun {
        id,
        dir,
        lock,
        record,
        stages,
        plan,
        torn_tail: log.torn_tail,
        findings,
        log,
        spawns,
        files,
    })
}

/// Every `stages/*/stage.json`, by stage id, from the bytes the audit hashed; a
/// record it did not keep, or that does not parse, is read again by the store's
/// reader (whose error names the file). A stage cut off in an attempt that starts
/// without a record (`store/started.rs`) is read back `running`, as if it had
/// written one, so that it is finished as `interrupted` like any other.
fn stage_records_from(
    dir: &Path,
    files: &RunFiles,
    plan: &PlanRecord,
) -> Result<BTreeMap<String, StageRecord>, StoreError> {
    let reader = RunReader::at(dir);
    let mut out = BTreeMap::new();
    for id in reader.stage_ids()? {
        let kept = files
            .kept(&layout::stage_record_rel(&id))
            .and_then(|b| serde_json::from_slice::<StageRecord>(b).ok());
        let record = match kept {
            Some(rec) => Some(rec),
            None => reader.stage_or_started(&id, plan)?,
        };
        if let Some(rec) = record {
            out.insert(rec.stage_id.clone(), rec);
        }
    }
    Ok(out)
}

/// What a resume starts with besides the opened run.
pub struct ResumeStart {
    pub root: PathBuf,
    /// The pipeline file as read again now.
    pub source: PipelineSource,
    /// The recorded options with this resume's overrides applied.
    pub options: RunOptions,
    pub runner: Option<RunnerInfo>,
    pub warnings: Vec<String>,
    /// `--rerun` patterns: stages run again on purpose, with their dependents.
    pub rerun: Vec<String>,
    /// `--reverify`: unverified execute stages first get a verification-only attempt.
    pub reverify: bool,
}

impl OpenedRun {
    /// The pipeline bytes this run started with, when this version checked them:
    /// read again unchanged, they need no second structural check. Not once a
    /// resume took other bytes (`previousPipelineSha256`): the version that
    /// checked those is not recorded.
    pub fn pipeline_checked(&self) -> Option<CheckedBefore> {
        let edited = self.record.resumes.iter().any(|r| {
            r.get("previousPipelineSha256")
                .is_some_and(|v| !v.is_null())
        });
        if edited {
            return None;
        }
        CheckedBefore::by(
            &self.record.pipeline.sha256,
            &self.record.specbridge_version,
        )
    }

    /// The `--rerun` patterns that name no stage of `nodes` and no recorded stage
    /// or fan-out instance.
    pub fn unknown_reruns<'a>(&self, patterns: &'a [String], nodes: &[Node]) -> Vec<&'a str> {
        let ids: Vec<&str> = nodes
            .iter()
            .map(|n| n.id.as_str())
            .chain(self.stages.keys().map(String::as_str))
            .collect();
        crate::resume::force::unmatched(patterns, &ids)
    }

    /// The nodes to schedule, each continuing its recorded attempt numbering.
    pub fn nodes(&self, source: &PipelineSource) -> Result<Vec<Node>, OrchestrateError> {
        let mut nodes = plan_nodes(&source.file, &self.record.options.only)?;
        for n in &mut nodes {
            if let Some(rec) = self.stages.get(&n.id) {
                n.prior_attempts = rec.attempts;
            }
        }
        Ok(nodes)
    }

    /// Take the working-tree lock, recover from a crash, and record this resume
    /// in `run.json`: the run folder, ready for [`ActiveRun::run`] to run every
    /// stage again that cannot be reused.
    pub fn begin(self, spec: ResumeStart, mut nodes: Vec<Node>) -> Result<ActiveRun, ResumeError> {
        let started = Instant::now();
        let tree_lock =
            crate::orchestrate::lock_working_tree(&spec.root, "resume", Some(&self.id), &nodes)
                .map_err(OrchestrateError::from)?;
        let OpenedRun {
            id,
            dir,
            lock,
            mut record,
            mut stages,
            plan,
            log,
            spawns,
            files,
            ..
        } = self;
        // The audit passed, so the chain is intact and has a head.
        let head = log.head.clone().ok_or_else(|| ResumeError::Unreadable {
            run: id.clone(),
            message: "its event log is missing or broken".into(),
        })?;

        // The log first: a torn line is kept aside and the chain goes on from the
        // last whole event.
        let aside = set_aside_torn_tail(&RunReader::at(&dir).events_path())?;
        let run = Arc::new(RunStore::open_locked(
            id.clone(),
            dir.clone(),
            lock,
            crate::redact::Redactor::for_pipeline(&spec.source.file),
            &head,
        )?);
        let number = record.resumes.len() + 1;
        let pipeline_sha = sha256_hex(&spec.source.bytes);
        run.event(RunEvent::RunResumed(RunResumed {
            resume: u32::try_from(number).unwrap_or(u32::MAX),
            previous_status: record.status,
            pipeline_sha256: pipeline_sha.clone(),
        }))?;
        let torn_tail = aside.map(|p| {
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
        if let Some(name) = &torn_tail {
            run.event(RunEvent::TornTailSetAside(TornTailSetAside {
                path: name.clone(),
            }))?;
        }

        let repaired = repair_unlogged(&run, &log, &stages)?;
        if !repaired.is_empty() {
            run.event(RunEvent::CrashRepaired(CrashRepaired {
                repaired: repaired.clone(),
            }))?;
        }

        // Nothing new starts while an agent of the dead process may still be
        // changing the working tree.
        let folders = AttemptFolders::walked(&files, &dir);
        let orphans = end_orphans(&run, spawns, &folders, |node| {
            orphan_grace(&spec.source.file, &stages, node)
        })?;
        let interrupted = mark_interrupted(&run, &mut stages)?;
        count_unrecorded_attempts(&run, &mut nodes, &folders, |id| {
            stages.get(id).map_or(0, |r| r.attempts)
        })?;

        if pipeline_sha != record.pipeline.sha256 {
            run.write_bytes(layout::PIPELINE, &spec.source.bytes)?;
        }
        let previous_pipeline = record.pipeline.sha256.clone();
        record.pipeline.sha256 = pipeline_sha.clone();
        record.pipeline.path = spec.source.path_in(&spec.root);
        record.pipeline.name = spec.source.file.name.clone();

        let mut decisions = Vec::new();
        // Each stage of the pipeline by id, and whether it has `forEach`.
        let defined: HashMap<&str, bool> = spec
            .source
            .file
            .stages
            .iter()
            .map(|s| (s.id.as_str(), s.for_each.is_some()))
            .collect();
        for rec in stages.values() {
            let def = rec.instance_of.as_deref().unwrap_or(&rec.stage_id);
            let in_pipeline = defined
                .get(def)
                .is_some_and(|&for_each| rec.instance_of.is_none() || for_each);
            if !in_pipeline && rec.status != StageStatus::Retired {
                decisions.push(retire(&run, rec, Reason::StageRemoved)?);
            }
        }

        let previous_status = record.status;
        let entry = json!({
            "resume": number,
            "startedAt": now_rfc3339(),
            "previousStatus": previous_status,
            "pipelineSha256": pipeline_sha,
            "previousPipelineSha256": (previous_pipeline != pipeline_sha).then_some(previous_pipeline),
            "overrides": spec.options.overrides,
            "tornTail": torn_tail,
            "orphans": orphans,
            "interrupted": interrupted,
        });
        record.status = RunStatus::Running;
        record.ended_at = None;
        record.exit_code = None;
        record.options = spec.options.clone();
        if let Some(r) = spec.runner.clone() {
            record.runner = Some(r);
        }
        for w in &spec.warnings {
            if !record.warnings.contains(w) {
                record.warnings.push(w.clone());
            }
        }
        record.resumes.push(entry);
        run.write_json(layout::RUN, &record)?;

        Ok(ActiveRun {
            run,
            record,
            plan,
            started,
            nodes,
            file: spec.source.file,
            tree_lock,
            resumed: Some(Resumed {
                root: spec.root,
                stages,
                forced: Forced::new(spec.rerun),
                reverify: spec.reverify,
                report: ResumeReport {
                    decisions,
                    orphans,
                    interrupted,
                    torn_tail,
                },
            }),
        })
    }
}

/// The SIGTERM → SIGKILL delay for an orphan of node `node`: its own stage's
/// `killGrace` (an instance's is its `forEach` stage's), as a cancel of that stage
/// would have used. Overrides of a run never set the grace.
fn orphan_grace(
    file: &crate::pipeline::PipelineFile,
    stages: &BTreeMap<String, StageRecord>,
    node: &str,
) -> Duration {
    let def = stages
        .get(node)
        .and_then(|r| r.instance_of.as_deref())
        .unwrap_or(node);
    let stage = file.stages.iter().find(|s| s.id == def);
    crate::pipeline::ResolvedRunner::for_stage(file, stage, &Default::default())
        .kill_grace
        .as_duration()
}
