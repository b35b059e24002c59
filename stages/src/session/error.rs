//! Why a session could not start or finish, each with the exit code it means.

use std::path::PathBuf;

use specbridge_engine::diagnostic::{Diagnostic, DiagnosticClass};
use specbridge_engine::exit;
use specbridge_engine::orchestrate::{OptionsError, OrchestrateError};
use specbridge_engine::pipeline::validate::worst_class;
use specbridge_engine::replay::ReplayError;
use specbridge_engine::resume::ResumeError;
use specbridge_engine::runner::claude_code::DoctorStatus;
use specbridge_engine::scaffold::ScaffoldError;

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// A flag's value no run can use.
    #[error(transparent)]
    Options(#[from] OptionsError),
    /// The pipeline file failed validation; every problem is in `diagnostics`.
    #[error("{} is not a valid pipeline", path.display())]
    Invalid {
        path: PathBuf,
        diagnostics: Vec<Diagnostic>,
    },
    /// The stages to run could not be planned (`--only` naming no stage).
    #[error(transparent)]
    Plan(OrchestrateError),
    #[error("--rerun {pattern}: no stage or fan-out instance of run {run} has this id")]
    UnknownRerun { pattern: String, run: String },
    /// The run to resume could not be opened or begun (in use, unreadable, or
    /// records that fail the integrity checks).
    #[error(transparent)]
    Resume(#[from] ResumeError),
    /// Refused before anything was created: agent stages outside a repository's
    /// root, execute stages on a tree with changes that are not the run's own.
    #[error("{0}")]
    Preflight(String),
    /// A confined command without a working bubblewrap.
    #[error("{0}")]
    Sandbox(String),
    #[error(transparent)]
    Replay(#[from] ReplayError),
    #[error("stage `{stage}`: runner kind `replay` needs `from:` (a recorded run folder)")]
    ReplayWithoutFrom { stage: String },
    #[error(transparent)]
    Scaffold(#[from] ScaffoldError),
    /// A runner command the planned agent stages use cannot be used.
    #[error("cannot run agent stages: the runner `{command}` {refusal}")]
    RunnerUnavailable {
        command: String,
        refusal: String,
        status: DoctorStatus,
    },
    #[error("failed to start the async runtime")]
    Runtime(#[source] std::io::Error),
    /// The run folder could not be written while the run went on.
    #[error(transparent)]
    Run(OrchestrateError),
}

impl SessionError {
    /// The documented exit code of this error (README, "Exit codes"): the one place a
    /// session's failure becomes a number.
    pub fn exit_code(&self) -> i32 {
        match self {
            SessionError::Invalid { diagnostics, .. } => match worst_class(diagnostics) {
                Some(DiagnosticClass::Safety) => exit::SAFETY,
                _ => exit::CONFIG,
            },
            SessionError::Resume(ResumeError::Tampered { .. }) => exit::SAFETY,
            SessionError::Replay(ReplayError::Tampered { .. }) => exit::SAFETY,
            SessionError::RunnerUnavailable { .. } => exit::RUNNER_UNAVAILABLE,
            SessionError::Options(_)
            | SessionError::Plan(_)
            | SessionError::UnknownRerun { .. }
            | SessionError::Resume(_)
            | SessionError::Preflight(_)
            | SessionError::Sandbox(_)
            | SessionError::Replay(_)
            | SessionError::ReplayWithoutFrom { .. }
            | SessionError::Scaffold(_)
            | SessionError::Runtime(_)
            // A run folder that cannot be written is the store's configuration
            // (a vanished folder, a full disk): README.md exit 2.
            | SessionError::Run(_) => exit::CONFIG,
        }
    }

    /// What the user can do about it, one line each, after the message.
    pub fn help(&self) -> Vec<String> {
        match self {
            SessionError::RunnerUnavailable { status, .. } => {
                let mut lines: Vec<String> = runner_hint(*status)
                    .map(|h| format!("  help: {h}"))
                    .into_iter()
                    .collect();
                lines.push(
                    "nothing was run; `specbridge runner doctor --command PATH` shows the details"
                        .into(),
                );
                lines
            }
            _ => Vec::new(),
        }
    }
}

fn runner_hint(status: DoctorStatus) -> Option<&'static str> {
    match status {
        DoctorStatus::Unauthenticated => {
            Some("log in with `claude auth login`, or set ANTHROPIC_API_KEY for the runner")
        }
        DoctorStatus::Incompatible => {
            Some("install a newer Claude Code: `npm install -g @anthropic-ai/claude-code`")
        }
        DoctorStatus::Unavailable => {
            Some("install Claude Code, or set `runner.command` to its path")
        }
        _ => None,
    }
}
