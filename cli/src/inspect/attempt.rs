//! One attempt folder read back: every record is optional, since a stage can stop
//! at any point (before the spawn, before verification, …).

use serde::Serialize;
use serde_json::Value;
use specbridge_engine::store::layout::attempt as file;
use specbridge_engine::store::AttemptReader;
use specbridge_engine::TokenUsage;

use super::transcript::{self, ToolCall, TranscriptSource};
use super::{head, tail, AttemptCost};

/// How much of a failing verification command's output is kept.
const FAILURE_TAIL_LINES: usize = 20;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AttemptStory {
    pub attempt: u32,
    /// Relative to the run folder.
    pub path: String,
    /// An agent was invoked (or replayed): the attempt has a `result.json`.
    pub invoked: bool,
    /// Answered from a recording (`replay.json`): the cost was recorded, not spent.
    pub replayed: bool,
    /// The status of the invocation, from `result.json` (`outcome` there).
    #[serde(rename = "outcome")]
    pub status: Option<String>,
    pub failure_reason: Option<String>,
    pub cost_usd: Option<f64>,
    pub tokens: Option<TokenUsage>,
    pub turns: Option<u64>,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    pub duration_ms: Option<u64>,
    pub exit_code: Option<i64>,
    pub prompt_head: Option<String>,
    pub prompt_bytes: Option<u64>,
    pub tool_calls: Vec<ToolCall>,
    pub transcript_source: TranscriptSource,
    pub verification: Vec<Verification>,
    pub evidence_status: Option<String>,
    pub evidence_reasons: Vec<String>,
    pub violations: Vec<String>,
    pub changed: Changed,
    /// Relative to the run folder, when the attempt recorded a diff.
    pub diff: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Changed {
    pub added: Vec<String>,
    pub modified: Vec<String>,
    pub deleted: Vec<String>,
    pub ambiguous: Vec<String>,
}

impl Changed {
    pub(crate) fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.modified.is_empty()
            && self.deleted.is_empty()
            && self.ambiguous.is_empty()
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Verification {
    pub name: String,
    pub argv: Vec<String>,
    pub required: bool,
    pub passed: bool,
    pub exit_code: Option<i64>,
    pub timed_out: bool,
    pub duration_ms: Option<u64>,
    /// The last lines of stdout and stderr of a command that failed.
    pub failure_tail: Option<String>,
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|x| match x {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

impl AttemptStory {
    /// What the attempt cost, for the sums.
    pub(crate) fn cost(&self) -> AttemptCost {
        AttemptCost {
            invoked: self.invoked,
            replayed: self.replayed,
            cost_usd: self.cost_usd,
            tokens: self.tokens,
        }
    }
}

pub(crate) fn read_attempt(dir: &AttemptReader, prompt_lines: usize) -> AttemptStory {
    let result = dir.json_opt::<Value>(file::RESULT);
    let process = dir.json_opt::<Value>(file::PROCESS);
    let evidence = dir.json_opt::<Value>(file::EVIDENCE);
    let changed = dir.json_opt::<Value>(file::CHANGED_FILES);
    let prompt = dir.bytes(file::PROMPT);
    let r = |k: &str| result.as_ref().and_then(|v| v.get(k));
    let p = |k: &str| process.as_ref().and_then(|v| v.get(k));
    let (tool_calls, transcript_source) = transcript::read(dir, result.as_ref());
    let cost = AttemptCost::of(result.as_ref(), dir);
    AttemptStory {
        attempt: dir.number(),
        invoked: cost.invoked,
        replayed: cost.replayed,
        status: r("outcome").and_then(Value::as_str).map(str::to_owned),
        failure_reason: r("failureReason")
            .and_then(Value::as_str)
            .map(str::to_owned),
        cost_usd: cost.cost_usd,
        tokens: cost.tokens,
        turns: r("numTurns").and_then(Value::as_u64),
        started_at: p("startedAt").and_then(Value::as_str).map(str::to_owned),
        ended_at: p("endedAt").and_then(Value::as_str).map(str::to_owned),
        duration_ms: p("durationMs").and_then(Value::as_u64),
        exit_code: p("exitCode").and_then(Value::as_i64),
        prompt_head: prompt
            .as_ref()
            .map(|b| head(&String::from_utf8_lossy(b), prompt_lines)),
        prompt_bytes: prompt.as_ref().map(|b| b.len() as u64),
        tool_calls,
        transcript_source,
        verification: verification(dir),
        evidence_status: evidence
            .as_ref()
            .and_then(|e| e.get("status"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        evidence_reasons: strings(evidence.as_ref().and_then(|e| e.get("reasons"))),
        violations: evidence
            .as_ref()
            .and_then(|e| e.get("violations"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.get("message").and_then(Value::as_str))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
        changed: Changed {
            added: strings(changed.as_ref().and_then(|c| c.get("added"))),
            modified: strings(changed.as_ref().and_then(|c| c.get("modified"))),
            deleted: strings(changed.as_ref().and_then(|c| c.get("deleted"))),
            ambiguous: strings(changed.as_ref().and_then(|c| c.get("ambiguous"))),
        },
        diff: dir
            .len(file::DIFF)
            .filter(|len| *len > 0)
            .map(|_| dir.rel_of(file::DIFF)),
        path: dir.rel().to_string(),
    }
}

fn verification(dir: &AttemptReader) -> Vec<Verification> {
    let Some(record) = dir.json_opt::<Value>(file::VERIFICATION) else {
        return Vec::new();
    };
    record
        .get("commands")
        .and_then(Value::as_array)
        .map(|commands| commands.iter().map(|c| command(dir, c)).collect())
        .unwrap_or_default()
}

fn command(dir: &AttemptReader, c: &Value) -> Verification {
    let s = |k: &str| c.get(k).and_then(Value::as_str).map(str::to_owned);
    let passed = c.get("passed").and_then(Value::as_bool).unwrap_or(false);
    let failure_tail = (!passed).then(|| {
        let mut parts = Vec::new();
        for key in ["stdoutLog", "stderrLog"] {
            let Some(name) = s(key) else { continue };
            // Log names come from the record; only a plain file name is followed.
            if let Some(bytes) = dir.named_log(&name) {
                let text = String::from_utf8_lossy(&bytes);
                let t = tail(&text, FAILURE_TAIL_LINES);
                if !t.trim().is_empty() {
                    parts.push(t);
                }
            }
        }
        parts.join("\n")
    });
    Verification {
        name: s("name").unwrap_or_default(),
        argv: strings(c.get("argv")),
        required: c.get("required").and_then(Value::as_bool).unwrap_or(true),
        passed,
        exit_code: c.get("exitCode").and_then(Value::as_i64),
        timed_out: c.get("timedOut").and_then(Value::as_bool).unwrap_or(false),
        duration_ms: c.get("durationMs").and_then(Value::as_u64),
        failure_tail: failure_tail.filter(|t| !t.is_empty()),
    }
}
