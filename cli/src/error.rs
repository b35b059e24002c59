//! The one error type of the CLI, and the exit code each error maps to.

use specbridge_engine::exit;

/// An error that ends the command. Output already printed stays; this adds one
/// last message on stderr and decides the exit code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad usage or configuration; the message says what and where.
    #[error("{0}")]
    Config(String),
    /// Diagnostics were already printed; only the exit code is left.
    #[error("")]
    Reported(i32),
    /// An integrity or safety refusal (a tampered recording, say).
    #[error("{0}")]
    Safety(String),
    #[error("{0}")]
    Other(String),
}

impl CliError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Config(_) => exit::CONFIG,
            CliError::Reported(code) => *code,
            CliError::Safety(_) => exit::SAFETY,
            CliError::Other(_) => exit::CONFIG,
        }
    }
}

pub type CliResult<T = i32> = Result<T, CliError>;

/// The short name of an exit code, for `{"error": {"code": …}}`.
pub fn code_name(exit_code: i32) -> &'static str {
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
/// "message", "exitCode"}}`. A `Reported` error already wrote its details to
/// stderr; its message says so.
pub fn error_json(e: &CliError) -> serde_json::Value {
    let code = e.exit_code();
    let message = match e {
        CliError::Reported(_) => format!(
            "{}; the details are on stderr",
            code_name(code).replace('-', " ")
        ),
        other => other.to_string(),
    };
    serde_json::json!({
        "error": { "code": code_name(code), "message": message, "exitCode": code }
    })
}
