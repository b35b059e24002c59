//! One streaming pass over `events.jsonl`: the chain check, plus the facts later
//! checks compare the files against (announcements, stage and run events).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::store::layout;

use crate::audit::report::{Finding, FindingCode};
use crate::store::events::verify_chain_with;

/// Chain problems reported one by one before the rest are summed up, so a log
/// rewritten wholesale does not bury every other finding.
const MAX_CHAIN_FINDINGS: usize = 20;

/// The last `record-written` event for a path.
#[derive(Debug, Clone)]
pub struct Announcement {
    pub sha256: String,
    pub line: u64,
}

/// The last event seen for a stage.
#[derive(Debug, Clone, PartialEq)]
pub enum StageEvent {
    Started {
        attempt: Option<u32>,
        line: u64,
    },
    Finished {
        status: String,
        attempt: Option<u32>,
        line: u64,
    },
}

/// Where the run's own lifecycle stood at the end of the log.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEvent {
    /// Started or resumed, and not finished since.
    Open { line: u64 },
    Finished {
        status: Option<String>,
        exit_code: Option<i64>,
        totals: Option<Value>,
        line: u64,
    },
}

/// What the log says, as far as audit needs it. Memory grows with the number of
/// distinct paths and stages, never with the length of the log.
#[derive(Debug, Default)]
pub struct EventFacts {
    pub events: u64,
    pub present: bool,
    pub announced: BTreeMap<String, Announcement>,
    /// `record-intent` events not followed by a `record-written` of their path:
    /// a write the process may have died in (docs/audit.md, "Crash recovery").
    pub intents: BTreeMap<String, Announcement>,
    pub stages: BTreeMap<String, StageEvent>,
    pub run: Option<RunEvent>,
}

/// Read the log once; chain problems and a torn tail become findings.
pub fn read_events(
    run_dir: &Path,
    findings: &mut Vec<Finding>,
) -> Result<EventFacts, crate::store::events::EventError> {
    let path = run_dir.join(layout::EVENTS);
    let mut facts = EventFacts::default();
    if !path.exists() {
        findings.push(
            Finding::new(
                FindingCode::ChainBroken,
                "events.jsonl is missing: nothing in this run can be checked against its log",
            )
            .file(layout::EVENTS),
        );
        return Ok(facts);
    }
    facts.present = true;
    let check = verify_chain_with(&path, |line, ev| visit(&mut facts, line, ev))?;
    facts.events = check.events;

    let total = check.problems.len();
    for p in check.problems.iter().take(MAX_CHAIN_FINDINGS) {
        // The store words every sequence problem as "seq is …".
        let code = if p.message.starts_with("seq ") {
            FindingCode::SeqGap
        } else {
            FindingCode::ChainBroken
        };
        findings.push(
            Finding::new(code, format!("line {}: {}", p.line, p.message)).file(layout::EVENTS),
        );
    }
    if total > MAX_CHAIN_FINDINGS {
        findings.push(
            Finding::new(
                FindingCode::ChainBroken,
                format!(
                    "{} more broken lines not listed one by one",
                    total - MAX_CHAIN_FINDINGS
                ),
            )
            .file(layout::EVENTS),
        );
    }
    if let Some(tail) = &check.torn_tail {
        findings.push(
            Finding::new(
                FindingCode::TornTail,
                format!(
                    "the last line ({} bytes) is incomplete, as a crash mid-write leaves it; \
                     resuming the run sets it aside",
                    tail.len()
                ),
            )
            .file(layout::EVENTS),
        );
    }
    Ok(facts)
}

fn visit(facts: &mut EventFacts, line: u64, ev: &Value) {
    let kind = ev.get("type").and_then(Value::as_str).unwrap_or_default();
    let str_field = |k: &str| ev.get(k).and_then(Value::as_str).map(str::to_string);
    let attempt = ev
        .get("attempt")
        .and_then(Value::as_u64)
        .and_then(|a| u32::try_from(a).ok());
    match kind {
        "record-written" => {
            if let (Some(path), Some(sha256)) = (str_field("path"), str_field("sha256")) {
                facts.intents.remove(&path);
                facts.announced.insert(path, Announcement { sha256, line });
            }
        }
        "record-intent" => {
            if let (Some(path), Some(sha256)) = (str_field("path"), str_field("sha256")) {
                facts.intents.insert(path, Announcement { sha256, line });
            }
        }
        "stage-started" => {
            if let Some(stage) = str_field("stage") {
                facts
                    .stages
                    .insert(stage, StageEvent::Started { attempt, line });
            }
        }
        "stage-finished" => {
            if let (Some(stage), Some(status)) = (str_field("stage"), str_field("status")) {
                facts.stages.insert(
                    stage,
                    StageEvent::Finished {
                        status,
                        attempt,
                        line,
                    },
                );
            }
        }
        "run-started" | "run-resumed" => facts.run = Some(RunEvent::Open { line }),
        "run-finished" => {
            facts.run = Some(RunEvent::Finished {
                status: str_field("status"),
                exit_code: ev.get("exitCode").and_then(Value::as_i64),
                totals: ev.get("totals").cloned(),
                line,
            })
        }
        _ => {}
    }
}
