//! Crash recovery before a resume schedules anything: agents orphaned by a dead
//! specbridge are ended, and stages it left `running` become `interrupted`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::audit::events::EventFacts;
use crate::audit::files::RunFiles;
use crate::events::line::EventLine;
use crate::events::{CrashRepaired, ProcessSpawned, RecordAnnounced, RunEvent, StageFinished};
use crate::status::StageStatus;
use crate::store::layout::{self, attempt};
use crate::store::{RunHandle, RunReader, StageRecord, StoreError};
use crate::supervisor::{group_alive, kill_group_if_alive};

pub use crate::events::Orphan;

/// What a `process-spawned` event recorded of the process besides its ids.
#[derive(Debug, Clone, Default)]
pub(crate) struct Spawned {
    at: Option<String>,
    start_ticks: Option<u64>,
}

/// The `process-spawned` events of stage attempts, gathered while the resume's
/// audit reads the log (the log is read once per resume).
#[derive(Debug, Default)]
pub(crate) struct Spawns(BTreeMap<(String, u32), (Orphan, Spawned)>);

impl Spawns {
    /// Take note of one event of the log, in order.
    pub(crate) fn visit(&mut self, line: &EventLine) {
        let RunEvent::ProcessSpawned(ProcessSpawned::Stage(p)) = &line.event else {
            return;
        };
        let orphan = Orphan {
            stage: p.stage.clone(),
            attempt: p.attempt,
            pid: i32::try_from(p.pid).unwrap_or(i32::MAX),
            pgid: p.pgid,
            ended: false,
            note: None,
        };
        let spawned = Spawned {
            at: Some(line.at.clone()),
            start_ticks: p.start_ticks,
        };
        self.0
            .insert((p.stage.clone(), p.attempt), (orphan, spawned));
    }

    /// The spawns whose attempt has no `process.json`: the process was never
    /// seen to end, so its group may still be running.
    fn unfinished(self, folders: &AttemptFolders<'_>) -> Vec<(Orphan, Spawned)> {
        self.0
            .into_values()
            .filter(|(o, _)| !folders.has(&o.stage, o.attempt, attempt::PROCESS))
            .collect()
    }
}

/// What a run's attempt folders hold, as crash recovery asks it: from the
/// resume audit's walk of the run, taken under the lock the resume holds, so
/// that the folders are not listed again; or from the disk, for stages that
/// appear only later in the run (a fan-out's instances).
pub(crate) struct AttemptFolders<'a> {
    walked: Option<&'a RunFiles>,
    reader: RunReader,
}

impl<'a> AttemptFolders<'a> {
    /// As the audit's walk of `run_dir` found them.
    pub(crate) fn walked(files: &'a RunFiles, run_dir: &Path) -> Self {
        AttemptFolders {
            walked: Some(files),
            reader: RunReader::at(run_dir),
        }
    }

    /// As they are on the disk now.
    pub(crate) fn on_disk(run_dir: &Path) -> Self {
        AttemptFolders {
            walked: None,
            reader: RunReader::at(run_dir),
        }
    }

    /// The numbers of `stage`'s attempt folders, in order.
    fn numbers(&self, stage: &str) -> Result<Vec<u32>, StoreError> {
        match self.walked.and_then(|files| files.attempt_numbers(stage)) {
            Some(numbers) => Ok(numbers),
            None => self.reader.attempt_numbers(stage),
        }
    }

    /// Whether attempt `number` of `stage` has the regular file `file`.
    fn has(&self, stage: &str, number: u32, file: &str) -> bool {
        match self.walked {
            Some(files) => files.is_file(&format!("{}/{file}", layout::attempt_rel(stage, number))),
            None => self.reader.attempt(stage, number).has(file),
        }
    }
}

/// End every group of an unfinished spawn that is still alive (SIGTERM, SIGKILL
/// after the `grace` of its stage, by node id), recording each as an
/// `orphan-ended` event.
pub(crate) fn end_orphans(
    run: &RunHandle,
    spawns: Spawns,
    folders: &AttemptFolders<'_>,
    grace: impl Fn(&str) -> Duration,
) -> Result<Vec<Orphan>, StoreError> {
    let mut out = Vec::new();
    for (mut orphan, spawned) in spawns.unfinished(folders) {
        if !group_alive(orphan.pgid) {
            continue;
        }
        if let Some(note) = reused_group(orphan.pgid, &spawned) {
            orphan.note = Some(note);
            run.event(RunEvent::OrphanLeft(orphan.clone()))?;
            out.push(orphan);
            continue;
        }
        orphan.ended = kill_group_if_alive(orphan.pgid, grace(&orphan.stage));
        run.event(RunEvent::OrphanEnded(orphan.clone()))?;
        out.push(orphan);
    }
    Ok(out)
}

/// Why group `pgid` is not the one recorded at `spawned_at`: its leader started
/// later, so the id was given to another process since. `None` when it may be ours.
fn reused_group(pgid: i32, spawned: &Spawned) -> Option<String> {
    let reused = || {
        format!("process group {pgid} now belongs to a process started after the recorded spawn; left alone")
    };
    let leader = u32::try_from(pgid).ok()?;
    if let Some(recorded) = spawned.start_ticks {
        // The same process has the same start ticks; a leader that is gone (its
        // group still alive) gives none, and its group is the one recorded.
        let now = crate::supervisor::process_start_ticks(leader)?;
        return (now != recorded).then(reused);
    }
    // Older logs: by wall-clock time, which can drift from the boot-relative
    // start time (a suspended or clock-stepped machine) — hence the slack.
    let spawned_at = chrono::DateTime::parse_from_rfc3339(spawned.at.as_deref()?).ok()?;
    let started = process_start_unix(pgid)?;
    // The event is written after the spawn returns: the leader started before it.
    (started > spawned_at.timestamp() as f64 + 2.0).then(reused)
}

/// When process `pid` started, in seconds since the epoch (Linux `/proc`).
fn process_start_unix(pid: i32) -> Option<f64> {
    let ticks = crate::supervisor::process_start_ticks(u32::try_from(pid).ok()?)? as f64;
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
pub(crate) fn mark_interrupted(
    run: &RunHandle,
    stages: &mut BTreeMap<String, StageRecord>,
) -> Result<Vec<String>, StoreError> {
    let mut ids = Vec::new();
    for rec in stages.values_mut() {
        if rec.status != StageStatus::Running {
            continue;
        }
        announce_logs_left(run, &rec.stage_id, rec.attempts)?;
        rec.status = StageStatus::Interrupted;
        rec.reason = Some(format!(
            "interrupted: specbridge stopped during attempt {}",
            rec.attempts
        ));
        rec.reused = None;
        run.write_json(&layout::stage_record_rel(&rec.stage_id), &*rec)?;
        run.event(RunEvent::StageFinished(StageFinished {
            stage: rec.stage_id.clone(),
            attempt: Some(rec.attempts),
            status: StageStatus::Interrupted,
            outcome: rec.reason.clone(),
            evidence_status: None,
            recovered: false,
        }))?;
        ids.push(rec.stage_id.clone());
    }
    Ok(ids)
}

/// The streamed logs attempt `n` of stage `stage` left, announced as they
/// were left; returns their paths.
fn announce_logs_left(run: &RunHandle, stage: &str, n: u32) -> Result<Vec<String>, StoreError> {
    let attempt_rel = layout::attempt_rel(stage, n);
    let mut announced = Vec::new();
    for log in [attempt::RAW_STDOUT, attempt::RAW_STDERR] {
        let rel = layout::in_attempt(&attempt_rel, log);
        if run.path(&rel).is_ok_and(|p| p.is_file()) {
            run.announce(&rel)?;
            announced.push(rel);
        }
    }
    Ok(announced)
}

/// Attempts a crash cut off before any record of them was on disk: the child
/// spawned and its logs made, the batch that records its start not yet written
/// (an agent's is written while the CLI starts up, before it gets its prompt;
/// a check's beside its command). Each of `nodes` is counted past every attempt
/// folder of its stage, so that the next attempt never reuses one (its logs are
/// new files only), and the logs such an attempt left are announced as they
/// were left, listed in one `crash-repaired` event. `recorded` tells what a
/// stage's record counts (0 without one).
pub(crate) fn count_unrecorded_attempts(
    run: &RunHandle,
    nodes: &mut [crate::scheduler::Node],
    folders: &AttemptFolders<'_>,
    recorded: impl Fn(&str) -> u32,
) -> Result<(), StoreError> {
    let mut announced = Vec::new();
    for node in nodes {
        let recorded = recorded(&node.id);
        let folders = folders.numbers(&node.id)?;
        for &n in folders.iter().filter(|&&n| n > recorded) {
            for rel in announce_logs_left(run, &node.id, n)? {
                announced.push(format!(
                    "announced {rel}, left by an attempt no record names"
                ));
            }
        }
        let last = folders.last().copied().unwrap_or(0);
        node.prior_attempts = node.prior_attempts.max(recorded).max(last);
    }
    if !announced.is_empty() {
        run.event(RunEvent::CrashRepaired(CrashRepaired {
            repaired: announced,
        }))?;
    }
    Ok(())
}

/// What a crash between a write and its event left, made whole before anything
/// is scheduled (docs/audit.md, "Crash recovery"): a record that matches its
/// pending `record-intent` is confirmed with a `record-written` event, and a
/// `stage.json` whose finish was written but not logged gets its `stage-finished`
/// event from the record. Every event it adds carries `"recovered": true`.
/// Returns what it repaired, one line each.
/// `facts` are the log as the resume's audit read it: the events appended since
/// (the resume's own) neither confirm a write nor finish a stage.
pub(crate) fn repair_unlogged(
    run: &RunHandle,
    facts: &EventFacts,
    stages: &BTreeMap<String, StageRecord>,
) -> Result<Vec<String>, StoreError> {
    let mut repaired = Vec::new();
    for (rel, intent) in &facts.intents {
        let Ok(path) = run.path(rel) else { continue };
        if crate::store::sha256_file(&path).is_ok_and(|sha| sha == intent.sha256) {
            run.event(RunEvent::RecordWritten(RecordAnnounced {
                path: rel.clone(),
                sha256: intent.sha256.clone(),
                recovered: true,
            }))?;
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
            run.event(RunEvent::StageFinished(StageFinished {
                stage: rec.stage_id.clone(),
                attempt: Some(rec.attempts),
                status: rec.status,
                outcome: rec.reason.clone(),
                evidence_status: rec.evidence_status,
                recovered: true,
            }))?;
            repaired.push(format!("logged the finish of {}", rec.stage_id));
        }
    }
    Ok(repaired)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    /// A process in its own group, as the supervisor spawns agents.
    fn leader() -> std::process::Child {
        std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("spawn sleep")
    }

    #[test]
    fn the_recorded_start_tells_our_process_from_a_later_one_whatever_the_clock_says() {
        let mut child = leader();
        let pid = child.id();
        let pgid = i32::try_from(pid).unwrap();
        let ticks = crate::supervisor::process_start_ticks(pid).expect("/proc readable");
        // A wall clock far off (a suspended machine, a stepped clock) does not
        // make our own process look like a stranger when the ticks were recorded.
        let ours = Spawned {
            at: Some("2001-01-01T00:00:00.000Z".into()),
            start_ticks: Some(ticks),
        };
        assert_eq!(reused_group(pgid, &ours), None);
        // A process whose start differs from the recorded one is someone else's.
        let other = Spawned {
            at: None,
            start_ticks: Some(ticks.saturating_sub(1)),
        };
        assert!(reused_group(pgid, &other).is_some());
        // Without ticks (older logs) the wall clock decides, with its slack.
        let old = Spawned {
            at: Some("2001-01-01T00:00:00.000Z".into()),
            start_ticks: None,
        };
        assert!(reused_group(pgid, &old).is_some());
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// A crash after an attempt's logs were made and before any record of it:
    /// the next attempt is numbered past its folder (its logs are new files
    /// only, so reusing the number would fail), and the logs it left are
    /// announced as they were; attempts a record counts are left alone.
    #[test]
    fn an_attempt_no_record_names_is_counted_and_its_logs_announced() {
        use crate::pipeline::StageKind;
        let base = tempfile::tempdir().unwrap();
        let run = crate::store::RunStore::new(base.path())
            .create(crate::redact::Redactor::default())
            .unwrap();
        let logs = |stage: &str, n: u32| {
            let dir = run.dir().join(layout::attempt_rel(stage, n));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(attempt::RAW_STDOUT), "started\n").unwrap();
            std::fs::write(dir.join(attempt::RAW_STDERR), "").unwrap();
        };
        logs("spec", 1);
        logs("gate", 1);
        logs("gate", 2);

        let node = |id: &str| crate::scheduler::Node::stage(id, StageKind::Generate, vec![]);
        let on_disk = AttemptFolders::on_disk(run.dir());
        let mut spec = [node("spec")];
        count_unrecorded_attempts(&run, &mut spec, &on_disk, |_| 0).unwrap();
        assert_eq!(spec[0].prior_attempts, 1, "the next attempt is 2");
        // The first attempt is recorded; only the second is not.
        let mut gate = [node("gate")];
        count_unrecorded_attempts(&run, &mut gate, &on_disk, |_| 1).unwrap();
        assert_eq!(gate[0].prior_attempts, 2);
        // A stage with no folder, or none past its record, is as recorded.
        let mut design = [node("design")];
        count_unrecorded_attempts(&run, &mut design, &on_disk, |_| 0).unwrap();
        assert_eq!(design[0].prior_attempts, 0);
        let mut recorded = [node("spec")];
        count_unrecorded_attempts(&run, &mut recorded, &on_disk, |_| 3).unwrap();
        assert_eq!(recorded[0].prior_attempts, 3);

        drop(run);
        let dir = std::fs::read_dir(base.path().join(".specbridge/runs"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
        // One `crash-repaired` event a call that announced something: spec's
        // two logs, then gate's second attempt's; none for the last two.
        let repaired: Vec<Vec<String>> = events
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| e["type"] == "crash-repaired")
            .map(|e| serde_json::from_value(e["repaired"].clone()).unwrap())
            .collect();
        let [announced, gate_announced] = &repaired[..] else {
            panic!("two crash-repaired events: {repaired:?}");
        };
        assert_eq!(announced.len(), 2, "{announced:?}");
        assert!(
            gate_announced
                .iter()
                .all(|l| l.contains("gate/attempt-002/")),
            "{gate_announced:?}"
        );
        let written = |rel: &str| {
            events.lines().any(|l| {
                l.contains("\"record-written\"") && l.contains(&format!("\"path\":\"{rel}\""))
            })
        };
        assert!(written("stages/spec/attempt-001/raw-stdout.log"));
        assert!(written("stages/gate/attempt-002/raw-stderr.log"));
        assert!(!written("stages/gate/attempt-001/raw-stdout.log"));
    }

    #[test]
    fn a_spawn_event_records_the_start_of_the_process() {
        let mut child = leader();
        let pid = child.id();
        let RunEvent::ProcessSpawned(ProcessSpawned::Stage(p)) =
            RunEvent::stage_spawned("s", 1, pid, i32::try_from(pid).unwrap())
        else {
            panic!("a stage spawn");
        };
        assert_eq!(p.start_ticks, crate::supervisor::process_start_ticks(pid));
        assert!(p.start_ticks.is_some());
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// Crash recovery's questions about attempt folders, answered from the
    /// resume audit's walk as the disk answers them, without asking the disk
    /// again: the resume holds the run's lock from before the walk.
    #[test]
    fn the_audits_walk_answers_for_attempt_folders_as_the_disk_does() {
        use crate::audit::events::EventFacts;
        use crate::audit::files::{compare, scan_files};
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for (stage, n, file) in [
            ("a", 1, Some(attempt::PROCESS)),
            ("a", 2, None),
            ("b", 1, Some(attempt::RAW_STDOUT)),
        ] {
            let folder = root.join(layout::attempt_rel(stage, n));
            std::fs::create_dir_all(&folder).unwrap();
            if let Some(file) = file {
                std::fs::write(folder.join(file), "{}").unwrap();
            }
        }
        let (_, files) = compare(
            scan_files(root).unwrap(),
            root,
            &EventFacts::default(),
            &mut Vec::new(),
        );
        let walked = AttemptFolders::walked(&files, root);
        let disk = AttemptFolders::on_disk(root);
        for stage in ["a", "b", "c"] {
            assert_eq!(walked.numbers(stage).unwrap(), disk.numbers(stage).unwrap());
            for n in 1..=3 {
                assert_eq!(
                    walked.has(stage, n, attempt::PROCESS),
                    disk.has(stage, n, attempt::PROCESS),
                    "{stage} {n}"
                );
            }
        }
        assert_eq!(walked.numbers("a").unwrap(), [1, 2]);
        assert!(walked.has("a", 1, attempt::PROCESS) && !walked.has("a", 2, attempt::PROCESS));
        std::fs::remove_dir_all(root.join("stages/a")).unwrap();
        assert_eq!(walked.numbers("a").unwrap(), [1, 2], "not listed again");
        assert!(walked.has("a", 1, attempt::PROCESS));
    }
}
