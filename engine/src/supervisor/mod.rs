//! The process supervisor (docs/stage-kinds.md, docs/claude-code-runner.md "Process control"): runs one child
//! process — an agent or a check command — so that nothing it starts outlives it.
//!
//! Each child gets its own process group. A timeout, a cancel, an output limit or a
//! hang after the agent's result sends SIGTERM to the whole group and SIGKILL after
//! the kill grace; once the leader has exited, any member of the group still alive
//! is ended too. stdout and stderr stream into sinks (the run store's redacting logs)
//! up to a byte cap, so memory stays flat whatever the child prints. What happened is returned as a [`ProcessRecord`],
//! the content of `process.json`.

mod cancel;
mod capture;
mod ctrl_c;
mod error;
mod group;
mod inert;
mod record;
mod resolve;
mod run;
mod sink;
mod spawner;
mod spec;

pub use cancel::{CancelLevel, CancelToken};
pub use capture::{ObserverControl, StdoutObserver, MAX_OBSERVED_LINE_BYTES};
pub use ctrl_c::install_cancel_signals;
pub use error::SupervisorError;
/// For the tests that read a thread's `/proc` record (`background.rs`).
#[cfg(test)]
pub(crate) use group::stat_fields;
pub use group::{group_alive, kill_group_if_alive, process_start_ticks};
pub use record::{process_record_schema, OutputStream, ProcessRecord, PROCESS_SCHEMA_VERSION};
pub use resolve::resolve_program;
pub use run::{run, run_until_ended, spawned};
pub use sink::{Discard, OutputSink};
pub use spec::SpawnSpec;
