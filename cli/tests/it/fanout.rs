//! forEach fan-out, the run budget and the run-level overrides, end to end against
//! the fake Claude Code CLI.

use serde_json::{json, Value};

use crate::common::{graph_statuses, read_json, TestContext};

const QUICK_RUNNER: &str = "  timeout: 20s
  killGrace: 300ms
";

fn task(id: &str, depends_on: &[&str]) -> Value {
    json!({
        "id": id,
        "title": format!("title of {id}"),
        "details": format!("details of {id}"),
        "dependsOn": depends_on,
        "requirements": [],
    })
}

/// A plan stage and an execute stage fanned out over its tasks; `plan_schema` is
/// the plan's output schema.
fn fanout_ctx(script: &Value, plan_schema: &str) -> TestContext {
    let mut ctx = TestContext::with_fake_claude("success");
    let path = ctx.aux_path("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    ctx.set_env("FAKE_CLAUDE_SCRIPT", &path.display().to_string());
    ctx.write("prompts/plan.md", "PLAN the work.\n");
    ctx.write(
        "prompts/implement.md",
        "TASK {{ item.id }}: {{ item.title }}\n{{ item.details }}\n",
    );
    ctx.write(
        "schemas/loose-plan.json",
        r#"{"type": "object", "required": ["tasks"], "properties": {"tasks": {"type": "array"}}}"#,
    );
    ctx.write_agent_pipeline(
        QUICK_RUNNER,
        &format!(
            "  - id: plan
    kind: generate
    prompt: prompts/plan.md
    output: {{ schema: {plan_schema} }}
  - id: implement
    kind: execute
    needs: [plan]
    forEach: {{ stage: plan, items: /tasks }}
    prompt: prompts/implement.md
    verification:
      - {{ name: tree, argv: [git, diff, --quiet, HEAD, --, specbridge.yaml] }}
"
        ),
    );
    ctx
}

#[test]
fn three_tasks_run_in_dependency_order_and_the_expansion_is_recorded() {
    let plan = json!({
        "summary": "three tasks",
        "markdown": "# Tasks",
        "tasks": [task("t1", &[]), task("t2", &[]), task("t3", &["t1"])],
    });
    let script = json!([
        {"match": "PLAN", "output": plan},
        {"match": "TASK t1:", "scenario": "write-file", "write": "t1.txt=one"},
        {"match": "TASK t2:", "scenario": "write-file", "write": "t2.txt=two"},
        {"match": "TASK t3:", "scenario": "write-file", "write": "t3.txt=three"},
    ]);
    let ctx = fanout_ctx(&script, "builtin:tasks");
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let run = ctx.only_run_dir();

    // Each instance got its own item in its prompt, and its own evidence.
    let order: Vec<String> = ctx
        .fake_agent_runs()
        .iter()
        .map(|r| r.stdin.lines().next().unwrap_or_default().to_string())
        .collect();
    let pos = |needle: &str| {
        order
            .iter()
            .position(|l| l.starts_with(needle))
            .unwrap_or_else(|| panic!("{needle} never ran: {order:?}"))
    };
    assert!(pos("TASK t1:") < pos("TASK t3:"), "{order:?}");
    assert_eq!(pos("PLAN"), 0);
    for id in ["t1", "t2", "t3"] {
        let prompt = std::fs::read_to_string(
            run.join(format!("stages/implement.{id}/attempt-001/prompt.md")),
        )
        .unwrap();
        assert_eq!(
            prompt,
            format!("TASK {id}: title of {id}\ndetails of {id}\n")
        );
        let stage = read_json(&run.join(format!("stages/implement.{id}/stage.json")));
        assert_eq!(stage["status"], "succeeded", "{stage:#}");
        assert_eq!(stage["evidenceStatus"], "verified", "{stage:#}");
        let changed = read_json(&run.join(format!(
            "stages/implement.{id}/attempt-001/changed-files.json"
        )));
        // Earlier instances' files are this run's, not this instance's.
        assert_eq!(
            changed["added"],
            json!([format!("{id}.txt")]),
            "{changed:#}"
        );
    }
    let t3 = read_json(&run.join("stages/implement.t3/stage.json"));
    assert!(
        t3["needs"]
            .as_array()
            .unwrap()
            .contains(&json!("implement.t1")),
        "{t3:#}"
    );

    let plan_json = read_json(&run.join("plan.json"));
    let expansion = &plan_json["expansions"][0];
    assert_eq!(expansion["stage"], "implement");
    assert_eq!(expansion["source"], "plan");
    assert_eq!(
        expansion["instances"],
        json!(["implement.t1", "implement.t2", "implement.t3"])
    );
    let graph = ctx.run(&["graph", "--run", "latest", "--format", "json"]);
    let statuses = graph_statuses(&graph.stdout);
    assert!(
        statuses.contains(&("implement.t3".to_string(), "succeeded".to_string())),
        "{statuses:?}"
    );
    let audit = ctx.run(&["runs", "audit", "latest"]);
    assert_eq!(audit.code, 0, "{}", audit.snapshot());
}

#[test]
fn an_unsafe_item_id_fails_the_stage_that_produced_it() {
    let plan = json!({
        "summary": "bad",
        "markdown": "# Tasks",
        "tasks": [task("t1", &[]), task("../x", &[])],
    });
    let script = json!([{"match": "PLAN", "output": plan}]);
    let ctx = fanout_ctx(&script, "schemas/loose-plan.json");
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 4, "{}", out.snapshot());
    let run = ctx.only_run_dir();
    let plan_stage = read_json(&run.join("stages/plan/stage.json"));
    assert_eq!(plan_stage["status"], "failed");
    assert_eq!(
        plan_stage["outcome"],
        "fan-out of `implement`: item 1 of `plan/tasks` has the unsafe id `../x`: ids must be [A-Za-z0-9._-], not start with a dot, and not contain `..`"
    );
    assert!(!run.join("stages/plan/output.json").exists());
    assert_eq!(ctx.fake_agent_runs().len(), 1, "no instance ran");
    let implement = read_json(&run.join("stages/implement/stage.json"));
    assert_eq!(implement["status"], "blocked", "{implement:#}");
}

#[test]
fn the_run_budget_stops_the_next_invocation() {
    let mut ctx = TestContext::with_fake_claude("success");
    ctx.set_env("FAKE_CLAUDE_COST", "0.75");
    ctx.write("prompts/a.md", "A\n");
    ctx.write("prompts/b.md", "B\n");
    ctx.write_agent_pipeline(
        &format!("{QUICK_RUNNER}budget:\n  maxBudgetUsd: 0.5\n"),
        "  - id: a
    kind: generate
    prompt: prompts/a.md
    output: { schema: builtin:document }
  - id: b
    kind: generate
    needs: [a]
    prompt: prompts/b.md
    output: { schema: builtin:document }
",
    );
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 4, "{}", out.snapshot());
    assert_eq!(ctx.fake_agent_runs().len(), 1, "b was started");
    let run = ctx.only_run_dir();
    let b = read_json(&run.join("stages/b/stage.json"));
    assert_eq!(b["status"], "budget-exceeded", "{b:#}");
    assert_eq!(b["attempts"], 0, "{b:#}");
    let run_json = read_json(&run.join("run.json"));
    assert_eq!(run_json["totals"]["costUsd"], 0.75);
    assert_eq!(run_json["totals"]["invocations"], 1);
}

#[test]
fn run_flags_override_the_file_and_are_recorded() {
    let ctx = TestContext::with_fake_claude("success");
    ctx.write("prompts/a.md", "A\n");
    ctx.write_agent_pipeline(
        QUICK_RUNNER,
        "  - id: a
    kind: generate
    prompt: prompts/a.md
    output: { schema: builtin:document }
",
    );
    let out = ctx.run(&[
        "run",
        "--max-turns",
        "7",
        "--max-budget-usd",
        "0.25",
        "--timeout",
        "45s",
        "--model",
        "opus",
    ]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let argv = &ctx.fake_agent_runs()[0].argv;
    let value = |flag: &str| {
        let i = argv
            .iter()
            .position(|a| a == flag)
            .unwrap_or_else(|| panic!("{flag} missing: {argv:?}"));
        argv[i + 1].clone()
    };
    assert_eq!(value("--max-turns"), "7");
    assert_eq!(value("--max-budget-usd"), "0.25");
    assert_eq!(value("--model"), "opus");
    let run = ctx.only_run_dir();
    let run_json = read_json(&run.join("run.json"));
    let overrides = &run_json["options"]["overrides"];
    assert_eq!(overrides["maxTurns"], 7, "{overrides:#}");
    assert_eq!(overrides["model"], "opus", "{overrides:#}");
    assert!(
        overrides["timeout"].is_string() || overrides["timeout"].is_number(),
        "{overrides:#}"
    );
    let request = read_json(&run.join("stages/a/attempt-001/request.json"));
    assert_eq!(request["maxTurns"], 7);
    assert_eq!(request["model"], "opus");
}

#[test]
fn a_dry_run_lists_a_fanned_out_stage_once_as_one_per_item() {
    let ctx = fanout_ctx(&json!([]), "builtin:tasks");
    let out = ctx.run(&["run", "--dry-run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let headings: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| !l.starts_with("    "))
        .collect();
    assert_eq!(
        headings,
        [
            "dry run: nothing will be spawned",
            "plan [generate]",
            "implement [execute, one per item] (needs plan)",
        ],
        "{}",
        out.stdout
    );
    assert!(ctx.fake_agent_runs().is_empty(), "a dry run spawns nothing");
}
