//! The executor of a resumed run: wraps the pipeline's executor and, just before a
//! stage would start, reuses its recorded result when [`reuse_or_rerun`] allows it.
//!
//! Reuse is decided lazily because a stage's input hash holds its upstream output
//! hashes: it can only be known once everything upstream has finished in this
//! resume, which may have produced new outputs — or byte-identical ones, in which
//! case the stage is still reused.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::events::{RunEvent, StageFinished};

use crate::resume::force::Forced;
use crate::resume::reuse::{reuse_or_rerun, Current, Reason, ReuseDecision, Why};
use crate::scheduler::{BoxFuture, Node, StageExecutor, StageReport, StageRun};
use crate::status::StageStatus;
use crate::store::{sha256_file, InputParts, RunHandle, StageRecord, StoreError};

/// The pipeline's executor, plus the records of the run being resumed.
pub struct ResumeExecutor {
    inner: Arc<dyn StageExecutor>,
    root: PathBuf,
    recorded: BTreeMap<String, StageRecord>,
    decisions: Mutex<Vec<ReuseDecision>>,
    forced: Forced,
    /// `--reverify`: unverified execute stages get a verification-only attempt.
    reverify: bool,
    reverifying: Mutex<BTreeSet<String>>,
}

impl ResumeExecutor {
    pub fn new(
        inner: Arc<dyn StageExecutor>,
        root: PathBuf,
        recorded: BTreeMap<String, StageRecord>,
        forced: Forced,
        reverify: bool,
    ) -> Arc<Self> {
        Arc::new(ResumeExecutor {
            inner,
            root,
            recorded,
            decisions: Mutex::new(Vec::new()),
            forced,
            reverify,
            reverifying: Mutex::new(BTreeSet::new()),
        })
    }

    /// Whether `rec` can be re-verified: an unverified execute stage whose inputs
    /// and output are unchanged (it would be reused had it passed its gate).
    fn can_reverify(
        &self,
        rec: &StageRecord,
        current: Result<Current<'_>, &str>,
        altered: Option<&str>,
    ) -> bool {
        if !self.reverify
            || rec.kind != crate::pipeline::StageKind::Execute
            || rec.status != StageStatus::Unverified
        {
            return false;
        }
        let mut passed: crate::resume::reuse::Recorded<'_> = rec.into();
        passed.status = StageStatus::Succeeded;
        reuse_or_rerun(Some(passed), current, altered).is_none()
    }

    /// Every decision taken so far, in the order taken.
    pub fn decisions(&self) -> Vec<ReuseDecision> {
        self.decisions.lock().expect("decisions lock").clone()
    }

    fn note(&self, run: &RunHandle, decision: ReuseDecision) {
        // Queued: written with the scheduler's next batch, ahead of anything
        // the stage itself logs (docs/resume.md). A failed write stops the
        // run's records (store::StoreFailure), and the scheduler ends the run
        // before anything else starts: nothing to do here.
        if let Err(e) = run.defer_event(RunEvent::ResumeDecision((&decision).into())) {
            tracing::debug!("failed to record the decision for {}: {e}", decision.stage);
        }
        self.decisions
            .lock()
            .expect("decisions lock")
            .push(decision);
    }
}

/// The first recorded output file of a stage that is missing or no longer has its
/// recorded sha256: `output.json` in the run folder, the document in the repository.
pub(crate) fn altered_output(rec: &StageRecord, run_dir: &Path, root: &Path) -> Option<String> {
    let differs = |path: PathBuf, sha: &str| sha256_file(&path).map_or(true, |s| s != sha);
    if let Some(out) = &rec.output {
        if differs(run_dir.join(&out.path), &out.sha256) {
            return Some(out.path.clone());
        }
    }
    if let Some(doc) = &rec.document {
        if differs(root.join(&doc.path), &doc.sha256) {
            return Some(doc.path.clone());
        }
    }
    None
}

/// The recorded result of a stage, as a report the scheduler can settle it with.
pub(crate) fn reused_report(rec: &StageRecord) -> StageReport {
    StageReport {
        status: rec.status,
        reason: rec.reason.clone(),
        evidence_status: rec.evidence_status,
        input_hash: rec.input_hash.clone(),
        input_parts: rec.input_parts.clone(),
        output: rec.output.clone(),
        document: rec.document.clone(),
        started_at: rec.started_at.clone(),
        ended_at: rec.ended_at.clone(),
        duration_ms: rec.duration_ms,
        cost_usd: rec.cost_usd,
        tokens: rec.tokens,
        turns: rec.turns,
        invocations: 0,
        exit_code: None,
        reused: true,
        retry: None,
        transient_attempts: rec.transient_attempts.unwrap_or(0),
    }
}

/// Mark a recorded stage `retired`: its record and attempts stay, its status says
/// it is no longer part of the run.
pub(crate) fn retire(
    run: &RunHandle,
    rec: &StageRecord,
    reason: Reason,
) -> Result<ReuseDecision, StoreError> {
    let mut retired = rec.clone();
    retired.status = StageStatus::Retired;
    retired.reason = Some(format!("retired: {reason}"));
    retired.reused = None;
    run.write_json(
        &crate::store::layout::stage_record_rel(&rec.stage_id),
        &retired,
    )?;
    run.event(RunEvent::StageFinished(StageFinished {
        stage: rec.stage_id.clone(),
        attempt: None,
        status: StageStatus::Retired,
        outcome: retired.reason.clone(),
        evidence_status: None,
        recovered: false,
    }))?;
    let decision = ReuseDecision::retire(&rec.stage_id, reason);
    run.event(RunEvent::ResumeDecision((&decision).into()))?;
    Ok(decision)
}

impl StageExecutor for ResumeExecutor {
    fn execute(self: Arc<Self>, stage: StageRun) -> BoxFuture<StageReport> {
        let reverify = self
            .reverifying
            .lock()
            .expect("reverify lock")
            .contains(&stage.node.id);
        if reverify {
            if let Some(f) = self.inner.clone().reverify(stage.clone()) {
                return f;
            }
        }
        self.inner.clone().execute(stage)
    }

    fn expand(&self, placeholder: &Node, run: &RunHandle) -> Result<Vec<Node>, String> {
        let mut instances = self.inner.expand(placeholder, run)?;
        let folders = crate::resume::recover::AttemptFolders::on_disk(run.dir());
        crate::resume::recover::count_unrecorded_attempts(run, &mut instances, &folders, |id| {
            self.recorded.get(id).map_or(0, |r| r.attempts)
        })
        .map_err(|e| crate::error_chain(&e))?;
        let ids: BTreeSet<&str> = instances.iter().map(|n| n.id.as_str()).collect();
        for rec in self.recorded.values() {
            let gone = rec.instance_of.as_deref() == Some(placeholder.id.as_str())
                && !ids.contains(rec.stage_id.as_str())
                && rec.status != StageStatus::Retired;
            if gone {
                let decision =
                    retire(run, rec, Reason::ItemGone).map_err(|e| crate::error_chain(&e))?;
                self.decisions
                    .lock()
                    .expect("decisions lock")
                    .push(decision);
            }
        }
        Ok(instances)
    }

    fn cancelled(&self) -> bool {
        self.inner.cancelled()
    }

    fn stop(&self) {
        self.inner.stop();
    }

    fn describe(&self, node: &Node) -> Vec<String> {
        self.inner.describe(node)
    }

    fn inputs(
        &self,
        node: &Node,
        run_dir: &Path,
        recorded: Option<&str>,
    ) -> Option<Result<(String, InputParts), String>> {
        self.inner.inputs(node, run_dir, recorded)
    }

    fn kept(&self, node: &Node, parts: Option<&InputParts>) {
        self.inner.kept(node, parts);
    }

    fn reads_records_at_start(&self, node: &Node, attempt: u32) -> bool {
        self.inner.reads_records_at_start(node, attempt)
    }

    fn reuse(&self, node: &Node, run: &RunHandle) -> Option<StageReport> {
        // The decision reads the upstream records: what this resume queued (the
        // end of a stage it ran again) is written first; the decisions queued
        // before it wait for the scheduler's next flush. A failed write stopped
        // the run's records; the scheduler's next write ends the run.
        if run.flush_records().is_err() {
            return None;
        }
        if let Some(why) = self.forced.check(node) {
            self.note(run, ReuseDecision::rerun(&node.id, why));
            return None;
        }
        let rec = self.recorded.get(&node.id);
        let recorded_hash = rec.and_then(|r| r.input_hash.as_deref());
        let current = self.inner.inputs(node, run.dir(), recorded_hash);
        let current_ref = match &current {
            Some(Ok((hash, parts))) => Ok(Current {
                input_hash: hash,
                input_parts: parts,
            }),
            Some(Err(e)) => Err(e.as_str()),
            None => Err("this stage kind cannot compute its input hash"),
        };
        let altered = rec.and_then(|r| altered_output(r, run.dir(), &self.root));
        if rec.is_some_and(|r| self.can_reverify(r, current_ref, altered.as_deref())) {
            self.reverifying
                .lock()
                .expect("reverify lock")
                .insert(node.id.clone());
            let why = Why::with(
                Reason::Reverify,
                "verification only, on the working tree as it is",
            );
            self.note(run, ReuseDecision::rerun(&node.id, why));
            return None;
        }
        match reuse_or_rerun(rec.map(Into::into), current_ref, altered.as_deref()) {
            None => {
                let rec = rec.expect("only a recorded stage is reused");
                self.inner.kept(node, rec.input_parts.as_ref());
                self.note(run, ReuseDecision::reuse(&node.id));
                Some(reused_report(rec))
            }
            Some(why) => {
                self.note(run, ReuseDecision::rerun(&node.id, why));
                None
            }
        }
    }
}
