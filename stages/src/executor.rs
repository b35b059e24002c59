//! The stage executor the scheduler drives: dispatches each node to its kind.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use specbridge_engine::pipeline::StageKind;
use specbridge_engine::scheduler::{BoxFuture, Node, StageExecutor, StageReport, StageRun};
use specbridge_engine::store::{InputParts, RunHandle, RunReader, StageRecord};
use specbridge_engine::StageStatus;

use crate::agent::AgentSetup;
use crate::context::RunContext;
use crate::working_tree::TreeLedger;

/// Runs every stage kind of a pipeline.
pub struct PipelineExecutor {
    pub ctx: RunContext,
    /// The runner detected before the run, and the recordings that may answer it.
    pub agent: AgentSetup,
    /// What stages of this run changed in the working tree.
    ledger: TreeLedger,
}

impl PipelineExecutor {
    /// An executor without a detected runner: agent stages end `runner-unavailable`.
    pub fn new(ctx: RunContext) -> Arc<Self> {
        Self::with_agent(ctx, AgentSetup::default())
    }

    pub(crate) fn with_agent(ctx: RunContext, agent: AgentSetup) -> Arc<Self> {
        Arc::new(PipelineExecutor {
            ctx,
            agent,
            ledger: TreeLedger::default(),
        })
    }

    /// Continue a run recorded in `run_dir` (resume): what its earlier processes
    /// changed in the working tree is the run's own, not the user's.
    pub(crate) fn resume_from(&self, run_dir: &Path, records: &BTreeMap<String, StageRecord>) {
        // The records the resume read after its audit, not read again: the run is
        // locked, so its folders hold exactly these.
        let Ok(ids) = RunReader::at(run_dir).stage_ids() else {
            return;
        };
        self.ledger
            .seed_from_records(run_dir, ids.iter().map(|id| (id.as_str(), records.get(id))));
    }

    /// The stage definition behind a node (an instance's is its `forEach` stage's).
    fn def_id(node: &Node) -> &str {
        node.instance_of.as_deref().unwrap_or(&node.id)
    }
}

/// The input hash in `stages/<id>/stage.json` of the run in `run_dir`, if any.
pub(crate) fn recorded_hash(run_dir: &Path, id: &str) -> Option<String> {
    if !specbridge_engine::store::is_safe_component(id) {
        return None;
    }
    specbridge_engine::store::RunReader::at(run_dir)
        .stage(id)
        .ok()??
        .input_hash
}

impl StageExecutor for PipelineExecutor {
    fn execute(self: Arc<Self>, sr: StageRun) -> BoxFuture<StageReport> {
        Box::pin(async move {
            let Some(stage) = self.ctx.stage(Self::def_id(&sr.node)).cloned() else {
                return StageReport::failed(
                    StageStatus::Failed,
                    format!("stage `{}` is not in the pipeline", sr.node.id),
                );
            };
            // Resolved once for the node; everything below is handed this one.
            let runner = self.ctx.runner_for(&stage);
            let (ctx, agent, ledger) = (&self.ctx, &self.agent, &self.ledger);
            match stage.kind {
                StageKind::Check => crate::check::run_check(ctx, &stage, &runner, &sr).await,
                StageKind::Generate => {
                    crate::generate::run_generate(ctx, agent, ledger, &stage, &runner, &sr).await
                }
                StageKind::Execute => {
                    crate::execute::run_execute(ctx, agent, ledger, &stage, &runner, &sr).await
                }
            }
        })
    }

    fn reverify(self: Arc<Self>, sr: StageRun) -> Option<BoxFuture<StageReport>> {
        let stage = self.ctx.stage(Self::def_id(&sr.node)).cloned()?;
        if stage.kind != StageKind::Execute {
            return None;
        }
        Some(Box::pin(async move {
            let runner = self.ctx.runner_for(&stage);
            crate::reverify::run_reverify(&self.ctx, &self.ledger, &stage, &runner, &sr).await
        }))
    }

    fn expand(&self, placeholder: &Node, run: &RunHandle) -> Result<Vec<Node>, String> {
        let stage = self
            .ctx
            .stage(&placeholder.id)
            .ok_or_else(|| format!("stage `{}` is not in the pipeline", placeholder.id))?;
        crate::fanout::expand(stage, placeholder, run).map_err(|e| crate::error_chain(&e))
    }

    fn inputs(
        &self,
        node: &Node,
        run_dir: &Path,
        recorded: Option<&str>,
    ) -> Option<Result<(String, InputParts), String>> {
        let stage = self.ctx.stage(Self::def_id(node))?;
        let inputs = match stage.kind {
            StageKind::Check => crate::check::inputs(&self.ctx, stage, node, run_dir, recorded),
            StageKind::Generate | StageKind::Execute => {
                let runner = self.ctx.runner_for(stage);
                crate::attempt::attempt_inputs(&self.ctx, stage, &runner, node, run_dir, recorded)
                    .map(|p| (p.input_hash, p.input_parts))
            }
        };
        Some(inputs.map_err(|e| e.reason()))
    }

    /// A first check attempt whose needs are all check stages settled in this
    /// process reads nothing of the run: what each need stands for downstream is
    /// kept in memory ([`crate::upstream::remember_digest`]).
    fn reads_records_at_start(&self, node: &Node, attempt: u32) -> bool {
        if node.needs.is_empty() && attempt == 1 {
            return false;
        }
        let Some(stage) = self.ctx.stage(Self::def_id(node)) else {
            return true;
        };
        attempt > 1
            || node.instance_of.is_some()
            || stage.kind != StageKind::Check
            || !crate::upstream::digests_in_memory(&self.ctx, stage)
    }

    fn kept(&self, node: &Node, parts: Option<&InputParts>) {
        let is_check = self
            .ctx
            .stage(Self::def_id(node))
            .is_some_and(|s| s.kind == StageKind::Check);
        if is_check {
            crate::upstream::remember_digest(&self.ctx, &node.id, parts);
        }
    }

    fn cancelled(&self) -> bool {
        self.ctx.cancel.is_cancelled()
    }

    fn stop(&self) {
        self.ctx.cancel.cancel_graceful();
    }

    fn describe(&self, node: &Node) -> Vec<String> {
        let Some(s) = self.ctx.stage(Self::def_id(node)) else {
            return Vec::new();
        };
        match s.kind {
            StageKind::Check => crate::check::describe(s),
            StageKind::Generate => {
                crate::generate::describe(&self.ctx, &self.agent, s, &self.ctx.runner_for(s))
            }
            StageKind::Execute => {
                crate::execute::describe(&self.ctx, &self.agent, s, &self.ctx.runner_for(s))
            }
        }
    }
}
