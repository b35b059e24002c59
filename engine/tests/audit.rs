//! `runs audit` against runs built with the real run store: a clean run audits
//! clean, and each kind of tampering or unsafe record is reported with its code,
//! stage, attempt and file.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use specbridge_engine::audit::{audit_all, audit_run, AuditReport, FindingCode, Severity};
use specbridge_engine::events::{
    CrashRepaired, RunEvent, RunFinished, RunResumed, RunStarted, StageFinished, StageStarted,
};
use specbridge_engine::pipeline::StageKind;
use specbridge_engine::store::{
    FileRef, PipelineRef, RunHandle, RunOptions, RunRecord, RunStore, StageRecord, Totals,
    SCHEMA_VERSION,
};
use specbridge_engine::{EvidenceStatus, RunStatus, StageStatus};

const ANT_KEY: &str = "sk-ant-api03-Zx9QwErTyUiOpAsDfGhJkLzXcVbNm0123456789";

/// Announces a file written around the store (as by hand, or by an older
/// specbridge that did not redact): the way to put a secret where audit must
/// find it, now that the store redacts everything it writes.
fn announce(run: &RunHandle, rel: &str) {
    let sha = specbridge_engine::store::sha256_file(&run.dir().join(rel)).unwrap();
    run.event(RunEvent::record_written(rel, &sha)).unwrap();
}

fn run_started(run: &RunHandle) -> RunEvent {
    RunEvent::RunStarted(RunStarted {
        run_id: run.id().to_string(),
        specbridge_version: None,
    })
}

fn run_finished(status: RunStatus, exit_code: i32, totals: Totals) -> RunEvent {
    RunEvent::RunFinished(RunFinished {
        status,
        exit_code,
        totals,
        error: None,
    })
}

fn stage_finished(
    stage: &str,
    attempt: Option<u32>,
    status: StageStatus,
    evidence_status: Option<EvidenceStatus>,
) -> RunEvent {
    RunEvent::StageFinished(StageFinished {
        stage: stage.to_string(),
        attempt,
        status,
        outcome: None,
        evidence_status,
        recovered: false,
    })
}

fn stage_started(stage: &str, attempt: u32) -> RunEvent {
    RunEvent::StageStarted(StageStarted {
        stage: stage.to_string(),
        attempt,
    })
}

/// Appends an event line with an intact chain but without the store (so without
/// redaction). The handle's own log is stale afterwards: append nothing through it.
fn append_raw_event(path: &Path, kind: &str, data: Value) {
    let text = std::fs::read_to_string(path).unwrap();
    let last = text.lines().last().unwrap();
    let seq = serde_json::from_str::<Value>(last).unwrap()["seq"]
        .as_u64()
        .unwrap();
    let mut event = json!({
        "seq": seq + 1,
        "at": "2026-01-01T00:00:00.000Z",
        "type": kind,
        "prev": specbridge_engine::store::sha256_hex(last.as_bytes()),
    });
    for (k, v) in data.as_object().unwrap() {
        event[k] = v.clone();
    }
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    writeln!(f, "{}", serde_json::to_string(&event).unwrap()).unwrap();
}

/// A finished three-stage run (generate → execute → check) written the way the
/// engine writes one, with the handle kept so tests can write more through it.
struct Fixture {
    _repo: tempfile::TempDir,
    run: RunHandle,
}

impl Fixture {
    /// The run with every stage written, before `run.json` is final.
    fn unfinished() -> Self {
        let repo = tempfile::tempdir().unwrap();
        let run = RunStore::new(repo.path())
            .create(Default::default())
            .unwrap();
        run.event(run_started(&run)).unwrap();
        run.write_bytes("pipeline.yaml", b"version: 1\nname: demo\n")
            .unwrap();
        run.write_json("run.json", &run_record(&run, RunStatus::Running, None))
            .unwrap();
        run.write_json("plan.json", &json!({ "schemaVersion": 1, "nodes": [] }))
            .unwrap();
        let fx = Fixture { _repo: repo, run };
        fx.generate_stage();
        fx.execute_stage();
        fx.check_stage();
        fx
    }

    /// A clean, finished run.
    fn finished() -> Self {
        let fx = Self::unfinished();
        fx.finish(RunStatus::Succeeded, 0);
        fx
    }

    fn finish(&self, status: RunStatus, exit_code: i32) {
        let record = run_record(&self.run, status, Some(exit_code));
        self.run.write_json("run.json", &record).unwrap();
        self.run
            .event(run_finished(status, exit_code, record.totals.clone()))
            .unwrap();
    }

    fn dir(&self) -> &Path {
        self.run.dir()
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir().join(rel)
    }

    fn audit(&self) -> AuditReport {
        audit_run(self.dir()).unwrap()
    }

    fn start_stage(&self, id: &str, kind: StageKind) {
        self.run
            .write_json(
                &format!("stages/{id}/stage.json"),
                &stage_record(id, kind, StageStatus::Running, None),
            )
            .unwrap();
        self.run.event(stage_started(id, 1)).unwrap();
    }

    fn finish_stage(&self, id: &str, kind: StageKind, evidence: Option<EvidenceStatus>) {
        let mut record = stage_record(id, kind, StageStatus::Succeeded, evidence);
        if kind != StageKind::Check {
            let rel = format!("stages/{id}/output.json");
            let sha = specbridge_engine::store::sha256_file(&self.path(&rel)).unwrap();
            record.output = Some(FileRef {
                path: rel,
                sha256: sha,
            });
        }
        self.run
            .write_json(&format!("stages/{id}/stage.json"), &record)
            .unwrap();
        self.run
            .event(stage_finished(
                id,
                Some(1),
                StageStatus::Succeeded,
                evidence,
            ))
            .unwrap();
    }

    /// Logs are streamed into place by the supervisor, then announced.
    fn stream_log(&self, rel: &str, text: &str) {
        std::fs::create_dir_all(self.path(rel).parent().unwrap()).unwrap();
        std::fs::write(self.path(rel), text).unwrap();
        announce(&self.run, rel);
    }

    fn generate_stage(&self) {
        let a = "stages/spec/attempt-001";
        self.start_stage("spec", StageKind::Generate);
        self.run
            .write_bytes(
                &format!("{a}/prompt.md"),
                b"Write the spec.\nThe API answered with Authorization: Bearer <redacted>\n",
            )
            .unwrap();
        self.run
            .write_json(&format!("{a}/output-schema.json"), &document_schema())
            .unwrap();
        self.run
            .write_json(&format!("{a}/process.json"), &process(generate_argv()))
            .unwrap();
        self.stream_log(
            &format!("{a}/raw-stdout.log"),
            "{\"type\":\"system\",\"subtype\":\"init\",\"tools\":[\"Read\",\"Glob\",\"Grep\"]}\n\
             {\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false}\n",
        );
        self.stream_log(&format!("{a}/raw-stderr.log"), "");
        self.run
            .write_json(
                &format!("{a}/result.json"),
                &json!({
                    "schemaVersion": 1, "subtype": "success", "isError": false,
                    "outcome": "succeeded",
                    "offeredTools": ["Read", "Glob", "Grep", "StructuredOutput"]
                }),
            )
            .unwrap();
        self.run
            .write_json(
                &format!("{a}/evidence.json"),
                &json!({
                    "schemaVersion": 1, "status": null,
                    "changed": { "added": [], "modified": [], "deleted": [] }
                }),
            )
            .unwrap();
        self.run
            .write_json(
                "stages/spec/output.json",
                &json!({ "summary": "The spec", "markdown": "# Spec\n" }),
            )
            .unwrap();
        self.finish_stage("spec", StageKind::Generate, None);
    }

    fn execute_stage(&self) {
        let a = "stages/implement/attempt-001";
        self.start_stage("implement", StageKind::Execute);
        self.run
            .write_bytes(&format!("{a}/prompt.md"), b"Implement the spec.\n")
            .unwrap();
        self.run
            .write_json(&format!("{a}/output-schema.json"), &task_result_schema())
            .unwrap();
        self.run
            .write_json(&format!("{a}/process.json"), &process(execute_argv()))
            .unwrap();
        self.stream_log(&format!("{a}/raw-stdout.log"), "{\"type\":\"result\"}\n");
        self.stream_log(&format!("{a}/raw-stderr.log"), "");
        self.run
            .write_json(&format!("{a}/verification.json"), &verification(true))
            .unwrap();
        self.run
            .write_json(
                &format!("{a}/evidence.json"),
                &json!({
                    "schemaVersion": 1, "status": "verified",
                    "changed": { "added": ["src/lib.rs"], "modified": [], "deleted": [] }
                }),
            )
            .unwrap();
        self.run
            .write_json(
                "stages/implement/output.json",
                &json!({ "status": "completed", "summary": "done", "changedFiles": ["src/lib.rs"] }),
            )
            .unwrap();
        self.finish_stage(
            "implement",
            StageKind::Execute,
            Some(EvidenceStatus::Verified),
        );
    }

    fn check_stage(&self) {
        let a = "stages/test/attempt-001";
        self.start_stage("test", StageKind::Check);
        self.stream_log(&format!("{a}/raw-stdout.log"), "test result: ok\n");
        self.stream_log(&format!("{a}/raw-stderr.log"), "");
        self.run
            .write_json(
                &format!("{a}/process.json"),
                &process(vec!["cargo", "test"]),
            )
            .unwrap();
        self.finish_stage("test", StageKind::Check, None);
    }
}

fn run_record(run: &RunHandle, status: RunStatus, exit_code: Option<i32>) -> RunRecord {
    RunRecord {
        schema_version: SCHEMA_VERSION,
        run_id: run.id().to_string(),
        status,
        pipeline: PipelineRef {
            name: "demo".into(),
            path: "specbridge.yaml".into(),
            sha256: specbridge_engine::store::sha256_hex(b"version: 1\nname: demo\n"),
        },
        specbridge_version: "0.1.0".into(),
        root: "/repo".into(),
        started_at: "2025-01-01T00:00:00.000Z".into(),
        ended_at: exit_code.map(|_| "2025-01-01T00:01:00.000Z".into()),
        duration_ms: exit_code.map(|_| 60_000),
        exit_code,
        totals: Totals {
            cost_usd: 0.25,
            invocations: 2,
            turns: 7,
            ..Totals::default()
        },
        stage_counts: BTreeMap::new(),
        options: RunOptions::default(),
        runner: None,
        warnings: vec![],
        resumes: vec![],
    }
}

fn stage_record(
    id: &str,
    kind: StageKind,
    status: StageStatus,
    evidence_status: Option<EvidenceStatus>,
) -> StageRecord {
    StageRecord {
        schema_version: SCHEMA_VERSION,
        stage_id: id.into(),
        kind,
        status,
        needs: vec![],
        instance_of: None,
        item_id: None,
        input_hash: Some("ab".repeat(32)),
        input_parts: None,
        attempts: 1,
        reason: None,
        evidence_status,
        output: None,
        document: None,
        started_at: None,
        ended_at: None,
        duration_ms: None,
        cost_usd: 0.0,
        turns: 0,
        tokens: Default::default(),
        reused: None,
        transient_attempts: None,
    }
}

fn process(argv: Vec<&str>) -> Value {
    json!({
        "schemaVersion": 1,
        "executable": argv[0],
        "redactedArgv": argv,
        "cwd": "/repo",
        "exitCode": 0,
        "timedOut": false,
        "cancelled": false,
    })
}

fn generate_argv() -> Vec<&'static str> {
    vec![
        "claude",
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--tools",
        "Read,Glob,Grep",
        "--allowedTools",
        "Read,Glob,Grep",
        "--permission-mode",
        "default",
        "--max-turns",
        "10",
        "--append-system-prompt",
        "<redacted>",
    ]
}

fn execute_argv() -> Vec<&'static str> {
    vec![
        "claude",
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--allowedTools",
        "Read,Glob,Grep,Edit,Write",
        "Bash(cargo test:*)",
        "--permission-mode",
        "default",
    ]
}

fn verification(passed: bool) -> Value {
    json!({
        "schemaVersion": 1,
        "commands": [
            { "name": "test", "required": true, "passed": passed, "exitCode": if passed { 0 } else { 101 } },
            { "name": "fmt", "required": false, "passed": false, "exitCode": 1 }
        ]
    })
}

fn document_schema() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "required": ["summary", "markdown"],
        "properties": { "summary": { "type": "string" }, "markdown": { "type": "string" } },
        "additionalProperties": false
    })
}

fn task_result_schema() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "required": ["status", "summary"],
        "properties": {
            "status": { "enum": ["completed", "blocked"] },
            "summary": { "type": "string" },
            "changedFiles": { "type": "array", "items": { "type": "string" } }
        }
    })
}

/// The codes found, in report order.
fn codes(report: &AuditReport) -> Vec<FindingCode> {
    report.findings.iter().map(|f| f.code).collect()
}

fn event_lines(fx: &Fixture) -> Vec<String> {
    std::fs::read_to_string(fx.path("events.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn write_event_lines(fx: &Fixture, lines: &[String]) {
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(fx.path("events.jsonl"), text).unwrap();
}

/// 0-based index of the first event line of a type (and stage, when given).
fn find_event(lines: &[String], kind: &str, stage: Option<&str>) -> usize {
    lines
        .iter()
        .position(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let stage_matches = match stage {
                Some(s) => v["stage"] == s,
                None => true,
            };
            v["type"] == kind && stage_matches
        })
        .unwrap()
}

/// Replace the first `from` with `to` in a file, bytes in place.
fn edit_file(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{from:?} not in {}", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

#[test]
fn a_clean_run_audits_clean() {
    let fx = Fixture::finished();
    let report = fx.audit();
    assert_eq!(report.findings, vec![], "{:#?}", report.findings);
    assert_eq!(report.exit_code(), 0);
    assert_eq!(report.run_id, fx.run.id());
    let events = event_lines(&fx).len() as u64;
    assert_eq!(report.events, events);
    // Every file but the lock was read.
    let files = walk_count(fx.dir());
    assert_eq!(report.checked_files, files - 1);
}

fn walk_count(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                walk_count(&e.path())
            } else {
                1
            }
        })
        .sum()
}

#[test]
fn a_run_still_going_audits_clean() {
    let fx = Fixture::unfinished();
    assert_eq!(fx.audit().findings, vec![]);
}

#[test]
fn a_changed_byte_in_any_announced_file_is_a_hash_mismatch() {
    for (rel, from, to, stage, attempt) in [
        ("pipeline.yaml", "demo", "demO", None, None),
        ("run.json", "\"turns\": 7", "\"turns\": 8", None, None),
        (
            "stages/spec/output.json",
            "The spec",
            "The spek",
            Some("spec"),
            None,
        ),
        (
            "stages/implement/attempt-001/raw-stdout.log",
            "result",
            "resulT",
            Some("implement"),
            Some(1),
        ),
        (
            "stages/spec/attempt-001/prompt.md",
            "Write",
            "Wrote",
            Some("spec"),
            Some(1),
        ),
    ] {
        let fx = Fixture::finished();
        edit_file(&fx.path(rel), from, to);
        let report = fx.audit();
        let mismatches: Vec<_> = report.with_code(FindingCode::FileHashMismatch).collect();
        assert_eq!(mismatches.len(), 1, "{rel}: {:#?}", report.findings);
        let f = mismatches[0];
        assert_eq!(f.file.as_deref(), Some(rel));
        assert_eq!(f.stage.as_deref(), stage, "{rel}");
        assert_eq!(f.attempt, attempt, "{rel}");
        assert_eq!(f.severity, Severity::Error);
        assert_eq!(report.exit_code(), 1);
    }
}

#[test]
fn a_changed_byte_is_the_only_finding_when_nothing_else_depends_on_it() {
    let fx = Fixture::finished();
    edit_file(&fx.path("pipeline.yaml"), "demo", "demO");
    assert_eq!(codes(&fx.audit()), [FindingCode::FileHashMismatch]);
}

#[test]
fn a_deleted_announced_file_is_missing() {
    let fx = Fixture::finished();
    std::fs::remove_file(fx.path("stages/test/attempt-001/raw-stderr.log")).unwrap();
    let report = fx.audit();
    assert_eq!(codes(&report), [FindingCode::AnnouncedFileMissing]);
    let f = &report.findings[0];
    assert_eq!(
        f.file.as_deref(),
        Some("stages/test/attempt-001/raw-stderr.log")
    );
    assert_eq!((f.stage.as_deref(), f.attempt), (Some("test"), Some(1)));
}

#[test]
fn a_json_record_nobody_announced_is_reported() {
    let fx = Fixture::finished();
    std::fs::write(
        fx.path("stages/implement/attempt-001/changed-files.json"),
        "[]\n",
    )
    .unwrap();
    let report = fx.audit();
    assert_eq!(codes(&report), [FindingCode::UnannouncedRecord]);
    assert_eq!(
        report.findings[0].file.as_deref(),
        Some("stages/implement/attempt-001/changed-files.json")
    );
}

#[test]
fn a_deleted_event_line_is_a_seq_gap_and_a_broken_link() {
    let fx = Fixture::finished();
    let mut lines = event_lines(&fx);
    let i = find_event(&lines, "stage-started", Some("implement"));
    lines.remove(i);
    write_event_lines(&fx, &lines);
    let report = fx.audit();
    let line = format!("line {}:", i + 1);
    let at_line: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.message.starts_with(&line))
        .map(|f| f.code)
        .collect();
    assert!(at_line.contains(&FindingCode::SeqGap), "{report:#?}");
    assert!(at_line.contains(&FindingCode::ChainBroken), "{report:#?}");
    assert!(report
        .findings
        .iter()
        .all(|f| f.file.as_deref() == Some("events.jsonl")));
}

#[test]
fn reordered_event_lines_are_found() {
    let fx = Fixture::finished();
    let mut lines = event_lines(&fx);
    let i = find_event(&lines, "stage-finished", Some("spec"));
    lines.swap(i, i + 1);
    write_event_lines(&fx, &lines);
    let report = fx.audit();
    let codes = codes(&report);
    assert!(codes.contains(&FindingCode::SeqGap), "{report:#?}");
    assert!(codes.contains(&FindingCode::ChainBroken), "{report:#?}");
}

#[test]
fn an_edited_event_breaks_the_link_of_the_next_line() {
    let fx = Fixture::finished();
    let mut lines = event_lines(&fx);
    let i = find_event(&lines, "stage-started", Some("test"));
    lines[i] = lines[i].replace("\"attempt\":1", "\"attempt\":2");
    write_event_lines(&fx, &lines);
    let report = fx.audit();
    assert_eq!(codes(&report), [FindingCode::ChainBroken], "{report:#?}");
    assert!(report.findings[0]
        .message
        .starts_with(&format!("line {}:", i + 2)));
}

#[test]
fn an_edit_of_the_last_event_is_caught_by_the_cross_check() {
    // Nothing follows the last line to link to it; run.json still disagrees.
    let fx = Fixture::finished();
    let mut lines = event_lines(&fx);
    let last = lines.len() - 1;
    lines[last] = lines[last].replace("\"succeeded\"", "\"cancelled\"");
    write_event_lines(&fx, &lines);
    assert_eq!(codes(&fx.audit()), [FindingCode::RunJsonMismatch]);
}

#[test]
fn a_torn_tail_is_only_a_warning_before_and_after_it_is_set_aside() {
    let fx = Fixture::finished();
    let events = event_lines(&fx).len() as u64;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(fx.path("events.jsonl"))
        .unwrap();
    f.write_all(b"{\"seq\":99,\"at\":\"2025-").unwrap();
    drop(f);
    let report = fx.audit();
    assert_eq!(codes(&report), [FindingCode::TornTail]);
    assert_eq!(report.findings[0].severity, Severity::Warning);
    assert_eq!(report.findings[0].file.as_deref(), Some("events.jsonl"));
    assert_eq!(report.events, events);
    assert_eq!(report.exit_code(), 0);

    let aside = specbridge_engine::store::events::set_aside_torn_tail(&fx.path("events.jsonl"))
        .unwrap()
        .unwrap();
    let report = fx.audit();
    assert_eq!(codes(&report), [FindingCode::TornTail]);
    assert_eq!(
        report.findings[0].file.as_deref(),
        aside.file_name().unwrap().to_str()
    );
    assert!(!report.has_errors());
}

#[test]
fn a_bypass_flag_in_a_recorded_argv_is_forbidden() {
    let fx = Fixture::finished();
    let mut argv = execute_argv();
    argv.insert(2, "--dangerously-skip-permissions");
    fx.run
        .write_json("stages/implement/attempt-001/process.json", &process(argv))
        .unwrap();
    let report = fx.audit();
    assert_eq!(codes(&report), [FindingCode::ForbiddenFlag]);
    let f = &report.findings[0];
    assert_eq!(
        (f.stage.as_deref(), f.attempt),
        (Some("implement"), Some(1))
    );
    assert_eq!(
        f.file.as_deref(),
        Some("stages/implement/attempt-001/process.json")
    );
}

#[test]
fn a_bypass_permission_mode_in_a_recorded_argv_is_forbidden() {
    for mode in [
        &["--permission-mode", "bypassPermissions"][..],
        &["--permission-mode=auto"],
    ] {
        let fx = Fixture::finished();
        let mut argv = vec!["claude", "-p"];
        argv.extend_from_slice(mode);
        fx.run
            .write_json("stages/test/attempt-001/process.json", &process(argv))
            .unwrap();
        assert_eq!(codes(&fx.audit()), [FindingCode::ForbiddenFlag], "{mode:?}");
    }
}

#[test]
fn a_secret_in_a_raw_log_is_reported_with_its_line() {
    let fx = Fixture::finished();
    let rel = "stages/spec/attempt-001/raw-stdout.log";
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(fx.path(rel))
        .unwrap();
    writeln!(f, "{{\"type\":\"assistant\",\"text\":\"key {ANT_KEY}\"}}").unwrap();
    drop(f);
    // Announced again, so the hash holds and only the secret is left to find.
    announce(&fx.run, rel);
    let report = fx.audit();
    assert_eq!(codes(&report), [FindingCode::SecretInFile]);
    let f = &report.findings[0];
    assert_eq!(f.file.as_deref(), Some(rel));
    assert_eq!((f.stage.as_deref(), f.attempt), (Some("spec"), Some(1)));
    assert!(
        f.message.contains("Anthropic API key at line 3"),
        "{}",
        f.message
    );
    assert!(
        !f.message.contains("sk-ant"),
        "the finding must not repeat the secret"
    );
}

#[test]
fn a_secret_in_a_record_or_the_event_log_is_reported() {
    let fx = Fixture::finished();
    let token = "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";
    let mut argv = execute_argv();
    argv.push("--api-key=sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz012345");
    let rel = "stages/implement/attempt-001/process.json";

    // Through the store, both are redacted: nothing for audit to find.
    fx.run
        .event(RunEvent::CrashRepaired(CrashRepaired {
            repaired: vec![token.to_string()],
        }))
        .unwrap();
    fx.run.write_json(rel, &process(argv.clone())).unwrap();
    let clean = fx.audit();
    assert_eq!(clean.with_code(FindingCode::SecretInFile).count(), 0);

    // Around the store (by hand, or by an older specbridge), audit finds them.
    let bytes = serde_json::to_vec_pretty(&process(argv)).unwrap();
    std::fs::write(fx.path(rel), bytes).unwrap();
    announce(&fx.run, rel);
    append_raw_event(
        &fx.path("events.jsonl"),
        "crash-repaired",
        json!({ "repaired": [token] }),
    );
    let report = fx.audit();
    let files: Vec<_> = report
        .with_code(FindingCode::SecretInFile)
        .map(|f| f.file.as_deref().unwrap())
        .collect();
    assert_eq!(
        files,
        ["events.jsonl", "stages/implement/attempt-001/process.json"]
    );
    assert_eq!(report.findings.len(), 2, "{report:#?}");
}

#[test]
fn a_generate_argv_allowing_write_is_a_mutating_tool() {
    let fx = Fixture::finished();
    let argv = vec![
        "claude",
        "-p",
        "--allowedTools",
        "Read,Write",
        "--permission-mode",
        "default",
    ];
    fx.run
        .write_json("stages/spec/attempt-001/process.json", &process(argv))
        .unwrap();
    let report = fx.audit();
    assert_eq!(codes(&report), [FindingCode::GenerateMutatingTool]);
    let f = &report.findings[0];
    assert_eq!((f.stage.as_deref(), f.attempt), (Some("spec"), Some(1)));
    assert!(f.message.contains("`Write`"), "{}", f.message);
}

#[test]
fn a_generate_stage_in_accept_edits_mode_is_a_mutating_tool() {
    let fx = Fixture::finished();
    let mut argv = generate_argv();
    let i = argv.iter().position(|a| *a == "default").unwrap();
    argv[i] = "acceptEdits";
    fx.run
        .write_json("stages/spec/attempt-001/process.json", &process(argv))
        .unwrap();
    assert_eq!(codes(&fx.audit()), [FindingCode::GenerateMutatingTool]);
}

#[test]
fn offered_mutating_tools_need_a_deny_in_a_generate_stage() {
    let fx = Fixture::finished();
    let result = json!({ "outcome": "succeeded", "offeredTools": ["Read", "Glob", "Grep", "Write", "Edit"] });
    fx.run
        .write_json("stages/spec/attempt-001/result.json", &result)
        .unwrap();
    let report = fx.audit();
    assert_eq!(
        codes(&report),
        [
            FindingCode::GenerateMutatingTool,
            FindingCode::GenerateMutatingTool
        ]
    );
    assert_eq!(
        report.findings[0].file.as_deref(),
        Some("stages/spec/attempt-001/result.json")
    );

    // A CLI without `--tools` offers everything; denying the mutating tools is the
    // documented fallback and passes.
    let argv = vec![
        "claude",
        "-p",
        "--allowedTools",
        "Read,Glob,Grep",
        "--disallowedTools",
        "Write,Edit",
    ];
    fx.run
        .write_json("stages/spec/attempt-001/process.json", &process(argv))
        .unwrap();
    assert_eq!(fx.audit().findings, vec![]);
}

#[test]
fn a_change_in_generate_evidence_is_reported() {
    let fx = Fixture::finished();
    fx.run
        .write_json(
            "stages/spec/attempt-001/evidence.json",
            &json!({ "changed": { "added": [], "modified": ["src/main.rs"], "deleted": [] } }),
        )
        .unwrap();
    let report = fx.audit();
    assert_eq!(codes(&report), [FindingCode::GenerateChangedTree]);
    let f = &report.findings[0];
    assert_eq!(
        f.file.as_deref(),
        Some("stages/spec/attempt-001/evidence.json")
    );
    assert!(f.message.contains("src/main.rs"), "{}", f.message);
}

#[test]
fn changes_in_execute_evidence_are_fine() {
    // The clean fixture's execute stage adds src/lib.rs; only generate is read-only.
    let fx = Fixture::finished();
    let ev: Value = serde_json::from_slice(
        &std::fs::read(fx.path("stages/implement/attempt-001/evidence.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(ev["changed"]["added"][0], "src/lib.rs");
    assert_eq!(fx.audit().findings, vec![]);
}

#[test]
fn an_output_that_breaks_its_recorded_schema_is_invalid() {
    let fx = Fixture::finished();
    fx.run
        .write_json(
            "stages/spec/output.json",
            &json!({ "summary": 3, "markdown": "# Spec\n", "extra": true }),
        )
        .unwrap();
    let report = fx.audit();
    assert_eq!(codes(&report), [FindingCode::OutputInvalid]);
    let f = &report.findings[0];
    assert_eq!(f.file.as_deref(), Some("stages/spec/output.json"));
    assert_eq!((f.stage.as_deref(), f.attempt), (Some("spec"), Some(1)));
}

#[test]
fn an_output_without_a_recorded_schema_is_a_warning() {
    let fx = Fixture::finished();
    std::fs::remove_file(fx.path("stages/implement/attempt-001/output-schema.json")).unwrap();
    let report = fx.audit();
    assert_eq!(
        codes(&report),
        [
            FindingCode::AnnouncedFileMissing,
            FindingCode::OutputSchemaMissing
        ]
    );
    assert_eq!(report.findings[1].severity, Severity::Warning);
}

#[test]
fn verified_evidence_with_a_failed_required_command_is_reported() {
    let fx = Fixture::finished();
    fx.run
        .write_json(
            "stages/implement/attempt-001/verification.json",
            &verification(false),
        )
        .unwrap();
    let report = fx.audit();
    assert_eq!(codes(&report), [FindingCode::VerifiedWithoutVerification]);
    let f = &report.findings[0];
    assert_eq!(
        f.file.as_deref(),
        Some("stages/implement/attempt-001/evidence.json")
    );
    assert!(f.message.contains("`test`"), "{}", f.message);
    assert!(
        !f.message.contains("`fmt`"),
        "an optional command does not count"
    );
}

#[test]
fn verified_evidence_without_verification_json_is_reported() {
    let fx = Fixture::finished();
    std::fs::remove_file(fx.path("stages/implement/attempt-001/verification.json")).unwrap();
    let codes = codes(&fx.audit());
    assert_eq!(
        codes,
        [
            FindingCode::AnnouncedFileMissing,
            FindingCode::VerifiedWithoutVerification
        ]
    );
}

#[test]
fn verified_evidence_without_a_change_is_reported() {
    let fx = Fixture::finished();
    fx.run
        .write_json(
            "stages/implement/attempt-001/evidence.json",
            &json!({ "status": "verified", "changed": { "added": [], "modified": [], "deleted": [] } }),
        )
        .unwrap();
    assert_eq!(codes(&fx.audit()), [FindingCode::VerifiedWithoutChange]);
}

#[test]
fn run_json_succeeded_while_the_last_event_says_failed_is_a_mismatch() {
    let fx = Fixture::unfinished();
    let record = run_record(&fx.run, RunStatus::Succeeded, Some(0));
    fx.run.write_json("run.json", &record).unwrap();
    fx.run
        .event(run_finished(RunStatus::Failed, 4, record.totals.clone()))
        .unwrap();
    let report = fx.audit();
    assert_eq!(
        codes(&report),
        [FindingCode::RunJsonMismatch, FindingCode::RunJsonMismatch]
    );
    assert!(report.findings[0].message.contains("status is succeeded"));
    assert!(report.findings[1].message.contains("exitCode is 0"));
    assert_eq!(report.findings[0].file.as_deref(), Some("run.json"));
}

#[test]
fn a_finished_run_json_without_a_run_finished_event_is_a_mismatch() {
    let fx = Fixture::unfinished();
    let record = run_record(&fx.run, RunStatus::Succeeded, Some(0));
    fx.run.write_json("run.json", &record).unwrap();
    assert_eq!(codes(&fx.audit()), [FindingCode::RunJsonMismatch]);
}

#[test]
fn run_json_totals_must_match_the_run_finished_event() {
    let fx = Fixture::unfinished();
    let record = run_record(&fx.run, RunStatus::Succeeded, Some(0));
    fx.run.write_json("run.json", &record).unwrap();
    fx.run
        .event(run_finished(
            RunStatus::Succeeded,
            0,
            Totals {
                cost_usd: 0.25,
                invocations: 3,
                turns: 7,
                ..Default::default()
            },
        ))
        .unwrap();
    let report = fx.audit();
    assert_eq!(codes(&report), [FindingCode::RunJsonMismatch]);
    assert!(report.findings[0].message.contains("totals.invocations"));
}

#[test]
fn a_stage_json_disagreeing_with_its_last_event_is_a_mismatch() {
    let fx = Fixture::finished();
    fx.run
        .write_json(
            "stages/test/stage.json",
            &stage_record("test", StageKind::Check, StageStatus::Failed, None),
        )
        .unwrap();
    let report = fx.audit();
    assert_eq!(codes(&report), [FindingCode::StageJsonMismatch]);
    let f = &report.findings[0];
    assert_eq!(f.stage.as_deref(), Some("test"));
    assert_eq!(f.file.as_deref(), Some("stages/test/stage.json"));
}

#[test]
fn an_unparseable_record_is_a_finding_not_a_crash() {
    let fx = Fixture::finished();
    fx.run
        .write_bytes(
            "stages/implement/attempt-001/evidence.json",
            b"{\"status\": ",
        )
        .unwrap();
    let report = fx.audit();
    assert_eq!(codes(&report), [FindingCode::RecordUnparseable]);
    assert_eq!(
        report.findings[0].file.as_deref(),
        Some("stages/implement/attempt-001/evidence.json")
    );
}

#[test]
fn a_missing_event_log_is_a_broken_chain() {
    let fx = Fixture::finished();
    std::fs::remove_file(fx.path("events.jsonl")).unwrap();
    let report = fx.audit();
    assert_eq!(report.findings[0].code, FindingCode::ChainBroken);
    // With no announcements, every record is unannounced.
    assert!(report
        .with_code(FindingCode::UnannouncedRecord)
        .any(|f| f.file.as_deref() == Some("run.json")));
}

#[test]
fn audit_all_reports_every_run_oldest_first() {
    let fx = Fixture::finished();
    let runs_dir = fx.dir().parent().unwrap().to_path_buf();
    let store = RunStore::new(runs_dir.parent().unwrap().parent().unwrap());
    let second = store.create(Default::default()).unwrap();
    second.event(run_started(&second)).unwrap();
    second
        .write_json("run.json", &run_record(&second, RunStatus::Running, None))
        .unwrap();
    std::fs::write(second.dir().join("stray.json"), "{}").unwrap();
    std::fs::create_dir(runs_dir.join("not-a-run")).unwrap();

    let reports = audit_all(&runs_dir).unwrap();
    let ids: Vec<_> = reports.iter().map(|r| r.run_id.as_str()).collect();
    assert_eq!(ids, [fx.run.id(), second.id()]);
    assert_eq!(reports[0].findings, vec![]);
    assert_eq!(codes(&reports[1]), [FindingCode::UnannouncedRecord]);
    assert!(audit_all(&runs_dir.join("missing")).unwrap().is_empty());
}

#[test]
fn a_folder_that_is_not_there_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = audit_run(&dir.path().join("nope")).unwrap_err();
    assert!(err.to_string().starts_with("failed to audit"), "{err}");
}

#[test]
fn finding_messages_read_well() {
    let fx = Fixture::unfinished();
    let mut argv = generate_argv();
    argv.extend(["--allowedTools", "Bash", "--dangerously-skip-permissions"]);
    fx.run
        .write_json("stages/spec/attempt-001/process.json", &process(argv))
        .unwrap();
    fx.run
        .write_json(
            "stages/spec/output.json",
            &json!({ "summary": "s", "extra": 1 }),
        )
        .unwrap();
    fx.run
        .write_json(
            "stages/implement/attempt-001/verification.json",
            &verification(false),
        )
        .unwrap();
    let record = run_record(&fx.run, RunStatus::Succeeded, Some(0));
    fx.run.write_json("run.json", &record).unwrap();
    fx.run
        .event(run_finished(RunStatus::Failed, 4, record.totals.clone()))
        .unwrap();
    let lines: Vec<String> = fx
        .audit()
        .findings
        .iter()
        .map(|f| {
            format!(
                "{} {} [{}{}] {}: {}",
                serde_json::to_value(f.severity).unwrap().as_str().unwrap(),
                f.code,
                f.stage.as_deref().unwrap_or("-"),
                f.attempt.map(|a| format!("#{a}")).unwrap_or_default(),
                f.file.as_deref().unwrap_or("-"),
                f.message
            )
        })
        .collect();
    insta::assert_snapshot!(lines.join("\n"));
}

#[test]
fn the_report_serializes_camel_case() {
    let fx = Fixture::finished();
    std::fs::remove_file(fx.path("stages/test/attempt-001/raw-stderr.log")).unwrap();
    let v = serde_json::to_value(fx.audit()).unwrap();
    assert!(v.get("runId").is_some() && v.get("checkedFiles").is_some());
    assert_eq!(v["findings"][0]["code"], "announced-file-missing");
    assert_eq!(v["findings"][0]["severity"], "error");
    assert_eq!(v["findings"][0]["attempt"], 1);
}

#[test]
fn a_log_rewritten_wholesale_is_summed_up_after_twenty_findings() {
    let fx = Fixture::finished();
    let mut lines = event_lines(&fx);
    lines.reverse();
    write_event_lines(&fx, &lines);
    let report = fx.audit();
    let chain: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.file.as_deref() == Some("events.jsonl"))
        .collect();
    assert_eq!(chain.len(), 21, "{report:#?}");
    assert_eq!(chain[20].code, FindingCode::ChainBroken);
    assert!(
        chain[20].message.contains("more broken lines"),
        "{}",
        chain[20].message
    );
}

#[test]
fn an_announcement_of_a_path_outside_the_run_is_unsafe() {
    let fx = Fixture::finished();
    fx.run
        .event(RunEvent::record_written(
            "../other/run.json",
            &"00".repeat(32),
        ))
        .unwrap();
    assert_eq!(codes(&fx.audit()), [FindingCode::AnnouncedPathUnsafe]);
}

#[test]
fn a_temporary_file_left_by_a_crash_is_not_an_unannounced_record() {
    let fx = Fixture::finished();
    std::fs::write(fx.path("stages/spec/.tmp-Ab12.json"), "{}").unwrap();
    assert_eq!(fx.audit().findings, vec![]);
}

#[test]
fn an_invalid_recorded_schema_is_reported_on_the_output() {
    let fx = Fixture::finished();
    fx.run
        .write_json(
            "stages/spec/attempt-001/output-schema.json",
            &json!({ "type": 12 }),
        )
        .unwrap();
    let report = fx.audit();
    assert_eq!(codes(&report), [FindingCode::OutputInvalid]);
    assert!(report.findings[0]
        .message
        .contains("is not a valid JSON Schema"));
}

#[test]
fn only_the_first_three_schema_errors_are_quoted() {
    let fx = Fixture::finished();
    fx.run
        .write_json(
            "stages/implement/output.json",
            &json!({ "status": "maybe", "summary": 1, "changedFiles": [2, 3] }),
        )
        .unwrap();
    let report = fx.audit();
    assert_eq!(codes(&report), [FindingCode::OutputInvalid]);
    let message = &report.findings[0].message;
    assert_eq!(message.matches("; at ").count(), 2, "{message}");
    assert!(message.ends_with("; and 1 more"), "{message}");
}

#[test]
fn a_resumed_run_is_open_again() {
    let fx = Fixture::finished();
    fx.run
        .event(RunEvent::RunResumed(RunResumed {
            resume: 1,
            previous_status: RunStatus::Succeeded,
            pipeline_sha256: "00".repeat(32),
        }))
        .unwrap();
    let mut record = run_record(&fx.run, RunStatus::Running, None);
    fx.run.write_json("run.json", &record).unwrap();
    assert_eq!(fx.audit().findings, vec![]);

    record.status = RunStatus::Failed;
    fx.run.write_json("run.json", &record).unwrap();
    assert_eq!(codes(&fx.audit()), [FindingCode::RunJsonMismatch]);
}

#[test]
fn a_finished_stage_json_after_a_start_without_a_finish_is_a_mismatch() {
    let fx = Fixture::unfinished();
    fx.run.event(stage_started("test", 2)).unwrap();
    let report = fx.audit();
    assert_eq!(codes(&report), [FindingCode::StageJsonMismatch]);
    assert_eq!(report.findings[0].attempt, Some(2));
}

#[test]
fn a_stage_finished_event_without_a_stage_json_is_a_mismatch() {
    let fx = Fixture::finished();
    fx.run
        .event(stage_finished("ghost", None, StageStatus::Failed, None))
        .unwrap();
    let report = fx.audit();
    assert_eq!(codes(&report), [FindingCode::StageJsonMismatch]);
    assert_eq!(report.findings[0].stage.as_deref(), Some("ghost"));
}

#[test]
fn a_line_that_is_not_an_event_of_this_version_is_a_finding() {
    let fx = Fixture::finished();
    assert_eq!(fx.audit().findings, vec![]);
    let events = fx.path("events.jsonl");
    // An unknown type, then a known type with a field it does not have, then one
    // missing a field: each is kept in the chain and each is reported by line.
    append_raw_event(&events, "note", json!({ "text": "hello" }));
    append_raw_event(
        &events,
        "stage-started",
        json!({ "stage": "test", "attempt": 1, "by": "hand" }),
    );
    append_raw_event(&events, "record-written", json!({ "path": "run.json" }));
    let report = fx.audit();
    assert_eq!(
        codes(&report),
        [
            FindingCode::EventUnknown,
            FindingCode::EventUnknown,
            FindingCode::EventUnknown
        ],
        "{report:#?}"
    );
    let lines = std::fs::read_to_string(&events).unwrap().lines().count();
    let messages: Vec<&str> = report.findings.iter().map(|f| f.message.as_str()).collect();
    assert!(
        messages[0].starts_with(&format!("line {}: `note`", lines - 2)),
        "{messages:?}"
    );
    assert!(messages[1].contains("`by`"), "{messages:?}");
    assert!(messages[2].contains("`sha256`"), "{messages:?}");
    assert!(report
        .findings
        .iter()
        .all(|f| f.severity == Severity::Error && f.file.as_deref() == Some("events.jsonl")));
}
