//! Crash recovery before a resume schedules anything: agents orphaned by a dead
//! specbridge are ended, and stages it left `running` become `interrupted`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use serde_json::{json, Value};

use crate::status::StageStatus;
use crate::store::events::verify_chain_with;
use crate::store::{RunHandle, StageRecord, StoreError};
use crate::supervisor::{group_alive, kill_group_if_alive};

/// A process group recorded at spawn whose end specbridge never saw.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Orphan {
    pub stage: String,
    pub attempt: u32,
    pub pid: i32,
    pub pgid: i32,
    /// Whether something of the group was alive and was ended.
    pub ended: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// `process-spawned` events of attempts that have no `process.json`: the process
/// was never seen to end, so its group may still be running.
pub fn unfinished_spawns(run_dir: &Path) -> Vec<(Orphan, Option<String>)> {
    let mut spawns: BTreeMap<(String, u32), (Orphan, Option<String>)> = BTreeMap::new();
    let _ = verify_chain_with(&run_dir.join("events.jsonl"), |_, ev| {
        if ev.get("type").and_then(Value::as_str) != Some("process-spawned") {
            return;
        }
        let int = |k: &str| ev.get(k).and_then(Value::as_i64);
        let (Some(stage), Some(attempt), Some(pid), Some(pgid)) = (
            ev.get("stage").and_then(Value::as_str),
            int("attempt"),
            int("pid"),
            int("pgid"),
        ) else {
            return;
        };
        let orphan = Orphan {
            stage: stage.to_string(),
            attempt: attempt as u32,
            pid: pid as i32,
            pgid: pgid as i32,
            ended: false,
            note: None,
        };
        let at = ev.get("at").and_then(Value::as_str).map(String::from);
        spawns.insert((stage.to_string(), attempt as u32), (orphan, at));
    });
    spawns
        .into_values()
        .filter(|(o, _)| {
            let rel = RunHandle::attempt_rel(&o.stage, o.attempt);
            !run_dir.join(rel).join("process.json").exists()
        })
        .collect()
}

/// End every group of an unfinished spawn that is still alive (SIGTERM, SIGKILL
/// after the `grace` of its stage, by node id), recording each as an
/// `orphan-ended` event.
pub fn end_orphans(
    run: &RunHandle,
    grace: impl Fn(&str) -> Duration,
) -> Result<Vec<Orphan>, StoreError> {
    let mut out = Vec::new();
    for (mut orphan, at) in unfinished_spawns(run.dir()) {
        if !group_alive(orphan.pgid) {
            continue;
        }
        if let Some(note) = reused_group(orphan.pgid, at.as_deref()) {
            orphan.note = Some(note);
            run.event(
                "orphan-left",
                serde_json::to_value(&orphan).expect("serialises"),
            )?;
            out.push(orphan);
            continue;
        }
        orphan.ended = kill_group_if_alive(orphan.pgid, grace(&orphan.stage));
        run.event(
            "orphan-ended",
            serde_json::to_value(&orphan).expect("serialises"),
        )?;
        out.push(orphan);
    }
    Ok(out)
}

/// Why group `pgid` is not the one recorded at `spawned_at`: its leader started
/// later, so the id was given to another process since. `None` when it may be ours.
fn reused_group(pgid: i32, spawned_at: Option<&str>) -> Option<String> {
    let spawned = chrono::DateTime::parse_from_rfc3339(spawned_at?).ok()?;
    let started = process_start_unix(pgid)?;
    // The event is written after the spawn returns: the leader started before it.
    (started > spawned.timestamp() as f64 + 2.0).then(|| {
        format!("process group {pgid} now belongs to a process started after the recorded spawn; left alone")
    })
}

/// When process `pid` started, in seconds since the epoch (Linux `/proc`).
fn process_start_unix(pid: i32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    // Fields after the command: state is field 3; starttime is field 22.
    let ticks: f64 = rest.split_whitespace().nth(19)?.parse().ok()?;
    let btime: f64 = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| btime + ticks / hz as f64)
}

/// Stages left `running` become `interrupted` (record and event); their streamed
/// logs are announced as they were left. Returns their ids.
pub fn mark_interrupted(
    run: &RunHandle,
    stages: &mut BTreeMap<String, StageRecord>,
) -> Result<Vec<String>, StoreError> {
    let mut ids = Vec::new();
    for rec in stages.values_mut() {
        if rec.status != StageStatus::Running {
            continue;
        }
        let attempt_rel = RunHandle::attempt_rel(&rec.stage_id, rec.attempts);
        for log in ["raw-stdout.log", "raw-stderr.log"] {
            let rel = format!("{attempt_rel}/{log}");
            if run.path(&rel).is_ok_and(|p| p.is_file()) {
                run.announce(&rel)?;
            }
        }
        rec.status = StageStatus::Interrupted;
        rec.reason = Some(format!(
            "interrupted: specbridge stopped during attempt {}",
            rec.attempts
        ));
        rec.reused = None;
        run.write_json(
            &format!("{}/stage.json", RunHandle::stage_rel(&rec.stage_id)),
            &*rec,
        )?;
        run.event(
            "stage-finished",
            json!({
                "stage": rec.stage_id,
                "attempt": rec.attempts,
                "status": StageStatus::Interrupted,
                "outcome": rec.reason,
            }),
        )?;
        ids.push(rec.stage_id.clone());
    }
    Ok(ids)
}

/// What a crash between a write and its event left, made whole before anything
/// is scheduled (docs/audit.md, "Crash recovery"): a record that matches its
/// pending `record-intent` is confirmed with a `record-written` event, and a
/// `stage.json` whose finish was written but not logged gets its `stage-finished`
/// event from the record. Every event it adds carries `"recovered": true`.
/// Returns what it repaired, one line each.
pub fn repair_unlogged(
    run: &RunHandle,
    stages: &BTreeMap<String, StageRecord>,
) -> Result<Vec<String>, StoreError> {
    let mut ignored = Vec::new();
    let facts = crate::audit::events::read_events(run.dir(), &mut ignored)?;
    let mut repaired = Vec::new();
    for (rel, intent) in &facts.intents {
        let Ok(path) = run.path(rel) else { continue };
        if crate::store::sha256_file(&path).is_ok_and(|sha| sha == intent.sha256) {
            run.event(
                "record-written",
                json!({ "path": rel, "sha256": intent.sha256, "recovered": true }),
            )?;
            repaired.push(format!("confirmed {rel}"));
        }
    }
    for rec in stages.values() {
        if rec.status == StageStatus::Running {
            // `mark_interrupted` finishes these.
            continue;
        }
        use crate::audit::events::StageEvent;
        let logged = match facts.stages.get(&rec.stage_id) {
            Some(StageEvent::Finished { status, .. }) => status.as_str() == rec.status.as_str(),
            Some(StageEvent::Started { .. }) => false,
            None => true,
        };
        if !logged {
            run.event(
                "stage-finished",
                json!({
                    "stage": rec.stage_id,
                    "attempt": rec.attempts,
                    "status": rec.status,
                    "outcome": rec.reason,
                    "evidenceStatus": rec.evidence_status,
                    "recovered": true,
                }),
            )?;
            repaired.push(format!("logged the finish of {}", rec.stage_id));
        }
    }
    Ok(repaired)
}
