//! Reading a recorded run back as a story: per stage, each attempt's prompt, tool
//! calls, verification, evidence, changes, cost and tokens. `runs show RUN STAGE`
//! prints it and `runs report` renders it as HTML; both read only the records, which
//! were redacted when written.

mod attempt;
mod transcript;

use std::path::Path;

use serde::Serialize;
use specbridge_engine::store::StageRecord;
use specbridge_engine::TokenUsage;

pub use attempt::{read_attempt, AttemptStory};
pub use transcript::TranscriptSource;

/// Money and tokens of some invocations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Spend {
    pub cost_usd: f64,
    pub tokens: TokenUsage,
    pub invocations: u32,
}

impl Spend {
    fn add(&mut self, cost_usd: f64, tokens: TokenUsage) {
        self.cost_usd += cost_usd;
        self.tokens += tokens;
        self.invocations += 1;
    }
}

/// One stage and every attempt it made, in order.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StageStory {
    pub stage: StageRecord,
    pub attempts: Vec<AttemptStory>,
    /// Over every attempt that ran an agent.
    pub spent: Spend,
    /// Attempts answered from a recording: their recorded cost was not spent again.
    pub recorded_not_spent: Spend,
}

impl StageStory {
    pub fn read(run_dir: &Path, stage: StageRecord, lines: usize) -> StageStory {
        let attempts: Vec<AttemptStory> = attempt_numbers(run_dir, &stage.stage_id)
            .into_iter()
            .map(|n| read_attempt(run_dir, &stage.stage_id, n, lines))
            .collect();
        let (spent, recorded_not_spent) = sums(&attempts);
        StageStory {
            stage,
            attempts,
            spent,
            recorded_not_spent,
        }
    }
}

/// What the attempts spent, and what replayed attempts had spent when recorded.
pub fn sums(attempts: &[AttemptStory]) -> (Spend, Spend) {
    let mut spent = Spend::default();
    let mut recorded = Spend::default();
    for a in attempts.iter().filter(|a| a.invoked) {
        let into = if a.replayed {
            &mut recorded
        } else {
            &mut spent
        };
        into.add(a.cost_usd.unwrap_or(0.0), a.tokens.unwrap_or_default());
    }
    (spent, recorded)
}

/// `attempt-NNN` folders of a stage, by number.
pub fn attempt_numbers(run_dir: &Path, stage: &str) -> Vec<u32> {
    let mut numbers: Vec<u32> = std::fs::read_dir(run_dir.join("stages").join(stage))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_prefix("attempt-")?
                .parse()
                .ok()
        })
        .collect();
    numbers.sort_unstable();
    numbers
}

pub fn attempt_rel(stage: &str, attempt: u32) -> String {
    format!("stages/{stage}/attempt-{attempt:03}")
}

/// The last `lines` lines of a text, for the tail of a failing command's output.
pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The first `lines` lines of a text.
pub fn head(text: &str, lines: usize) -> String {
    text.lines().take(lines).collect::<Vec<_>>().join("\n")
}
