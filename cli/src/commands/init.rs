//! `specbridge init`: write a starter pipeline.

use specbridge_stages::init::{init, InitError};

use crate::args::InitArgs;
use crate::commands::Workspace;
use crate::error::{CliError, CliResult};
use crate::printer::Printer;

pub fn run(ws: &Workspace, args: InitArgs, printer: Printer) -> CliResult {
    match init(&ws.root, &args.template) {
        Ok(written) => {
            for f in &written {
                printer.out(format!("wrote {f}"));
            }
            printer.out(
                "next: describe the change in SPEC.md, set your test command under `verification:`, then `specbridge validate` and `specbridge run --dry-run`",
            );
            Ok(0)
        }
        Err(e @ (InitError::UnknownTemplate { .. } | InitError::WouldOverwrite(_))) => {
            Err(CliError::Config(e.to_string()))
        }
        Err(e) => Err(CliError::Other(e.to_string())),
    }
}
