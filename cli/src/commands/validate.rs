//! `specbridge validate`: every problem of a pipeline file at once.

use serde::Serialize;
use specbridge_engine::exit;
use specbridge_engine::pipeline::validate::load_and_validate;
use specbridge_engine::Diagnostic;

use crate::args::ValidateArgs;
use crate::commands::Workspace;
use crate::diagnostics::{
    display_path, exit_code, print as print_diagnostics, relative, summary, warning_count,
};
use crate::error::CliResult;
use crate::printer::Printer;

#[derive(Serialize)]
struct Report<'a> {
    valid: bool,
    file: String,
    diagnostics: &'a [Diagnostic],
}

pub(crate) fn run(ws: &Workspace, args: ValidateArgs, printer: Printer) -> CliResult {
    let path = ws.pipeline_path(args.file.file);
    let (diagnostics, stages) = match load_and_validate(&path, &ws.root) {
        Ok(mut v) => {
            let warnings = std::mem::take(&mut v.warnings);
            let stages = v.pipeline.file.stages.len();
            // The process ends once the result is printed: freeing a large
            // pipeline's document, model and graph node by node would cost a
            // tenth of the command's time and return nothing to anyone.
            std::mem::forget(v);
            (warnings, Some(stages))
        }
        Err(d) => (d, None),
    };
    let diagnostics = relative(diagnostics);
    let code = exit_code(&diagnostics);
    let shown = display_path(&path);
    if args.json {
        printer.json(&Report {
            valid: code == exit::OK,
            file: shown,
            diagnostics: &diagnostics,
        });
        return Ok(code);
    }
    print_diagnostics(&printer, &diagnostics);
    match stages {
        Some(n) => printer.out(format!(
            "{shown}: valid, {n} stage{}{}",
            if n == 1 { "" } else { "s" },
            warning_count(&diagnostics)
        )),
        None => printer.err(summary(&shown, &diagnostics)),
    }
    Ok(code)
}
