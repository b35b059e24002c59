//! Git evidence for agent stages (docs/stage-kinds.md, docs/run-directory.md, docs/evidence.md): snapshots of the working tree
//! before and after an invocation, attribution of what changed, protected paths,
//! the attempt's `diff.patch`, and the evidence status that follows from them.
//!
//! Everything here is plain library code over a repository root; running
//! verification commands and writing the records are the stage kinds' business.

mod attribute;
mod diff;
mod error;
mod git;
mod paths;
mod protect;
mod record;
mod repository;
mod secrets;
mod snapshot;
mod status;
mod tree_epoch;
pub mod verification;

pub use attribute::{attribute, ChangeAuthor, ChangedFiles, OwnWrite};
pub use diff::{attempt_diff, AttemptDiff, DiffInfo, PatchAhead, DEFAULT_DIFF_MAX_BYTES};
pub use error::EvidenceError;
pub use git::command as git_command;
pub(crate) use git::program as git_program;
pub use paths::normalize_rel_path;
pub use protect::{ProtectedPaths, ProtectedRule, ProtectionReason, Violation, ViolationKind};
pub use record::{
    record_schemas, ChangeCounts, Claims, EvidenceKind, EvidenceRecord, VerificationSummary,
};
pub use repository::{ask_ahead, repository_paths, RepositoryPaths};
pub use secrets::{secrets_in_change, EvidenceFinding, SECRET_IN_CHANGE};
pub use snapshot::{require_clean_start, EntryKind, GitSnapshot, PathState, PathStatus};
pub use status::{generate_violations, judge, EvidenceInput, EvidenceVerdict, VerificationResult};
pub(crate) use tree_epoch::note_own_write;
pub use tree_epoch::TreeEpoch;

/// The run store's folder: specbridge writes there during every stage, so it is never
/// part of a snapshot (the run's own hash chain is what protects it).
pub const RUN_STORE_DIR: &str = crate::store::layout::STORE_DIR;
