//! One module per command; each returns the exit code.

mod audit;
mod doctor;
mod graph;
mod init;
mod resume;
mod run;
pub(crate) mod runs;
pub(crate) mod validate;

use std::path::PathBuf;

use crate::args::{Cli, Command, RunnerCommand, RunsCommand};
use crate::error::{CliError, CliResult};
use crate::printer::Printer;

/// Where the command works: the repository root and the pipeline file.
#[derive(Debug, Clone)]
pub(crate) struct Workspace {
    pub root: PathBuf,
}

impl Workspace {
    /// The recorded run a selector names (id, unique prefix, `latest`).
    pub(crate) fn run(&self, selector: &str) -> CliResult<specbridge_engine::store::RunReader> {
        Ok(specbridge_engine::store::RunStore::new(&self.root).reader(selector)?)
    }

    /// The root as an absolute path with symlinks resolved, as the current
    /// directory is: it is recorded in `run.json` and is where confined commands
    /// start, inside a sandbox whose own `/` a relative path (`-C .`) would name.
    pub(crate) fn new(dir: Option<PathBuf>) -> CliResult<Self> {
        let given = match dir {
            Some(d) => d,
            None => std::env::current_dir().map_err(|e| {
                CliError::Config(format!("failed to read the current directory: {e}"))
            })?,
        };
        match std::fs::canonicalize(&given) {
            Ok(root) if root.is_dir() => Ok(Workspace { root }),
            _ => Err(CliError::Config(format!(
                "-C {}: not a directory",
                given.display()
            ))),
        }
    }

    /// The pipeline file: `-f` relative to the current directory, else
    /// `specbridge.yaml` at the repository root.
    pub(crate) fn pipeline_path(&self, file: Option<PathBuf>) -> PathBuf {
        match file {
            Some(f) if f.is_absolute() => f,
            Some(f) => std::env::current_dir().map(|d| d.join(&f)).unwrap_or(f),
            None => self.root.join("specbridge.yaml"),
        }
    }
}

pub(crate) fn dispatch(cli: Cli, printer: Printer) -> CliResult {
    let ws = Workspace::new(cli.global.directory)?;
    match cli.command {
        Command::Init(args) => init::run(&ws, args, printer),
        Command::Run(args) => run::run(&ws, printer, args),
        Command::Validate(args) => validate::run(&ws, args, printer),
        Command::Graph(args) => graph::run(&ws, args, printer),
        Command::Resume(args) => resume::run(&ws, printer, args),
        Command::Runs(RunsCommand::List { json }) => runs::list(&ws, printer, json),
        Command::Runs(RunsCommand::Show {
            run,
            stage: None,
            json,
            ..
        }) => runs::show(&ws, printer, &run, json, cli.global.verbose > 0),
        Command::Runs(RunsCommand::Show {
            run,
            stage: Some(stage),
            attempt,
            diff,
            json,
        }) => runs::show_stage(
            &ws,
            printer,
            &run,
            runs::stage::StageArgs {
                stage: &stage,
                attempt,
                diff,
                json,
            },
        ),
        Command::Runs(RunsCommand::Report { run, output, json }) => {
            runs::report::run(&ws, printer, &run, output, json)
        }
        Command::Runs(RunsCommand::Audit { run, all, json }) => {
            audit::run(&ws, printer, run, all, json)
        }
        Command::Runner(RunnerCommand::Doctor {
            kind,
            command,
            file,
            json,
        }) => doctor::run(&ws, &kind, command, file.file, json, printer),
    }
}
