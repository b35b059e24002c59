//! Problems found in user input, each with where it is.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Error,
}

/// What class of problem a diagnostic is; decides the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DiagnosticClass {
    /// A configuration problem (exit 2).
    Config,
    /// A forbidden flag or permission mode (exit 6).
    Safety,
}

/// A 1-based line and column in a source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

/// One problem, with where it is and, when we can tell, how to fix it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Diagnostic {
    pub severity: Severity,
    pub class: DiagnosticClass,
    /// A stable short name such as `unknown-key` or `cycle`.
    pub code: String,
    pub message: String,
    pub file: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<Location>,
    /// A path into the document such as `stages[2].needs[0]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
}

impl Diagnostic {
    pub fn error(code: &str, file: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            class: DiagnosticClass::Config,
            code: code.into(),
            message: message.into(),
            file: file.into(),
            location: None,
            path: None,
            help: None,
        }
    }

    pub fn warning(code: &str, file: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(code, file, message)
        }
    }

    pub fn safety(mut self) -> Self {
        self.class = DiagnosticClass::Safety;
        self
    }

    pub fn at(mut self, location: Option<Location>) -> Self {
        self.location = location;
        self
    }

    pub(crate) fn with_path(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }

    pub(crate) fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    /// `file:line:column: error: message` then `  help: …`, like compilers print.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(l) = self.location {
            write!(f, ":{}:{}", l.line, l.column)?;
        }
        let sev = match self.severity {
            Severity::Warning => "warning",
            Severity::Error => "error",
        };
        write!(f, ": {sev}: {}", self.message)?;
        if let Some(h) = &self.help {
            write!(f, "\n  help: {h}")?;
        }
        Ok(())
    }
}
