//! The recordings a run answers agent stages from, and `--scaffold` workspaces.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use specbridge_engine::pipeline::RunnerKind;
use specbridge_engine::replay::Recording;

use super::SessionError;
use crate::agent::ReplaySetup;
use crate::RunContext;

/// `run --replay DIR` and `--replay-missing`.
#[derive(Debug, Clone, Default)]
pub struct ReplaySettings {
    /// Every agent stage is answered from this recorded run folder (absolute).
    pub from: Option<PathBuf>,
    /// A stage without a usable recording runs live instead of failing.
    pub live_when_missing: bool,
}

/// The recordings this run answers agent stages from: `--replay`, and every
/// `runner: {kind: replay, from: …}` of the pipeline (relative to its folder).
/// Each is audited once here, before anything runs.
pub(crate) fn setup(
    ctx: &RunContext,
    settings: &ReplaySettings,
) -> Result<ReplaySetup, SessionError> {
    let mut setup = ReplaySetup {
        live_when_missing: settings.live_when_missing,
        ..Default::default()
    };
    if let Some(dir) = &settings.from {
        setup.forced = Some(Arc::new(Recording::open(dir)?));
        return Ok(setup);
    }
    let mut by_from = BTreeMap::new();
    for stage in ctx.pipeline.stages.iter().filter(|s| s.kind.is_agent()) {
        let runner = ctx.runner_for(stage);
        if runner.kind != RunnerKind::Replay {
            continue;
        }
        let Some(from) = runner.from.clone() else {
            return Err(SessionError::ReplayWithoutFrom {
                stage: stage.id.clone(),
            });
        };
        if let std::collections::btree_map::Entry::Vacant(slot) = by_from.entry(from) {
            let recording = Recording::open(&ctx.pipeline_dir.join(slot.key()))?;
            slot.insert(Arc::new(recording));
        }
    }
    setup.by_from = by_from;
    Ok(setup)
}

/// `--scaffold DIR`: the run happens in a fresh one-commit git repository holding
/// a copy of DIR.
#[derive(Debug, Clone)]
pub struct ScaffoldSettings {
    /// The folder copied (absolute).
    pub from: PathBuf,
    /// Keep the scaffold after the run (else `--no-keep`: deleted with its records).
    pub keep: bool,
}

/// A scaffold in use, deleted when dropped unless kept.
pub(crate) struct Scaffold {
    pub root: PathBuf,
    keep: bool,
}

impl Scaffold {
    pub(super) fn create(settings: &ScaffoldSettings) -> Result<Self, SessionError> {
        Ok(Scaffold {
            root: specbridge_engine::scaffold::create(&settings.from)?,
            keep: settings.keep,
        })
    }

    pub(super) fn root(&self) -> &Path {
        &self.root
    }

    pub(super) fn kept(&self) -> bool {
        self.keep
    }
}

impl Drop for Scaffold {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}
