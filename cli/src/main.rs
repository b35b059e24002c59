//! The `specbridge` binary: argument parsing, output and exit codes over the engine.

mod args;
mod commands;
mod diagnostics;
mod error;
mod inspect;
mod printer;
mod progress;
mod report;
mod table;
mod view;

use crate::args::{Cli, ColorChoice};
use crate::error::{error_json, CliError};
use crate::printer::Printer;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // `--json` asked for on the command line, even when the rest does not parse.
    let args: Vec<String> = std::env::args().collect();
    let json_asked = args.iter().skip(1).any(|a| a == "--json");
    let cli = match parse(&args) {
        Ok(cli) => cli,
        Err(e) => std::process::exit(usage_error(e, json_asked)),
    };
    let printer = Printer::new(cli.global.color);
    let json_out = cli.command.json_output();
    init_tracing(cli.global.verbose, printer.color);
    let code = match commands::dispatch(cli, printer) {
        Ok(code) => code,
        Err(e) => {
            // Stdout holds exactly one JSON object in `--json` mode: the error
            // object, unless the command printed its own before failing.
            if json_out && !printer::json_printed() {
                printer.json(&error_json(&e));
            }
            e.report(printer);
            e.exit_code()
        }
    };
    end(code)
}

/// Ends the process once what it printed is out: `_exit` rather than `exit`,
/// whose handlers only free memory the process is about to lose anyway (the
/// allocator's collection at exit gives every page back one `madvise` at a
/// time). Every file of the run was written, synced and closed before
/// `dispatch` returned; stdout is flushed here, stderr is unbuffered.
fn end(code: i32) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    // SAFETY: `_exit` ends the process without touching its memory; nothing
    // runs after it.
    unsafe { libc::_exit(code) }
}

/// Clap with its colours following `--color` and NO_COLOR like everything else.
fn parse(args: &[String]) -> Result<Cli, clap::Error> {
    use clap::{CommandFactory, FromArgMatches};
    let never = args
        .windows(2)
        .any(|w| w[0] == "--color" && w[1] == "never")
        || args.iter().any(|a| a == "--color=never")
        || std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let always = args
        .windows(2)
        .any(|w| w[0] == "--color" && w[1] == "always")
        || args.iter().any(|a| a == "--color=always");
    let choice = if always {
        clap::ColorChoice::Always
    } else if never {
        clap::ColorChoice::Never
    } else {
        clap::ColorChoice::Auto
    };
    let matches = Cli::command().color(choice).try_get_matches_from(args)?;
    Cli::from_arg_matches(&matches)
}

/// Clap's own errors (and `--help`/`--version`), with the JSON error object on
/// stdout when `--json` was given to a command that failed to parse.
fn usage_error(e: clap::Error, json_asked: bool) -> i32 {
    use clap::error::ErrorKind;
    let informational = matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion);
    if json_asked && !informational {
        let message = e
            .render()
            .to_string()
            .lines()
            .next()
            .unwrap_or_default()
            .trim_start_matches("error: ")
            .to_string();
        let printer = Printer::new(ColorChoice::Never);
        printer.json(&error_json(&CliError::Config(message)));
    }
    let _ = e.print();
    e.exit_code()
}

fn init_tracing(verbose: u8, color: bool) {
    let level = match verbose {
        0 | 1 => "warn",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("SPECBRIDGE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(color)
        .without_time()
        .try_init();
}
