//! Crash injection: specbridge aborted (SIGABRT, no cleanup) right after its N-th
//! store write (`SPECBRIDGE_TEST_ABORT_AFTER_WRITES`, docs/testing.md), for every N
//! of a multi-stage run with agent stages and a check that starts beside the
//! batch recording its need's end (`recheck`). Every such run must resume to
//! success without redoing a stage that had passed, and then audit clean.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use serde_json::Value;

use crate::common::{read_json, TestContext};

const PIPELINE: &str = "  - id: spec
    kind: generate
    prompt: prompts/spec.md
    output: { schema: builtin:document }
  - id: design
    kind: generate
    needs: [spec]
    prompt: prompts/design.md
    output: { schema: builtin:document }
  - id: implement
    kind: execute
    needs: [design]
    prompt: prompts/implement.md
    verification:
      - { name: feature done, argv: [grep, -q, done, feature.txt] }
  - id: gate
    kind: check
    needs: [implement]
    argv: [grep, -q, done, feature.txt]
  - id: recheck
    kind: check
    needs: [gate]
    argv: [grep, -q, done, feature.txt]
  - id: polish
    kind: execute
    needs: [recheck]
    prompt: prompts/polish.md
    verification:
      - { name: polished, argv: [grep, -q, done, polish.txt] }
";

fn repo() -> TestContext {
    let mut ctx = TestContext::with_fake_claude("success");
    let script = ctx.aux_path("script.json");
    // Enough answers for every attempt a crash and its resume can cause.
    let mut steps = Vec::new();
    for _ in 0..4 {
        steps.push(r#"{"match": "Write the spec", "scenario": "success"}"#);
        steps.push(r#"{"match": "Write the design", "scenario": "success"}"#);
        steps.push(
            r#"{"match": "Implement the feature", "scenario": "write-file", "write": "feature.txt=done"}"#,
        );
        steps.push(
            r#"{"match": "Polish it", "scenario": "write-file", "write": "polish.txt=done"}"#,
        );
    }
    std::fs::write(&script, format!("[{}]", steps.join(","))).unwrap();
    ctx.set_env("FAKE_CLAUDE_SCRIPT", &script.display().to_string());
    ctx.write("prompts/spec.md", "Write the spec.\n");
    ctx.write("prompts/design.md", "Write the design.\n");
    ctx.write("prompts/implement.md", "Implement the feature.\n");
    ctx.write("prompts/polish.md", "Polish it.\n");
    ctx.write_agent_pipeline("  timeout: 20s\n  killGrace: 200ms\n", PIPELINE);
    ctx
}

/// Store writes of a run: one per event, plus one per record file renamed into
/// place (each announced by a `record-intent` event).
fn writes_of(events: &str) -> usize {
    events.lines().count() + events.matches("\"type\":\"record-intent\"").count()
}

/// The last status each stage's `stage-finished` event gave it.
fn passed(events: &str) -> Vec<String> {
    let mut last = std::collections::BTreeMap::new();
    for line in events.lines() {
        let Ok(ev) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if ev["type"] == "stage-finished" {
            last.insert(
                ev["stage"].as_str().unwrap_or("").to_string(),
                ev["status"].as_str().unwrap_or("").to_string(),
            );
        }
    }
    last.into_iter()
        .filter(|(_, s)| s == "succeeded")
        .map(|(id, _)| id)
        .collect()
}

/// Every stage whose process the log says was spawned is shown by `runs show`,
/// whatever the crash left: its attempt's folder is made before its spawn is
/// recorded (a check stage's first attempt is listed by that folder alone).
fn shown_as_spawned(ctx: &TestContext, n: usize, events: &str) -> Result<(), String> {
    let spawned: Vec<String> = events
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|ev| ev["type"] == "process-spawned")
        .filter_map(|ev| ev["stage"].as_str().map(str::to_string))
        .collect();
    if spawned.is_empty() {
        return Ok(());
    }
    let show = ctx.run(&["runs", "show", "latest", "--json"]);
    let shown: Value = serde_json::from_str(&show.stdout)
        .map_err(|e| format!("{n}: runs show after the crash: {e}: {}", show.snapshot()))?;
    let listed: Vec<&str> = shown["stages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["stageId"].as_str())
        .collect();
    match spawned.iter().find(|id| !listed.contains(&id.as_str())) {
        Some(id) => Err(format!(
            "{n}: `{id}` was spawned but runs show lists only {listed:?}"
        )),
        None => Ok(()),
    }
}

/// Crash after write `n`, resume, check. `Err` describes what went wrong.
fn crash_at(n: usize) -> Result<&'static str, String> {
    let mut ctx = repo();
    ctx.set_env("SPECBRIDGE_TEST_ABORT_AFTER_WRITES", &n.to_string());
    let out = ctx.run(&["run"]);
    ctx.set_env("SPECBRIDGE_TEST_ABORT_AFTER_WRITES", "0");
    let Some(run) = std::fs::read_dir(ctx.path(".specbridge/runs"))
        .ok()
        .and_then(|mut d| d.next())
        .and_then(std::result::Result::ok)
        .map(|e| e.path())
    else {
        return Err(format!("{n}: no run folder: {}", out.snapshot()));
    };
    if out.code == 0 {
        return Ok("finished");
    }
    if !run.join("run.json").is_file() {
        // Aborted before its first record: there is nothing to resume, and
        // nothing was spawned.
        if ctx.fake_agent_runs().is_empty() {
            return Ok("before run.json");
        }
        return Err(format!("{n}: no run.json but an agent ran"));
    }
    let events = std::fs::read_to_string(run.join("events.jsonl")).unwrap_or_default();
    let before = passed(&events);
    shown_as_spawned(&ctx, n, &events)?;
    // An execute agent cut off before it recorded its change leaves it in the
    // tree: the resume keeps it as that attempt's partial work.
    let out = ctx.run(&["resume", "latest"]);
    if out.code != 0 {
        return Err(format!(
            "{n}: resume exited {}: {}",
            out.code,
            out.snapshot()
        ));
    }
    for id in &before {
        let stage = read_json(&run.join(format!("stages/{id}/stage.json")));
        if !crate::common::reused_by_last_resume_in(&run, id) {
            return Err(format!(
                "{n}: `{id}` had passed and was run again: {stage:#}"
            ));
        }
    }
    let audit = ctx.run(&["runs", "audit", "latest"]);
    if audit.code != 0 {
        return Err(format!("{n}: audit after resume: {}", audit.snapshot()));
    }
    Ok("resumed")
}

#[test]
fn every_crash_point_of_a_run_resumes_to_success() {
    let full = repo();
    let out = full.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let events = std::fs::read_to_string(full.only_run_dir().join("events.jsonl")).unwrap();
    let total = writes_of(&events);
    eprintln!("crash sweep over {total} write points");
    assert!(
        total >= 200,
        "a run of {total} writes is too small to sweep"
    );

    let next = AtomicUsize::new(1);
    let failures = Mutex::new(Vec::new());
    let outcomes = Mutex::new(std::collections::BTreeMap::<&str, usize>::new());
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let n = next.fetch_add(1, Ordering::SeqCst);
                if n > total {
                    break;
                }
                match crash_at(n) {
                    Ok(what) => *outcomes.lock().unwrap().entry(what).or_insert(0) += 1,
                    Err(e) => failures.lock().unwrap().push(e),
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {total} crash points failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    let outcomes = outcomes.into_inner().unwrap();
    eprintln!("crash sweep outcomes: {outcomes:?}");
    assert!(
        outcomes.get("resumed").copied().unwrap_or(0) * 4 >= total * 3,
        "{outcomes:?}"
    );
}

/// specbridge killed (SIGKILL) while its execute agent is half-way: the agent has
/// written part of its change and works on. The resume ends the orphaned agent,
/// keeps the partial change as that attempt's (no `--allow-dirty`), and the next
/// attempt finishes on top of it, judged from where the cut-off attempt began.
#[test]
fn a_crash_while_an_execute_agent_works_resumes_on_top_of_its_partial_change() {
    use std::time::{Duration, Instant};
    let mut ctx = TestContext::with_claude_script(
        r#"[
            {"match": "Write the spec", "scenario": "success"},
            {"match": "Implement the feature", "scenario": "run-command"},
            {"match": "Implement the feature", "scenario": "write-file", "write": "feature.txt=done"}
        ]"#,
    );
    // Half the change, then the agent keeps working.
    ctx.set_env(
        "FAKE_CLAUDE_COMMAND",
        "echo partial > feature.txt && echo more > notes.txt && sleep 120",
    );
    ctx.write("prompts/spec.md", "Write the spec.\n");
    ctx.write("prompts/implement.md", "Implement the feature.\n");
    ctx.write_agent_pipeline(
        "  timeout: 60s\n  killGrace: 300ms\n",
        crate::common::SPEC_THEN_IMPLEMENT,
    );
    let mut child = ctx
        .command()
        .arg("run")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    while !(ctx.path("notes.txt").is_file() && ctx.fake_agent_runs().len() >= 2) {
        assert!(
            Instant::now() < until,
            "the agent never wrote its partial change"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let agent = ctx.fake_agent_runs()[1].clone();
    // SAFETY: a signal to a child we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    assert!(
        crate::common::process_alive(agent.pid),
        "the orphaned agent works on"
    );
    let run = ctx.only_run_dir();
    assert!(!run
        .join("stages/implement/attempt-001/git-after.json")
        .exists());

    let out = ctx.run(&["resume", "latest"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert!(
        out.stderr.contains(
            "kept as the partial work of `implement` attempt 1 (cut off by a crash; it continues on top of it): feature.txt, notes.txt"
        ),
        "{}",
        out.snapshot()
    );
    assert!(
        !crate::common::process_alive(agent.pid),
        "the resume ended the orphaned agent"
    );
    assert_eq!(ctx.read("feature.txt").trim(), "done");
    assert_eq!(ctx.read("notes.txt"), "more\n", "nothing was discarded");
    assert_eq!(ctx.fake_agent_runs().len(), 3, "spec was not run again");
    assert!(crate::common::reused_by_last_resume_in(&run, "spec"));
    let stage = read_json(&run.join("stages/implement/stage.json"));
    assert_eq!(stage["status"], "succeeded", "{stage:#}");
    assert_eq!(stage["evidenceStatus"], "verified", "{stage:#}");
    let attempt = run.join("stages/implement/attempt-002");
    let continuation = read_json(&attempt.join("continuation.json"));
    assert_eq!(continuation["baselineAttempt"], 1, "{continuation:#}");
    // The whole change is the stage's, judged from where attempt 1 began.
    let changed = read_json(&attempt.join("changed-files.json"));
    let added: Vec<&str> = changed["added"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(added, ["feature.txt", "notes.txt"], "{changed:#}");
    let audit = ctx.run(&["runs", "audit", "latest"]);
    assert_eq!(audit.code, 0, "{}", audit.snapshot());
}
