//! `specbridge runs audit RUN|--all`: check run directories' integrity and safety.

use specbridge_engine::audit::{audit_all, audit_run, AuditReport, Severity};
use specbridge_engine::exit;
use specbridge_engine::store::{RunReader, RunStore};

use crate::commands::Workspace;
use crate::error::CliResult;
use crate::printer::Printer;

pub(super) fn run(
    ws: &Workspace,
    printer: Printer,
    run: Option<String>,
    all: bool,
    json: bool,
) -> CliResult {
    let store = RunStore::new(&ws.root);
    let reports = if all {
        audit_all(store.runs_dir())?
    } else {
        let selector = run.as_deref().unwrap_or("latest");
        // A path to a run folder anywhere (a recording, a copy) is audited as is.
        let as_path = RunReader::at(std::path::Path::new(selector));
        let dir = if as_path.has_run_record() {
            as_path.dir().to_path_buf()
        } else {
            store.select(selector)?.1
        };
        vec![audit_run(&dir)?]
    };
    let code = exit::most_severe(reports.iter().map(AuditReport::exit_code));
    if json {
        if all {
            printer.json(&reports);
        } else {
            printer.json(&reports[0]);
        }
        return Ok(code);
    }
    if reports.is_empty() {
        printer.err(format!(
            "no runs to audit in {}",
            store.runs_dir().display()
        ));
    }
    for r in &reports {
        print_report(&printer, r);
    }
    Ok(code)
}

fn print_report(printer: &Printer, r: &AuditReport) {
    let errors = r
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    let warnings = r.findings.len() - errors;
    for f in &r.findings {
        let label = match f.severity {
            Severity::Error => printer.error_label(),
            Severity::Warning => printer.warning_label(),
        };
        let mut place = Vec::new();
        if let Some(s) = &f.stage {
            place.push(format!("stage {s}"));
        }
        if let Some(a) = f.attempt {
            place.push(format!("attempt {a}"));
        }
        if let Some(file) = &f.file {
            place.push(file.clone());
        }
        let place = if place.is_empty() {
            String::new()
        } else {
            format!(" [{}]", place.join(", "))
        };
        printer.out(format!(
            "{label}[{}]{place}: {}",
            f.code.as_str(),
            f.message
        ));
    }
    let verdict = if r.findings.is_empty() {
        "clean".to_string()
    } else {
        format!("{errors} error(s), {warnings} warning(s)")
    };
    printer.out(format!(
        "run {}: {verdict} ({} files checked, {} events)",
        r.run_id, r.checked_files, r.events
    ));
}
