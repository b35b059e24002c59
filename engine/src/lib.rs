//! specbridge engine: the pipeline model and its validation, the DAG, the scheduler,
//! the run store, the process supervisor and the agent runners.
//!
//! This crate knows nothing about terminals or argument parsing: the CLI crate turns
//! its results into output and exit codes.

pub mod audit;
pub mod background;
pub mod bash_rule;
pub mod beside;
pub mod builtin_schemas;
pub mod compiled_schema;
pub mod dag;
pub mod diagnostic;
pub mod events;
pub mod evidence;
pub mod graph;
pub mod orchestrate;
pub mod pipeline;
pub mod policy;
pub mod redact;
pub mod replay;
pub mod resume;
pub mod run_failure;
pub mod runner;
pub mod safety;
pub mod sandbox;
pub mod scaffold;
pub mod scheduler;
pub mod schemas;
pub mod status;
pub mod store;
pub mod supervisor;
pub mod time;
pub mod tokens;
mod user_cache;

pub use diagnostic::{Diagnostic, DiagnosticClass, Location, Severity};
pub use status::{exit, EvidenceStatus, RunStatus, StageStatus};
pub use tokens::TokenUsage;
pub use user_cache::CacheUse;

/// An error with its sources, on one line: `failed to x: because y: because z`.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
