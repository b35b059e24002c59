//! `specbridge runs report RUN`: the run as one HTML page (rendered by `crate::report`).

use std::path::PathBuf;

use serde_json::json;
use specbridge_engine::store::RunStore;

use crate::commands::Workspace;
use crate::error::{CliError, CliResult};
use crate::printer::Printer;
use crate::report::{render, ReportData};

pub(crate) fn run(
    ws: &Workspace,
    printer: Printer,
    selector: &str,
    output: Option<PathBuf>,
    json_out: bool,
) -> CliResult {
    let store = RunStore::new(&ws.root);
    let reader = ws.run(selector)?;
    let id = reader.id();
    let record = reader.run()?;
    let data = ReportData::read(&reader, record)?;
    let page = render(&data, &reader);
    // Outside the run folder: the audit checks every file in it against an
    // announcement, and the report is not a record.
    let path = output.unwrap_or_else(|| {
        let specbridge_dir = store.runs_dir().parent().unwrap_or(store.runs_dir());
        specbridge_dir.join("reports").join(format!("{id}.html"))
    });
    // Built from redacted records, and redacted once more with this process's
    // environment: the page may be shared.
    let redactor = specbridge_engine::redact::Redactor::from_process_env();
    specbridge_engine::store::write_report(&path, page.as_bytes(), &redactor).map_err(
        |source| CliError::WriteReport {
            path: path.clone(),
            source,
        },
    )?;
    if json_out {
        printer.json(&json!({ "runId": id, "report": path, "bytes": page.len() }));
    } else {
        printer.out(format!("wrote {} ({} bytes)", path.display(), page.len()));
    }
    Ok(0)
}
