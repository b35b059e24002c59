//! specbridge stage kinds: `generate` (read-only spec generation), `execute` (task
//! execution with evidence) and `check` (a command gate), and the executor that the
//! engine's scheduler drives.

pub mod agent;
pub mod attempt;
pub mod check;
pub mod confine;
pub mod context;
pub mod continuation;
pub mod error;
pub mod execute;
pub mod executor;
pub mod fanout;
pub mod flow;
pub mod generate;
pub mod init;
pub mod input_hash;
pub mod partial_work;
pub mod previous;
pub mod prompt;
pub mod reverify;
pub mod schema;
pub mod secrets;
pub mod session;
pub mod store_check;
pub mod upstream;
pub mod verify;
pub mod working_tree;

pub use agent::{AgentSetup, DetectedRunner};
pub use context::RunContext;
pub use error::StageError;
pub use executor::PipelineExecutor;
pub use session::{RunSession, SessionError};

/// An argv as one line a user could paste into a shell (for display only: nothing
/// specbridge runs goes through a shell).
pub fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if !a.is_empty()
                && a.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@+%^".contains(&b))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub(crate) use specbridge_engine::error_chain;

pub(crate) fn rfc3339(t: chrono::DateTime<chrono::Utc>) -> String {
    specbridge_engine::time::format_rfc3339(t)
}
