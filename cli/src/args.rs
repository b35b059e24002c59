//! Every command-line definition of the `specbridge` binary, in one place.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use specbridge_engine::orchestrate::GivenOptions;
use specbridge_engine::pipeline::{DurationSpec, RunOverrides};

use crate::error::CliError;

#[derive(Debug, Parser)]
#[command(
    name = "specbridge",
    version,
    about = "Run spec-to-task pipelines on the Claude Code CLI and keep every run as an auditable directory",
    long_about = None,
    propagate_version = true
)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub(crate) struct GlobalArgs {
    /// Repository root (default: the current directory)
    #[arg(short = 'C', global = true, value_name = "DIR")]
    pub directory: Option<PathBuf>,
    /// Print more detail (repeat for debug logs)
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// When to use colors (NO_COLOR is honoured)
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Write a starter specbridge.yaml and prompts/
    Init(InitArgs),
    /// Check a pipeline file and report every problem at once
    Validate(ValidateArgs),
    /// Draw the stage graph
    Graph(GraphArgs),
    /// Run a pipeline
    Run(RunArgs),
    /// Resume a failed or interrupted run
    Resume(ResumeArgs),
    /// Inspect recorded runs
    #[command(subcommand)]
    Runs(RunsCommand),
    /// Inspect agent runners
    #[command(subcommand)]
    Runner(RunnerCommand),
}

#[derive(Debug, Args)]
pub(crate) struct FileArg {
    /// Pipeline file (default: specbridge.yaml at the repository root)
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct InitArgs {
    /// Starter template
    #[arg(long, value_enum, default_value_t = InitTemplate::SpecToTask)]
    pub template: InitTemplate,
    /// Replace the template's files when they exist (SPEC.md is never replaced)
    #[arg(long)]
    pub force: bool,
    /// The command that tests the project, as words (default: detected from
    /// Cargo.toml, package.json, pyproject.toml, go.mod or a Makefile)
    #[arg(long, value_name = "COMMAND")]
    pub test: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum InitTemplate {
    /// requirements → design → tasks (read-only), then one execute stage per task
    SpecToTask,
}

impl InitTemplate {
    pub(crate) fn name(self) -> &'static str {
        match self {
            InitTemplate::SpecToTask => "spec-to-task",
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct ValidateArgs {
    #[command(flatten)]
    pub file: FileArg,
    /// Print the problems as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum GraphFormat {
    Mermaid,
    Dot,
    Json,
}

#[derive(Debug, Args)]
pub(crate) struct GraphArgs {
    #[command(flatten)]
    pub file: FileArg,
    /// Drawing format
    #[arg(long, value_enum, default_value_t = GraphFormat::Mermaid)]
    pub format: GraphFormat,
    /// Draw the expanded graph of a recorded run, with each node's status
    #[arg(long, value_name = "RUN")]
    pub run: Option<String>,
}

/// Settings of a run that can be overridden on the command line (run and resume).
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct OverrideArgs {
    /// Stages running at once
    #[arg(long, value_name = "N")]
    pub concurrency: Option<u32>,
    /// Per-invocation turn limit
    #[arg(long, value_name = "N")]
    pub max_turns: Option<u32>,
    /// Per-invocation budget in US dollars
    #[arg(long, value_name = "X")]
    pub max_budget_usd: Option<f64>,
    /// Per-invocation timeout (90s, 15m, 1h, or milliseconds)
    #[arg(long, value_name = "DUR")]
    pub timeout: Option<String>,
    /// Model for every agent stage
    #[arg(long, value_name = "M")]
    pub model: Option<String>,
    /// Whole-run budget in US dollars, over the first run and every resume
    /// (overrides the pipeline's `budget.maxBudgetUsd`; not part of any input hash)
    #[arg(long, value_name = "X")]
    pub run_budget_usd: Option<f64>,
    /// Stop scheduling new stages after the first failure
    #[arg(long)]
    pub fail_fast: bool,
    /// Allow a dirty working tree (pre-existing changes are recorded and not attributed)
    #[arg(long)]
    pub allow_dirty: bool,
    /// Print one JSON summary on stdout and nothing else there
    #[arg(long)]
    pub json: bool,
    /// Probe the runner and bubblewrap again instead of using what the cache folder remembers
    #[arg(long)]
    pub refresh_runner: bool,
}

impl OverrideArgs {
    /// The flags as the session takes them. Only parsing happens here; which
    /// values a run can use is the session's rule (`GivenOptions::check`).
    pub(crate) fn given(&self, only: &[String]) -> Result<GivenOptions, CliError> {
        let timeout = match &self.timeout {
            Some(t) => Some(
                DurationSpec::parse(t).map_err(|e| CliError::Config(format!("--timeout: {e}")))?,
            ),
            None => None,
        };
        Ok(GivenOptions {
            concurrency: self.concurrency,
            only: only.to_vec(),
            fail_fast: self.fail_fast,
            allow_dirty: self.allow_dirty,
            overrides: RunOverrides {
                max_turns: self.max_turns,
                max_budget_usd: self.max_budget_usd,
                timeout,
                model: self.model.clone(),
            },
            run_budget_usd: self.run_budget_usd,
        })
    }
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub file: FileArg,
    /// Run only these stages and everything they need (repeatable)
    #[arg(long = "only", value_name = "STAGE")]
    pub only: Vec<String>,
    /// Print the plan and every argv that would run, spawning nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Copy DIR into a fresh temporary git repository (one commit) and run there
    #[arg(long, value_name = "DIR")]
    pub scaffold: Option<PathBuf>,
    /// Keep the scaffold folder after the run (the default; it is printed)
    #[arg(long, requires = "scaffold", conflicts_with = "no_keep")]
    pub keep: bool,
    /// Delete the scaffold folder after the run
    #[arg(long, requires = "scaffold")]
    pub no_keep: bool,
    #[command(flatten)]
    pub replay: ReplayArgs,
    #[command(flatten)]
    pub overrides: OverrideArgs,
}

/// Answering agent stages from a recorded run.
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct ReplayArgs {
    /// Answer every agent stage from this recorded run directory instead of a live model
    #[arg(long, value_name = "RUN_DIR")]
    pub replay: Option<PathBuf>,
    /// What a stage without a usable recording does
    #[arg(long, value_enum, default_value_t = ReplayMissing::Fail, requires = "replay")]
    pub replay_missing: ReplayMissing,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum ReplayMissing {
    /// Fail the stage with the reason
    #[default]
    Fail,
    /// Run the stage live
    Live,
}

#[derive(Debug, Args)]
pub(crate) struct ResumeArgs {
    /// Run id, unique prefix, or `latest`
    pub run: String,
    /// Print, per stage, reuse or rerun and why
    #[arg(long)]
    pub dry_run: bool,
    /// Run this stage again, and everything that depends on it (repeatable; `*`
    /// and `?` match fan-out instances, e.g. `implement.*`)
    #[arg(long = "rerun", value_name = "STAGE")]
    pub rerun: Vec<String>,
    /// First run the verification of every unverified execute stage again on the
    /// working tree as it is now (a hand fix); a stage that passes is verified
    /// without spawning an agent
    #[arg(long)]
    pub reverify: bool,
    #[command(flatten)]
    pub file: FileArg,
    #[command(flatten)]
    pub overrides: OverrideArgs,
}

#[derive(Debug, Subcommand)]
pub(crate) enum RunsCommand {
    /// List recorded runs
    List {
        /// Print the runs as one JSON array
        #[arg(long)]
        json: bool,
    },
    /// Show one run, or one stage's story: prompt, tool calls, verification, evidence, cost
    Show {
        /// Run id, unique prefix, or `latest`
        run: String,
        /// Show this stage (or fan-out instance) attempt by attempt
        stage: Option<String>,
        /// Only this attempt of the stage
        #[arg(long, value_name = "N", requires = "stage")]
        attempt: Option<u32>,
        /// Print the stage's recorded change (each attempt's diff.patch)
        #[arg(long, requires = "stage")]
        diff: bool,
        /// Print the same as one JSON object
        #[arg(long)]
        json: bool,
    },
    /// Write the run as one self-contained HTML page
    Report {
        /// Run id, unique prefix, or `latest`
        run: String,
        /// Where to write it (default: report.html in the run folder)
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Print the report's path and size as one JSON object
        #[arg(long)]
        json: bool,
    },
    /// Check a run directory's integrity and safety
    Audit {
        /// Run id, unique prefix, `latest`, or the path of a run folder
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        run: Option<String>,
        /// Audit every run
        #[arg(long)]
        all: bool,
        /// Print the findings as one JSON object
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum RunnerCommand {
    /// Detect an agent CLI's version, capabilities and authentication
    Doctor {
        /// Runner kind
        #[arg(default_value = "claude-code")]
        kind: String,
        /// Executable to probe (default: the pipeline's runner command, else `claude`)
        #[arg(long, value_name = "PATH")]
        command: Option<PathBuf>,
        #[command(flatten)]
        file: FileArg,
        /// Print the report as one JSON object
        #[arg(long)]
        json: bool,
    },
}

impl Command {
    /// The command was asked for `--json`: its stdout is exactly one JSON value,
    /// errors included.
    pub(crate) fn json_output(&self) -> bool {
        match self {
            Command::Init(_) | Command::Graph(_) => false,
            Command::Validate(a) => a.json,
            Command::Run(a) => a.overrides.json,
            Command::Resume(a) => a.overrides.json,
            Command::Runs(RunsCommand::List { json })
            | Command::Runs(RunsCommand::Show { json, .. })
            | Command::Runs(RunsCommand::Report { json, .. })
            | Command::Runs(RunsCommand::Audit { json, .. })
            | Command::Runner(RunnerCommand::Doctor { json, .. }) => *json,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// `--help` of every subcommand explains every option and argument.
    #[test]
    fn every_option_of_every_subcommand_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&super::Cli::command(), "specbridge", &mut missing);
        assert!(missing.is_empty(), "options without help: {missing:?}");
    }
}
