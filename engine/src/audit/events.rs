//! One streaming pass over `events.jsonl`: the chain check, each line read as a
//! [`RunEvent`] (a line that is not one is an `event-unknown` finding), plus the
//! facts later checks compare the files against (announcements, stage and run
//! events).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::store::layout;

use crate::audit::report::{Finding, FindingCode};
use crate::events::line::{read_with, EventLine, UnknownEvent};
use crate::events::RunEvent;

/// Chain problems reported one by one before the rest are summed up, so a log
/// rewritten wholesale does not bury every other finding.
const MAX_CHAIN_FINDINGS: usize = 20;

/// The last `record-written` event for a path.
#[derive(Debug, Clone)]
pub(crate) struct Announcement {
    pub sha256: String,
    pub line: u64,
}

/// The last event seen for a stage.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum StageEvent {
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
pub(crate) enum RunLifecycle {
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
pub(crate) struct EventFacts {
    pub events: u64,
    pub present: bool,
    pub announced: BTreeMap<String, Announcement>,
    /// `record-intent` events not followed by a `record-written` of their path:
    /// a write the process may have died in (docs/audit.md, "Crash recovery").
    pub intents: BTreeMap<String, Announcement>,
    pub stages: BTreeMap<String, StageEvent>,
    pub run: Option<RunLifecycle>,
    /// Lines that are not an event this version writes (each is a finding).
    pub unknown: u64,
    /// Where the whole lines end, for a resume to continue the log without
    /// reading it again; `None` when the chain is broken or the log is missing.
    pub head: Option<crate::store::events::ChainHead>,
    /// Bytes of an incomplete last line.
    pub torn_tail: Option<usize>,
}

/// Read the log once; chain problems and a torn tail become findings. Every
/// event that parses is also handed to `also` (in order), so that a resume learns
/// what it needs from the same single read of the log.
pub(crate) fn read_events(
    run_dir: &Path,
    findings: &mut Vec<Finding>,
    mut also: impl FnMut(&EventLine),
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
    let mut unknown = Vec::new();
    let check = read_with(&path, |line, parsed| {
        if let Ok(event) = &parsed {
            also(event);
        }
        visit(&mut facts, &mut unknown, line, parsed);
    })?;
    facts.head = check.head();
    facts.torn_tail = check.torn_tail.as_ref().map(Vec::len);
    if facts.unknown > MAX_CHAIN_FINDINGS as u64 {
        unknown.push(
            Finding::new(
                FindingCode::EventUnknown,
                format!(
                    "{} more lines that are not events not listed one by one",
                    facts.unknown - MAX_CHAIN_FINDINGS as u64
                ),
            )
            .file(crate::store::layout::EVENTS),
        );
    }
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
    findings.extend(unknown);
    Ok(facts)
}

fn visit(
    facts: &mut EventFacts,
    findings: &mut Vec<Finding>,
    line: u64,
    parsed: Result<EventLine, UnknownEvent>,
) {
    let event = match parsed {
        Ok(parsed) => parsed.event,
        Err(unknown) => {
            facts.unknown += 1;
            if facts.unknown <= MAX_CHAIN_FINDINGS as u64 {
                findings.push(
                    Finding::new(FindingCode::EventUnknown, format!("line {line}: {unknown}"))
                        .file(crate::store::layout::EVENTS),
                );
            }
            return;
        }
    };
    match event {
        RunEvent::RecordWritten(r) => {
            facts.intents.remove(&r.path);
            facts.announced.insert(
                r.path,
                Announcement {
                    sha256: r.sha256,
                    line,
                },
            );
        }
        RunEvent::RecordIntent(r) => {
            facts.intents.insert(
                r.path,
                Announcement {
                    sha256: r.sha256,
                    line,
                },
            );
        }
        RunEvent::StageStarted(s) => {
            facts.stages.insert(
                s.stage,
                StageEvent::Started {
                    attempt: Some(s.attempt),
                    line,
                },
            );
        }
        RunEvent::StageFinished(f) => {
            facts.stages.insert(
                f.stage,
                StageEvent::Finished {
                    status: f.status.as_str().to_string(),
                    attempt: f.attempt,
                    line,
                },
            );
        }
        RunEvent::RunStarted(_) | RunEvent::RunResumed(_) => {
            facts.run = Some(RunLifecycle::Open { line });
        }
        RunEvent::RunFinished(f) => {
            facts.run = Some(RunLifecycle::Finished {
                status: Some(f.status.as_str().to_string()),
                exit_code: Some(i64::from(f.exit_code)),
                totals: serde_json::to_value(&f.totals).ok(),
                line,
            });
        }
        _ => {}
    }
}
