//! Setting up replay and scaffold workspaces for `specbridge run`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use specbridge_engine::pipeline::RunnerKind;
use specbridge_engine::replay::{Recording, ReplayError};
use specbridge_engine::scaffold;
use specbridge_stages::agent::ReplaySetup;
use specbridge_stages::RunContext;

use crate::args::{ReplayArgs, ReplayMissing};
use crate::commands::Workspace;
use crate::error::{CliError, CliResult};
use crate::printer::Printer;

/// A path given on the command line, relative to the current directory.
pub fn from_cwd(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    }
}

/// `--scaffold DIR`: a fresh one-commit git repository holding a copy of DIR.
pub fn scaffold_workspace(dir: &Path, printer: Printer, keep: bool) -> CliResult<Workspace> {
    let src = from_cwd(dir);
    let root =
        scaffold::create(&src).map_err(|e| CliError::Config(specbridge_engine::error_chain(&e)))?;
    if keep {
        printer.err(format!(
            "scaffold: {} (a copy of {} in a new git repository)",
            root.display(),
            src.display()
        ));
    } else {
        printer.err(format!(
            "scaffold: a copy of {} in a new git repository, deleted after the run (--no-keep)",
            src.display()
        ));
    }
    Ok(Workspace { root })
}

fn open(dir: &Path) -> CliResult<Arc<Recording>> {
    match Recording::open(dir) {
        Ok(r) => Ok(Arc::new(r)),
        Err(e @ ReplayError::Tampered { .. }) => {
            Err(CliError::Safety(specbridge_engine::error_chain(&e)))
        }
        Err(e) => Err(CliError::Config(specbridge_engine::error_chain(&e))),
    }
}

/// The recordings this run answers agent stages from: `--replay`, and every
/// `runner: {kind: replay, from: …}` of the pipeline (relative to its folder).
/// Each is audited once here, before anything runs.
pub fn setup(
    ctx: &RunContext,
    args: &ReplayArgs,
    replay_dir: Option<&Path>,
) -> CliResult<ReplaySetup> {
    let mut setup = ReplaySetup {
        live_when_missing: args.replay_missing == ReplayMissing::Live,
        ..Default::default()
    };
    if let Some(dir) = replay_dir {
        setup.forced = Some(open(dir)?);
        return Ok(setup);
    }
    let mut by_from = BTreeMap::new();
    for stage in ctx.pipeline.stages.iter().filter(|s| s.kind.is_agent()) {
        let runner = ctx.runner_for(stage);
        if runner.kind != RunnerKind::Replay {
            continue;
        }
        let Some(from) = runner.from.clone() else {
            return Err(CliError::Config(format!(
                "stage `{}`: runner kind `replay` needs `from:` (a recorded run folder)",
                stage.id
            )));
        };
        if let std::collections::btree_map::Entry::Vacant(slot) = by_from.entry(from) {
            let recording = open(&ctx.pipeline_dir.join(slot.key()))?;
            slot.insert(recording);
        }
    }
    setup.by_from = by_from;
    Ok(setup)
}
