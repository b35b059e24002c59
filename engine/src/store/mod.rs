//! The run store: one folder per run under `.specbridge/runs/`, records written
//! atomically, an append-only hash-chained event log, and an OS lock per run.
//!
//! [`RunHandle`] is the only writer of run records: it owns the run's redactor,
//! and the raw writers (`atomic`, the event log, the log files) are private to
//! this module. [`RunReader`] is the one reader of a run folder, and [`layout`]
//! the one place that names its folders and files, for both.

mod atomic;
mod batch;
pub mod confined;
mod document;
mod durable;
pub mod events;
mod fault;
mod flock;
pub mod layout;
pub mod lock;
mod log;
mod private;
mod publish;
mod reader;
pub mod records;
mod run;
mod select;
mod started;
mod sync_pool;
mod tamper;
pub mod tree_lock;

pub use atomic::{sha256_file, sha256_hex, write_report, WriteError};
pub use confined::{write_confined, ConfinedWriteError};
pub use document::{publish_confined, Published, StagedDocument};
pub(crate) use durable::off_the_worker;
pub use events::{verify_chain, ChainCheck};
pub use fault::StoreFailure;
pub use lock::{held_by_another, held_flocks, is_held, lock_key, LockError, RunLock, StoreClock};
pub use log::RunLog;
pub use private::{add_exclude_line, excludes_run_store, git_exclude_file, EXCLUDE_LINE};
pub use reader::{AttemptReader, RunReader};
pub use records::*;
pub use run::{RunHandle, RunStore, StoreError};
pub(crate) use select::run_ids;
pub use select::{
    is_safe_component, shortest_unique_prefixes, RunSelectError, MAX_ID_BYTES, MAX_NAME_BYTES,
};
pub use started::writes_running_record;
pub use tamper::RecordChange;
pub use tree_lock::{lock_tree_for, TreeLock, TreeLockError, TREE_LOCK_FILE};

/// Now, as RFC 3339 UTC with milliseconds (the format of every time in a run).
pub use crate::time::now_rfc3339;
