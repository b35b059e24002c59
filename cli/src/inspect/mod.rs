//! Reading a recorded run back as a story: per stage, each attempt's prompt, tool
//! calls, verification, evidence, changes, cost and tokens. `runs show RUN STAGE`
//! prints it and `runs report` renders it as HTML; both read only the records, which
//! were redacted when written.

mod attempt;
mod transcript;

use serde::Serialize;
use serde_json::Value;
use specbridge_engine::store::layout::attempt as file;
use specbridge_engine::store::{AttemptReader, RunReader, StageRecord, StoreError};
use specbridge_engine::TokenUsage;

pub(crate) use attempt::{read_attempt, AttemptStory};
pub(crate) use transcript::TranscriptSource;

/// Money and tokens of some invocations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Spend {
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
pub(crate) struct StageStory {
    pub stage: StageRecord,
    pub attempts: Vec<AttemptStory>,
    /// Over every attempt that ran an agent.
    pub spent: Spend,
    /// Attempts answered from a recording: their recorded cost was not spent again.
    pub recorded_not_spent: Spend,
}

impl StageStory {
    pub(crate) fn read(
        run: &RunReader,
        stage: StageRecord,
        lines: usize,
    ) -> Result<StageStory, StoreError> {
        let attempts: Vec<AttemptStory> = run
            .attempts(&stage.stage_id)?
            .iter()
            .map(|a| read_attempt(a, lines))
            .collect();
        let (spent, recorded_not_spent) = sums(attempts.iter().map(AttemptStory::cost));
        Ok(StageStory {
            stage,
            attempts,
            spent,
            recorded_not_spent,
        })
    }
}

/// What a stage's attempts spent and what its replayed attempts had spent when
/// recorded, from each attempt's `result.json` alone: a listing of a large run
/// reads no prompt, log or transcript. A check stage invokes no agent and has no
/// `result.json`: its folder is not read at all.
pub(crate) fn stage_spend(
    run: &RunReader,
    stage: &StageRecord,
) -> Result<(Spend, Spend), StoreError> {
    if !stage.kind.is_agent() {
        return Ok((Spend::default(), Spend::default()));
    }
    Ok(sums(run.attempts(&stage.stage_id)?.iter().map(|a| {
        AttemptCost::of(a.json_opt::<Value>(file::RESULT).as_ref(), a)
    })))
}

/// What one attempt cost, as the sums need it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AttemptCost {
    /// An agent was invoked (or replayed): the attempt has a `result.json`.
    pub invoked: bool,
    /// Answered from a recording (`replay.json`).
    pub replayed: bool,
    pub cost_usd: Option<f64>,
    pub tokens: Option<TokenUsage>,
}

impl AttemptCost {
    /// From the attempt's parsed `result.json`, if any.
    fn of(result: Option<&Value>, a: &AttemptReader) -> AttemptCost {
        let r = |k: &str| result.and_then(|v| v.get(k));
        AttemptCost {
            invoked: result.is_some(),
            // Only an invocation can have been replayed: no look for the file
            // in the attempts of a check.
            replayed: result.is_some() && a.has(file::REPLAY),
            cost_usd: r("totalCostUsd").and_then(Value::as_f64),
            tokens: r("tokens").and_then(|t| serde_json::from_value(t.clone()).ok()),
        }
    }
}

/// What the attempts spent, and what replayed attempts had spent when recorded.
pub(crate) fn sums(attempts: impl IntoIterator<Item = AttemptCost>) -> (Spend, Spend) {
    let mut spent = Spend::default();
    let mut recorded = Spend::default();
    for a in attempts.into_iter().filter(|a| a.invoked) {
        let into = if a.replayed {
            &mut recorded
        } else {
            &mut spent
        };
        into.add(a.cost_usd.unwrap_or(0.0), a.tokens.unwrap_or_default());
    }
    (spent, recorded)
}

/// The last `lines` lines of a text, for the tail of a failing command's output.
pub(crate) fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The first `lines` lines of a text.
pub(crate) fn head(text: &str, lines: usize) -> String {
    text.lines().take(lines).collect::<Vec<_>>().join("\n")
}
