//! The one error type of the CLI, and the one place an error becomes an exit
//! code ([`CliError::exit_code`]) and what is printed for it.

use std::path::PathBuf;

use specbridge_engine::audit::AuditError;
use specbridge_engine::exit;
use specbridge_engine::store::{StoreError, WriteError};
use specbridge_stages::init::InitError;
use specbridge_stages::SessionError;

use crate::diagnostics;
use crate::printer::Printer;

/// An error that ends the command. Output already printed stays; this adds the
/// last messages on stderr and decides the exit code.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// Bad usage or configuration found by the CLI itself; the message says what
    /// and where (a flag, an argument, `-C`).
    #[error("{0}")]
    Config(String),
    /// A run, resume or replay that could not start or finish.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The run store could not be read (a run selector, a record).
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Audit(#[from] AuditError),
    #[error(transparent)]
    Init(#[from] InitError),
    #[error("failed to write {}", path.display())]
    WriteReport {
        path: PathBuf,
        #[source]
        source: WriteError,
    },
    #[error("failed to start the async runtime")]
    Runtime(#[source] std::io::Error),
}

impl CliError {
    /// The documented exit code (README, "Exit codes") of each error. A session knows its
    /// own; everything the CLI reads or writes itself is a usage or
    /// configuration problem: a run store that cannot be read, a report that
    /// cannot be written.
    pub(crate) fn exit_code(&self) -> i32 {
        match self {
            CliError::Session(e) => e.exit_code(),
            CliError::Config(_)
            | CliError::Store(_)
            | CliError::Audit(_)
            | CliError::Init(_)
            | CliError::WriteReport { .. }
            | CliError::Runtime(_) => exit::CONFIG,
        }
    }

    /// The message with its causes, each once: `failed to x: because y`. A
    /// cause whose text the message already ends with is not repeated.
    pub(crate) fn message(&self) -> String {
        if let CliError::Session(SessionError::Invalid { path, diagnostics }) = self {
            return diagnostics::summary(&path.display().to_string(), diagnostics);
        }
        let mut text = self.to_string();
        let mut cause = std::error::Error::source(self);
        while let Some(c) = cause {
            let part = c.to_string();
            if !part.is_empty() && !text.ends_with(&part) {
                text.push_str(": ");
                text.push_str(&part);
            }
            cause = c.source();
        }
        text
    }

    /// Print the error on stderr: an invalid pipeline file as its diagnostics and
    /// their count, anything else as one `error:` line and its help lines.
    pub(crate) fn report(&self, printer: Printer) {
        if let CliError::Session(SessionError::Invalid { diagnostics: d, .. }) = self {
            let d = diagnostics::relative(d.clone());
            diagnostics::print(&printer, &d);
            printer.err(self.message());
            return;
        }
        printer.err(format!("{}: {}", printer.error_label(), self.message()));
        for line in self.help() {
            printer.err(line);
        }
    }

    /// Lines after the message: what to do, or what was found.
    fn help(&self) -> Vec<String> {
        match self {
            CliError::Session(SessionError::Resume(
                specbridge_engine::resume::ResumeError::Tampered { findings, .. },
            )) => findings
                .iter()
                .map(|f| {
                    format!(
                        "  [{}]{}: {}",
                        f.code,
                        f.file
                            .as_deref()
                            .map(|p| format!(" {p}"))
                            .unwrap_or_default(),
                        f.message
                    )
                })
                .collect(),
            CliError::Session(e) => e.help(),
            _ => Vec::new(),
        }
    }
}

pub(crate) type CliResult<T = i32> = Result<T, CliError>;

/// The short name of an exit code, for `{"error": {"code": …}}`.
pub(crate) fn code_name(exit_code: i32) -> &'static str {
    match exit_code {
        exit::OK => "ok",
        exit::GATE => "gate-failed",
        exit::CONFIG => "usage-or-config",
        exit::RUNNER_UNAVAILABLE => "runner-unavailable",
        exit::RUNNER_FAILURE => "runner-failure",
        exit::TIMEOUT => "timeout-or-cancelled",
        exit::SAFETY => "safety-violation",
        _ => "error",
    }
}

/// The one JSON object `--json` prints for an error: `{"error": {"code",
/// "message", "exitCode"}}`.
pub(crate) fn error_json(e: &CliError) -> serde_json::Value {
    let code = e.exit_code();
    serde_json::json!({
        "error": { "code": code_name(code), "message": e.message(), "exitCode": code }
    })
}

#[cfg(test)]
#[path = "error_tests.rs"]
mod tests;
