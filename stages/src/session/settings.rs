//! What a session is given (plain settings parsed from the command line), whom it
//! tells as it goes, and how it ends.

use std::path::{Path, PathBuf};

use specbridge_engine::audit::Finding;
use specbridge_engine::events::Observed;
use specbridge_engine::orchestrate::{GivenOptions, RunResult};
use specbridge_engine::resume::ReuseDecision;
use specbridge_engine::scheduler::Node;
use specbridge_engine::{exit, Diagnostic};

use super::replay::{ReplaySettings, ScaffoldSettings};

/// One `run` or `resume`, as the command line gave it.
#[derive(Debug, Clone)]
pub struct SessionSettings {
    /// The repository root (`-C`); under `--scaffold`, the scaffold's root replaces it.
    pub root: PathBuf,
    /// The pipeline file: absolute, or relative to the root the run happens in.
    /// `None`: `specbridge.yaml` at the root for a run, the recorded path for a resume.
    pub file: Option<PathBuf>,
    pub given: GivenOptions,
    /// `--refresh-runner`: probe the runner again instead of using the cache.
    pub refresh_runner: bool,
    /// `--dry-run`: plan and decide, spawn and create nothing.
    pub dry_run: bool,
    pub kind: SessionKind,
}

/// A fresh run, or a resume of a recorded one.
#[derive(Debug, Clone)]
pub enum SessionKind {
    Run {
        replay: ReplaySettings,
        scaffold: Option<ScaffoldSettings>,
    },
    Resume {
        /// Run id, unique prefix or `latest`.
        run: String,
        /// `--rerun` patterns: stages run again on purpose, with their dependents.
        rerun: Vec<String>,
        /// `--reverify`: unverified execute stages first get a verification-only attempt.
        reverify: bool,
    },
}

/// Whom a session tells what happens, in order; the CLI prints it. Every method
/// has a default that ignores it.
pub trait SessionObserver: Send + Sync {
    /// `--scaffold`: the copy the run happens in.
    fn scaffold_created(&self, root: &Path, from: &Path, keep: bool) {
        let _ = (root, from, keep);
    }
    /// `--scaffold` without `--no-keep`, after the run.
    fn scaffold_kept(&self, root: &Path) {
        let _ = root;
    }
    /// The run to resume was opened: audit findings that do not stop a resume, and
    /// the length of an incomplete last event line.
    fn resume_opened(&self, findings: &[Finding], torn_tail: Option<usize>, dry_run: bool) {
        let _ = (findings, torn_tail, dry_run);
    }
    /// Warnings of the pipeline file's validation.
    fn pipeline_warnings(&self, diagnostics: &[Diagnostic]) {
        let _ = diagnostics;
    }
    /// Warnings about the run (runner, sandbox, replay), before it starts.
    fn warnings(&self, warnings: &[String]) {
        let _ = warnings;
    }
    /// The run folder was created (or reopened, `resumed`).
    fn run_started(&self, run_id: &str, resumed: bool) {
        let _ = (run_id, resumed);
    }
    /// An event of the run as the store appended it (redacted, with its `seq`
    /// and `at`), or a running agent's live progress, in the order of the log.
    /// Called while the log is held: it must not write to the run.
    fn observed(&self, seen: &Observed<'_>) {
        let _ = seen;
    }
}

/// A stage of a dry run, with the argv lines it would run.
#[derive(Debug, Clone)]
pub struct PlannedStage {
    pub node: Node,
    pub argv: Vec<String>,
}

/// How a session ended.
#[derive(Debug)]
pub enum SessionEnd {
    /// `run --dry-run`: the stages in plan order and what they would run.
    Planned {
        stages: Vec<PlannedStage>,
        /// Why runner capabilities were assumed, when they were.
        assumption: Option<String>,
    },
    /// `resume --dry-run`: what each stage would do.
    ResumePlanned {
        run_id: String,
        decisions: Vec<ReuseDecision>,
    },
    /// A run or resume that ran, settled.
    Finished {
        result: Box<RunResult>,
        /// `--no-keep`: the scaffold, records included, is gone.
        records_deleted: bool,
    },
}

impl SessionEnd {
    pub fn exit_code(&self) -> i32 {
        match self {
            SessionEnd::Planned { .. } | SessionEnd::ResumePlanned { .. } => exit::OK,
            SessionEnd::Finished { result, .. } => result.exit_code,
        }
    }
}
