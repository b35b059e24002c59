//! The end of a run or resume whose records stopped being written: its folder
//! vanished, or a write failed (a full disk). One settle path for both commands
//! (docs/resume.md, "When the records cannot be written"): `run.json` becomes
//! `failed` with exit code 2 when it still can be written, and the error says
//! whether, and how, the run can be resumed.

use std::time::Duration;

use crate::events::{RunEvent, RunFinished};
use crate::scheduler::SchedulerError;
use crate::status::{exit, RunStatus};
use crate::store::{RunHandle, RunRecord, StoreError, StoreFailure, Totals};

/// A run that ended because its records could not be written.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", self.describe())]
pub struct RecordsFailed {
    pub run_id: String,
    pub failure: StoreFailure,
    /// Whether `run.json` now says `failed`.
    pub settled: bool,
    /// What `run.json` says when it could not be settled: `running`, or the
    /// status it was renamed into place with just before the write that failed
    /// (a failure among the run's last events: the file is on disk, its
    /// announcement and `run-finished` are not).
    pub left_as: RunStatus,
}

impl RecordsFailed {
    /// The run can be resumed once the cause is gone: its records are what a
    /// crash at the failed write would have left.
    pub fn resumable(&self) -> bool {
        !self.failure.vanished
    }

    fn describe(&self) -> String {
        let id = &self.run_id;
        let head = format!(
            "run {id} failed: its records could not be written: {}; the running stages were ended",
            self.failure.message
        );
        if !self.resumable() {
            return format!(
                "{head}. It cannot be resumed: its records are gone (nothing else was changed; `specbridge runs list` shows the other runs)"
            );
        }
        let state = if self.settled {
            "run.json says `failed`".to_string()
        } else if self.left_as == RunStatus::Running {
            "run.json could not be updated either and still says `running` (resume treats the run as interrupted)".to_string()
        } else {
            format!(
                "run.json could not be updated either and says `{}`, without the events that end the run (resume writes them)",
                self.left_as.as_str()
            )
        };
        format!("{head}; {state}. Free space (or fix the cause), then `specbridge resume {id}`: stages that passed are kept")
    }
}

/// Why a scheduled run or resume stopped early, as a [`RecordsFailed`] when its
/// records failed (`Err(other)` for anything else).
pub(crate) fn records_failed(
    error: SchedulerError,
) -> Result<(StoreFailure, Totals), SchedulerError> {
    match error {
        SchedulerError::RecordsFailed { failure, spent } => Ok((failure, spent)),
        SchedulerError::Store(e) => Ok((failure_of(&e), Totals::default())),
    }
}

/// The failure a store error stands for (the first failure of the run when its
/// writes have stopped).
pub(crate) fn failure_of(error: &StoreError) -> StoreFailure {
    StoreFailure {
        message: crate::error_chain(error),
        vanished: matches!(error, StoreError::FolderVanished { .. }),
        in_event_log: matches!(error, StoreError::Events(_)),
    }
}

/// Settle `record` as failed (exit 2) with what was `spent` added, on the run's
/// one write after a failure; the last resume entry, when one is open, ends too.
pub fn settle(
    run: &RunHandle,
    record: &mut RunRecord,
    elapsed: Duration,
    spent: Totals,
    failure: StoreFailure,
) -> RecordsFailed {
    let failure = run.failure().unwrap_or(failure);
    record.settle(RunStatus::Failed, exit::CONFIG, elapsed, &spent);
    let finished = RunEvent::RunFinished(RunFinished {
        status: RunStatus::Failed,
        exit_code: exit::CONFIG,
        totals: record.totals.clone(),
        error: Some(failure.message.clone()),
    });
    let settled = run.settle_after_failure(record, finished).is_ok();
    // Read back rather than assumed: the failed write may have come after the
    // settle's own `run.json` was renamed into place.
    let left_as = if settled {
        RunStatus::Failed
    } else {
        crate::store::RunReader::at(run.dir())
            .run()
            .map_or(RunStatus::Running, |r| r.status)
    };
    RecordsFailed {
        run_id: run.id().to_string(),
        failure,
        settled,
        left_as,
    }
}
