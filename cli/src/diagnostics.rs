//! Pipeline diagnostics on the terminal: compiler-style lines, their count, and
//! the exit code they mean. Shared by `validate`, `graph` and the errors of
//! `run` and `resume`.

use std::path::{Path, PathBuf};

use specbridge_engine::pipeline::validate::worst_class;
use specbridge_engine::{exit, Diagnostic, DiagnosticClass, Severity};

use crate::printer::Printer;

/// Exit 0 without errors, 6 when any error is a safety problem, else 2.
pub(crate) fn exit_code(diagnostics: &[Diagnostic]) -> i32 {
    match worst_class(diagnostics) {
        None => exit::OK,
        Some(DiagnosticClass::Safety) => exit::SAFETY,
        Some(DiagnosticClass::Config) => exit::CONFIG,
    }
}

/// Each diagnostic on stderr, compiler style, with a coloured severity.
pub(crate) fn print(printer: &Printer, diagnostics: &[Diagnostic]) {
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
pub(crate) fn summary(file: &str, diagnostics: &[Diagnostic]) -> String {
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    format!(
        "{file}: {errors} error{}{}",
        if errors == 1 { "" } else { "s" },
        warning_count(diagnostics)
    )
}

pub(crate) fn warning_count(diagnostics: &[Diagnostic]) -> String {
    match diagnostics.iter().filter(|d| !d.is_error()).count() {
        0 => String::new(),
        1 => ", 1 warning".into(),
        n => format!(", {n} warnings"),
    }
}

/// Diagnostics with their file shown relative to the current folder.
pub(crate) fn relative(mut diagnostics: Vec<Diagnostic>) -> Vec<Diagnostic> {
    for d in &mut diagnostics {
        d.file = PathBuf::from(display_path(&d.file));
    }
    diagnostics
}

/// A path relative to the current folder when it is inside it.
pub(crate) fn display_path(path: &Path) -> String {
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
