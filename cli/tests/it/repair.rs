//! From red to green: a stage that did not pass its gate blocks what depends on
//! it, and a user gets to a green run by fixing the code by hand (`resume
//! --reverify`), by letting the agent try again with what went wrong
//! (`attempt.previous`), or by asking for a rerun (`--rerun`) — never paying
//! again for what passed. The run budget holds over every resume.

use serde_json::Value;

use crate::common::{read_json, reused_by_last_resume, TestContext};

const RUNNER: &str = "  timeout: 20s\n  killGrace: 300ms\n";

/// spec → implement (execute, verified by a marker) → after (a check).
const SPEC_IMPLEMENT_AFTER: &str = "  - id: spec
    kind: generate
    prompt: prompts/spec.md
    output: { schema: builtin:document }
  - id: implement
    kind: execute
    needs: [spec]
    prompt: prompts/implement.md
    verification:
      - { name: feature done, argv: [sh, -c, \"echo checking-marker-42 >&2; grep -q done feature.txt\"] }
  - id: after
    kind: check
    needs: [implement]
    argv: [echo, after]
";

fn stage(ctx: &TestContext, id: &str) -> Value {
    read_json(&ctx.only_run_dir().join(format!("stages/{id}/stage.json")))
}

/// A repository whose implement stage writes `feature.txt=wip` first (its
/// verification fails) and then, if asked again, `feature.txt=done`.
fn red_run() -> TestContext {
    let ctx = TestContext::with_claude_script(
        r#"[
            {"match": "Write the spec", "scenario": "success"},
            {"match": "Implement the feature", "scenario": "write-file", "write": "feature.txt=wip"},
            {"match": "Implement the feature", "scenario": "write-file", "write": "feature.txt=done"}
        ]"#,
    );
    ctx.write("prompts/spec.md", "Write the spec.\n");
    ctx.write("prompts/implement.md", "Implement the feature.\n");
    ctx.write_agent_pipeline(RUNNER, SPEC_IMPLEMENT_AFTER);

    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 1, "verification failed: {}", out.snapshot());
    assert!(
        out.stdout.contains("failed (exit 1)"),
        "never `succeeded`: {}",
        out.stdout
    );
    let implement = stage(&ctx, "implement");
    assert_eq!(implement["status"], "unverified", "{implement:#}");
    assert_eq!(implement["evidenceStatus"], "implemented-unverified");
    let after = stage(&ctx, "after");
    assert_eq!(after["status"], "blocked", "{after:#}");
    let why = after["outcome"].as_str().unwrap();
    assert!(why.contains("blocked by `implement` (unverified"), "{why}");
    assert!(
        !ctx.only_run_dir().join("stages/after/attempt-001").exists(),
        "nothing builds on work that did not pass its gate"
    );
    let run = read_json(&ctx.only_run_dir().join("run.json"));
    assert_eq!(run["status"], "failed");
    assert_eq!(run["exitCode"], 1);
    let list: Value = serde_json::from_str(&ctx.run(&["runs", "list", "--json"]).stdout).unwrap();
    assert_eq!(list[0]["status"], "failed");
    assert_eq!(list[0]["stagesSucceeded"], 1, "{list:#}");
    let json: Value =
        serde_json::from_str(&ctx.run(&["runs", "show", "latest", "--json"]).stdout).unwrap();
    let ids: Vec<&str> = json["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stageId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["spec", "implement", "after"], "plan order");
    assert_eq!(ctx.fake_agent_runs().len(), 2);
    ctx
}

#[test]
fn a_hand_fix_is_accepted_by_reverify_without_an_agent() {
    let ctx = red_run();
    ctx.write("feature.txt", "done\n");
    // An uncommitted change that is not the run's is refused, as under `run`.
    let out = ctx.run(&["resume", "latest", "--reverify"]);
    assert_eq!(out.code, 2, "{}", out.snapshot());
    assert!(out.stderr.contains("--allow-dirty"), "{}", out.stderr);
    ctx.git(&["add", "feature.txt"]);
    ctx.git(&["commit", "-q", "-m", "fix by hand"]);

    let out = ctx.run(&["resume", "latest", "--reverify"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_eq!(ctx.fake_agent_runs().len(), 2, "no agent was spawned");
    let implement = stage(&ctx, "implement");
    assert_eq!(implement["status"], "succeeded", "{implement:#}");
    assert_eq!(implement["evidenceStatus"], "verified");
    assert_eq!(implement["attempts"], 2);
    let attempt = ctx.only_run_dir().join("stages/implement/attempt-002");
    assert!(
        !attempt.join("process.json").exists(),
        "nothing was invoked"
    );
    let changed = read_json(&attempt.join("changed-files.json"));
    assert_eq!(changed["attributedTo"], "human", "{changed:#}");
    assert!(
        changed["modified"]
            .as_array()
            .unwrap()
            .contains(&Value::from("feature.txt")),
        "{changed:#}"
    );
    let evidence = read_json(&attempt.join("evidence.json"));
    assert_eq!(evidence["kind"], "reverify");
    assert_eq!(evidence["status"], "verified");
    assert_eq!(stage(&ctx, "after")["status"], "succeeded");
    assert!(reused_by_last_resume(&ctx, "spec"));
    let run = read_json(&ctx.only_run_dir().join("run.json"));
    assert_eq!(run["status"], "succeeded");
    assert_eq!(run["totals"]["invocations"], 2, "nothing was billed again");
    let audit = ctx.run(&["runs", "audit", "latest"]);
    assert_eq!(audit.code, 0, "{}", audit.snapshot());
}

#[test]
fn plain_resume_reruns_only_the_unverified_stage_and_tells_it_why() {
    let ctx = red_run();
    let first_hash = stage(&ctx, "implement")["inputHash"].clone();
    let out = ctx.run(&["resume", "latest", "--dry-run", "--json"]);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let decided: Vec<(String, String)> = v["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["stage"].as_str().unwrap().to_string(),
                d["action"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        decided,
        [
            ("spec".to_string(), "reuse".to_string()),
            ("implement".to_string(), "rerun".to_string()),
            ("after".to_string(), "rerun".to_string())
        ]
    );

    let out = ctx.run(&["resume", "latest"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let runs = ctx.fake_agent_runs();
    assert_eq!(runs.len(), 3, "only implement ran again");
    let prompt = &runs[2].stdin;
    assert!(prompt.starts_with("Implement the feature.\n"), "{prompt}");
    assert!(prompt.contains("## Previous attempt"), "{prompt}");
    assert!(prompt.contains("ended `unverified`"), "{prompt}");
    assert!(prompt.contains("feature done"), "{prompt}");
    assert!(prompt.contains("exited 1"), "{prompt}");
    assert!(
        prompt.contains("checking-marker-42"),
        "the output tail: {prompt}"
    );
    let recorded = std::fs::read_to_string(
        ctx.only_run_dir()
            .join("stages/implement/attempt-002/prompt.md"),
    )
    .unwrap();
    assert_eq!(&recorded, prompt, "prompt.md is what was sent");
    let implement = stage(&ctx, "implement");
    assert_eq!(implement["status"], "succeeded", "{implement:#}");
    assert_eq!(
        implement["inputHash"], first_hash,
        "what went wrong is not part of the input hash"
    );
    assert!(reused_by_last_resume(&ctx, "spec"));
    assert_eq!(stage(&ctx, "after")["status"], "succeeded");
    assert_eq!(ctx.run(&["runs", "audit", "latest"]).code, 0);
}

#[test]
fn a_template_that_uses_attempt_previous_gets_no_default_section() {
    let ctx = TestContext::with_claude_script(
        r#"[
            {"match": "Implement", "scenario": "write-file", "write": "feature.txt=wip"},
            {"match": "Implement", "scenario": "write-file", "write": "feature.txt=done"}
        ]"#,
    );
    ctx.write(
        "prompts/implement.md",
        "Implement.\n{% if attempt.previous %}Last time: {{ attempt.previous.status }}, {{ attempt.previous.verification[0].command }} exited {{ attempt.previous.verification[0].exitCode }}.\n{% endif %}",
    );
    ctx.write_agent_pipeline(
        RUNNER,
        "  - id: implement
    kind: execute
    prompt: prompts/implement.md
    verification:
      - { name: done, argv: [grep, -q, done, feature.txt] }
",
    );
    assert_eq!(ctx.run(&["run"]).code, 1);
    assert_eq!(ctx.fake_agent_runs()[0].stdin, "Implement.\n");
    let out = ctx.run(&["resume", "latest"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let sent = &ctx.fake_agent_runs()[1].stdin;
    assert_eq!(
        sent, "Implement.\nLast time: unverified, grep -q done feature.txt exited 1.\n",
        "{sent}"
    );
}

/// Four checks appending to a log outside the repository: each opens that one
/// folder for writing (checks are confined otherwise).
/// A finished run of [`chain`], its stages logging to the returned file.
fn chain_run() -> (TestContext, std::path::PathBuf) {
    let mut ctx = TestContext::with_fake_claude("success");
    let log = ctx.aux_path("log");
    ctx.set_env("LOG", &log.display().to_string());
    ctx.write("specbridge.yaml", &chain(log.parent().unwrap()));
    assert_eq!(ctx.run(&["run"]).code, 0);
    (ctx, log)
}

fn chain(log_dir: &std::path::Path) -> String {
    let open = format!("sandbox: {{ writable: [\"{}\"] }}", log_dir.display());
    format!(
        "version: 1
name: chain
concurrency: 1
stages:
  - {{ id: a, kind: check, argv: [sh, -c, \"echo a >> $LOG\"], {open} }}
  - {{ id: b, kind: check, needs: [a], argv: [sh, -c, \"echo b >> $LOG\"], {open} }}
  - {{ id: c, kind: check, needs: [b], argv: [sh, -c, \"echo c >> $LOG\"], {open} }}
  - {{ id: d, kind: check, needs: [a], argv: [sh, -c, \"echo d >> $LOG\"], {open} }}
"
    )
}

#[test]
fn rerun_of_a_middle_stage_reruns_it_and_its_dependents_only() {
    let (ctx, log) = chain_run();
    let unknown = ctx.run(&["resume", "latest", "--rerun", "bb"]);
    assert_eq!(unknown.code, 2, "{}", unknown.snapshot());
    assert!(unknown.stderr.contains("--rerun bb"), "{}", unknown.stderr);

    let out = ctx.run(&["resume", "latest", "--rerun", "b"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let ran = std::fs::read_to_string(&log).unwrap();
    assert_eq!(ran, "a\nb\nc\nd\nb\nc\n", "b and c again, a and d not");
    for (id, attempts, reused) in [
        ("a", 1, true),
        ("b", 2, false),
        ("c", 2, false),
        ("d", 1, true),
    ] {
        let s = stage(&ctx, id);
        assert_eq!(s["attempts"], attempts, "{id}: {s:#}");
        assert_eq!(reused_by_last_resume(&ctx, id), reused, "{id}: {s:#}");
    }
    let run = read_json(&ctx.only_run_dir().join("run.json"));
    let decisions = &run["resumes"][0]["decisions"];
    assert!(
        decisions.to_string().contains("\"detail\":\"needs `b`\""),
        "{decisions:#}"
    );
    assert_eq!(ctx.run(&["runs", "audit", "latest"]).code, 0);
}

/// The `stage.json` of every stage of the only run, by file name.
fn stage_records(ctx: &TestContext) -> Vec<(String, Vec<u8>)> {
    ["a", "b", "c", "d"]
        .iter()
        .map(|id| {
            let path = ctx.only_run_dir().join(format!("stages/{id}/stage.json"));
            (id.to_string(), std::fs::read(path).unwrap())
        })
        .collect()
}

#[test]
fn a_resume_with_nothing_to_redo_rewrites_no_stage_record_and_later_resumes_still_work() {
    let (ctx, log) = chain_run();
    let before = stage_records(&ctx);

    let out = ctx.run(&["resume", "latest"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert!(
        out.stdout.contains("resume: 4 reused, 0 run again"),
        "{}",
        out.stdout
    );
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "a\nb\nc\nd\n");
    assert_eq!(stage_records(&ctx), before, "every record left as it was");
    for id in ["a", "b", "c", "d"] {
        assert!(reused_by_last_resume(&ctx, id), "{id}");
    }
    let run = read_json(&ctx.only_run_dir().join("run.json"));
    assert_eq!(run["status"], "succeeded");
    assert_eq!(run["stageCounts"]["succeeded"], 4, "{run:#}");
    assert_eq!(ctx.run(&["runs", "audit", "latest"]).code, 0);

    // A reused record is still held to what was announced for it.
    let rec = ctx.only_run_dir().join("stages/d/stage.json");
    let kept = std::fs::read(&rec).unwrap();
    let forged = String::from_utf8(kept.clone())
        .unwrap()
        .replace("\"attempts\": 1", "\"attempts\": 2");
    assert_ne!(forged.as_bytes(), kept.as_slice());
    std::fs::write(&rec, forged).unwrap();
    let out = ctx.run(&["resume", "latest"]);
    assert_eq!(out.code, 6, "{}", out.snapshot());
    std::fs::write(&rec, kept).unwrap();

    // Later resumes decide from the records as they were left.
    let out = ctx.run(&["resume", "latest", "--rerun", "b"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "a\nb\nc\nd\nb\nc\n");
    assert_eq!(stage(&ctx, "b")["attempts"], 2);
    assert!(reused_by_last_resume(&ctx, "a"));
    assert!(!reused_by_last_resume(&ctx, "c"));
    let out = ctx.run(&["resume", "latest"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert!(
        out.stdout.contains("resume: 4 reused, 0 run again"),
        "{}",
        out.stdout
    );
    assert_eq!(stage(&ctx, "c")["attempts"], 2);
    assert_eq!(ctx.run(&["runs", "audit", "latest"]).code, 0);
}

#[test]
fn the_run_budget_holds_across_resumes() {
    let mut ctx = TestContext::with_fake_claude("success");
    ctx.set_env("FAKE_CLAUDE_COST", "0.3");
    for p in ["a", "b", "c"] {
        ctx.write(&format!("prompts/{p}.md"), &format!("{p}\n"));
    }
    ctx.write_agent_pipeline(
        &format!("{RUNNER}budget:\n  maxBudgetUsd: 0.5\nconcurrency: 1\n"),
        "  - { id: a, kind: generate, prompt: prompts/a.md, output: { schema: builtin:document } }
  - { id: b, kind: generate, needs: [a], prompt: prompts/b.md, output: { schema: builtin:document } }
  - { id: c, kind: generate, needs: [b], prompt: prompts/c.md, output: { schema: builtin:document } }
",
    );
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 4, "{}", out.snapshot());
    assert_eq!(ctx.fake_agent_runs().len(), 2);
    assert_eq!(stage(&ctx, "c")["status"], "budget-exceeded");

    // A resume does not get a fresh budget: $0.60 of $0.50 is already spent.
    let out = ctx.run(&["resume", "latest"]);
    assert_eq!(out.code, 4, "{}", out.snapshot());
    assert_eq!(
        ctx.fake_agent_runs().len(),
        2,
        "nothing started past the budget"
    );
    let c = stage(&ctx, "c");
    assert_eq!(c["status"], "budget-exceeded");
    assert!(
        c["outcome"].as_str().unwrap().contains("--run-budget-usd"),
        "{c:#}"
    );
    let out = ctx.run(&["resume", "latest"]);
    assert_eq!(out.code, 4, "a second resume neither: {}", out.snapshot());
    assert_eq!(ctx.fake_agent_runs().len(), 2);

    let out = ctx.run(&["resume", "latest", "--run-budget-usd", "2"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_eq!(ctx.fake_agent_runs().len(), 3, "only c ran");
    let run = read_json(&ctx.only_run_dir().join("run.json"));
    let spent = run["totals"]["costUsd"].as_f64().unwrap();
    assert!((spent - 0.9).abs() < 1e-9, "{spent}");
    assert_eq!(run["totals"]["invocations"], 3);
}
