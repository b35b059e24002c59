//! The stage executor the scheduler drives: dispatches each node to its kind.

use std::sync::Arc;

use specbridge_engine::pipeline::StageKind;
use specbridge_engine::scheduler::{BoxFuture, Node, StageExecutor, StageReport, StageRun};
use specbridge_engine::store::RunHandle;
use specbridge_engine::StageStatus;

use crate::context::RunContext;

/// Runs every stage kind of a pipeline.
pub struct PipelineExecutor {
    pub ctx: RunContext,
}

impl PipelineExecutor {
    pub fn new(ctx: RunContext) -> Arc<Self> {
        Arc::new(PipelineExecutor { ctx })
    }

    /// The stage definition behind a node (an instance's is its `forEach` stage's).
    fn def_id(node: &Node) -> &str {
        node.instance_of.as_deref().unwrap_or(&node.id)
    }
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
            match stage.kind {
                StageKind::Check => crate::check::run_check(&self.ctx, &stage, &sr).await,
                StageKind::Generate | StageKind::Execute => StageReport::failed(
                    StageStatus::RunnerUnavailable,
                    format!(
                        "{} stages are not available in this version",
                        stage.kind.as_str()
                    ),
                ),
            }
        })
    }

    fn expand(&self, placeholder: &Node, run: &RunHandle) -> Result<Vec<Node>, String> {
        let stage = self
            .ctx
            .stage(&placeholder.id)
            .ok_or_else(|| format!("stage `{}` is not in the pipeline", placeholder.id))?;
        crate::fanout::expand(stage, placeholder, run)
    }

    fn cancelled(&self) -> bool {
        self.ctx.cancel.is_cancelled()
    }

    fn describe(&self, node: &Node) -> Vec<String> {
        match self.ctx.stage(Self::def_id(node)) {
            Some(s) if s.kind == StageKind::Check => crate::check::describe(s),
            _ => Vec::new(),
        }
    }
}
