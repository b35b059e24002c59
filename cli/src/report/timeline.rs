//! Stage attempts in time, from `events.jsonl` (`stage-started` → `stage-finished`).

use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;

use chrono::{DateTime, Utc};
use serde_json::Value;

/// One attempt of one stage.
#[derive(Debug, Clone)]
pub struct Bar {
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
pub fn from_events(path: &Path) -> (Vec<Bar>, Vec<Value>) {
    let mut bars: Vec<Bar> = Vec::new();
    let mut open: HashMap<String, usize> = HashMap::new();
    let mut decisions = Vec::new();
    let Ok(file) = std::fs::File::open(path) else {
        return (bars, decisions);
    };
    for line in std::io::BufReader::new(file).lines().map_while(Result::ok) {
        let Ok(event) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let kind = event["type"].as_str().unwrap_or_default();
        let stage = event["stage"].as_str().unwrap_or_default().to_string();
        let at = event["at"].as_str().and_then(millis);
        match (kind, at) {
            ("stage-started", Some(at)) => {
                open.insert(stage.clone(), bars.len());
                bars.push(Bar {
                    attempt: event["attempt"].as_u64().unwrap_or(1) as u32,
                    stage,
                    start_ms: at,
                    end_ms: None,
                    status: "running".into(),
                });
            }
            ("stage-finished", Some(at)) => {
                if let Some(i) = open.remove(&stage) {
                    bars[i].end_ms = Some(at);
                    bars[i].status = event["status"].as_str().unwrap_or("?").to_string();
                }
            }
            ("resume-decision", _) => decisions.push(event),
            _ => {}
        }
    }
    (bars, decisions)
}
