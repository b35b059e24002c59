//! The `specbridge` binary: argument parsing, output and exit codes over the engine.

mod args;
mod commands;
mod error;
mod printer;
mod inspect;
mod progress;
mod table;

use clap::Parser;

use crate::args::Cli;
use crate::error::CliError;
use crate::printer::Printer;

fn main() {
    let cli = Cli::parse();
    let printer = Printer::new(cli.global.color);
    init_tracing(cli.global.verbose);
    let code = match commands::dispatch(cli, printer) {
        Ok(code) => code,
        Err(CliError::Reported(code)) => code,
        Err(e) => {
            printer.err(format!("{}: {e}", printer.error_label()));
            e.exit_code()
        }
    };
    std::process::exit(code);
}

fn init_tracing(verbose: u8) {
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
        .without_time()
        .try_init();
}
