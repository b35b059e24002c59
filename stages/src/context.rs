//! What every stage of a run shares: the repository, the pipeline, cancellation.

use std::path::PathBuf;
use std::sync::Arc;

use specbridge_engine::pipeline::{PipelineFile, ResolvedRunner, RunOverrides, StageDef};
use specbridge_engine::supervisor::CancelToken;

/// Shared, read-only context of one run.
#[derive(Debug, Clone)]
pub struct RunContext {
    /// The repository root: the working directory of every command and agent.
    pub root: PathBuf,
    /// The folder of the pipeline file (prompt and schema paths are relative to it).
    pub pipeline_dir: PathBuf,
    pub pipeline: Arc<PipelineFile>,
    pub overrides: RunOverrides,
    pub cancel: CancelToken,
    pub allow_dirty: bool,
}

impl RunContext {
    pub fn stage(&self, id: &str) -> Option<&StageDef> {
        self.pipeline.stages.iter().find(|s| s.id == id)
    }

    /// Runner settings of a stage after defaults, pipeline, stage and overrides.
    pub fn runner_for(&self, stage: &StageDef) -> ResolvedRunner {
        let mut layers = vec![&self.pipeline.runner];
        if let Some(r) = &stage.runner {
            layers.push(r);
        }
        ResolvedRunner::resolve(&layers, &self.overrides)
    }
}
