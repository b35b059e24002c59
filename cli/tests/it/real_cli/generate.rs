//! Generate stages under the real CLI: read-only tools, structured output, and every
//! way an invocation can end (docs/stage-kinds.md generate, docs/claude-code-runner.md Success and Outcomes).

use serde_json::{json, Value};
use specbridge_testkit::model_server::{Reply, Script, ToolCall};

use super::harness::{Sandbox, MUTATING_TOOLS};

const STAGE: &str = "stages:
  - id: requirements
    kind: generate
    prompt: prompts/requirements.md
    output: { schema: builtin:document, document: docs/requirements.md }
";

const PROMPT_MARKER: &str = "prompt-marker-5c1e";

/// A sandbox with the one-stage generate pipeline, or `None` when the tier skips.
fn generate_sandbox(runner_keys: &str, script: Script) -> Option<Sandbox> {
    let sandbox = Sandbox::new(|_| script)?;
    sandbox.ctx.write(
        "prompts/requirements.md",
        &format!("Write the requirements of {{{{ pipeline.name }}}}.\nMarker: {PROMPT_MARKER}.\n"),
    );
    sandbox.write_pipeline(runner_keys, STAGE);
    Some(sandbox)
}

/// Runs the pipeline and checks what every outcome shares: the exit code, the stage
/// status in stage.json and result.json, one attempt, and no agent left running.
fn run_expecting(sandbox: &Sandbox, status: &str, exit: i32) -> Value {
    let out = sandbox.run(&["run"]);
    assert_eq!(out.code, exit, "{}", out.snapshot());
    let stage = sandbox.stage_json("requirements");
    assert_eq!(stage["status"], status, "{stage:#}\n{}", out.snapshot());
    assert_eq!(stage["attempts"], 1, "{stage:#}");
    let result = sandbox.attempt_json("requirements", 1, "result.json");
    assert_eq!(result["outcome"], status, "{result:#}");
    let run = super::harness::read_json(&sandbox.run_dir().join("run.json"));
    assert_eq!(run["exitCode"], exit);
    assert_eq!(run["runner"]["version"], super::harness::CLAUDE_VERSION);
    assert_eq!(
        sandbox.leftover_processes(),
        Vec::<u32>::new(),
        "agent processes left running"
    );
    if status != "succeeded" {
        assert!(
            !sandbox.ctx.path("docs/requirements.md").exists(),
            "a failed stage wrote its document"
        );
        assert!(!sandbox
            .run_dir()
            .join("stages/requirements/output.json")
            .exists());
    }
    stage
}

/// Checks that the run succeeded in two attempts, the first a transient
/// failure, and returns that one's `result.json`.
fn retried_once(sandbox: &Sandbox, out: &crate::common::Output) -> Value {
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let stage = sandbox.stage_json("requirements");
    assert_eq!(stage["status"], "succeeded", "{stage:#}");
    assert_eq!(stage["attempts"], 2, "{stage:#}");
    assert_eq!(stage["transientAttempts"], 1, "{stage:#}");
    let first = sandbox.attempt_json("requirements", 1, "result.json");
    assert_eq!(first["transient"], true, "{first:#}");
    first
}

fn raw_stdout(sandbox: &Sandbox) -> String {
    std::fs::read_to_string(
        sandbox
            .attempt_dir("requirements", 1)
            .join("raw-stdout.log"),
    )
    .expect("raw stdout kept")
}

#[test]
fn generate_stage_cannot_write_and_specbridge_writes_the_document() {
    let markdown = "# Requirements\n\n1. The tool counts words.\n";
    let Some(sandbox) = Sandbox::new(|root| {
        Script::new([
            Reply::tool_uses(
                Some("Let me write it myself.".into()),
                vec![ToolCall::new(
                    "Write",
                    json!({"file_path": root.join("model-wrote.md"), "content": "written by the model\n"}),
                )
                .with_id("toolu_write")],
            ),
            Reply::structured_output(json!({"summary": "One requirement.", "markdown": markdown})),
        ])
    }) else {
        return;
    };
    sandbox.ctx.write(
        "prompts/requirements.md",
        &format!("Write the requirements of {{{{ pipeline.name }}}}.\nMarker: {PROMPT_MARKER}.\n"),
    );
    sandbox.write_pipeline("  model: sonnet\n  effort: low\n  maxTurns: 4\n", STAGE);

    let stage = run_expecting(&sandbox, "succeeded", 0);

    // specbridge wrote the document; the model's Write never ran.
    assert_eq!(sandbox.ctx.read("docs/requirements.md"), markdown);
    assert!(!sandbox.ctx.path("model-wrote.md").exists());
    assert_eq!(sandbox.changed_paths(), ["?? docs/requirements.md"]);
    assert_eq!(stage["document"]["path"], "docs/requirements.md");
    // The read-only evidence saw no change by the agent.
    let evidence = sandbox.attempt_json("requirements", 1, "evidence.json");
    assert_eq!(evidence["kind"], "generate");
    assert_eq!(evidence["violations"], json!([]), "{evidence:#}");
    let output =
        super::harness::read_json(&sandbox.run_dir().join("stages/requirements/output.json"));
    assert_eq!(output["markdown"], markdown);

    // The tools offered, as the init event listed them and as the model saw them.
    let result = sandbox.attempt_json("requirements", 1, "result.json");
    let offered: Vec<&str> = result["offeredTools"]
        .as_array()
        .expect("offeredTools recorded from the init event")
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(offered.contains(&"Read"), "{offered:?}");
    assert!(offered.contains(&"StructuredOutput"), "{offered:?}");
    // Tokens as the real CLI reports them (modelUsage), and the refused Write as
    // `runs show` reads it back from the real stream.
    assert!(
        result["tokens"]["input"].as_u64().unwrap_or(0) > 0,
        "{result:#}"
    );
    assert!(
        result["tokens"]["output"].as_u64().unwrap_or(0) > 0,
        "{result:#}"
    );
    let shown = sandbox
        .ctx
        .run(&["runs", "show", "latest", "requirements", "--json"]);
    let story: Value = serde_json::from_str(&shown.stdout).expect("one JSON object");
    let calls = &story["stage"]["attempts"][0]["toolCalls"];
    assert_eq!(calls[0]["tool"], "Write", "{story:#}");
    assert_eq!(calls[0]["refused"], json!(true), "{story:#}");
    let requests = sandbox.model_requests();
    assert_eq!(
        requests.len(),
        2,
        "one tool round, then the structured output"
    );
    for tool in MUTATING_TOOLS {
        assert!(!offered.contains(tool), "{tool} offered: {offered:?}");
        for request in &requests {
            assert!(
                !request.tool_names().contains(&tool.to_string()),
                "{tool} shown to the model"
            );
        }
    }
    // `--tools` makes Write unknown rather than denied: a tool error, no denial.
    let write_result = &requests[1].tool_results()[0];
    assert_eq!(write_result.tool_use_id, "toolu_write");
    assert!(write_result.is_error, "{write_result:?}");
    assert!(
        write_result.text().contains("No such tool available"),
        "{write_result:?}"
    );
    assert_eq!(result["permissionDenials"], json!([]));

    // The rendered prompt went on stdin and reached the model.
    let first_message = requests[0].body["messages"][0].to_string();
    assert!(first_message.contains("Write the requirements of real-cli."));
    assert!(first_message.contains(PROMPT_MARKER));
    let process = sandbox.attempt_json("requirements", 1, "process.json");
    let argv = process["redactedArgv"].to_string();
    assert!(
        !argv.contains(PROMPT_MARKER),
        "the prompt is in argv: {argv}"
    );

    // The session id, model and effort passed in argv are the ones the CLI used.
    let request = sandbox.attempt_json("requirements", 1, "request.json");
    assert_eq!(result["sessionId"], request["sessionId"]);
    assert_eq!(
        requests[0]
            .headers
            .get("x-claude-code-session-id")
            .map(String::as_str),
        request["sessionId"].as_str()
    );
    let model = requests[0].body["model"].as_str().unwrap_or_default();
    assert!(model.contains("sonnet"), "model sent: {model}");
    assert_eq!(requests[0].body["output_config"]["effort"], "low");
    assert_eq!(sandbox.server.remaining(), 0);
}

#[test]
fn text_only_answer_is_malformed_output_with_the_raw_output_kept() {
    let answer = "The requirements look fine to me; nothing to add.";
    let Some(sandbox) = generate_sandbox(
        "  maxTurns: 4\n",
        Script::new([Reply::text(answer).forever()]),
    ) else {
        return;
    };
    let stage = run_expecting(&sandbox, "malformed-output", 4);

    // The CLI nudges once, then reports success without structured_output.
    assert_eq!(sandbox.model_requests().len(), 2);
    let result = sandbox.attempt_json("requirements", 1, "result.json");
    assert_eq!(result["subtype"], "success");
    assert_eq!(result["isError"], false);
    let reason = stage["outcome"].to_string() + &result["failureReason"].to_string();
    assert!(
        reason.contains("structured_output"),
        "{stage:#}\n{result:#}"
    );
    assert!(raw_stdout(&sandbox).contains(answer));
}

#[test]
fn output_that_always_breaks_the_schema_is_malformed_output() {
    let Some(sandbox) = generate_sandbox(
        "  maxTurns: 10\n",
        Script::new([Reply::structured_output(json!({"summary": "no markdown field"})).forever()]),
    ) else {
        return;
    };
    run_expecting(&sandbox, "malformed-output", 4);

    let result = sandbox.attempt_json("requirements", 1, "result.json");
    assert_eq!(result["subtype"], "error_max_structured_output_retries");
    assert_eq!(
        result["terminalReason"],
        "structured_output_retry_exhausted"
    );
    let requests = sandbox.model_requests();
    assert_eq!(
        requests.len(),
        5,
        "five refused attempts, then the CLI gives up"
    );
    let refusal = requests[1].tool_results()[0].text();
    assert!(
        refusal.contains("Output does not match required schema"),
        "{refusal}"
    );
    assert!(raw_stdout(&sandbox).contains("no markdown field"));
}

#[test]
fn tool_calls_past_max_turns_are_max_turns() {
    let Some(sandbox) = Sandbox::new(|root| {
        Script::new([
            Reply::tool_use("Read", json!({"file_path": root.join("README.md")})).forever(),
        ])
    }) else {
        return;
    };
    sandbox
        .ctx
        .write("prompts/requirements.md", "Read forever.\n");
    sandbox.write_pipeline("  maxTurns: 2\n", STAGE);

    run_expecting(&sandbox, "max-turns", 4);
    let result = sandbox.attempt_json("requirements", 1, "result.json");
    assert_eq!(result["subtype"], "error_max_turns");
    // `--max-turns 2` was honoured: two model turns, reported as the limit plus one.
    assert_eq!(sandbox.model_requests().len(), 2);
    assert_eq!(result["numTurns"], 3);
}

#[test]
fn unauthorized_without_retry_is_runner_unavailable() {
    let Some(sandbox) = generate_sandbox(
        "  maxTurns: 4\n",
        Script::new([Reply::error(401)
            .with_header("x-should-retry", "false")
            .forever()]),
    ) else {
        return;
    };
    run_expecting(&sandbox, "runner-unavailable", 3);
    let result = sandbox.attempt_json("requirements", 1, "result.json");
    assert_eq!(result["apiErrorStatus"], 401);
    assert_eq!(
        sandbox.model_requests().len(),
        1,
        "a 401 that must not be retried"
    );
}

#[test]
fn repeated_overload_is_failed() {
    // specbridge's own retry is off here: this is how the CLI gives up.
    let Some(sandbox) = generate_sandbox(
        "  maxTurns: 4\n  retries: 0\n",
        Script::new([Reply::error(529).forever()]),
    ) else {
        return;
    };
    let stage = run_expecting(&sandbox, "failed", 4);
    let result = sandbox.attempt_json("requirements", 1, "result.json");
    assert_eq!(result["apiErrorStatus"], 529);
    assert_eq!(
        sandbox.model_requests().len(),
        2,
        "CLAUDE_CODE_MAX_RETRIES=1: one retry"
    );
    assert_eq!(result["terminalReason"], "api_error");
    assert!(stage["outcome"].to_string().contains("529"), "{stage:#}");
}

#[test]
fn an_overload_the_cli_gave_up_on_is_retried_as_a_new_attempt() {
    // The CLI retries once (CLAUDE_CODE_MAX_RETRIES=1) and gives up on the second
    // 529; specbridge's second attempt gets the answer.
    let Some(sandbox) = generate_sandbox(
        "  maxTurns: 4\n",
        Script::new([
            Reply::error(529).repeated(2),
            Reply::structured_output(json!({"summary": "ok", "markdown": "# Requirements\n"})),
        ]),
    ) else {
        return;
    };
    let first = retried_once(&sandbox, &sandbox.run(&["run"]));
    assert_eq!(first["apiErrorStatus"], 529, "{first:#}");
    let second = sandbox.attempt_json("requirements", 2, "result.json");
    assert_eq!(second["outcome"], "succeeded", "{second:#}");
    assert_eq!(sandbox.model_requests().len(), 3);
}

/// Claude Code gives up on a stdin that has said nothing 3 s after it starts
/// ("Input must be provided", exit 1, asking nothing). A prompt held that long
/// — here by its before-snapshot, slowed down — is withheld instead: the
/// attempt fails as a transient failure that says why, and the retry, its
/// snapshot taken before the spawn, gets the answer.
#[test]
fn a_prompt_held_past_the_clis_wait_is_withheld_and_retried() {
    let Some(sandbox) = generate_sandbox(
        "  maxTurns: 4\n",
        Script::new([Reply::structured_output(
            json!({"summary": "ok", "markdown": "# Requirements\n"}),
        )]),
    ) else {
        return;
    };
    let slow = tempfile::tempdir().unwrap();
    crate::common::write_slow_git(slow.path(), "3.5", Some(2));
    let mut path = std::ffi::OsString::from(slow.path());
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let mut cmd = sandbox.command();
    cmd.env("PATH", path).arg("run");
    let first = retried_once(&sandbox, &sandbox.run_command(cmd));
    assert!(
        first["failureReason"]
            .as_str()
            .is_some_and(|r| r.contains("was stopped before it was given its prompt")),
        "{first:#}"
    );
    // Only the second attempt's CLI asked the model anything.
    assert_eq!(sandbox.model_requests().len(), 1);
    assert_eq!(sandbox.leftover_processes(), Vec::<u32>::new());
}

#[test]
fn a_stalled_model_times_out_and_no_agent_is_left() {
    let Some(sandbox) = generate_sandbox(
        "  maxTurns: 4\n  timeout: 6s\n  killGrace: 500ms\n",
        Script::new([Reply::text("too late").with_delay_ms(600_000)]),
    ) else {
        return;
    };
    run_expecting(&sandbox, "timed-out", 5);
    let process = sandbox.attempt_json("requirements", 1, "process.json");
    assert_eq!(process["timedOut"], true);
    let pid = process["pid"].as_u64().unwrap() as u32;
    assert!(!crate::common::process_alive(pid));
    // The request was made and was still stalled when the agent was stopped (the
    // timeout leaves a loaded machine ample time to start the CLI).
    assert_eq!(sandbox.model_requests().len(), 1);
}

#[test]
fn spending_past_the_budget_is_budget_exceeded() {
    // Each turn reports a million input tokens: dollars at any model's price.
    let Some(sandbox) = Sandbox::new(|root| {
        Script::new([
            Reply::tool_use("Read", json!({"file_path": root.join("README.md")}))
                .with_usage(1_000_000, 1_000)
                .forever(),
        ])
    }) else {
        return;
    };
    sandbox
        .ctx
        .write("prompts/requirements.md", "Read a lot.\n");
    sandbox.write_pipeline("  maxTurns: 6\n  maxBudgetUsd: 0.5\n", STAGE);

    run_expecting(&sandbox, "budget-exceeded", 4);
    let result = sandbox.attempt_json("requirements", 1, "result.json");
    assert_eq!(result["subtype"], "error_max_budget_usd");
    assert!(result["totalCostUsd"].as_f64().unwrap() > 0.5, "{result:#}");
    // `--max-budget-usd` stopped the run before the turn limit.
    assert!(sandbox.model_requests().len() < 6);
}

#[test]
fn doctor_reads_the_real_help_and_auth_status() {
    let Some(sandbox) = Sandbox::new(|_| Script::new([])) else {
        return;
    };
    let claude = sandbox.claude.display().to_string();
    let out = sandbox.run(&[
        "runner",
        "doctor",
        "claude-code",
        "--command",
        &claude,
        "--json",
    ]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let report: Value = serde_json::from_str(&out.stdout).expect("doctor JSON");
    assert_eq!(report["status"], "available", "{report:#}");
    assert_eq!(report["version"], super::harness::CLAUDE_VERSION);
    assert_eq!(report["auth"], "authenticated", "{report:#}");
    assert_eq!(report["missing"], json!([]), "{report:#}");
    // Every optional flag specbridge knows is in the pinned version's help.
    assert_eq!(report["degraded"], json!([]), "{report:#}");
    // Detection never talks to the model.
    assert_eq!(sandbox.model_requests().len(), 0);
}

#[test]
fn not_logged_in_ends_the_first_invocation_runner_unavailable() {
    // Detection does not ask `auth status` before a run: the invocation itself
    // fails unauthenticated, without a model request, and the run exits 3.
    let Some(sandbox) = generate_sandbox("  maxTurns: 4\n", Script::new([Reply::text("unused")]))
    else {
        return;
    };
    let mut cmd = sandbox.command();
    cmd.env_remove("ANTHROPIC_API_KEY").arg("run");
    let out = sandbox.run_command(cmd);
    assert_eq!(out.code, 3, "{}", out.snapshot());
    assert!(
        out.stderr.contains("the runner is not authenticated"),
        "{}",
        out.snapshot()
    );
    assert_eq!(sandbox.model_requests().len(), 0);
    assert_eq!(sandbox.changed_paths(), Vec::<String>::new());
}

#[test]
fn a_large_document_comes_back_whole() {
    // About 0.9 MB of Markdown. The CLI's result line carries it twice
    // (`result` and `structured_output`): a line of about 1.8 MB.
    let line = "- The tool counts words in every file it is given, and says so. \u{00e9}\n";
    let markdown = format!("# Requirements\n\n{}", line.repeat(900_000 / line.len()));
    let Some(sandbox) = generate_sandbox(
        "  maxTurns: 4\n",
        Script::new([Reply::structured_output(
            json!({"summary": "Many requirements.", "markdown": markdown}),
        )
        .repeated(2)]),
    ) else {
        return;
    };
    run_expecting(&sandbox, "succeeded", 0);
    assert_eq!(sandbox.ctx.read("docs/requirements.md"), markdown);
    let longest = raw_stdout(&sandbox).lines().map(str::len).max().unwrap();
    assert!(
        longest > 2 * markdown.len(),
        "the longest line: {longest} bytes"
    );

    // Under a stdout limit it does not fit in, the stage says which limit.
    std::fs::remove_dir_all(sandbox.ctx.path(".specbridge/runs")).unwrap();
    std::fs::remove_file(sandbox.ctx.path("docs/requirements.md")).unwrap();
    sandbox.write_pipeline("  maxTurns: 4\n  maxStdoutBytes: 1MiB\n", STAGE);
    let stage = run_expecting(&sandbox, "failed", 4);
    assert_eq!(
        stage["outcome"],
        "stdout passed its limit (maxStdoutBytes: 1MiB); the process was stopped and its output kept unparsed",
        "{stage:#}"
    );
}
