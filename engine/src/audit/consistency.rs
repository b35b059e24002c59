//! `run.json` and each `stage.json` against what the event log says happened.

use serde_json::Value;

use crate::audit::events::{EventFacts, RunLifecycle, StageEvent};
use crate::audit::files::RunFiles;
use crate::audit::records::{read_record, str_field};
use crate::audit::report::{Finding, FindingCode};
use crate::audit::stages::StageState;
use crate::store::layout;

/// Statuses a stage or run may show while no finish event follows its start: it is
/// still going, or a resume found it cut off by a crash.
const UNFINISHED: &[&str] = &["running", "interrupted"];

const COST_TOLERANCE: f64 = 1e-9;

pub(crate) fn check_run_json(files: &RunFiles, facts: &EventFacts, findings: &mut Vec<Finding>) {
    let Some(run) = read_record(files, layout::RUN, findings) else {
        return;
    };
    let mismatch =
        |message: String| Finding::new(FindingCode::RunJsonMismatch, message).file(layout::RUN);
    let status = str_field(&run, "status").unwrap_or("missing");
    match &facts.run {
        Some(RunLifecycle::Finished {
            status: ev_status,
            exit_code,
            totals,
            line,
        }) => {
            if let Some(ev_status) = ev_status.as_deref().filter(|s| *s != status) {
                findings.push(mismatch(format!(
                    "status is {status} but the run-finished event (line {line}) says {ev_status}"
                )));
            }
            let recorded = run.get("exitCode").and_then(Value::as_i64);
            if let Some(code) = exit_code.filter(|c| Some(*c) != recorded) {
                findings.push(mismatch(format!(
                    "exitCode is {} but the run-finished event (line {line}) says {code}",
                    recorded.map_or("missing".to_string(), |c| c.to_string())
                )));
            }
            if let (Some(ev), Some(rec)) = (totals, run.get("totals")) {
                for field in totals_differences(ev, rec) {
                    findings.push(mismatch(format!(
                        "totals.{field} differs from the run-finished event (line {line})"
                    )));
                }
            }
        }
        Some(RunLifecycle::Open { line }) if !UNFINISHED.contains(&status) => {
            findings.push(mismatch(format!(
                "status is {status} but no run-finished event follows the run's start (line {line})"
            )));
        }
        _ => {}
    }
}

/// Which of `costUsd`, `invocations`, `turns`, `tokens` differ between two totals
/// objects (`tokens` only when both have it: runs recorded before it existed lack it).
fn totals_differences(a: &Value, b: &Value) -> Vec<&'static str> {
    let num = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64);
    let mut out = Vec::new();
    for field in ["costUsd", "invocations", "turns"] {
        let differs = match (num(a, field), num(b, field)) {
            (Some(x), Some(y)) => (x - y).abs() > COST_TOLERANCE,
            (None, None) => false,
            _ => true,
        };
        if differs {
            out.push(field);
        }
    }
    if let (Some(x), Some(y)) = (a.get("tokens"), b.get("tokens")) {
        if x != y {
            out.push("tokens");
        }
    }
    out
}

pub(crate) fn check_stage_json(
    states: &[StageState],
    facts: &EventFacts,
    findings: &mut Vec<Finding>,
) {
    for state in states {
        let Some(status) = state.status.as_deref() else {
            continue;
        };
        let rel = layout::stage_record_rel(&state.id);
        let mismatch = |message: String, attempt: Option<u32>| {
            Finding::new(FindingCode::StageJsonMismatch, message)
                .file(&rel)
                .attempt(attempt)
        };
        match facts.stages.get(&state.id) {
            Some(StageEvent::Finished {
                status: ev_status,
                attempt,
                line,
            }) if ev_status != status => findings.push(mismatch(
                format!("status is {status} but the last stage-finished event (line {line}) says {ev_status}"),
                *attempt,
            )),
            Some(StageEvent::Started { attempt, line }) if !UNFINISHED.contains(&status) => {
                findings.push(mismatch(
                    format!("status is {status} but the stage's last event is stage-started (line {line}) with no stage-finished after it"),
                    *attempt,
                ));
            }
            _ => {}
        }
    }
    // A set, not a scan of the stages per event: that is quadratic in the stages.
    let recorded: std::collections::BTreeSet<&str> = states.iter().map(|s| s.id.as_str()).collect();
    for (id, ev) in &facts.stages {
        if let StageEvent::Finished { line, .. } = ev {
            if !recorded.contains(id.as_str()) {
                findings.push(
                    Finding::new(
                        FindingCode::StageJsonMismatch,
                        format!("a stage-finished event (line {line}) names this stage but there is no stage.json"),
                    )
                    .stage(id),
                );
            }
        }
    }
}
