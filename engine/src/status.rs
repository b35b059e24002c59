//! The vocabulary of outcomes: stage statuses, evidence statuses, run statuses, and
//! the exit code each maps to (docs/claude-code-runner.md, README.md).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Exit codes of the `specbridge` binary (README.md).
pub mod exit {
    pub const OK: i32 = 0;
    /// Gate failed: unverified, verification failed, audit findings.
    pub const GATE: i32 = 1;
    /// Usage or configuration error.
    pub const CONFIG: i32 = 2;
    /// Runner unavailable, unauthenticated or incompatible.
    pub const RUNNER_UNAVAILABLE: i32 = 3;
    /// Runner failure: nonzero exit, malformed output, limits.
    pub const RUNNER_FAILURE: i32 = 4;
    /// Timeout or cancellation.
    pub const TIMEOUT: i32 = 5;
    /// Safety violation.
    pub const SAFETY: i32 = 6;

    /// How severe an exit code is when stages fail differently: 6, then 3, 5, 4, 1.
    pub(crate) fn severity_rank(code: i32) -> u8 {
        match code {
            SAFETY => 6,
            RUNNER_UNAVAILABLE => 5,
            TIMEOUT => 4,
            RUNNER_FAILURE => 3,
            GATE => 2,
            CONFIG => 1,
            _ => 0,
        }
    }

    /// The most severe of a set of exit codes (0 when empty).
    pub fn most_severe(codes: impl IntoIterator<Item = i32>) -> i32 {
        codes
            .into_iter()
            .max_by_key(|c| severity_rank(*c))
            .unwrap_or(OK)
    }
}

/// The status of one stage (or fan-out instance) in a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum StageStatus {
    #[default]
    Pending,
    Running,
    Succeeded,
    Failed,
    MalformedOutput,
    MaxTurns,
    BudgetExceeded,
    TimedOut,
    Cancelled,
    RunnerUnavailable,
    SafetyViolation,
    /// An execute stage whose change is not proven to work: a required
    /// verification failed, nothing was configured to verify it, or its changes
    /// cannot be attributed (evidence `implemented-unverified`). A gate failure.
    Unverified,
    /// An execute stage that changed no file (evidence `no-change`). A gate failure.
    NoChange,
    /// A check stage whose command ran and exited nonzero. A gate failure.
    CheckFailed,
    /// Not run because a stage it needs did not pass its gate.
    Blocked,
    /// Not run: `--fail-fast` stopped scheduling after a failure.
    Skipped,
    /// Left `running` by a specbridge process that died; found by resume.
    Interrupted,
    /// A fan-out instance whose item no longer exists after a resume.
    Retired,
}

impl StageStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            StageStatus::Pending => "pending",
            StageStatus::Running => "running",
            StageStatus::Succeeded => "succeeded",
            StageStatus::Failed => "failed",
            StageStatus::MalformedOutput => "malformed-output",
            StageStatus::MaxTurns => "max-turns",
            StageStatus::BudgetExceeded => "budget-exceeded",
            StageStatus::TimedOut => "timed-out",
            StageStatus::Cancelled => "cancelled",
            StageStatus::RunnerUnavailable => "runner-unavailable",
            StageStatus::SafetyViolation => "safety-violation",
            StageStatus::Unverified => "unverified",
            StageStatus::NoChange => "no-change",
            StageStatus::CheckFailed => "check-failed",
            StageStatus::Blocked => "blocked",
            StageStatus::Skipped => "skipped",
            StageStatus::Interrupted => "interrupted",
            StageStatus::Retired => "retired",
        }
    }

    /// Whether the stage has finished (successfully or not).
    pub fn is_terminal(self) -> bool {
        !matches!(self, StageStatus::Pending | StageStatus::Running)
    }

    /// Whether the stage passed its gate (docs/stage-kinds.md): the only status anything may
    /// build on, and the only one resume reuses.
    pub fn passed(self) -> bool {
        self == StageStatus::Succeeded
    }

    /// Whether the stage ended at its gate: it ran to the end, but what it
    /// produced did not pass (exit 1).
    pub(crate) fn is_gate_failure(self) -> bool {
        matches!(
            self,
            StageStatus::Unverified | StageStatus::NoChange | StageStatus::CheckFailed
        )
    }

    /// Whether the stage never ran because of another stage (blocked, skipped).
    pub fn not_run(self) -> bool {
        matches!(self, StageStatus::Blocked | StageStatus::Skipped)
    }

    /// The exit code this status contributes to the run's.
    pub fn exit_code(self) -> i32 {
        match self {
            StageStatus::Succeeded
            | StageStatus::Pending
            | StageStatus::Running
            | StageStatus::Skipped
            | StageStatus::Blocked
            | StageStatus::Retired => exit::OK,
            StageStatus::Unverified | StageStatus::NoChange | StageStatus::CheckFailed => {
                exit::GATE
            }
            StageStatus::Failed
            | StageStatus::MalformedOutput
            | StageStatus::MaxTurns
            | StageStatus::BudgetExceeded => exit::RUNNER_FAILURE,
            StageStatus::TimedOut | StageStatus::Cancelled | StageStatus::Interrupted => {
                exit::TIMEOUT
            }
            StageStatus::RunnerUnavailable => exit::RUNNER_UNAVAILABLE,
            StageStatus::SafetyViolation => exit::SAFETY,
        }
    }
}

impl std::fmt::Display for StageStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the evidence of an execute stage shows (docs/evidence.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum EvidenceStatus {
    Verified,
    ImplementedUnverified,
    NoChange,
    Failed,
}

impl EvidenceStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            EvidenceStatus::Verified => "verified",
            EvidenceStatus::ImplementedUnverified => "implemented-unverified",
            EvidenceStatus::NoChange => "no-change",
            EvidenceStatus::Failed => "failed",
        }
    }

    pub fn exit_code(self) -> i32 {
        match self {
            EvidenceStatus::Verified | EvidenceStatus::Failed => exit::OK,
            EvidenceStatus::ImplementedUnverified | EvidenceStatus::NoChange => exit::GATE,
        }
    }

    /// The stage status an execute stage ends with when its runner succeeded, it
    /// broke no rule and its output validated: only `verified` passes the gate.
    pub fn stage_status(self) -> StageStatus {
        match self {
            EvidenceStatus::Verified => StageStatus::Succeeded,
            EvidenceStatus::ImplementedUnverified => StageStatus::Unverified,
            EvidenceStatus::NoChange => StageStatus::NoChange,
            EvidenceStatus::Failed => StageStatus::Failed,
        }
    }
}

/// The status of a whole run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RunStatus {
    Running,
    Succeeded,
    Failed,
    Cancelled,
    Interrupted,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Interrupted => "interrupted",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::exit::*;

    #[test]
    fn most_severe_follows_the_documented_order() {
        assert_eq!(most_severe([GATE, RUNNER_FAILURE, TIMEOUT]), TIMEOUT);
        assert_eq!(
            most_severe([TIMEOUT, RUNNER_UNAVAILABLE]),
            RUNNER_UNAVAILABLE
        );
        assert_eq!(most_severe([RUNNER_UNAVAILABLE, SAFETY, GATE]), SAFETY);
        assert_eq!(most_severe([OK, GATE]), GATE);
        assert_eq!(most_severe([]), OK);
    }
}
