//! `specbridge runs audit`: re-check a recorded run from its files alone (docs/audit.md).
//!
//! Audit is read-only and takes no lock: it may run beside a live run, whose last
//! records can then look torn or unfinished. Every file is streamed in bounded
//! chunks, so a run with huge logs is audited in small, fixed memory.
//!
//! The checks, in report order: the event chain; every file against its last
//! announcement, and secrets in every file; each stage's argv, read-only rule,
//! evidence and output; `run.json` and `stage.json` against the events.

mod consistency;
pub(crate) mod events;
pub(crate) mod files;
pub mod forbidden;
mod records;
mod report;
pub mod secrets;
mod stages;
mod tools;

use std::path::{Path, PathBuf};

pub use report::{AuditReport, Finding, FindingCode, Severity};

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("failed to audit {0}: not a run folder")]
    NotARun(PathBuf),
    #[error("failed to read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to read the event log")]
    Events(#[from] crate::store::events::EventError),
}

/// Audit one run folder.
pub fn audit_run(run_dir: &Path) -> Result<AuditReport, AuditError> {
    audit_run_with(run_dir, |_| {}).map(|(report, _, _)| report)
}

/// [`audit_run`], also handing every event of the log to `also` and returning
/// what the log says and what the walk found: a resume's one read of the log
/// (its gate, crash recovery and the chain's head all come from it) and of its
/// records.
pub(crate) fn audit_run_with(
    run_dir: &Path,
    also: impl FnMut(&crate::events::line::EventLine),
) -> Result<(AuditReport, events::EventFacts, files::RunFiles), AuditError> {
    if !run_dir.is_dir() {
        return Err(AuditError::NotARun(run_dir.to_path_buf()));
    }
    let run_id = run_dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let mut findings = Vec::new();
    secrets::warm_up();
    // The file pass (every file hashed and scanned for secrets) needs nothing
    // from the event log until the comparison: it runs on a second core while
    // the log is read and its chain checked, which take about as long.
    let (scanned, facts) = crate::beside::beside(
        || files::scan_files(run_dir),
        || events::read_events(run_dir, &mut findings, also),
    );
    let facts = facts?;
    set_aside_tails(run_dir, &mut findings)?;
    let (checked_files, run_files) = files::compare(scanned?, run_dir, &facts, &mut findings);
    let stage_states = stages::check_stages(&run_files, &mut findings)?;
    consistency::check_run_json(&run_files, &facts, &mut findings);
    consistency::check_stage_json(&stage_states, &facts, &mut findings);
    let report = AuditReport {
        run_id,
        findings,
        checked_files,
        events: facts.events,
    };
    Ok((report, facts, run_files))
}

/// Audit every run in `runs_dir` (`.specbridge/runs`), oldest first.
pub fn audit_all(runs_dir: &Path) -> Result<Vec<AuditReport>, AuditError> {
    let ids = crate::store::run_ids(runs_dir).map_err(|e| match e {
        crate::store::RunSelectError::Io { path, source } => AuditError::Read { path, source },
        other => AuditError::Read {
            path: runs_dir.to_path_buf(),
            source: std::io::Error::other(other),
        },
    })?;
    ids.iter().map(|id| audit_run(&runs_dir.join(id))).collect()
}

/// Crash recovery keeps a torn last event line as `events.jsonl.torn-N`: report
/// each, so the crash stays visible after the log was repaired.
fn set_aside_tails(run_dir: &Path, findings: &mut Vec<Finding>) -> Result<(), AuditError> {
    let read = |source| AuditError::Read {
        path: run_dir.to_path_buf(),
        source,
    };
    let mut names: Vec<String> = std::fs::read_dir(run_dir)
        .map_err(read)?
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(crate::store::layout::TORN_TAIL_PREFIX))
        .collect();
    names.sort();
    for name in names {
        findings.push(
            Finding::new(
                FindingCode::TornTail,
                "a torn last event line that crash recovery set aside",
            )
            .file(&name),
        );
    }
    Ok(())
}
