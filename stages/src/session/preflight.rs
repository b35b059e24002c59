//! What a run or resume refuses before anything is spawned or created
//! (detection included), each with exit 2.

use std::path::Path;

use specbridge_engine::pipeline::{PipelineFile, StageKind};
use specbridge_engine::sandbox::SandboxProbe;
use specbridge_engine::scheduler::Node;

use super::SessionError;
use crate::confine;

/// Agent stages outside a repository's root; execute stages on a tree with
/// changes that are not the run's own (`run_dir`, resume) unless `--allow-dirty`.
/// Returns the partial work of execute attempts a crash cut off, which a resume
/// keeps (one line each, to tell the user).
pub(crate) fn check_working_tree(
    root: &Path,
    nodes: &[Node],
    allow_dirty: bool,
    run_dir: Option<&Path>,
) -> Result<Vec<String>, SessionError> {
    if nodes.iter().any(|n| n.kind.is_agent()) {
        crate::working_tree::require_repository_root(root).map_err(SessionError::Preflight)?;
    }
    if nodes.iter().any(|n| n.kind == StageKind::Execute) {
        let kept = crate::working_tree::require_clean_start(root, allow_dirty, run_dir)
            .map_err(SessionError::Preflight)?;
        return Ok(kept
            .iter()
            .map(super::super::partial_work::PartialWork::describe)
            .collect());
    }
    Ok(Vec::new())
}

/// The sandbox of the commands specbridge runs itself, settled before anything is
/// created: a confined command without a working bubblewrap refuses the run
/// (exit 2). A dry run only warns; it spawns nothing, not even the probe.
pub(crate) fn command_sandbox(
    root: &Path,
    file: &PipelineFile,
    nodes: &[Node],
    dry_run: bool,
    probe: &SandboxProbe,
) -> Result<confine::SandboxPreflight, SessionError> {
    let commands = confine::planned_commands(file, nodes);
    let mut found = if dry_run {
        confine::preflight(&commands, || Ok("bwrap".into()))
            .map(|p| confine::SandboxPreflight {
                bubblewrap: None,
                ..p
            })
            .unwrap_or_default()
    } else {
        confine::preflight(&commands, || probe.get().bubblewrap_for_commands())
            .map_err(SessionError::Sandbox)?
    };
    let target = std::env::var_os("CARGO_TARGET_DIR").map(std::path::PathBuf::from);
    found.warnings.extend(confine::cargo_target_warnings(
        &commands,
        root,
        target.as_deref(),
    ));
    Ok(found)
}
