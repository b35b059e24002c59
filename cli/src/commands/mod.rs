//! One module per command; each returns the exit code.

mod doctor;

use std::path::PathBuf;

use crate::args::{Cli, Command, RunnerCommand, RunsCommand};
use crate::error::{CliError, CliResult};
use crate::printer::Printer;

/// Where the command works: the repository root and the pipeline file.
#[derive(Debug, Clone)]
pub struct Workspace {
    pub root: PathBuf,
}

impl Workspace {
    pub fn new(dir: Option<PathBuf>) -> CliResult<Self> {
        let root = match dir {
            Some(d) => d,
            None => std::env::current_dir()
                .map_err(|e| CliError::Config(format!("failed to read the current directory: {e}")))?,
        };
        if !root.is_dir() {
            return Err(CliError::Config(format!(
                "-C {}: not a directory",
                root.display()
            )));
        }
        Ok(Workspace { root })
    }

    /// The pipeline file: `-f` relative to the current directory, else
    /// `specbridge.yaml` at the repository root.
    pub fn pipeline_path(&self, file: Option<PathBuf>) -> PathBuf {
        match file {
            Some(f) if f.is_absolute() => f,
            Some(f) => std::env::current_dir().map(|d| d.join(&f)).unwrap_or(f),
            None => self.root.join("specbridge.yaml"),
        }
    }
}

pub fn dispatch(cli: Cli, printer: Printer) -> CliResult {
    let ws = Workspace::new(cli.global.directory)?;
    let _ = (&ws, printer);
    match cli.command {
        Command::Init(_) => Err(CliError::not_yet("init")),
        Command::Validate(_) => Err(CliError::not_yet("validate")),
        Command::Graph(_) => Err(CliError::not_yet("graph")),
        Command::Run(_) => Err(CliError::not_yet("run")),
        Command::Resume(_) => Err(CliError::not_yet("resume")),
        Command::Runs(RunsCommand::List { .. }) => Err(CliError::not_yet("runs list")),
        Command::Runs(RunsCommand::Show { .. }) => Err(CliError::not_yet("runs show")),
        Command::Runs(RunsCommand::Audit { .. }) => Err(CliError::not_yet("runs audit")),
        Command::Runner(RunnerCommand::Doctor {
            kind,
            command,
            json,
        }) => doctor::run(&kind, command, json, printer),
    }
}
