//! Retrying an agent stage after a transient failure (docs/stage-kinds.md): how long to wait
//! before the next attempt, and whether there may be one.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What an executor says about an attempt that failed transiently: the retries the
/// stage's runner allows and the delay the failure asked for, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryHint {
    /// `runner.retries`.
    pub retries: u32,
    /// A `Retry-After` seen in the failure.
    pub retry_after_ms: Option<u64>,
}

/// Base delay of the backoff; the environment variable is a test hook (documented
/// in docs/claude-code-runner.md) so that tests do not sleep for seconds.
pub(crate) const BASE_DELAY_ENV: &str = "SPECBRIDGE_RETRY_BASE_MS";
const DEFAULT_BASE: Duration = Duration::from_secs(2);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

fn base_delay() -> Duration {
    std::env::var(BASE_DELAY_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(DEFAULT_BASE, Duration::from_millis)
}

/// The wait before retry number `retry` (1 for the first): exponential with equal
/// jitter (half fixed, half random, so that stages that failed together do not
/// retry together), never shorter than a `Retry-After`.
pub(crate) fn delay(retry: u32, hint: &RetryHint) -> Duration {
    delay_with(base_delay(), retry, hint, jitter_fraction())
}

fn delay_with(base: Duration, retry: u32, hint: &RetryHint, jitter: f64) -> Duration {
    let exp = base
        .saturating_mul(1u32 << retry.saturating_sub(1).min(16))
        .min(MAX_BACKOFF);
    let half = exp / 2;
    let backoff = half + half.mul_f64(jitter.clamp(0.0, 1.0));
    let asked = hint.retry_after_ms.map(Duration::from_millis);
    asked.map_or(backoff, |a| backoff.max(a))
}

/// How many of attempts `1..=upto` of `stage` failed transiently, from their
/// `result.json` (`transient: true`): the retries a stage has had over the whole
/// run, whichever process made them, since `runner.retries` bounds the run's.
pub fn transient_attempts(run: &crate::store::RunHandle, stage: &str, upto: u32) -> u32 {
    let reader = crate::store::RunReader::at(run.dir());
    (1..=upto)
        .filter(|&n| {
            reader
                .attempt(stage, n)
                .json_opt::<serde_json::Value>(crate::store::layout::attempt::RESULT)
                .is_some_and(|r| r.get("transient") == Some(&serde_json::Value::Bool(true)))
        })
        .count() as u32
}

fn jitter_fraction() -> f64 {
    let bits = uuid::Uuid::new_v4().as_u128() as u64;
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_HINT: RetryHint = RetryHint {
        retries: 2,
        retry_after_ms: None,
    };

    #[test]
    fn doubles_each_retry_within_its_jitter_band() {
        let base = Duration::from_millis(100);
        for (retry, exp) in [(1, 100), (2, 200), (3, 400)] {
            let low = delay_with(base, retry, &NO_HINT, 0.0);
            let high = delay_with(base, retry, &NO_HINT, 1.0);
            assert_eq!(low, Duration::from_millis(exp / 2));
            assert_eq!(high, Duration::from_millis(exp));
        }
    }

    #[test]
    fn is_capped_and_honours_retry_after() {
        let base = Duration::from_secs(2);
        assert_eq!(delay_with(base, 30, &NO_HINT, 1.0), MAX_BACKOFF);
        let hint = RetryHint {
            retries: 2,
            retry_after_ms: Some(9_000),
        };
        assert_eq!(
            delay_with(Duration::from_millis(10), 1, &hint, 0.5),
            Duration::from_secs(9)
        );
    }

    #[test]
    fn jitter_is_a_fraction() {
        for _ in 0..100 {
            let j = jitter_fraction();
            assert!((0.0..1.0).contains(&j));
        }
    }
}
