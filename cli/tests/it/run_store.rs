//! The run store (`.specbridge/` outside the run's own folder) compared around
//! every agent attempt: a change there is a safety violation of the attempt that
//! made it, and of no other (`stages/src/store_check.rs`).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::{read_json, write_fake_wrapper, TestContext};

const RUNNER: &str = "  timeout: 20s
  killGrace: 300ms
";

const ONE_STAGE: &str = "  - id: notes
    kind: generate
    prompt: prompts/notes.md
    output: { schema: builtin:document, document: docs/notes.md }
";

/// A generate stage `id` needing `need`, its prompt `prompts/<id>.md`.
fn generate_after(id: &str, need: &str) -> String {
    format!(
        "  - id: {id}
    kind: generate
    needs: [{need}]
    prompt: prompts/{id}.md
    output: {{ schema: builtin:document, document: docs/{id}.md }}
"
    )
}

fn run_dirs(ctx: &TestContext) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(ctx.path(".specbridge/runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn evidence(run: &Path, stage: &str) -> Value {
    read_json(&run.join(format!("stages/{stage}/attempt-001/evidence.json")))
}

/// The `.specbridge/…` paths an attempt's evidence names as run-store changes.
fn store_violations(ev: &Value) -> Vec<String> {
    ev["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["kind"] == "protected-path-changed" && v["rule"] == ".specbridge")
        .map(|v| v["path"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn an_agent_editing_an_earlier_runs_record_in_place_is_a_safety_violation() {
    let mut ctx = TestContext::with_fake_claude("success");
    ctx.write("prompts/notes.md", "Write the notes.\n");
    ctx.write_agent_pipeline(RUNNER, ONE_STAGE);
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let earlier = run_dirs(&ctx).pop().unwrap();
    let id = earlier.file_name().unwrap().to_string_lossy().into_owned();
    let before = std::fs::read(earlier.join("run.json")).unwrap();

    // The record an auditor reads first, appended to where it lies.
    let target = format!(".specbridge/runs/{id}/run.json");
    ctx.set_env("FAKE_CLAUDE_SCENARIO", "touch-protected");
    ctx.set_env("FAKE_CLAUDE_PROTECTED", &target);
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 6, "{}", out.snapshot());
    assert_ne!(std::fs::read(earlier.join("run.json")).unwrap(), before);
    let second = run_dirs(&ctx)
        .into_iter()
        .find(|d| *d != earlier)
        .expect("a second run");
    let stage = read_json(&second.join("stages/notes/stage.json"));
    assert_eq!(stage["status"], "safety-violation", "{stage:#}");
    assert_eq!(store_violations(&evidence(&second, "notes")), vec![target]);
}

#[test]
fn of_consecutive_agent_stages_only_the_one_that_touched_the_store_is_blamed() {
    // The second stage's "before" is the first one's "after", taken once.
    let mut ctx = TestContext::with_claude_script(
        r#"[
            {"match": "Write the notes", "scenario": "success"},
            {"match": "Write the summary", "scenario": "touch-protected"},
            {"match": "Write the tail", "scenario": "success"}
        ]"#,
    );
    ctx.set_env("FAKE_CLAUDE_PROTECTED", ".specbridge/notes.txt");
    ctx.write("prompts/notes.md", "Write the notes.\n");
    ctx.write("prompts/summary.md", "Write the summary.\n");
    ctx.write("prompts/tail.md", "Write the tail.\n");
    ctx.write_agent_pipeline(
        RUNNER,
        &format!(
            "{ONE_STAGE}{}{}",
            generate_after("summary", "notes"),
            generate_after("tail", "notes")
        ),
    );
    let out = ctx.run(&["run", "--concurrency", "1"]);
    assert_eq!(out.code, 6, "{}", out.snapshot());
    let run = ctx.only_run_dir();
    assert!(store_violations(&evidence(&run, "notes")).is_empty());
    assert_eq!(
        store_violations(&evidence(&run, "summary")),
        vec![".specbridge/notes.txt"]
    );
    // The stage after the one that changed the store (ids start in order) starts
    // from the store as that stage left it: the change is not blamed twice.
    let tail = read_json(&run.join("stages/tail/stage.json"));
    assert_eq!(tail["status"], "succeeded", "{tail:#}");
    assert!(store_violations(&evidence(&run, "tail")).is_empty());
}

#[test]
fn a_command_between_agent_stages_that_writes_the_store_is_not_blamed_on_the_next_agent() {
    // An unconfined check may write under `.specbridge/`: it is the user's own
    // command, and the agent after it did not make the change.
    let ctx = TestContext::with_fake_claude("success");
    ctx.write("prompts/notes.md", "Write the notes.\n");
    ctx.write("prompts/summary.md", "Write the summary.\n");
    ctx.write_agent_pipeline(
        RUNNER,
        &format!(
            "{ONE_STAGE}  - id: tidy
    kind: check
    needs: [notes]
    sandbox: off
    argv: [sh, -c, 'echo kept > .specbridge/notes.txt']
{}",
            generate_after("summary", "tidy")
        ),
    );
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_eq!(ctx.read(".specbridge/notes.txt"), "kept\n");
    let run = ctx.only_run_dir();
    assert!(store_violations(&evidence(&run, "summary")).is_empty());
}

#[test]
fn a_run_working_beside_the_agent_in_the_same_repository_is_not_blamed_on_it() {
    // Run `b` (checks only, no working-tree lock) waits in a check until run `a`'s
    // agent has started, then ends and writes its records while that agent works.
    let ctx = TestContext::with_fake_claude("success");
    let started = ctx.aux_path("agent-started");
    let agent = ctx.aux_path("slow-claude");
    write_fake_wrapper(&agent, &format!("touch '{}'; sleep 1", started.display()));
    ctx.write("prompts/notes.md", "Write the notes.\n");
    ctx.write(
        "a.yaml",
        &format!(
            "version: 1\nname: a\nrunner:\n  command: {}\n{RUNNER}stages:\n{ONE_STAGE}",
            agent.display()
        ),
    );
    ctx.write(
        "b.yaml",
        &format!(
            "version: 1\nname: b\nstages:
  - id: wait
    kind: check
    sandbox: off
    argv: [sh, -c, 'while [ ! -e {} ]; do sleep 0.02; done']
  - {{ id: after, kind: check, needs: [wait], argv: ['true'] }}
",
            started.display()
        ),
    );
    ctx.commit_all("two pipelines");

    let mut b = ctx
        .command()
        .args(["run", "-f", "b.yaml"])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(ctx.aux_path("b-stderr")).unwrap())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !ctx.path(".specbridge/runs").is_dir()
        || std::fs::read_dir(ctx.path(".specbridge/runs"))
            .unwrap()
            .count()
            == 0
    {
        assert!(std::time::Instant::now() < deadline, "run b never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = ctx.run(&["run", "-f", "a.yaml"]);
    assert_eq!(
        b.wait().unwrap().code(),
        Some(0),
        "run b failed: {}",
        std::fs::read_to_string(ctx.aux_path("b-stderr")).unwrap_or_default()
    );
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let a = run_dirs(&ctx)
        .into_iter()
        .find(|d| d.join("stages/notes").is_dir())
        .expect("run a");
    assert!(store_violations(&evidence(&a, "notes")).is_empty());
}

#[test]
fn an_agent_removing_an_earlier_run_or_changing_a_records_mode_is_found_whenever_it_acts() {
    // The "before" of a run's first agent attempt is walked beside the agent: the
    // agent may act before that walk or after it, and either way it is found.
    let mut ctx = TestContext::with_fake_claude("success");
    ctx.write("prompts/notes.md", "Write the notes.\n");
    ctx.write_agent_pipeline(RUNNER, ONE_STAGE);
    for _ in 0..2 {
        let out = ctx.run(&["run"]);
        assert_eq!(out.code, 0, "{}", out.snapshot());
    }
    let earlier = run_dirs(&ctx);
    let id = |d: &PathBuf| d.file_name().unwrap().to_string_lossy().into_owned();
    let (gone, kept) = (id(&earlier[0]), id(&earlier[1]));
    ctx.set_env("FAKE_CLAUDE_SCENARIO", "run-command");
    ctx.set_env(
        "FAKE_CLAUDE_COMMAND",
        &format!("rm -rf .specbridge/runs/{gone} && chmod 600 .specbridge/runs/{kept}/run.json"),
    );
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 6, "{}", out.snapshot());
    assert!(!earlier[0].exists(), "the command ran");
    let third = run_dirs(&ctx)
        .into_iter()
        .find(|d| *d != earlier[1])
        .expect("a third run");
    let found = store_violations(&evidence(&third, "notes"));
    for path in [
        format!(".specbridge/runs/{gone}"),
        format!(".specbridge/runs/{kept}/run.json"),
    ] {
        assert!(found.contains(&path), "{path} not in {found:#?}");
    }
}
