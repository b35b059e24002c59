//! What specbridge observes of the agent against the fake CLI (docs/claude-code-runner.md, "Observed,
//! not assumed"): an `init` event that differs from the request stops the agent at
//! once; tool calls the policy refuses that ran anyway are safety violations found in
//! the stream; every call is recorded in `tool-calls.jsonl`; a resume takes the
//! working-tree lock as a run does.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{assert_matches_schema, read_json, TestContext};

const RUNNER: &str = "  timeout: 30s
  killGrace: 300ms
";

const EXECUTE_STAGE: &str = "  - id: implement
    kind: execute
    prompt: prompts/implement.md
    verification:
      - { name: always, argv: [\"true\"] }
";

fn execute_ctx(scenario: &str, runner_keys: &str) -> TestContext {
    let ctx = TestContext::with_fake_claude(scenario);
    ctx.write("prompts/implement.md", "Implement the feature.\n");
    ctx.write_agent_pipeline(&format!("{RUNNER}{runner_keys}"), EXECUTE_STAGE);
    ctx
}

fn attempt_dir(ctx: &TestContext) -> PathBuf {
    ctx.only_run_dir().join("stages/implement/attempt-001")
}

fn tool_calls(ctx: &TestContext) -> Vec<Value> {
    let path = attempt_dir(ctx).join("tool-calls.jsonl");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

fn stage(ctx: &TestContext) -> Value {
    read_json(&ctx.only_run_dir().join("stages/implement/stage.json"))
}

/// The agent's init event differs; it must be stopped before its later tool call.
fn assert_stopped_at_init(scenario: &str, expected_in_reason: &str) {
    let mut ctx = execute_ctx(scenario, "");
    ctx.set_env("FAKE_CLAUDE_WRITE", "late-write.txt=too late");
    let started = Instant::now();
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 6, "{}", out.snapshot());
    assert!(
        !ctx.path("late-write.txt").exists(),
        "the agent got to its tool call after the init event"
    );
    // The fake waits a second before the call; nothing waited for a result.
    assert!(started.elapsed() < Duration::from_secs(20));
    let stage = stage(&ctx);
    assert_eq!(stage["status"], "safety-violation", "{stage:#}");
    let reason = stage["outcome"].as_str().unwrap_or_default();
    assert!(reason.contains(expected_in_reason), "{reason}");
    assert!(reason.contains("init event"), "{reason}");
    let process = read_json(&attempt_dir(&ctx).join("process.json"));
    assert_eq!(process["stoppedByObserver"], true, "{process:#}");
    assert_eq!(process["signal"], "SIGKILL", "{process:#}");
    let result = read_json(&attempt_dir(&ctx).join("result.json"));
    assert_eq!(result["outcome"], "safety-violation");
    assert!(result["failureReason"]
        .as_str()
        .unwrap()
        .contains(expected_in_reason));
}

#[test]
fn an_init_event_offering_another_tool_stops_the_agent_at_once() {
    assert_stopped_at_init(
        "init-extra-tool",
        "offered tools that were not asked for: Bash",
    );
}

#[test]
fn an_init_event_reporting_another_permission_mode_stops_the_agent_at_once() {
    assert_stopped_at_init("init-mode-differs", "permission mode `acceptEdits`");
}

#[test]
fn a_write_outside_the_repository_in_the_stream_is_a_safety_violation() {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("escaped.txt");
    let mut ctx = execute_ctx("write-file", "");
    ctx.set_env(
        "FAKE_CLAUDE_WRITE",
        &format!("{}=escaped", target.display()),
    );
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 6, "{}", out.snapshot());
    let stage = stage(&ctx);
    assert_eq!(stage["status"], "safety-violation", "{stage:#}");
    let reason = stage["outcome"].as_str().unwrap();
    assert!(reason.contains("Write"), "{reason}");
    assert!(reason.contains("outside the repository"), "{reason}");

    let calls = tool_calls(&ctx);
    let write = calls
        .iter()
        .find(|c| c["tool"] == "Write")
        .expect("the Write call is recorded");
    assert_eq!(write["policy"], "refused", "{write:#}");
    assert_eq!(write["outcome"], "succeeded");
    assert_eq!(write["violation"], true);
    assert_eq!(write["input"]["file_path"], target.display().to_string());
    assert!(write["reason"].as_str().unwrap().contains("outside"));
    let read = calls.iter().find(|c| c["tool"] == "Read").expect("Read");
    assert_eq!(read["policy"], "allowed", "{read:#}");
    assert_eq!(read["violation"], false);
    for (i, call) in calls.iter().enumerate() {
        let line = ctx.aux_path(&format!("tool-call-{i}.json"));
        std::fs::write(&line, call.to_string()).unwrap();
        assert_matches_schema(&line, "tool-call.schema.json");
    }
}

#[test]
fn a_bash_command_without_a_matching_rule_is_a_safety_violation() {
    let mut ctx = execute_ctx(
        "run-command",
        "  tools: [Read, Edit, Write, Bash]\n  allowedBashRules: [\"Bash(git status *)\"]\n",
    );
    ctx.set_env("FAKE_CLAUDE_COMMAND", "git status && touch bash-ran.txt");
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 6, "{}", out.snapshot());
    let stage = stage(&ctx);
    assert_eq!(stage["status"], "safety-violation", "{stage:#}");
    let reason = stage["outcome"].as_str().unwrap();
    assert!(
        reason.contains("Bash `git status && touch bash-ran.txt`"),
        "{reason}"
    );
    let calls = tool_calls(&ctx);
    let bash = calls.iter().find(|c| c["tool"] == "Bash").expect("Bash");
    assert_eq!(bash["policy"], "refused");
    assert_eq!(bash["violation"], true);
}

#[test]
fn a_bash_command_matching_its_rule_is_allowed_and_recorded() {
    let mut ctx = execute_ctx(
        "run-command",
        "  tools: [Read, Edit, Write, Bash]\n  allowedBashRules: [\"Bash(touch:*)\"]\n",
    );
    ctx.set_env("FAKE_CLAUDE_COMMAND", "touch bash-ran.txt");
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let calls = tool_calls(&ctx);
    let bash = calls.iter().find(|c| c["tool"] == "Bash").expect("Bash");
    assert_eq!(bash["policy"], "allowed", "{bash:#}");
    assert_eq!(bash["outcome"], "succeeded");
    assert_eq!(bash["violation"], false);
    assert_eq!(bash["input"]["command"], "touch bash-ran.txt");
    assert_eq!(bash["seq"], 1);
    assert!(calls.iter().any(|c| c["tool"] == "StructuredOutput"));
}

#[test]
fn a_resume_with_execute_stages_is_refused_while_another_run_holds_the_tree() {
    let mut ctx = execute_ctx("api-500", "");
    ctx.set_env("FAKE_CLAUDE_HANG_SECS", "30");
    let failed = ctx.run(&["run"]);
    assert_eq!(failed.code, 4, "{}", failed.snapshot());
    let first_id = ctx
        .only_run_dir()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();

    let mut holder = ctx
        .command()
        .args(["run", "--allow-dirty"])
        .env("FAKE_CLAUDE_SCENARIO", "hang-before-result")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the run that holds the tree");
    let lock = ctx.path(".specbridge/worktree.lock");
    let deadline = Instant::now() + Duration::from_secs(30);
    let holder_id = loop {
        let text = std::fs::read_to_string(&lock).unwrap_or_default();
        let id = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["runId"].as_str().map(str::to_owned))
            .filter(|id| *id != first_id);
        if let Some(id) = id {
            break id;
        }
        assert!(
            Instant::now() < deadline,
            "the second run never took the tree"
        );
        std::thread::sleep(Duration::from_millis(50));
    };

    let resumed = ctx
        .command()
        .args(["resume", &first_id])
        .output()
        .expect("run resume");
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(resumed.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("in use by run {holder_id}")),
        "{stderr}"
    );
    // Refused before anything was done to the run.
    let record = read_json(
        &ctx.root()
            .join(format!(".specbridge/runs/{first_id}/run.json")),
    );
    assert_eq!(record["resumes"], serde_json::json!([]), "{record:#}");
}

#[test]
fn a_prompt_replaced_by_a_symlink_out_of_the_repository_during_the_run_is_not_read() {
    let ctx = TestContext::with_fake_claude("success");
    ctx.write("prompts/doc.md", "Write the document.\n");
    ctx.write_agent_pipeline(
        RUNNER,
        "  - id: swap
    kind: check
    argv: [ln, -sf, /etc/passwd, prompts/doc.md]
  - id: doc
    kind: generate
    needs: [swap]
    prompt: prompts/doc.md
    output: { schema: builtin:document }
",
    );
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 6, "{}", out.snapshot());
    let stage = read_json(&ctx.only_run_dir().join("stages/doc/stage.json"));
    assert_eq!(stage["status"], "safety-violation", "{stage:#}");
    let reason = stage["outcome"].as_str().unwrap();
    assert!(
        reason.contains("refusing the prompt file of stage `doc`: it resolves to `/etc/passwd`"),
        "{reason}"
    );
    assert!(ctx.fake_agent_runs().is_empty(), "the agent was started");
}
