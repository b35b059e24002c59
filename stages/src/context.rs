//! What every stage of a run shares: the repository, the pipeline, cancellation.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use specbridge_engine::orchestrate::PipelineSource;
use specbridge_engine::pipeline::{PipelineFile, ResolvedRunner, RunOverrides, StageDef};
use specbridge_engine::supervisor::CancelToken;

/// Shared, read-only context of one run.
#[derive(Debug, Clone)]
pub struct RunContext {
    /// The repository root: the working directory of every command and agent.
    pub root: PathBuf,
    /// The folder of the pipeline file (prompt and schema paths are relative to it).
    pub pipeline_dir: PathBuf,
    /// The pipeline file relative to the root, as `run.json` records it
    /// ([`PipelineSource::path_in`]): a protected path of every agent stage.
    pub pipeline_file: String,
    pub pipeline: Arc<PipelineFile>,
    pub overrides: RunOverrides,
    pub cancel: CancelToken,
    pub allow_dirty: bool,
    /// The bubblewrap that confines check stages and verification commands, found
    /// before the run ([`crate::confine::preflight`]); `None` when none is confined.
    pub bubblewrap: Option<PathBuf>,
    /// Position of each stage in `pipeline.stages`, by id ([`index_stages`]).
    pub stage_index: Arc<HashMap<String, usize>>,
    /// What each check stage this process settled from its record (a resume's
    /// reuse) stands for downstream ([`crate::upstream`]). Its record stays as it
    /// is, so it is not read again for every stage that needs it.
    pub kept_digests: Arc<Mutex<HashMap<String, Option<String>>>>,
}

/// Stages by id, so that looking one up does not scan the pipeline (a scan per
/// stage is quadratic in the pipeline's size).
pub(crate) fn index_stages(pipeline: &PipelineFile) -> Arc<HashMap<String, usize>> {
    Arc::new(
        pipeline
            .stages
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.clone(), i))
            .collect(),
    )
}

impl RunContext {
    /// The context of a run of `source` in the repository at `root`.
    pub fn new(
        root: &Path,
        source: &PipelineSource,
        overrides: RunOverrides,
        cancel: CancelToken,
        allow_dirty: bool,
    ) -> Self {
        RunContext {
            root: root.to_path_buf(),
            pipeline_dir: source
                .path
                .parent()
                .map_or_else(|| root.to_path_buf(), Path::to_path_buf),
            pipeline_file: source.path_in(root),
            pipeline: source.file.clone(),
            overrides,
            cancel,
            allow_dirty,
            bubblewrap: None,
            stage_index: index_stages(&source.file),
            kept_digests: Arc::default(),
        }
    }

    pub fn stage(&self, id: &str) -> Option<&StageDef> {
        self.stage_index
            .get(id)
            .and_then(|&i| self.pipeline.stages.get(i))
            .filter(|s| s.id == id)
    }

    /// Runner settings of a stage after defaults, pipeline, stage and overrides.
    /// Resolved once per node (by the executor) and passed down from there.
    pub(crate) fn runner_for(&self, stage: &StageDef) -> ResolvedRunner {
        ResolvedRunner::for_stage(&self.pipeline, Some(stage), &self.overrides)
    }
}
