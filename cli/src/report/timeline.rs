//! Stage attempts in time, from `events.jsonl` (`stage-started` → `stage-finished`).

use std::collections::HashMap;
use std::path::Path;

use chrono::{DateTime, Utc};
use specbridge_engine::events::{line, ResumeDecision, RunEvent};

/// One attempt of one stage.
#[derive(Debug, Clone)]
pub(crate) struct Bar {
    pub stage: String,
    pub attempt: u32,
    pub start_ms: i64,
    pub end_ms: Option<i64>,
    pub status: String,
}

fn millis(at: &str) -> Option<i64> {
    DateTime::parse_from_rfc3339(at)
        .ok()
        .map(|t| t.with_timezone(&Utc).timestamp_millis())
}

/// The attempts in start order, and the resume decisions, read line by line.
pub(super) fn from_events(path: &Path) -> (Vec<Bar>, Vec<ResumeDecision>) {
    let mut bars: Vec<Bar> = Vec::new();
    let mut open: HashMap<String, usize> = HashMap::new();
    let mut decisions = Vec::new();
    for line in line::read_all(path) {
        let at = millis(&line.at);
        match (line.event, at) {
            (RunEvent::StageStarted(s), Some(at)) => {
                open.insert(s.stage.clone(), bars.len());
                bars.push(Bar {
                    attempt: s.attempt,
                    stage: s.stage,
                    start_ms: at,
                    end_ms: None,
                    status: "running".into(),
                });
            }
            (RunEvent::StageFinished(f), Some(at)) => {
                if let Some(i) = open.remove(&f.stage) {
                    bars[i].end_ms = Some(at);
                    bars[i].status = f.status.as_str().to_string();
                }
            }
            (RunEvent::ResumeDecision(d), _) => decisions.push(d),
            _ => {}
        }
    }
    (bars, decisions)
}
