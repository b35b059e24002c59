//! `specbridge validate`: every problem of a pipeline file at once.

use std::path::{Path, PathBuf};

use serde::Serialize;
use specbridge_engine::pipeline::validate::{load_and_validate, worst_class};
use specbridge_engine::{exit, Diagnostic, DiagnosticClass, Severity};

use crate::args::ValidateArgs;
use crate::commands::Workspace;
use crate::error::CliResult;
use crate::printer::Printer;

#[derive(Serialize)]
struct Report<'a> {
    valid: bool,
    file: String,
    diagnostics: &'a [Diagnostic],
}

pub fn run(ws: &Workspace, args: ValidateArgs, printer: Printer) -> CliResult {
    let path = ws.pipeline_path(args.file.file);
    let (diagnostics, stages) = match load_and_validate(&path, &ws.root) {
        Ok(v) => (v.warnings, Some(v.pipeline.file.stages.len())),
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

/// Exit 0 without errors, 6 when any error is a safety problem, else 2.
pub fn exit_code(diagnostics: &[Diagnostic]) -> i32 {
    match worst_class(diagnostics) {
        None => exit::OK,
        Some(DiagnosticClass::Safety) => exit::SAFETY,
        Some(DiagnosticClass::Config) => exit::CONFIG,
    }
}

/// Each diagnostic on stderr, compiler style, with a coloured severity.
pub fn print_diagnostics(printer: &Printer, diagnostics: &[Diagnostic]) {
    for d in diagnostics {
        let text = d.to_string();
        let (plain, label) = match d.severity {
            Severity::Error => (": error: ", printer.error_label()),
            Severity::Warning => (": warning: ", printer.warning_label()),
        };
        printer.err(text.replacen(plain, &format!(": {label}: "), 1));
    }
}

/// `FILE: 3 errors, 1 warning` after the messages of an invalid file.
pub fn summary(file: &str, diagnostics: &[Diagnostic]) -> String {
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    format!(
        "{file}: {errors} error{}{}",
        if errors == 1 { "" } else { "s" },
        warning_count(diagnostics)
    )
}

fn warning_count(diagnostics: &[Diagnostic]) -> String {
    match diagnostics.iter().filter(|d| !d.is_error()).count() {
        0 => String::new(),
        1 => ", 1 warning".into(),
        n => format!(", {n} warnings"),
    }
}

/// Diagnostics with their file shown relative to the current folder.
pub fn relative(mut diagnostics: Vec<Diagnostic>) -> Vec<Diagnostic> {
    for d in &mut diagnostics {
        d.file = PathBuf::from(display_path(&d.file));
    }
    diagnostics
}

/// A path relative to the current folder when it is inside it.
pub fn display_path(path: &Path) -> String {
    let Ok(cwd) = std::env::current_dir() else {
        return path.display().to_string();
    };
    let strip = |base: &Path| path.strip_prefix(base).ok().map(Path::to_path_buf);
    let rel = strip(&cwd).or_else(|| {
        let canon = std::fs::canonicalize(&cwd).ok()?;
        let file = std::fs::canonicalize(path).ok()?;
        file.strip_prefix(canon).ok().map(Path::to_path_buf)
    });
    match rel {
        Some(r) if !r.as_os_str().is_empty() => r.display().to_string(),
        _ => path.display().to_string(),
    }
}
