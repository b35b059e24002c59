//! Agent stages end to end: the binary runs generate stages against the fake
//! Claude Code CLI, one scenario at a time, and the run folder is checked.

use std::path::PathBuf;

use serde_json::Value;

use crate::common::{
    assert_matches_schema, process_alive, read_json, write_fake_wrapper, TestContext,
};

const GENERATE_STAGE: &str = "  - id: requirements
    kind: generate
    prompt: prompts/requirements.md
    output: { schema: builtin:document, document: docs/requirements.md }
";

/// Short limits so that the hanging scenarios end quickly.
const QUICK_RUNNER: &str = "  timeout: 3s
  killGrace: 300ms
  maxStdoutBytes: 1MiB
";

const PROMPT: &str =
    "Write the requirements of pipeline {{ pipeline.name }}.\nMarker: prompt-body-7f3a.\n";

fn generate_ctx(scenario: &str) -> TestContext {
    let ctx = TestContext::with_fake_claude(scenario);
    ctx.write("prompts/requirements.md", PROMPT);
    ctx.write_agent_pipeline(QUICK_RUNNER, GENERATE_STAGE);
    ctx
}

/// Staged documents (`.document-*`, store/document.rs) left anywhere in the run
/// folder: none once a stage has ended, whether its document was written or not.
fn staged_documents_left(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut left = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            left.extend(staged_documents_left(&path));
        } else if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with(".document-"))
        {
            left.push(path);
        }
    }
    left
}

fn attempt_dir(ctx: &TestContext) -> PathBuf {
    ctx.only_run_dir().join("stages/requirements/attempt-001")
}

/// Runs the pipeline, expecting exit `code` and the stage `requirements` ended
/// `status`; returns its `stage.json`.
fn run_ending(ctx: &TestContext, code: i32, status: &str) -> Value {
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, code, "{}", out.snapshot());
    let stage = read_json(&ctx.only_run_dir().join("stages/requirements/stage.json"));
    assert_eq!(stage["status"], status, "{stage:#}");
    stage
}

/// Runs the one-stage pipeline and checks what every spawned invocation leaves:
/// the stage status, the exit code, every attempt record (each valid against its
/// schema), no capture left behind, and no process of the fake still running.
fn run_scenario(ctx: &TestContext, status: &str, exit: i32) -> Value {
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, exit, "{}", out.snapshot());
    let run = ctx.only_run_dir();
    let stage = read_json(&run.join("stages/requirements/stage.json"));
    assert_eq!(stage["status"], status, "{stage:#}\n{}", out.snapshot());
    let attempt = attempt_dir(ctx);
    for name in [
        "prompt.md",
        "request.json",
        "output-schema.json",
        "process.json",
        "raw-stdout.log",
        "raw-stderr.log",
        "result.json",
    ] {
        assert!(attempt.join(name).is_file(), "{name} is missing");
    }
    for entry in std::fs::read_dir(&attempt).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(
            !name.starts_with('.'),
            "{name} was left in the attempt folder"
        );
    }
    assert_matches_schema(&attempt.join("process.json"), "process.schema.json");
    assert_matches_schema(&attempt.join("result.json"), "result.schema.json");
    assert_matches_schema(&attempt.join("request.json"), "request.schema.json");
    let result = read_json(&attempt.join("result.json"));
    // The scenarios that break the read-only policy do it by tool calls, which the
    // stream shows: result.json already says so, before the evidence does.
    assert_eq!(result["outcome"], status);
    // A transient failure (api-500, api-529) is retried runner.retries times
    // (default 2); every other outcome is one invocation.
    let expected = if result["transient"] == true { 3 } else { 1 };
    let runs = ctx.fake_agent_runs();
    assert_eq!(runs.len(), expected, "agent invocations");
    assert_eq!(stage["attempts"], expected, "{stage:#}");
    for r in &runs {
        assert!(
            !process_alive(r.pid),
            "the fake agent (pid {}) is still running",
            r.pid
        );
    }
    let run_json = read_json(&run.join("run.json"));
    assert_eq!(run_json["exitCode"], exit);
    assert_eq!(run_json["runner"]["version"], "2.1.332");
    assert_eq!(run_json["totals"]["invocations"], expected);
    stage
}

/// The document's event rides with the stage's end (docs/run-directory.md,
/// "Writing rules"): it names the bytes in the repository, follows the
/// `output.json` it was taken from, and comes before `stage-finished`.
#[test]
fn the_document_is_announced_after_its_output_and_before_the_stage_ends() {
    let ctx = generate_ctx("success");
    run_scenario(&ctx, "succeeded", 0);
    let events = std::fs::read_to_string(ctx.only_run_dir().join("events.jsonl")).unwrap();
    let events: Vec<Value> = events
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let at = |what: &dyn Fn(&Value) -> bool| {
        let found: Vec<usize> = (0..events.len()).filter(|&i| what(&events[i])).collect();
        assert_eq!(found.len(), 1, "{found:?} in {events:#?}");
        found[0]
    };
    let output =
        at(&|e| e["type"] == "record-written" && e["path"] == "stages/requirements/output.json");
    let document = at(&|e| e["type"] == "document-written");
    let finished = at(&|e| e["type"] == "stage-finished" && e["stage"] == "requirements");
    assert!(output < document && document < finished, "{events:#?}");
    assert_eq!(events[document]["path"], "docs/requirements.md");
    assert_eq!(
        events[document]["sha256"],
        specbridge_engine::store::sha256_hex(ctx.read("docs/requirements.md").as_bytes())
    );
    let audit = ctx.run(&["runs", "audit", "latest"]);
    assert_eq!(audit.code, 0, "{}", audit.snapshot());
}

/// The first agent stage of a run, started alone with the working tree's
/// snapshot taken ahead, waits for the disk once before its agent starts: the
/// run's first records, the stage's start and the attempt's records go in one
/// batch — every intent before any announcement — and the log stays whole.
#[test]
fn the_first_agent_stage_writes_what_its_spawn_waits_for_in_one_batch() {
    let ctx = generate_ctx("success");
    // A repository's first run adds the run store's line to
    // `.git/info/exclude`, a write that voids the snapshot taken ahead; every
    // later run starts as the second does.
    run_scenario(&ctx, "succeeded", 0);
    std::fs::remove_dir_all(ctx.path(".specbridge/runs")).unwrap();
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let events = crate::events::assert_events_match_schema(&ctx.only_run_dir());
    let spawned = events
        .iter()
        .position(|e| e["type"] == "process-spawned")
        .expect("the agent was spawned");
    let before = &events[..spawned];
    let kinds: Vec<&str> = before.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let last_intent = kinds.iter().rposition(|k| *k == "record-intent").unwrap();
    let first_written = kinds.iter().position(|k| *k == "record-written").unwrap();
    assert!(last_intent < first_written, "two batches: {kinds:?}");
    for path in [
        "run.json",
        "stages/requirements/attempt-001/git-before.json",
        "stages/requirements/attempt-001/request.json",
    ] {
        assert!(
            before
                .iter()
                .any(|e| e["type"] == "record-written" && e["path"] == path),
            "{path} is not written before the spawn: {before:#?}"
        );
    }
    assert!(kinds.contains(&"stage-started"), "{kinds:?}");
    let audit = ctx.run(&["runs", "audit", "latest"]);
    assert_eq!(audit.code, 0, "{}", audit.snapshot());
}

#[test]
fn success_writes_the_output_and_the_document() {
    let ctx = generate_ctx("success");
    let stage = run_scenario(&ctx, "succeeded", 0);
    let run = ctx.only_run_dir();
    let output_path = run.join("stages/requirements/output.json");
    assert_matches_schema(&output_path, "document.schema.json");
    let output = read_json(&output_path);
    // The fake answers with a minimal instance of the schema.
    assert_eq!(
        ctx.read("docs/requirements.md"),
        output["markdown"].as_str().unwrap()
    );
    // Staged in the attempt's folder, then moved: nothing is left there, and
    // the document's folder holds the document alone.
    assert_eq!(staged_documents_left(&run), Vec::<PathBuf>::new());
    let beside: Vec<_> = std::fs::read_dir(ctx.path("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(beside, ["requirements.md"]);
    assert_eq!(stage["output"]["path"], "stages/requirements/output.json");
    assert_eq!(stage["document"]["path"], "docs/requirements.md");
    assert_eq!(stage["inputHash"].as_str().unwrap().len(), 64);
    let bytes = std::fs::read(&output_path).unwrap();
    assert_eq!(
        stage["output"]["sha256"],
        specbridge_engine::store::sha256_hex(&bytes)
    );
    let result = read_json(&attempt_dir(&ctx).join("result.json"));
    assert_eq!(
        result["offeredTools"],
        serde_json::json!(["Glob", "Grep", "Read", "StructuredOutput"])
    );
    let request = read_json(&attempt_dir(&ctx).join("request.json"));
    assert_eq!(request["operation"], "generate");
    assert_eq!(
        request["toolPolicy"]["tools"],
        serde_json::json!(["Read", "Glob", "Grep"])
    );
    assert_eq!(request["schemaDelivery"], "json-schema-flag");
    // The prompt went on stdin, rendered, and is what prompt.md holds.
    let runs = ctx.fake_agent_runs();
    assert_eq!(
        runs[0].stdin,
        "Write the requirements of pipeline agent-test.\nMarker: prompt-body-7f3a.\n"
    );
    assert_eq!(
        std::fs::read_to_string(attempt_dir(&ctx).join("prompt.md")).unwrap(),
        runs[0].stdin
    );
    assert_eq!(
        runs[0].cwd,
        std::fs::canonicalize(ctx.root())
            .unwrap()
            .display()
            .to_string()
    );
}

/// A document of about 0.9 MB comes back whole: the CLI's result line carries
/// it twice (`result` and `structured_output`), about 1.8 MB, and is parsed
/// whole up to `maxStdoutBytes`; under a limit it does not fit in, the stage
/// says which limit stopped it.
#[test]
fn a_large_document_comes_back_whole_within_the_stdout_limit() {
    let line = "- The tool counts words in every file it is given, and says so.\n";
    let markdown = format!("# Requirements\n\n{}", line.repeat(900_000 / line.len()));
    let step = serde_json::json!({"scenario": "success", "output": {"summary": "Many.", "markdown": markdown}});
    let ctx = TestContext::with_claude_script(&serde_json::json!([step, step]).to_string());
    ctx.write("prompts/requirements.md", PROMPT);
    ctx.write_agent_pipeline("  maxStdoutBytes: 4MiB\n", GENERATE_STAGE);
    run_ending(&ctx, 0, "succeeded");
    assert_eq!(ctx.read("docs/requirements.md"), markdown);
    let stdout = std::fs::read_to_string(attempt_dir(&ctx).join("raw-stdout.log")).unwrap();
    let longest = stdout.lines().map(str::len).max().unwrap();
    assert!(
        longest > 2 * markdown.len(),
        "the longest line: {longest} bytes"
    );

    std::fs::remove_dir_all(ctx.path(".specbridge/runs")).unwrap();
    std::fs::remove_file(ctx.path("docs/requirements.md")).unwrap();
    ctx.write_agent_pipeline("  maxStdoutBytes: 1MiB\n", GENERATE_STAGE);
    let stage = run_ending(&ctx, 4, "failed");
    assert_eq!(
        stage["outcome"],
        "stdout passed its limit (maxStdoutBytes: 1MiB); the process was stopped and its output kept unparsed"
    );
    assert!(!ctx.path("docs/requirements.md").exists());
}

/// A document whose folder is a symlink is refused when the document would be
/// moved into place, even one that validation lets pass (it stays inside the
/// repository; one leading out is refused before the run): the stage is a
/// safety violation, nothing lands through the link, and the bytes staged in
/// the attempt's folder are removed.
#[test]
fn a_document_through_a_symlinked_folder_is_refused_and_its_staged_bytes_removed() {
    let ctx = generate_ctx("success");
    ctx.write("notes/.keep", "");
    std::os::unix::fs::symlink("notes", ctx.path("docs")).unwrap();
    ctx.commit_all("docs is a link");
    let stage = run_ending(&ctx, 6, "safety-violation");
    let outcome = stage["outcome"].as_str().unwrap();
    assert!(
        outcome.contains("`docs`") && outcome.contains("symbolic link"),
        "{outcome}"
    );
    let notes: Vec<_> = std::fs::read_dir(ctx.path("notes"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(notes, [".keep"]);
    assert_eq!(
        staged_documents_left(&ctx.only_run_dir()),
        Vec::<PathBuf>::new()
    );
}

macro_rules! scenario_tests {
    ($($name:ident: $scenario:literal => $status:literal, $exit:literal;)*) => {$(
        #[test]
        fn $name() {
            let ctx = generate_ctx($scenario);
            let stage = run_scenario(&ctx, $status, $exit);
            if $status != "succeeded" {
                assert!(stage["outcome"].as_str().is_some_and(|o| !o.is_empty()), "{stage:#}");
                assert!(!ctx.only_run_dir().join("stages/requirements/output.json").exists());
                assert!(!ctx.path("docs/requirements.md").exists(), "a document was written");
            }
            assert_eq!(staged_documents_left(&ctx.only_run_dir()), Vec::<PathBuf>::new());
        }
    )*};
}

// docs/claude-code-runner.md outcome table. write-file, git-commit and touch-protected change the
// working tree during a read-only generate stage: a safety violation (exit 6).
scenario_tests! {
    text_only_is_malformed_output: "text-only" => "malformed-output", 4;
    schema_retries_exhausted_is_malformed_output: "schema-retries-exhausted" => "malformed-output", 4;
    max_turns_is_max_turns: "max-turns" => "max-turns", 4;
    old_max_turns_is_max_turns: "max-turns-old" => "max-turns", 4;
    budget_is_budget_exceeded: "budget" => "budget-exceeded", 4;
    // Transient: three attempts (runner.retries, default 2), then failed; see retry.rs.
    api_500_fails: "api-500" => "failed", 4;
    api_529_fails: "api-529" => "failed", 4;
    garbage_fails: "garbage" => "failed", 4;
    write_file_is_a_safety_violation: "write-file" => "safety-violation", 6;
    git_commit_is_a_safety_violation: "git-commit" => "safety-violation", 6;
    touch_protected_is_a_safety_violation: "touch-protected" => "safety-violation", 6;
}

#[test]
fn a_write_during_a_generate_stage_is_recorded_with_its_path() {
    let mut ctx = generate_ctx("write-file");
    ctx.set_env("FAKE_CLAUDE_WRITE", "notes/agent.txt=sneaky");
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 6, "{}", out.snapshot());
    let attempt = attempt_dir(&ctx);
    let evidence = read_json(&attempt.join("evidence.json"));
    assert_eq!(evidence["kind"], "generate");
    assert_eq!(
        evidence["violations"][0]["kind"], "changed-by-generate",
        "{evidence:#}"
    );
    assert_eq!(evidence["violations"][0]["path"], "notes/agent.txt");
    let changed = read_json(&attempt.join("changed-files.json"));
    assert_eq!(changed["added"], serde_json::json!(["notes/agent.txt"]));
    for name in ["git-before.json", "git-after.json", "diff.patch"] {
        assert!(attempt.join(name).is_file(), "{name} is missing");
    }
    // Nothing was accepted: no output, no document.
    assert!(!ctx.path("docs/requirements.md").exists());
    let stage = read_json(&ctx.only_run_dir().join("stages/requirements/stage.json"));
    assert!(
        stage["outcome"]
            .as_str()
            .unwrap()
            .contains("notes/agent.txt"),
        "{stage:#}"
    );
}

/// A run cancelled while the agent's prompt waits for its before-snapshot
/// never gives the agent its prompt: the CLI, spawned, is ended having asked
/// nothing, and the stage is `cancelled` (exit 5).
#[test]
fn a_cancel_while_the_prompt_waits_for_the_snapshot_gives_the_agent_nothing() {
    cancelled_while_the_prompt_waits(GENERATE_STAGE, "requirements");
}

/// An execute stage's first attempt decides nothing from its before-snapshot
/// about what to spawn: the snapshot is finished while the CLI starts up, as
/// a generate stage's is (here after a check stage, so that the attempt takes
/// its own rather than the run's first), and a cancel meanwhile gives the
/// agent nothing.
#[test]
fn an_execute_stages_snapshot_is_finished_while_the_cli_starts_up() {
    let stages = "  - { id: ready, kind: check, argv: [\"true\"], sandbox: off }
  - id: implement
    kind: execute
    needs: [ready]
    prompt: prompts/requirements.md
    verification:
      - { name: feature done, argv: [grep, -q, done, feature.txt] }
";
    cancelled_while_the_prompt_waits(stages, "implement");
}

/// Runs `stages` with every `git status` slowed to 3 s and cancels the run
/// once the agent of `stage` has been spawned: the stage must be `cancelled`
/// before its agent had its prompt.
fn cancelled_while_the_prompt_waits(stages: &str, stage: &str) {
    let mut ctx = TestContext::with_fake_claude("success");
    ctx.write("prompts/requirements.md", PROMPT);
    // The fake under a name of its own that marks the agent's spawn.
    let spawned = ctx.aux_path("agent-spawned");
    let claude = ctx.aux_path("claude");
    write_fake_wrapper(&claude, &format!(": > '{}'", spawned.display()));
    ctx.write(
        "specbridge.yaml",
        &format!(
            "version: 1\nname: agent-test\nrunner:\n  command: {}\n{QUICK_RUNNER}stages:\n{stages}",
            claude.display()
        ),
    );
    ctx.commit_all("pipeline");
    ctx.slow_git_status("3", None);
    let mut child = ctx.command().arg("run").spawn().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !spawned.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // The snapshot, begun before the spawn, still has seconds to go.
    std::thread::sleep(std::time::Duration::from_millis(200));
    // SAFETY: sending a signal to a child we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(child.wait().unwrap().code(), Some(5));
    let record = read_json(
        &ctx.only_run_dir()
            .join(format!("stages/{stage}/stage.json")),
    );
    assert_eq!(record["status"], "cancelled", "{record:#}");
    assert!(
        record["outcome"]
            .as_str()
            .is_some_and(|o| o.contains("before the agent was given its prompt")),
        "{record:#}"
    );
    let prompted: Vec<_> = ctx
        .fake_agent_runs()
        .into_iter()
        .filter(|r| r.stdin.contains("prompt-body-7f3a"))
        .collect();
    assert!(
        prompted.is_empty(),
        "the agent had its prompt: {prompted:?}"
    );
}

/// A generate stage's before-snapshot is finished while the CLI starts up,
/// and always before the agent has its prompt: with every `git status` slowed
/// down, a write the agent makes the moment it has its prompt is still its
/// change, a safety violation, and not in `git-before.json`.
#[test]
fn the_before_snapshot_is_finished_before_the_agent_has_its_prompt() {
    let mut ctx = generate_ctx("write-file");
    ctx.set_env("FAKE_CLAUDE_WRITE", "notes/agent.txt=at once");
    ctx.slow_git_status("0.4", None);
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 6, "{}", out.snapshot());
    let attempt = attempt_dir(&ctx);
    let evidence = read_json(&attempt.join("evidence.json"));
    assert_eq!(
        evidence["violations"][0]["path"], "notes/agent.txt",
        "{evidence:#}"
    );
    let before = read_json(&attempt.join("git-before.json"));
    assert!(
        before["entries"].get("notes/agent.txt").is_none(),
        "{before:#}"
    );
}

/// A prompt held past the CLI's own wait for it (3 s from its start) would
/// reach a CLI that has given up ("Input must be provided", not retried): it
/// is withheld instead, and the attempt fails as a transient failure that says
/// why. The retry takes its before-snapshot before the spawn and succeeds.
#[test]
fn a_prompt_held_past_the_clis_wait_is_withheld_and_retried() {
    let mut ctx = TestContext::with_fake_claude("success");
    ctx.write("prompts/requirements.md", PROMPT);
    ctx.write_agent_pipeline("  timeout: 30s\n  killGrace: 300ms\n", GENERATE_STAGE);
    // The first snapshots — the one taken ahead and the one the first
    // attempt's prompt waits for — take longer than the CLI waits.
    ctx.slow_git_status("3.5", Some(2));
    succeeded_after_a_withheld_prompt(&ctx);
}

/// On a disk whose syncs take over a second, the first attempt's prompt, held
/// while its records are written, would come too late for the CLI: withheld,
/// a transient failure. The retry writes its records before the spawn, holds
/// its prompt for the spawn's event alone, and succeeds.
#[test]
fn on_a_slow_disk_the_retry_writes_its_records_before_the_spawn() {
    let mut ctx = TestContext::with_fake_claude("success");
    ctx.write("prompts/requirements.md", PROMPT);
    ctx.write_agent_pipeline("  timeout: 60s\n  killGrace: 300ms\n", GENERATE_STAGE);
    ctx.set_env("SPECBRIDGE_TEST_SYNC_DELAY_MS", "1500");
    succeeded_after_a_withheld_prompt(&ctx);
}

/// Runs the one-stage pipeline and checks that it succeeded in two attempts,
/// the first ended before its CLI was given the prompt, as a transient failure.
fn succeeded_after_a_withheld_prompt(ctx: &TestContext) {
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let run = ctx.only_run_dir();
    let first = read_json(&run.join("stages/requirements/attempt-001/result.json"));
    assert_eq!(first["outcome"], "failed", "{first:#}");
    assert_eq!(first["transient"], true, "{first:#}");
    let reason = first["failureReason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("was stopped before it was given its prompt")
            && reason
                .contains("gives up on a prompt that has not begun to arrive 3 s after it starts"),
        "{first:#}"
    );
    let stage = read_json(&run.join("stages/requirements/stage.json"));
    assert_eq!(stage["status"], "succeeded", "{stage:#}");
    assert_eq!(stage["attempts"], 2, "{stage:#}");
    assert_eq!(stage["transientAttempts"], 1, "{stage:#}");
    assert_eq!(stage["outcome"], "after 1 transient failure(s), retried");
    let prompted = ctx
        .fake_agent_runs()
        .into_iter()
        .filter(|r| r.stdin.contains("prompt-body-7f3a"))
        .count();
    assert_eq!(prompted, 1, "only the second attempt's CLI had the prompt");
}

#[test]
fn hang_before_result_times_out() {
    let ctx = generate_ctx("hang-before-result");
    run_scenario(&ctx, "timed-out", 5);
    let process = read_json(&attempt_dir(&ctx).join("process.json"));
    assert_eq!(process["timedOut"], true);
}

#[test]
fn ignore_sigterm_is_killed_after_the_grace() {
    let ctx = generate_ctx("ignore-sigterm");
    run_scenario(&ctx, "timed-out", 5);
    let process = read_json(&attempt_dir(&ctx).join("process.json"));
    assert_eq!(process["timedOut"], true);
    assert_eq!(process["signal"], "SIGKILL");
}

#[test]
fn hang_after_result_keeps_the_result() {
    let ctx = generate_ctx("hang-after-result");
    run_scenario(&ctx, "succeeded", 0);
    let process = read_json(&attempt_dir(&ctx).join("process.json"));
    assert_eq!(process["hungAfterResult"], true);
    assert!(ctx.path("docs/requirements.md").is_file());
}

#[test]
fn stdout_flood_is_stopped_and_kept_unparsed() {
    let ctx = generate_ctx("stdout-flood");
    run_scenario(&ctx, "failed", 4);
    let process = read_json(&attempt_dir(&ctx).join("process.json"));
    assert_eq!(process["stdoutTruncated"], true);
    assert_eq!(process["stdoutBytes"], 1024 * 1024);
    let kept = std::fs::metadata(attempt_dir(&ctx).join("raw-stdout.log")).unwrap();
    assert_eq!(kept.len(), 1024 * 1024);
}

#[test]
fn stderr_flood_past_the_default_limit_fails() {
    let ctx = generate_ctx("stderr-flood");
    let stage = run_scenario(&ctx, "failed", 4);
    assert!(
        stage["outcome"].as_str().unwrap().contains("stderr"),
        "{stage:#}"
    );
}

#[test]
fn grandchild_left_running_is_ended() {
    let mut ctx = generate_ctx("grandchild");
    let pidfile = ctx.aux_path("grandchild.pid");
    ctx.set_env(
        "FAKE_CLAUDE_GRANDCHILD_PIDFILE",
        &pidfile.display().to_string(),
    );
    run_scenario(&ctx, "succeeded", 0);
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        !process_alive(pid),
        "the agent's grandchild {pid} is still running"
    );
    let process = read_json(&attempt_dir(&ctx).join("process.json"));
    assert_eq!(process["orphansKilled"], true);
}

#[test]
fn not_logged_in_during_a_run_is_runner_unavailable() {
    // `auth status` says logged in; the print-mode run then says it is not.
    let mut ctx = generate_ctx("success");
    let script = ctx.aux_path("script.json");
    std::fs::write(&script, r#"["not-logged-in"]"#).unwrap();
    ctx.set_env("FAKE_CLAUDE_SCRIPT", &script.display().to_string());
    run_scenario(&ctx, "runner-unavailable", 3);
}

#[test]
fn a_logged_out_runner_is_found_by_its_first_invocation() {
    // Detection does not ask `auth status`: the invocation fails unauthenticated,
    // which is classified runner-unavailable, exit 3, as the probe would have.
    let ctx = generate_ctx("not-logged-in");
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 3, "{}", out.snapshot());
    assert!(
        out.stderr.contains("the runner is not authenticated"),
        "{}",
        out.snapshot()
    );
    assert_eq!(ctx.fake_agent_runs().len(), 1);
    assert!(!ctx
        .fake_log()
        .iter()
        .any(|i| i.argv.first().map(String::as_str) == Some("auth")));
}

#[test]
fn detection_refuses_version_1_0_0_with_nothing_spawned() {
    let mut ctx = generate_ctx("success");
    ctx.set_env("FAKE_CLAUDE_VERSION", "1.0.0");
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 3, "{}", out.snapshot());
    insta::assert_snapshot!(out.stderr.replace(&crate::common::fake_claude_bin().display().to_string(), "[FAKE]"), @r"
    error: cannot run agent stages: the runner `[FAKE]` is incompatible (Claude Code 1.0.0): it lacks --permission-mode
      help: install a newer Claude Code: `npm install -g @anthropic-ai/claude-code`
    nothing was run; `specbridge runner doctor --command PATH` shows the details
    ");
    assert!(!ctx.path(".specbridge/runs").exists());
    assert!(ctx.fake_agent_runs().is_empty());
    let mut probes: Vec<Vec<String>> = ctx.fake_log().into_iter().map(|i| i.argv).collect();
    probes.sort();
    assert_eq!(
        probes,
        [vec!["--help".to_string()], vec!["--version".to_string()]]
    );

    let fake = crate::common::fake_claude_bin();
    let doctor = ctx.run(&["runner", "doctor", "--command", fake.to_str().unwrap()]);
    assert_eq!(doctor.code, 3, "{}", doctor.snapshot());
}

#[test]
fn check_only_pipelines_skip_detection() {
    let ctx = TestContext::with_fake_claude("success");
    ctx.write(
        "specbridge.yaml",
        "version: 1\nname: checks\nrunner:\n  command: /nonexistent/claude\nstages:\n  - id: ok\n    kind: check\n    argv: [\"true\"]\n",
    );
    ctx.commit_all("pipeline");
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let run_json = read_json(&ctx.only_run_dir().join("run.json"));
    assert!(run_json.get("runner").is_none());
}

#[test]
fn the_prompt_never_appears_in_any_argv() {
    let ctx = generate_ctx("success");
    run_scenario(&ctx, "succeeded", 0);
    for invocation in ctx.fake_log() {
        for arg in &invocation.argv {
            assert!(!arg.contains("prompt-body-7f3a"), "prompt in argv: {arg}");
        }
    }
    let process = read_json(&attempt_dir(&ctx).join("process.json"));
    let argv = serde_json::to_string(&process["redactedArgv"]).unwrap();
    assert!(!argv.contains("prompt-body-7f3a"));
    assert!(argv.contains("--json-schema"), "{argv}");
}

#[test]
fn dry_run_prints_each_agent_argv_and_spawns_no_agent() {
    let ctx = generate_ctx("success");
    let out = ctx.run(&["run", "--dry-run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let line = out
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with('$'))
        .expect("an argv line");
    for part in [
        "--print",
        "--output-format stream-json --verbose",
        "--permission-mode manual",
        "--tools Read,Glob,Grep",
        "--allowedTools 'Read(./**),Glob(./**),Grep(./**)'",
        "--setting-sources ''",
        "--strict-mcp-config",
        "--json-schema",
        "--session-id '<fresh-session-id>'",
        "< rendered-prompt",
    ] {
        assert!(line.contains(part), "{part} missing from {line}");
    }
    assert!(!out.stdout.contains("prompt-body-7f3a"));
    assert!(ctx.fake_agent_runs().is_empty());
    assert!(!ctx.path(".specbridge").exists());
}

#[test]
fn dry_run_without_the_runner_states_its_assumption() {
    let ctx = TestContext::with_fake_claude("success");
    ctx.write("prompts/requirements.md", PROMPT);
    ctx.write(
        "specbridge.yaml",
        &format!("version: 1\nname: t\nrunner:\n  command: /nonexistent/claude\nstages:\n{GENERATE_STAGE}"),
    );
    let out = ctx.run(&["run", "--dry-run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert!(
        out.stdout
            .contains("note: the runner `/nonexistent/claude` cannot be used"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("--permission-mode default"),
        "{}",
        out.stdout
    );
}

#[test]
fn an_undefined_template_variable_fails_the_stage_with_its_line() {
    let ctx = TestContext::with_fake_claude("success");
    ctx.write(
        "prompts/requirements.md",
        "First line.\n{{ stages.design.output.summary }}\n",
    );
    ctx.write_agent_pipeline(QUICK_RUNNER, GENERATE_STAGE);
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 4, "{}", out.snapshot());
    let stage = read_json(&ctx.only_run_dir().join("stages/requirements/stage.json"));
    let outcome = stage["outcome"].as_str().unwrap();
    assert!(outcome.contains("prompts/requirements.md:2"), "{outcome}");
    assert!(outcome.contains("undefined"), "{outcome}");
    assert!(ctx.fake_agent_runs().is_empty());
}

#[test]
fn a_temporary_folder_that_cannot_be_made_fails_the_attempt_before_the_spawn() {
    // The invocation's own temporary folder is made inside the one that
    // `CLAUDE_CODE_TMPDIR` names (docs/claude-code-runner.md).
    let ctx = TestContext::with_fake_claude("success");
    ctx.write("prompts/requirements.md", PROMPT);
    ctx.write_agent_pipeline(
        &format!("{QUICK_RUNNER}  env:\n    CLAUDE_CODE_TMPDIR: /nonexistent/agent-tmp\n"),
        GENERATE_STAGE,
    );
    let stage = run_ending(&ctx, 4, "failed");
    let outcome = stage["outcome"].as_str().unwrap();
    assert!(
        outcome
            .contains("failed to create a temporary folder for the CLI in /nonexistent/agent-tmp"),
        "{outcome}"
    );
    assert!(ctx.fake_agent_runs().is_empty(), "the agent was started");
    let result = read_json(&attempt_dir(&ctx).join("result.json"));
    assert_eq!(result["outcome"], "failed", "{result:#}");
}

#[test]
fn upstream_outputs_and_documents_reach_downstream_prompts() {
    let ctx = TestContext::with_claude_script(
        r##"[{"scenario": "success", "match": "REQ", "output": {"summary": "req summary", "markdown": "# Requirements\nqueue"}},
            {"scenario": "success", "match": "DESIGN", "output": {"summary": "design summary", "markdown": "# Design"}}]"##,
    );
    ctx.write("prompts/requirements.md", "REQ\n");
    ctx.write(
        "prompts/design.md",
        "DESIGN from {{ stages.requirements.output.summary }}\n{{ stages.requirements.document }}",
    );
    ctx.write_agent_pipeline(
        QUICK_RUNNER,
        &format!(
            "{GENERATE_STAGE}  - id: design\n    kind: generate\n    needs: [requirements]\n    prompt: prompts/design.md\n    output: {{ schema: builtin:document, document: docs/design.md }}\n"
        ),
    );
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let design_prompt = std::fs::read_to_string(
        ctx.only_run_dir()
            .join("stages/design/attempt-001/prompt.md"),
    )
    .unwrap();
    assert_eq!(
        design_prompt,
        "DESIGN from req summary\n# Requirements\nqueue"
    );
    assert_eq!(ctx.read("docs/design.md"), "# Design");
    let plan = read_json(&ctx.only_run_dir().join("plan.json"));
    let hashes: Vec<&str> = plan["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["inputHash"].as_str().unwrap())
        .collect();
    assert_eq!(hashes.len(), 2);
    assert_ne!(hashes[0], hashes[1]);
}

#[test]
fn a_forbidden_flag_in_the_pipeline_is_refused_by_validation() {
    let ctx = TestContext::with_fake_claude("success");
    ctx.write("prompts/requirements.md", PROMPT);
    ctx.write_agent_pipeline(
        "  commandArgs: [\"--dangerously-skip-permissions\"]\n",
        GENERATE_STAGE,
    );
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 6, "{}", out.snapshot());
    assert!(
        ctx.fake_log().is_empty(),
        "nothing may be spawned, not even a probe"
    );
    assert!(!ctx.path(".specbridge").exists());
}

const CANARY_ANTHROPIC: &str = "sk-ant-api03-CANARYenv0123456789abcdefXYZ";
const CANARY_GITHUB: &str = "ghp_CANARYgithubTOKEN0123456789abcdefgh";
const CANARY_ARGS: &str = "sk-ant-api03-CANARYargs0123456789abcdefXYZ";
const CANARY_PROMPT: &str = "ghp_CANARYpromptTOKEN0123456789abcdefg";
const CANARY_OUTPUT: &str = "sk-ant-api03-CANARYoutput0123456789abcdXYZ";
const CANARY_RESULT: &str = "ghp_CANARYresultTOKEN0123456789abcdefg";
const CANARY_PLAIN_ENV: &str = "plain-env-canary-4d9c1e";

#[test]
fn canary_secrets_never_reach_the_run_folder() {
    let mut ctx = TestContext::with_fake_claude("success");
    // A version whose result is the model's last text, so that it carries a canary.
    ctx.set_env("FAKE_CLAUDE_VERSION", "2.1.100");
    ctx.set_env("ANTHROPIC_API_KEY", CANARY_ANTHROPIC);
    ctx.set_env("GITHUB_TOKEN", CANARY_GITHUB);
    ctx.set_env("MY_SERVICE_PASSWORD", CANARY_PLAIN_ENV);
    ctx.set_env(
        "FAKE_CLAUDE_OUTPUT",
        // Not in `markdown`: a document holding a secret is refused, not written
        // (secrets::a_generated_document_holding_a_secret_is_not_written).
        &format!(
            r#"{{"summary": "key {CANARY_OUTPUT}, token {CANARY_GITHUB}", "markdown": "the notes"}}"#
        ),
    );
    ctx.set_env("FAKE_CLAUDE_RESULT", &format!("done, {CANARY_RESULT}"));
    ctx.write(
        "prompts/requirements.md",
        &format!("Use {CANARY_PROMPT} and {CANARY_PLAIN_ENV}.\n"),
    );
    ctx.write_agent_pipeline(
        &format!("  commandArgs: [\"--append-system-prompt\", \"{CANARY_ARGS}\"]\n"),
        GENERATE_STAGE,
    );
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    // The agent really got them: the test would prove nothing otherwise.
    let runs = ctx.fake_agent_runs();
    assert!(runs[0].stdin.contains(CANARY_PROMPT));
    assert!(runs[0].argv.iter().any(|a| a == CANARY_ARGS));

    let stdout_log = ctx
        .only_run_dir()
        .join("stages/requirements/attempt-001/raw-stdout.log");
    assert!(std::fs::read_to_string(stdout_log)
        .unwrap()
        .contains("done, <redacted>"));

    let files = ctx.specbridge_files();
    assert!(files.len() > 10, "{files:?}");
    for file in files {
        let bytes = std::fs::read(&file).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        for canary in [
            CANARY_ANTHROPIC,
            CANARY_GITHUB,
            CANARY_ARGS,
            CANARY_PROMPT,
            CANARY_OUTPUT,
            CANARY_RESULT,
            CANARY_PLAIN_ENV,
        ] {
            assert!(
                !text.contains(canary),
                "{} holds the canary {canary}",
                file.display()
            );
        }
    }
    for text in [&out.stdout, &out.stderr] {
        assert!(!text.contains(CANARY_ANTHROPIC) && !text.contains(CANARY_ARGS));
    }
}

/// `PATH` may name the repository (`.`, an empty entry): the git that specbridge
/// runs for its evidence is never one found there, which an agent could write.
#[test]
fn a_git_planted_in_the_repository_is_never_run() {
    let mut ctx = generate_ctx("success");
    ctx.write(
        "git",
        "#!/bin/sh\ntouch \"$PWD/planted-git-ran\"\nexec /bin/false\n",
    );
    std::fs::set_permissions(
        ctx.path("git"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    ctx.commit_all("a git of the repository's own");
    let path = format!(".::{}", std::env::var("PATH").unwrap_or_default());
    ctx.set_env("PATH", &path);
    run_scenario(&ctx, "succeeded", 0);
    assert!(!ctx.path("planted-git-ran").exists());

    // With no git in an absolute folder, none runs: the run is refused for want
    // of git, as without any.
    std::fs::remove_dir_all(ctx.path(".specbridge")).unwrap();
    ctx.set_env("PATH", ".:");
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 2, "{}", out.snapshot());
    assert!(
        out.stderr
            .contains("agent stages need git for their evidence: failed to run git"),
        "{}",
        out.stderr
    );
    assert!(!ctx.path("planted-git-ran").exists());
}

/// The working tree's snapshot is taken ahead, from the session's start, for the
/// run's first agent attempt (`snapshot_ahead.rs`). A repository's first run
/// then adds `.specbridge/` to `.git/info/exclude`, one of the control files the
/// snapshot covers: a snapshot from before that line would charge the run's own
/// write to the generate stage as a safety violation.
#[test]
fn a_repositorys_first_run_is_not_charged_with_its_own_exclude_line() {
    let ctx = generate_ctx("success");
    let exclude = ctx.path(".git/info/exclude");
    assert!(!std::fs::read_to_string(&exclude)
        .unwrap_or_default()
        .contains(".specbridge/"));
    run_scenario(&ctx, "succeeded", 0);
    assert!(std::fs::read_to_string(&exclude)
        .unwrap()
        .contains(".specbridge/"));
    let before = read_json(&attempt_dir(&ctx).join("git-before.json"));
    assert_eq!(
        before["gitControl"][".git/info/exclude"],
        read_json(&attempt_dir(&ctx).join("git-after.json"))["gitControl"][".git/info/exclude"],
        "{before:#}"
    );
}

/// A check stage that changes the tree before the first agent stage starts voids
/// the snapshot taken ahead: the generate stage is judged from the tree as the
/// check left it, not charged with the check's change.
#[test]
fn a_change_by_a_stage_before_the_first_agent_is_not_the_agents() {
    let ctx = TestContext::with_fake_claude("success");
    ctx.write("prompts/requirements.md", PROMPT);
    ctx.write("tracked.txt", "before\n");
    // As after a first run: the run adds nothing to the exclude file, whose
    // change would void the snapshot on its own.
    ctx.write(".git/info/exclude", ".specbridge/\n");
    // Both stages can start first; by id, the check does (concurrency 1).
    ctx.write_agent_pipeline(
        QUICK_RUNNER,
        &format!(
            "  - id: a-check\n    kind: check\n    sandbox: off\n    argv: [sh, -c, 'echo after > tracked.txt']\n{GENERATE_STAGE}"
        ),
    );
    let out = ctx.run(&["run", "--concurrency", "1"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_eq!(ctx.read("tracked.txt"), "after\n");
    let run = ctx.only_run_dir();
    let stage = read_json(&run.join("stages/requirements/stage.json"));
    assert_eq!(stage["status"], "succeeded", "{stage:#}");
    let before = read_json(&run.join("stages/requirements/attempt-001/git-before.json"));
    assert!(
        before["entries"].get("tracked.txt").is_some(),
        "the check's change is in the generate stage's before-snapshot: {before:#}"
    );
}
