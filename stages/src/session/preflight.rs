//! What a run or resume refuses before anything is spawned or created
//! (detection included), each with exit 2.

use std::path::Path;

use specbridge_engine::pipeline::{PipelineFile, StageKind};
use specbridge_engine::sandbox::SandboxProbe;
use specbridge_engine::scheduler::Node;

use super::SessionError;
use crate::confine;
use crate::snapshot_ahead::SnapshotAhead;

/// Agent stages outside a repository's root; execute stages on a tree with
/// changes that are not the run's own (`run_dir`, resume) unless `--allow-dirty`,
/// judged from the snapshot taken ahead where there is one. Returns the partial
/// work of execute attempts a crash cut off, which a resume keeps (one line each,
/// to tell the user).
pub(crate) fn check_working_tree(
    root: &Path,
    nodes: &[Node],
    allow_dirty: bool,
    run_dir: Option<&Path>,
    ahead: &SnapshotAhead,
) -> Result<Vec<String>, SessionError> {
    if nodes.iter().any(|n| n.kind.is_agent()) {
        crate::working_tree::require_repository_root(root).map_err(SessionError::Preflight)?;
    }
    if nodes.iter().any(|n| n.kind == StageKind::Execute) {
        let kept = crate::working_tree::require_clean_start(root, allow_dirty, run_dir, ahead)
            .map_err(SessionError::Preflight)?;
        return Ok(kept
            .iter()
            .map(super::super::partial_work::PartialWork::describe)
            .collect());
    }
    Ok(Vec::new())
}

/// The working tree's snapshot, started now where it will be wanted: by the
/// preflight's clean-tree check (execute stages), or, in a fresh run, by an
/// agent stage that can be the first to start (`snapshot_ahead.rs`). It needs
/// nothing the preflight finds, so it goes on beside it. Only a fresh run's
/// first attempt may claim it; a resume's takes its own: the resume ends what
/// the interrupted run left running after this point, and what that changed
/// until then is no attempt's.
pub(crate) fn snapshot_ahead(
    root: &Path,
    nodes: &[Node],
    allow_dirty: bool,
    fresh: bool,
) -> SnapshotAhead {
    let first_is_agent = fresh
        && nodes
            .iter()
            .any(|n| n.kind.is_agent() && n.needs.is_empty());
    let clean_check = !allow_dirty && nodes.iter().any(|n| n.kind == StageKind::Execute);
    if first_is_agent || clean_check {
        SnapshotAhead::start(root, fresh)
    } else {
        SnapshotAhead::default()
    }
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
