//! Loading and validating the pipeline file for commands that run it.

use std::path::PathBuf;

use specbridge_engine::orchestrate::PipelineSource;
use specbridge_engine::pipeline::validate::load_and_validate;

use crate::commands::validate::{exit_code, print_diagnostics, relative, summary};
use crate::commands::Workspace;
use crate::error::{CliError, CliResult};
use crate::printer::Printer;

/// Load the pipeline file and validate it; print warnings; refuse on errors with
/// the same messages and exit code as `specbridge validate`.
pub fn load_valid(
    ws: &Workspace,
    file: Option<PathBuf>,
    printer: Printer,
) -> CliResult<PipelineSource> {
    let path = ws.pipeline_path(file);
    match load_and_validate(&path, &ws.root) {
        Ok(v) => {
            print_diagnostics(&printer, &relative(v.warnings));
            Ok(PipelineSource {
                path: v.pipeline.path.clone(),
                bytes: v.pipeline.raw.clone(),
                file: v.pipeline.file.clone(),
            })
        }
        Err(diags) => {
            let diags = relative(diags);
            print_diagnostics(&printer, &diags);
            printer.err(summary(&path.display().to_string(), &diags));
            Err(CliError::Reported(exit_code(&diags)))
        }
    }
}
