//! The Claude Code runner (docs/claude-code-runner.md): detection of the installed CLI, argv
//! assembly with the tool policies of docs/stage-kinds.md, and reading its output.

pub mod argv;
pub mod capabilities;
pub mod detection_cache;
pub mod doctor;
pub mod envelope;
pub mod help;
pub mod invoke;
pub mod known;
pub mod observe;
pub mod outcome;
mod private_tmp;
pub mod probe;
mod prompt_hold;
pub mod record;
pub mod request;
pub mod stream;
pub mod transient;

#[cfg(test)]
pub(crate) mod fixtures;

pub use argv::{
    assemble, InvocationInput, InvocationRequest, Operation, OutputFormat, SkippedFlag, ToolPolicy,
};
pub use capabilities::{Capabilities, CapabilityGap};
pub use doctor::{
    diagnose, diagnose_with, AuthCheck, AuthStatus, DoctorOptions, DoctorReport, DoctorStatus,
};
pub use invoke::{invoke, InvocationOutcome, InvokeSpec, ProgressCallback};
