//! Transient API failures (overloaded, rate-limited, 5xx) are retried, each retry
//! its own attempt with its records, up to `runner.retries` and never past the run
//! budget; anything else is never retried.

use serde_json::Value;

use crate::common::{read_json, TestContext};

const STAGE: &str = "  - id: requirements
    kind: generate
    prompt: prompts/requirements.md
    output: { schema: builtin:document, document: docs/requirements.md }
";

fn ctx_with_script(runner: &str, steps: &str) -> TestContext {
    let mut ctx = TestContext::with_fake_claude("success");
    let script = ctx.aux_path("script.json");
    std::fs::write(&script, steps).unwrap();
    ctx.set_env("FAKE_CLAUDE_SCRIPT", &script.display().to_string());
    ctx.write("prompts/requirements.md", "Write the requirements.\n");
    ctx.write_agent_pipeline(runner, STAGE);
    ctx
}

fn ctx_with_scenario(runner: &str, scenario: &str) -> TestContext {
    let ctx = TestContext::with_fake_claude(scenario);
    ctx.write("prompts/requirements.md", "Write the requirements.\n");
    ctx.write_agent_pipeline(runner, STAGE);
    ctx
}

const RUNNER: &str = "  timeout: 20s\n  killGrace: 300ms\n";

fn stage(ctx: &TestContext) -> Value {
    read_json(&ctx.only_run_dir().join("stages/requirements/stage.json"))
}

fn attempts(ctx: &TestContext) -> Vec<String> {
    let dir = ctx.only_run_dir().join("stages/requirements");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("attempt-"))
        .collect();
    names.sort();
    names
}

fn attempt_result(ctx: &TestContext, n: u32) -> Value {
    read_json(
        &ctx.only_run_dir()
            .join(format!("stages/requirements/attempt-{n:03}/result.json")),
    )
}

#[test]
fn a_529_then_success_is_one_retried_attempt_and_the_run_succeeds() {
    let ctx = ctx_with_script(RUNNER, r#"["api-529", "success"]"#);
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_eq!(attempts(&ctx), ["attempt-001", "attempt-002"]);
    assert_eq!(ctx.fake_agent_runs().len(), 2);
    // The first attempt's records are kept, marked transient.
    let first = attempt_result(&ctx, 1);
    assert_eq!(first["outcome"], "failed", "{first:#}");
    assert_eq!(first["apiErrorStatus"], 529);
    assert_eq!(first["transient"], true);
    for name in ["process.json", "raw-stdout.log", "prompt.md"] {
        assert!(ctx
            .only_run_dir()
            .join("stages/requirements/attempt-001")
            .join(name)
            .is_file());
    }
    let second = attempt_result(&ctx, 2);
    assert_eq!(second["outcome"], "succeeded");
    assert!(second.get("transient").is_none(), "{second:#}");
    let stage = stage(&ctx);
    assert_eq!(stage["status"], "succeeded", "{stage:#}");
    assert_eq!(stage["attempts"], 2);
    assert_eq!(stage["transientAttempts"], 1);
    assert!(
        stage["outcome"]
            .as_str()
            .unwrap()
            .contains("1 transient failure"),
        "{stage:#}"
    );
    assert!(ctx.path("docs/requirements.md").is_file());
    let events = std::fs::read_to_string(ctx.only_run_dir().join("events.jsonl")).unwrap();
    assert_eq!(events.matches("\"stage-retrying\"").count(), 1, "{events}");
    let audit = ctx.run(&["runs", "audit", "latest"]);
    assert_eq!(
        audit.code,
        0,
        "a retried run audits clean: {}",
        audit.snapshot()
    );
}

#[test]
fn always_529_gives_retries_plus_one_attempts_then_fails() {
    let ctx = ctx_with_scenario(&format!("{RUNNER}  retries: 3\n"), "api-529");
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 4, "{}", out.snapshot());
    assert_eq!(attempts(&ctx).len(), 4);
    let stage = stage(&ctx);
    assert_eq!(stage["status"], "failed");
    assert_eq!(stage["attempts"], 4);
    assert_eq!(stage["transientAttempts"], 4);
    let outcome = stage["outcome"].as_str().unwrap();
    assert!(outcome.contains("HTTP 529"), "{outcome}");
    assert!(outcome.contains("4 transient failure(s)"), "{outcome}");
}

#[test]
fn the_default_is_two_retries_and_zero_disables_them() {
    let ctx = ctx_with_scenario(RUNNER, "api-500");
    assert_eq!(ctx.run(&["run"]).code, 4);
    assert_eq!(
        attempts(&ctx).len(),
        3,
        "1 + the default runner.retries (2)"
    );

    let ctx = ctx_with_scenario(&format!("{RUNNER}  retries: 0\n"), "api-529");
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 4, "{}", out.snapshot());
    assert_eq!(attempts(&ctx), ["attempt-001"]);
    let stage = stage(&ctx);
    assert!(
        stage["outcome"]
            .as_str()
            .unwrap()
            .contains("runner.retries is 0"),
        "{stage:#}"
    );
}

#[test]
fn non_transient_failures_are_never_retried() {
    for (scenario, status) in [
        ("text-only", "malformed-output"),
        ("max-turns", "max-turns"),
        ("garbage", "failed"),
        ("not-logged-in", "runner-unavailable"),
    ] {
        let ctx = ctx_with_scenario(RUNNER, scenario);
        let out = ctx.run(&["run"]);
        assert_ne!(out.code, 0, "{scenario}: {}", out.snapshot());
        assert_eq!(attempts(&ctx), ["attempt-001"], "{scenario}");
        let stage = stage(&ctx);
        assert_eq!(stage["status"], status, "{scenario}: {stage:#}");
        assert!(stage.get("transientAttempts").is_none(), "{scenario}");
    }
}

#[test]
fn retries_stop_at_the_run_budget() {
    // The first 529 attempt spent more than the whole run budget: no retry.
    let mut ctx = ctx_with_scenario(RUNNER, "api-529");
    ctx.set_env("FAKE_CLAUDE_COST", "0.5");
    let out = ctx.run(&["run", "--run-budget-usd", "0.4"]);
    assert_eq!(out.code, 4, "{}", out.snapshot());
    assert_eq!(attempts(&ctx), ["attempt-001"]);
    let stage = stage(&ctx);
    assert!(
        stage["outcome"]
            .as_str()
            .unwrap()
            .contains("run budget is spent"),
        "{stage:#}"
    );
}

#[test]
fn retries_above_the_limit_are_rejected() {
    let ctx = ctx_with_scenario(&format!("{RUNNER}  retries: 11\n"), "success");
    let out = ctx.run(&["validate"]);
    assert_eq!(out.code, 2, "{}", out.snapshot());
    assert!(out.stderr.contains("retries"), "{}", out.snapshot());
}

#[test]
fn runner_retries_bound_the_whole_run_not_each_resume() {
    let runner = format!("{RUNNER}  retries: 1\n");
    let ctx = ctx_with_script(
        &runner,
        r#"["api-529", "api-529", "api-529", "api-529", "success"]"#,
    );
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 4, "{}", out.snapshot());
    assert_eq!(attempts(&ctx), ["attempt-001", "attempt-002"]);

    // The stage has had its one retry: a resume runs it once more, and a transient
    // failure then is not retried again.
    let out = ctx.run(&["resume", "latest"]);
    assert_eq!(out.code, 4, "{}", out.snapshot());
    assert_eq!(
        attempts(&ctx),
        ["attempt-001", "attempt-002", "attempt-003"]
    );
    assert_eq!(ctx.fake_agent_runs().len(), 3);
    let stage = stage(&ctx);
    assert_eq!(stage["status"], "failed", "{stage:#}");
    assert_eq!(stage["transientAttempts"], 3, "{stage:#}");
    let outcome = stage["outcome"].as_str().unwrap();
    assert!(
        outcome.contains("3 transient failure(s), runner.retries is 1"),
        "{outcome}"
    );

    // A later success says how many transient failures came before it.
    let out = ctx.run(&["resume", "latest"]);
    assert_eq!(out.code, 4, "{}", out.snapshot());
    let out = ctx.run(&["resume", "latest"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let stage = self::stage(&ctx);
    assert_eq!(stage["status"], "succeeded", "{stage:#}");
    assert_eq!(stage["transientAttempts"], 4, "{stage:#}");
    assert_eq!(attempts(&ctx).len(), 5);
}
