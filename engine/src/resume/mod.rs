//! `specbridge resume` (docs/resume.md): continue a run in its own
//! folder, reusing every stage whose result still holds and running the rest
//! again as new attempts.
//!
//! - [`reuse_or_rerun`]: the pure rule — reuse a stage only if it succeeded, its input hash
//!   is unchanged and its recorded output files are intact — and the reasons;
//! - [`executor`]: applies the rule lazily, just before each stage would start,
//!   once its upstream has settled in this resume;
//! - [`force`]: `--rerun`, stages run again on purpose with their dependents;
//! - [`recover`]: crash recovery (orphaned agents, stages left `running`);
//! - [`dry`]: `--dry-run`, from the recorded outputs alone;
//! - [`session`]: opening a run for resume (lock, integrity check) and beginning
//!   the resume in its folder; scheduling and settling are the run's own
//!   (`orchestrate::ActiveRun`).

pub mod dry;
pub mod executor;
pub mod force;
pub mod recover;
pub mod reuse;
pub mod session;

pub use dry::plan_dry_run;
pub use executor::ResumeExecutor;
pub use force::Forced;
pub use recover::Orphan;
pub use reuse::{reuse_or_rerun, Action, Current, Reason, Recorded, ReuseDecision, Why};
pub use session::{open_for_resume, OpenedRun, ResumeError, ResumeStart};
