//! The event log against its generated schema: every line a real run writes (check,
//! generate, execute, fan-out, a retry, then a resume) is one of the shapes in
//! `schemas/event.schema.json`, and the schema refuses what is not.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use crate::common::{read_json, workspace_root, Output, TestContext};

fn event_schema() -> jsonschema::Validator {
    let schema = read_json(&workspace_root().join("schemas/event.schema.json"));
    jsonschema::validator_for(&schema).unwrap()
}

fn task(id: &str) -> Value {
    json!({
        "id": id,
        "title": format!("title of {id}"),
        "details": format!("details of {id}"),
        "dependsOn": [],
        "requirements": [],
    })
}

/// A run that fails only in its last check stage, after a plan that was retried
/// once and a fan-out of two execute instances; then the check is made to pass
/// and the run resumed.
fn resumed_run() -> (TestContext, Output, Output) {
    let plan = json!({
        "summary": "two tasks",
        "markdown": "# Tasks",
        "tasks": [task("t1"), task("t2")],
    });
    let script = json!([
        {"match": "PLAN", "scenario": "api-529"},
        {"match": "PLAN", "output": plan},
        {"match": "TASK t1:", "scenario": "write-file", "write": "t1.txt=one"},
        {"match": "TASK t2:", "scenario": "write-file", "write": "t2.txt=two"},
    ]);
    let mut ctx = TestContext::with_fake_claude("success");
    let path = ctx.aux_path("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    ctx.set_env("FAKE_CLAUDE_SCRIPT", &path.display().to_string());
    ctx.write("prompts/plan.md", "PLAN the work.\n");
    ctx.write(
        "prompts/implement.md",
        "TASK {{ item.id }}: {{ item.title }}\n",
    );
    ctx.write_agent_pipeline(
        "  timeout: 20s\n  killGrace: 300ms\n",
        "  - { id: lint, kind: check, argv: [echo, lint] }
  - id: plan
    kind: generate
    prompt: prompts/plan.md
    output: { schema: builtin:tasks, document: docs/plan.md }
  - id: implement
    kind: execute
    needs: [plan]
    forEach: { stage: plan, items: /tasks }
    prompt: prompts/implement.md
    verification:
      - { name: tree, argv: [git, diff, --quiet, HEAD, --, specbridge.yaml] }
  - { id: ready, kind: check, argv: [test, -f, ready.txt] }
",
    );
    let first = ctx.run(&["run"]);
    assert_eq!(first.code, 1, "only `ready` fails: {}", first.snapshot());
    ctx.write("ready.txt", "yes\n");
    ctx.commit_all("ready");
    let resumed = ctx.run(&["resume", "latest"]);
    assert_eq!(resumed.code, 0, "{}", resumed.snapshot());
    (ctx, first, resumed)
}

/// Every line of a run's `events.jsonl` validates against the committed schema;
/// returns the lines.
pub(crate) fn assert_events_match_schema(run_dir: &std::path::Path) -> Vec<Value> {
    let validator = event_schema();
    let text = std::fs::read_to_string(run_dir.join("events.jsonl")).unwrap();
    let mut lines = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let event: Value = serde_json::from_str(line).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&event)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "line {}: {line}\n{errors:?}", n + 1);
        lines.push(event);
    }
    lines
}

#[test]
fn every_line_of_a_resumed_run_matches_the_committed_event_schema() {
    let (ctx, _, _) = resumed_run();
    let mut types = BTreeSet::new();
    let mut verification_spawn = false;
    for event in assert_events_match_schema(&ctx.only_run_dir()) {
        types.insert(event["type"].as_str().unwrap().to_string());
        verification_spawn |= event.get("verification").is_some();
    }
    // The run went through every part of the vocabulary this test means to cover.
    for kind in [
        "run-started",
        "record-intent",
        "record-written",
        "stage-started",
        "process-spawned",
        "document-written",
        "stage-retrying",
        "stage-expanded",
        "stage-finished",
        "run-finished",
        "run-resumed",
        "resume-decision",
    ] {
        assert!(types.contains(kind), "no {kind} in {types:?}");
    }
    assert!(verification_spawn, "no verification command was spawned");
    let audit = ctx.run(&["runs", "audit", "latest"]);
    assert_eq!(audit.code, 0, "{}", audit.snapshot());
}

/// A resume queues its decisions and writes them with its next batch of
/// writes: each is still in the log, once, and ahead of anything the stage it
/// decides logs in that resume.
#[test]
fn a_resumes_decisions_are_logged_once_each_before_the_stages_they_decide() {
    let (ctx, _, _) = resumed_run();
    let events = assert_events_match_schema(&ctx.only_run_dir());
    let resumed_at = events
        .iter()
        .position(|e| e["type"] == "run-resumed")
        .expect("a run-resumed event");
    let after = &events[resumed_at..];
    let decided: Vec<(&str, &str)> = after
        .iter()
        .filter(|e| e["type"] == "resume-decision")
        .map(|e| (e["stage"].as_str().unwrap(), e["action"].as_str().unwrap()))
        .collect();
    let stages: BTreeSet<&str> = decided.iter().map(|(s, _)| *s).collect();
    assert_eq!(
        stages.len(),
        decided.len(),
        "one decision a stage: {decided:?}"
    );
    for stage in ["lint", "plan", "implement.t1", "implement.t2", "ready"] {
        assert!(
            stages.contains(stage),
            "no decision for {stage}: {decided:?}"
        );
    }
    assert!(decided.contains(&("ready", "rerun")), "{decided:?}");
    let first_of = |kind: &str, stage: &str| {
        after
            .iter()
            .position(|e| e["type"] == kind && e["stage"] == stage)
            .unwrap_or_else(|| panic!("no {kind} of {stage} after the resume"))
    };
    assert!(
        first_of("resume-decision", "ready") < first_of("stage-started", "ready"),
        "{after:#?}"
    );
}

#[test]
fn the_schema_refuses_an_unknown_field_an_unknown_type_and_a_missing_field() {
    let validator = event_schema();
    let line = json!({
        "seq": 6,
        "at": "2026-11-30T14:24:03.957Z",
        "type": "stage-started",
        "prev": "5a8a9fbf27516d0bd38e7933d241b95f513b555ad07f7e403cb31c41278d7ea3",
        "stage": "requirements",
        "attempt": 1,
    });
    assert!(validator.is_valid(&line), "the line as written is valid");

    let mut extra = line.clone();
    extra["by"] = json!("hand");
    assert!(!validator.is_valid(&extra), "an unknown field is refused");

    let mut unknown = line.clone();
    unknown["type"] = json!("note");
    assert!(!validator.is_valid(&unknown), "an unknown type is refused");

    let mut missing = line.clone();
    missing.as_object_mut().unwrap().remove("attempt");
    assert!(!validator.is_valid(&missing), "a missing field is refused");

    let mut no_prev = line;
    no_prev.as_object_mut().unwrap().remove("prev");
    assert!(!validator.is_valid(&no_prev), "the envelope is required");
}

#[test]
fn the_committed_recording_still_matches_the_schema() {
    // Written before the vocabulary was a type: what README command 1 replays.
    let lines = assert_events_match_schema(&workspace_root().join(".specbridge-example"));
    assert!(lines.len() > 100);
}

#[test]
fn the_progress_lines_are_drawn_from_the_events() {
    let (_ctx, first, resumed) = resumed_run();
    // Not a terminal: one plain line per stage event, in the order of the log.
    let lines: Vec<&str> = first.stderr.lines().collect();
    let at = |prefix: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` in {lines:#?}"))
    };
    assert!(
        at("running    plan") < at("succeeded  plan ("),
        "{lines:#?}"
    );
    // The retry starts the stage again; it is finished once.
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("running    plan"))
            .count(),
        2,
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("succeeded  implement.t1 (") && l.contains("[verified]")),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("check-failed ready (") && l.contains(": exit code 1")),
        "{lines:#?}"
    );
    let again: Vec<&str> = resumed.stderr.lines().collect();
    for reused in [
        "reused     lint",
        "reused     plan",
        "reused     implement.t2",
    ] {
        assert!(again.contains(&reused), "no `{reused}` in {again:#?}");
    }
    assert!(
        again.iter().any(|l| l.starts_with("succeeded  ready (")),
        "{again:#?}"
    );
}

#[test]
fn a_log_with_a_line_that_is_not_an_event_is_audited_and_not_resumed() {
    let ctx = TestContext::new();
    ctx.write(
        "specbridge.yaml",
        "version: 1\nname: checks\nstages:\n  - { id: a, kind: check, argv: [\"false\"] }\n",
    );
    assert_eq!(ctx.run(&["run"]).code, 1);
    let events = ctx.only_run_dir().join("events.jsonl");
    // Chained as the store chains, so only the vocabulary can tell it apart.
    let text = std::fs::read_to_string(&events).unwrap();
    let last = text.lines().last().unwrap();
    let seq = serde_json::from_str::<Value>(last).unwrap()["seq"]
        .as_u64()
        .unwrap();
    let forged = json!({
        "seq": seq + 1,
        "at": "2026-01-01T00:00:00.000Z",
        "type": "stage-approved",
        "prev": specbridge_engine::store::sha256_hex(last.as_bytes()),
        "stage": "a",
    });
    let after = format!("{text}{forged}\n");
    std::fs::write(&events, &after).unwrap();

    let audit = ctx.run(&["runs", "audit", "latest"]);
    assert_eq!(audit.code, 1, "{}", audit.snapshot());
    assert!(
        audit.stdout.contains("event-unknown") || audit.stderr.contains("event-unknown"),
        "{}",
        audit.snapshot()
    );
    let out = ctx.run(&["resume", "latest"]);
    assert_eq!(out.code, 6, "{}", out.snapshot());
    assert!(out.stderr.contains("[event-unknown]"), "{}", out.stderr);
    assert!(out.stderr.contains("`stage-approved`"), "{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(&events).unwrap(),
        after,
        "a refused resume writes nothing"
    );
}
