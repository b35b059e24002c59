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
