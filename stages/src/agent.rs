//! What agent stages share across a run: the runner detected before it, and the
//! recordings that may answer them. Live progress goes to the run's subscribers
//! (`RunHandle::live_progress`).

use std::collections::BTreeMap;
use std::sync::Arc;

use specbridge_engine::pipeline::{ResolvedRunner, RunnerKind};
use specbridge_engine::replay::Recording;
use specbridge_engine::runner::claude_code::Capabilities;

/// One runner command as detected before the run.
#[derive(Debug, Clone, PartialEq)]
pub struct DetectedRunner {
    pub version: Option<String>,
    pub capabilities: Capabilities,
    /// Not detected: capabilities assumed for `--dry-run` (the CLI was not found).
    pub assumed: bool,
}

/// The agent side of a run.
#[derive(Clone, Default)]
pub struct AgentSetup {
    /// By `runner.command` as resolved for the stages (usually one).
    pub runners: BTreeMap<String, DetectedRunner>,
    /// Recorded runs that answer agent stages instead of a live model.
    pub replay: ReplaySetup,
    /// Whether the CLI's sandbox can run on this machine, detected once in a live
    /// run, when a stage that allows Bash is first assembled; `None` when not
    /// checked (a dry run), where such a stage is assembled as if it could.
    pub sandbox: Option<Arc<specbridge_engine::sandbox::SandboxProbe>>,
    /// The run store's state between agent attempts (`store_check/`).
    pub store: Arc<crate::store_check::StoreBaseline>,
    /// The working tree's snapshot taken ahead for the run's first agent attempt
    /// (`snapshot_ahead.rs`).
    pub tree_ahead: Arc<crate::snapshot_ahead::SnapshotAhead>,
}

/// Where replayed stages come from (docs/replay.md).
#[derive(Debug, Clone, Default)]
pub struct ReplaySetup {
    /// `run --replay DIR`: every agent stage is answered from this recording.
    pub forced: Option<Arc<Recording>>,
    /// `runner: {kind: replay, from: …}`: by `from` as written in the pipeline.
    pub by_from: BTreeMap<String, Arc<Recording>>,
    /// `--replay-missing=live`: a stage without a usable recording runs live.
    pub live_when_missing: bool,
}

impl ReplaySetup {
    /// The recording that answers a stage with these runner settings, if any.
    pub(crate) fn recording_for(&self, runner: &ResolvedRunner) -> Option<&Arc<Recording>> {
        if let Some(r) = &self.forced {
            return Some(r);
        }
        if runner.kind != RunnerKind::Replay {
            return None;
        }
        runner.from.as_ref().and_then(|f| self.by_from.get(f))
    }
}

impl std::fmt::Debug for AgentSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentSetup")
            .field("runners", &self.runners)
            .field("replay", &self.replay)
            .finish()
    }
}

impl AgentSetup {
    pub fn runner(&self, command: &str) -> Option<&DetectedRunner> {
        self.runners.get(command)
    }
}

/// Capabilities of a current Claude Code with every flag specbridge uses (those of
/// the newest version built in), for `--dry-run` when the CLI cannot be asked.
/// The version and the permission modes are left unlisted, so modes are passed as
/// configured.
pub(crate) fn assumed_capabilities() -> Capabilities {
    let newest = specbridge_engine::runner::claude_code::known::KNOWN[0];
    Capabilities {
        version: None,
        permission_modes: None,
        ..specbridge_engine::runner::claude_code::known::capabilities(newest)
            .expect("the newest known version has built-in capabilities")
    }
}
