//! The CLI's wait for its prompt, against what holds the prompt back.
//!
//! An agent's prompt is written only once its attempt's first records are on
//! disk and, for a generate stage, its before-snapshot is finished, while the
//! CLI starts up (docs/claude-code-runner.md, "The prompt held"). The CLI does
//! not wait for ever: 2.1.332 gives up on a stdin that has said nothing 3 s
//! after its start, warns, and exits 1 for want of a prompt. A hold that long
//! (a disk whose syncs take seconds, a snapshot slower than foreseen) would
//! end the attempt with the CLI's own "Input must be provided", a failure that
//! says nothing of its cause and is not retried. So a hold that reaches
//! [`LIMIT`] withholds the prompt instead — the CLI is ended having been given
//! nothing — and the attempt fails as a transient failure that says why:
//! `runner.retries` gives it another. That one, and every later agent attempt
//! of the process, holds its prompt for as little as it can ([`write_ahead`]):
//! its before-snapshot is finished and everything queued written before the
//! spawn, which leaves the spawn's event, appended, to the hold.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The longest hold after which the prompt is still written: half a second
/// short of the CLI's 3 s, which count from its start, a little after the spawn.
pub(super) const LIMIT: Duration = Duration::from_millis(2500);

/// One invocation's hold, begun when its process has been spawned.
pub(super) struct PromptHold {
    since: Instant,
    limit: Duration,
    overdue: OnceLock<Duration>,
}

impl PromptHold {
    pub(super) fn begin() -> Self {
        Self::with_limit(LIMIT)
    }

    fn with_limit(limit: Duration) -> Self {
        PromptHold {
            since: Instant::now(),
            limit,
            overdue: OnceLock::new(),
        }
    }

    /// Called once nothing holds the prompt any more: an error when the hold
    /// reached the limit, and the prompt must not be written. A cancelled run
    /// withholds it anyway, as a cancel (the supervisor's own check).
    pub(super) fn release(&self, cancelled: bool) -> Result<(), String> {
        let held = self.since.elapsed();
        if held < self.limit || cancelled {
            return Ok(());
        }
        let _ = self.overdue.set(held);
        Err(format!("the prompt was held {}", seconds(held)))
    }

    /// How long the prompt was held, when that withheld it.
    pub(super) fn overdue(&self) -> Option<Duration> {
        self.overdue.get().copied()
    }
}

/// Whether a hold of this process withheld a prompt ([`remember_overdue`]).
static OVERDUE_SEEN: AtomicBool = AtomicBool::new(false);

/// A hold withheld a prompt: what holds the later ones is made shorter.
pub(super) fn remember_overdue() {
    OVERDUE_SEEN.store(true, Ordering::Relaxed);
}

/// Whether an agent attempt writes what is queued before its spawn rather
/// than while the CLI starts up: once a hold of this process has withheld a
/// prompt, the disk (or the snapshot) has shown it can outlast the CLI's wait.
pub(super) fn write_ahead() -> bool {
    OVERDUE_SEEN.load(Ordering::Relaxed)
}

/// The attempt's failure when the hold withheld the prompt from `program`.
pub(super) fn withheld_reason(program: &str, held: Duration) -> String {
    format!(
        "`{program}` was stopped before it was given its prompt: what the prompt waits \
         for (the attempt's records, its before-snapshot) took {}, and \
         Claude Code gives up on a prompt that has not begun to arrive 3 s after it starts",
        seconds(held)
    )
}

fn seconds(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_short_of_the_limit_lets_the_prompt_go() {
        let hold = PromptHold::begin();
        assert_eq!(hold.release(false), Ok(()));
        assert_eq!(hold.overdue(), None);
    }

    #[test]
    fn a_hold_at_the_limit_withholds_the_prompt_and_says_how_long() {
        let hold = PromptHold::with_limit(Duration::from_millis(20));
        std::thread::sleep(Duration::from_millis(30));
        let reason = hold.release(false).unwrap_err();
        assert!(reason.starts_with("the prompt was held 0.0"), "{reason}");
        let held = hold.overdue().expect("recorded");
        assert!(held >= Duration::from_millis(20), "{held:?}");
    }

    #[test]
    fn a_cancelled_run_leaves_the_withholding_to_the_cancel() {
        let hold = PromptHold::with_limit(Duration::ZERO);
        assert_eq!(hold.release(true), Ok(()));
        assert_eq!(hold.overdue(), None);
    }

    #[test]
    fn the_limit_leaves_the_cli_half_a_second() {
        assert_eq!(LIMIT + Duration::from_millis(500), Duration::from_secs(3));
    }
}
