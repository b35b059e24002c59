//! From red to green under the real CLI (the binary-level versions are in
//! `repair.rs` and `signals.rs`): a plain resume after a failed verification, a
//! signal while the CLI works, `--rerun` of a middle stage, and the run budget
//! over resumes (docs/resume.md).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use specbridge_testkit::model_server::{Reply, Script, ToolCall};

use super::harness::{read_json, Sandbox};
use crate::common::reused_by_last_resume;

/// spec → implement (execute, verified by a marker on stderr) → after (a check).
const SPEC_IMPLEMENT_AFTER: &str = "stages:
  - id: spec
    kind: generate
    prompt: prompts/spec.md
    output: { schema: builtin:document }
  - id: implement
    kind: execute
    needs: [spec]
    prompt: prompts/implement.md
    output: { schema: builtin:task-result }
    verification:
      - { name: notes-written, argv: [sh, -c, 'echo checking-marker-42 >&2; test \"$(cat notes.txt)\" = hello'] }
  - id: after
    kind: check
    needs: [implement]
    argv: [echo, after]
";

const EXECUTE_RUNNER: &str =
    "  maxTurns: 6\n  timeout: 5m\n  killGrace: 500ms\n  tools: [Read, Glob, Grep, Edit, Write]\n";

fn document(markdown: &str) -> Reply {
    Reply::structured_output(json!({"summary": "Done.", "markdown": markdown}))
}

fn tool(root: &Path, id: &str, name: &str, mut input: Value) -> Reply {
    input["file_path"] = json!(root.join("notes.txt"));
    Reply::tool_uses(None, vec![ToolCall::new(name, input).with_id(id)])
}

fn task_result() -> Reply {
    Reply::structured_output(json!({
        "status": "completed",
        "summary": "Wrote the notes.",
        "changedFiles": ["notes.txt"],
        "commandsRun": [],
        "blockingQuestions": [],
    }))
}

fn spec_implement_after(sandbox: &Sandbox) {
    sandbox.ctx.write("prompts/spec.md", "Write the spec.\n");
    sandbox.ctx.write(
        "prompts/implement.md",
        "Write notes.txt with the word hello.\n",
    );
    sandbox.write_pipeline(EXECUTE_RUNNER, SPEC_IMPLEMENT_AFTER);
}

/// The first user message of a model request, as JSON text.
fn first_message(sandbox: &Sandbox, index: usize) -> String {
    sandbox.model_requests()[index].body["messages"][0].to_string()
}

#[test]
fn plain_resume_reruns_only_the_unverified_stage_with_the_failure_in_its_prompt() {
    let Some(sandbox) = Sandbox::new(|root: &Path| {
        Script::new([
            document("# Spec\n"),
            // Attempt 1: the wrong word.
            tool(root, "t_wrong", "Write", json!({"content": "helo\n"})),
            task_result(),
            // Attempt 2: read what is there, then write it right.
            tool(root, "t_read", "Read", json!({})),
            tool(root, "t_right", "Write", json!({"content": "hello\n"})),
            task_result(),
        ])
    }) else {
        return;
    };
    spec_implement_after(&sandbox);

    let out = sandbox.run(&["run"]);
    assert_eq!(out.code, 1, "{}", out.snapshot());
    let implement = sandbox.stage_json("implement");
    assert_eq!(implement["status"], "unverified", "{implement:#}");
    assert_eq!(implement["evidenceStatus"], "implemented-unverified");
    let after = sandbox.stage_json("after");
    assert_eq!(after["status"], "blocked", "{after:#}");
    assert!(!sandbox.run_dir().join("stages/after/attempt-001").exists());
    assert_eq!(sandbox.model_requests().len(), 3);

    let out = sandbox.run(&["resume", "latest"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_eq!(sandbox.ctx.read("notes.txt"), "hello\n");
    assert_eq!(
        sandbox.model_requests().len(),
        6,
        "only implement ran again"
    );
    assert_eq!(sandbox.server.remaining(), 0);
    // What went wrong reached the model: the command, its exit, its output tail.
    let prompt = std::fs::read_to_string(sandbox.attempt_dir("implement", 2).join("prompt.md"))
        .expect("prompt.md of attempt 2");
    assert!(prompt.starts_with("Write notes.txt with the word hello.\n"));
    for part in [
        "## Previous attempt",
        "ended `unverified`",
        "notes-written",
        "exited 1",
        "checking-marker-42",
    ] {
        assert!(prompt.contains(part), "{part} missing: {prompt}");
    }
    let sent = first_message(&sandbox, 3);
    assert!(sent.contains("checking-marker-42"), "{sent}");
    assert!(!first_message(&sandbox, 1).contains("checking-marker-42"));

    let spec = sandbox.stage_json("spec");
    assert!(reused_by_last_resume(&sandbox.ctx, "spec"), "{spec:#}");
    assert_eq!(spec["attempts"], 1, "{spec:#}");
    let implement = sandbox.stage_json("implement");
    assert_eq!(implement["status"], "succeeded", "{implement:#}");
    assert_eq!(implement["evidenceStatus"], "verified", "{implement:#}");
    assert_eq!(implement["attempts"], 2, "{implement:#}");
    assert_eq!(sandbox.stage_json("after")["status"], "succeeded");
    let audit = sandbox.run(&["runs", "audit", "latest"]);
    assert_eq!(audit.code, 0, "{}", audit.snapshot());
}

/// Live (not zombie) processes whose process group is `pgid`.
fn group_members(pgid: i64) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                // After the command name: state, ppid, pgrp.
                let fields: Vec<&str> = stat
                    .rsplit_once(')')
                    .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
                fields.len() > 2 && fields[0] != "Z" && fields[2] == pgid.to_string()
            })
        })
        .collect()
}

/// The `process-spawned` event of `implement`, once it is in `events.jsonl` (asked
/// only once the run has begun).
fn implement_spawned(sandbox: &Sandbox) -> Option<Value> {
    let events = std::fs::read_to_string(sandbox.run_dir().join("events.jsonl")).ok()?;
    events
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|e| e["type"] == "process-spawned" && e["stage"] == "implement")
}

fn signal_while_the_real_cli_works(signal: i32) {
    let Some(sandbox) = Sandbox::new(|root: &Path| {
        Script::new([
            document("# Spec\n"),
            // Attempt 1: the model stalls far beyond the test.
            Reply::text("Still thinking.").with_delay_ms(600_000),
            // Attempt 2, after the resume.
            tool(root, "t_write", "Write", json!({"content": "hello\n"})),
            task_result(),
        ])
    }) else {
        return;
    };
    spec_implement_after(&sandbox);

    let mut child = sandbox.spawn_run();
    // The CLI is working once the stalled request reached the server.
    let until = Instant::now() + Duration::from_secs(180);
    let spawned = loop {
        if sandbox.model_requests().len() >= 2 {
            if let Some(event) = implement_spawned(&sandbox) {
                break event;
            }
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("the implement stage never reached the model");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let pid = spawned["pid"].as_i64().expect("pid");
    let pgid = spawned["pgid"].as_i64().expect("pgid");
    assert!(!group_members(pgid).is_empty(), "the CLI's group is alive");

    // SAFETY: a signal to a child we spawned.
    unsafe { libc::kill(child.id() as i32, signal) };
    let until = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("specbridge did not end after signal {signal}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(5), "signal {signal}");
    assert!(
        !crate::common::process_alive(pid as u32),
        "the CLI was ended"
    );
    assert_eq!(group_members(pgid), Vec::<u32>::new(), "its group too");
    assert_eq!(sandbox.leftover_processes(), Vec::<u32>::new());
    let run = read_json(&sandbox.run_dir().join("run.json"));
    assert_eq!(run["status"], "cancelled", "{run:#}");
    assert_eq!(run["exitCode"], 5);
    assert_eq!(sandbox.stage_json("implement")["status"], "cancelled");
    let process = sandbox.attempt_json("implement", 1, "process.json");
    assert_eq!(process["cancelled"], true, "{process:#}");

    let out = sandbox.run(&["resume", "latest"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_eq!(sandbox.ctx.read("notes.txt"), "hello\n");
    assert_eq!(
        sandbox.model_requests().len(),
        4,
        "spec was not asked again"
    );
    assert!(reused_by_last_resume(&sandbox.ctx, "spec"));
    let implement = sandbox.stage_json("implement");
    assert_eq!(implement["status"], "succeeded", "{implement:#}");
    assert_eq!(implement["evidenceStatus"], "verified", "{implement:#}");
    assert_eq!(sandbox.stage_json("after")["status"], "succeeded");
    let audit = sandbox.run(&["runs", "audit", "latest"]);
    assert_eq!(audit.code, 0, "{}", audit.snapshot());
}

#[test]
fn sigterm_while_the_real_cli_works_cancels_and_resume_finishes() {
    signal_while_the_real_cli_works(libc::SIGTERM);
}

#[test]
fn sighup_while_the_real_cli_works_cancels_and_resume_finishes() {
    signal_while_the_real_cli_works(libc::SIGHUP);
}

/// a → b → c, three generate stages, each prompted with its own marker.
fn chain(sandbox: &Sandbox, top: &str) {
    for id in ["a", "b", "c"] {
        sandbox.ctx.write(
            &format!("prompts/{id}.md"),
            &format!("Write part {id}-7f3.\n"),
        );
    }
    let stages = "stages:
  - { id: a, kind: generate, prompt: prompts/a.md, output: { schema: builtin:document } }
  - { id: b, kind: generate, needs: [a], prompt: prompts/b.md, output: { schema: builtin:document } }
  - { id: c, kind: generate, needs: [b], prompt: prompts/c.md, output: { schema: builtin:document } }
";
    sandbox.write_pipeline(
        "  model: sonnet\n  maxTurns: 4\n",
        &format!("{top}{stages}"),
    );
}

#[test]
fn rerun_of_the_middle_stage_reruns_it_and_the_next_and_reuses_the_first() {
    let Some(sandbox) = Sandbox::new(|_| {
        Script::new(["# A\n", "# B\n", "# C\n", "# B again\n", "# C again\n"].map(document))
    }) else {
        return;
    };
    chain(&sandbox, "");
    let out = sandbox.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_eq!(sandbox.model_requests().len(), 3);

    let out = sandbox.run(&["resume", "latest", "--rerun", "b"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_eq!(sandbox.model_requests().len(), 5, "b and c, not a");
    assert!(first_message(&sandbox, 3).contains("part b-7f3"));
    assert!(first_message(&sandbox, 4).contains("part c-7f3"));
    for (id, attempts, reused) in [("a", 1, true), ("b", 2, false), ("c", 2, false)] {
        let stage = sandbox.stage_json(id);
        assert_eq!(stage["status"], "succeeded", "{id}: {stage:#}");
        assert_eq!(stage["attempts"], attempts, "{id}: {stage:#}");
        assert_eq!(
            reused_by_last_resume(&sandbox.ctx, id),
            reused,
            "{id}: {stage:#}"
        );
    }
    let output = read_json(&sandbox.run_dir().join("stages/c/output.json"));
    assert_eq!(output["markdown"], "# C again\n");
    let audit = sandbox.run(&["runs", "audit", "latest"]);
    assert_eq!(audit.code, 0, "{}", audit.snapshot());
}

/// What the CLI reported an attempt cost.
fn attempt_cost(sandbox: &Sandbox, stage: &str, attempt: u32) -> f64 {
    let result = sandbox.attempt_json(stage, attempt, "result.json");
    result["totalCostUsd"]
        .as_f64()
        .unwrap_or_else(|| panic!("{result:#}"))
}

fn run_cost(sandbox: &Sandbox) -> (f64, Value) {
    let run = read_json(&sandbox.run_dir().join("run.json"));
    (run["totals"]["costUsd"].as_f64().expect("costUsd"), run)
}

#[test]
fn the_run_budget_holds_across_resumes_with_the_real_cli_costs() {
    // 100k input tokens a stage: about $0.21 as the CLI prices them, so that a
    // alone stays under the $0.30 budget and a with b goes past it.
    let Some(sandbox) = Sandbox::new(|_| {
        Script::new(["# A\n", "# B\n", "# C\n"].map(|m| document(m).with_usage(100_000, 1_000)))
    }) else {
        return;
    };
    chain(&sandbox, "budget:\n  maxBudgetUsd: 0.3\nconcurrency: 1\n");

    // a spends under the budget, b starts below it and goes past: c never starts.
    let out = sandbox.run(&["run"]);
    assert_eq!(out.code, 4, "{}", out.snapshot());
    let (a, b) = (
        attempt_cost(&sandbox, "a", 1),
        attempt_cost(&sandbox, "b", 1),
    );
    assert!(a > 0.0 && a < 0.3 && a + b >= 0.3, "a ${a}, b ${b}");
    let (spent, _) = run_cost(&sandbox);
    assert!((spent - (a + b)).abs() < 1e-9, "{spent} != {a} + {b}");
    assert_eq!(sandbox.model_requests().len(), 2);
    assert_eq!(sandbox.stage_json("c")["status"], "budget-exceeded");

    // A resume gets no fresh budget: the invocation is refused, nothing is spent.
    let out = sandbox.run(&["resume", "latest"]);
    assert_eq!(out.code, 4, "{}", out.snapshot());
    assert_eq!(sandbox.model_requests().len(), 2, "nothing started");
    let c = sandbox.stage_json("c");
    assert_eq!(c["status"], "budget-exceeded", "{c:#}");
    assert!(
        c["outcome"].as_str().unwrap().contains("--run-budget-usd"),
        "{c:#}"
    );
    assert!(!sandbox.run_dir().join("stages/c/attempt-001").exists());
    assert_eq!(run_cost(&sandbox).0, spent);

    // Raised, only c runs, and its cost is added to what the run had spent.
    let out = sandbox.run(&["resume", "latest", "--run-budget-usd", "5"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_eq!(sandbox.model_requests().len(), 3, "only c ran");
    let c = attempt_cost(&sandbox, "c", 1);
    let (total, run) = run_cost(&sandbox);
    assert!(
        (total - (spent + c)).abs() < 1e-9,
        "{total} != {spent} + {c}"
    );
    assert_eq!(run["totals"]["invocations"], 3, "{run:#}");
    assert_eq!(run["resumes"].as_array().map(Vec::len), Some(2), "{run:#}");
    let audit = sandbox.run(&["runs", "audit", "latest"]);
    assert_eq!(audit.code, 0, "{}", audit.snapshot());
}
