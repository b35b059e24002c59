//! `specbridge runs report RUN`: the run as one HTML page (rendered by `crate::report`).

use std::path::PathBuf;

use crate::commands::Workspace;
use crate::error::{CliError, CliResult};
use crate::printer::Printer;

pub fn run(
    ws: &Workspace,
    printer: Printer,
    selector: &str,
    output: Option<PathBuf>,
    json_out: bool,
) -> CliResult {
    let _ = (ws, printer, selector, output, json_out);
    Err(CliError::Other("not yet".into()))
}
