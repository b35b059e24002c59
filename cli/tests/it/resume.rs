//! `specbridge resume`: reuse what still holds, run the rest again in the same run
//! folder, and recover from a crash of specbridge itself.

use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use specbridge_engine::store::{verify_chain, RunLock};

use crate::common::{process_alive, read_json, reused_by_last_resume, TestContext};

fn stage(ctx: &TestContext, id: &str) -> Value {
    read_json(&ctx.only_run_dir().join(format!("stages/{id}/stage.json")))
}

/// `resume --dry-run --json`: stage id → (action, reason).
fn dry_run(ctx: &TestContext) -> Vec<(String, String, String)> {
    let out = ctx.run(&["resume", "latest", "--dry-run", "--json"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    v["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let s = |k: &str| d[k].as_str().unwrap_or("").to_string();
            (s("stage"), s("action"), s("reason"))
        })
        .collect()
}

fn decisions(list: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    list.iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect()
}

/// The audit of the only run is clean (warnings allowed).
fn assert_audit_clean(ctx: &TestContext) {
    let out = ctx.run(&["runs", "audit", "latest", "--json"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
}

/// A generate stage, then two checks that append to `$GATE_LOG` in `log_dir`:
/// outside the repository, so that the commands leave the tree clean, and so
/// opened to them explicitly (checks are confined to the repository).
fn agent_then_gate(log_dir: &Path) -> String {
    format!(
        "  - id: requirements
    kind: generate
    prompt: prompts/requirements.md
    output: {{ schema: builtin:document, document: docs/requirements.md }}
  - id: gate
    kind: check
    needs: [requirements]
    argv: [sh, -c, \"echo gate >> $GATE_LOG; test -f fixed\"]
    sandbox: {{ writable: [\"{d}\"] }}
  - id: after
    kind: check
    needs: [gate]
    argv: [sh, -c, \"echo after >> $GATE_LOG\"]
    sandbox: {{ writable: [\"{d}\"] }}
",
        d = log_dir.display()
    )
}

#[test]
fn a_fixed_check_reruns_alone_with_its_dependents_and_spends_nothing_again() {
    let mut ctx = TestContext::with_fake_claude("success");
    ctx.write("prompts/requirements.md", "Write the requirements.\n");
    let gate_log = ctx.aux_path("gate.log");
    ctx.write_agent_pipeline("", &agent_then_gate(gate_log.parent().unwrap()));
    ctx.set_env("GATE_LOG", &gate_log.display().to_string());
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 1, "{}", out.snapshot());
    assert_eq!(ctx.fake_agent_runs().len(), 1);
    assert_eq!(stage(&ctx, "after")["status"], "blocked");

    assert_eq!(
        dry_run(&ctx),
        decisions(&[
            ("requirements", "reuse", ""),
            ("gate", "rerun", "gate-failed"),
            ("after", "rerun", "not-run"),
        ])
    );
    // The user fixes what the gate checks.
    ctx.write("fixed", "");
    let out = ctx.run(&["resume", "latest"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_eq!(ctx.fake_agent_runs().len(), 1, "the agent stage was reused");
    let gate = stage(&ctx, "gate");
    assert_eq!(gate["status"], "succeeded");
    assert_eq!(gate["attempts"], 2);
    assert!(ctx.only_run_dir().join("stages/gate/attempt-002").is_dir());
    assert_eq!(stage(&ctx, "after")["status"], "succeeded");
    let req = stage(&ctx, "requirements");
    assert!(reused_by_last_resume(&ctx, "requirements"), "{req:#}");
    assert_eq!(req["attempts"], 1);
    let run = read_json(&ctx.only_run_dir().join("run.json"));
    assert_eq!(run["status"], "succeeded");
    assert_eq!(run["exitCode"], 0);
    assert_eq!(run["totals"]["invocations"], 1, "cost is not spent again");
    assert_eq!(run["resumes"].as_array().unwrap().len(), 1);
    assert_eq!(run["resumes"][0]["spent"]["invocations"], 0);
    let log = std::fs::read_to_string(&gate_log).unwrap();
    assert_eq!(log, "gate\ngate\nafter\n");
    assert_audit_clean(&ctx);
}

const CHAIN: &str = "  - id: requirements
    kind: generate
    prompt: prompts/requirements.md
    output: { schema: builtin:document }
  - id: design
    kind: generate
    needs: [requirements]
    prompt: prompts/design.md
    output: { schema: builtin:document }
  - id: tasks
    kind: generate
    needs: [design]
    prompt: prompts/tasks.md
    output: { schema: builtin:document }
";

fn chain_ctx() -> TestContext {
    let ctx = TestContext::with_fake_claude("success");
    ctx.write("prompts/requirements.md", "Requirements.\n");
    ctx.write(
        "prompts/design.md",
        "Design from {{ stages.requirements.output.summary }}.\n",
    );
    ctx.write(
        "prompts/tasks.md",
        "Tasks from {{ stages.design.output.summary }}.\n",
    );
    ctx.write_agent_pipeline("", CHAIN);
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_eq!(ctx.fake_agent_runs().len(), 3);
    ctx
}

#[test]
fn editing_nothing_reruns_nothing() {
    let ctx = chain_ctx();
    assert_eq!(
        dry_run(&ctx),
        decisions(&[
            ("requirements", "reuse", ""),
            ("design", "reuse", ""),
            ("tasks", "reuse", ""),
        ])
    );
    let out = ctx.run(&["resume", "latest"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert!(
        out.stdout.contains("resume: 3 reused, 0 run again"),
        "{}",
        out.stdout
    );
    assert_eq!(ctx.fake_agent_runs().len(), 3, "nothing ran again");
    assert_audit_clean(&ctx);
}

#[test]
fn editing_one_prompt_reruns_that_stage_and_its_downstream_only() {
    let mut ctx = chain_ctx();
    ctx.write(
        "prompts/design.md",
        "Design it better, from {{ stages.requirements.output.summary }}.\n",
    );
    assert_eq!(
        dry_run(&ctx),
        decisions(&[
            ("requirements", "reuse", ""),
            ("design", "rerun", "prompt-changed"),
            ("tasks", "rerun", "upstream-may-change"),
        ])
    );
    // The new design comes out different.
    ctx.set_env(
        "FAKE_CLAUDE_OUTPUT",
        r##"{"summary": "a better design", "markdown": "# Better\n"}"##,
    );
    let out = ctx.run(&["resume", "latest", "--json"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let reasons: Vec<(String, String)> = v["resume"]["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["stage"].as_str().unwrap().to_string(),
                d["reason"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        reasons,
        [
            ("requirements".to_string(), String::new()),
            ("design".to_string(), "prompt-changed".to_string()),
            ("tasks".to_string(), "upstream-output-changed".to_string()),
        ]
    );
    let runs = ctx.fake_agent_runs();
    assert_eq!(runs.len(), 5, "design and tasks ran again");
    assert!(runs[3].stdin.contains("Design it better"));
    assert!(runs[4].stdin.contains("a better design"));
    assert_eq!(stage(&ctx, "design")["attempts"], 2);
    assert!(reused_by_last_resume(&ctx, "requirements"));
    assert_audit_clean(&ctx);
}

#[test]
fn an_upstream_rerun_with_byte_identical_output_leaves_its_downstream_reused() {
    let ctx = chain_ctx();
    ctx.write(
        "prompts/design.md",
        "Design, again, from {{ stages.requirements.output.summary }}.\n",
    );
    // The fake answers the same minimal document as before.
    let out = ctx.run(&["resume", "latest"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_eq!(ctx.fake_agent_runs().len(), 4, "only design ran again");
    assert_eq!(stage(&ctx, "design")["attempts"], 2);
    assert!(reused_by_last_resume(&ctx, "tasks"));
    assert_eq!(stage(&ctx, "tasks")["attempts"], 1);
}

const CHECKS: &str = "version: 1
name: checks
stages:
  - { id: a, kind: check, argv: [echo, a] }
  - { id: b, kind: check, needs: [a], argv: [sh, -c, \"test -f fixed\"] }
";

/// A check stage whose needs are check stages takes what they stand for from
/// memory (they ran, or were reused, in the same process) and starts beside the
/// batch that records their end. What it hashed must be what their records say:
/// a resume reading them from disk reuses every stage, after a run and after a
/// resume that ran part of the chain again.
#[test]
fn check_stages_hash_their_check_needs_as_the_records_say() {
    let ctx = TestContext::new();
    ctx.write(
        "specbridge.yaml",
        "version: 1
name: checks
stages:
  - { id: a, kind: check, argv: [echo, a] }
  - { id: b, kind: check, needs: [a], argv: [sh, -c, \"test -f fixed\"] }
  - { id: c, kind: check, needs: [a, b], argv: [echo, c] }
  - { id: d, kind: check, needs: [c], argv: [echo, d] }
",
    );
    assert_eq!(ctx.run(&["run"]).code, 1);
    ctx.write("fixed", "");
    let out = ctx.run(&["resume", "latest"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert!(reused_by_last_resume(&ctx, "a"));
    let upstream = &stage(&ctx, "c")["inputParts"]["upstream"];
    assert!(upstream["a"].is_null(), "a needs nothing: {upstream}");
    assert!(upstream["b"].is_string(), "b stands for a: {upstream}");
    let all_reused = decisions(&[
        ("a", "reuse", ""),
        ("b", "reuse", ""),
        ("c", "reuse", ""),
        ("d", "reuse", ""),
    ]);
    assert_eq!(dry_run(&ctx), all_reused);

    // The same chain run whole in one process.
    std::fs::remove_dir_all(ctx.path(".specbridge/runs")).unwrap();
    assert_eq!(ctx.run(&["run"]).code, 0);
    assert_eq!(dry_run(&ctx), all_reused);
    assert_audit_clean(&ctx);
}

#[test]
fn a_run_in_use_is_refused() {
    let ctx = TestContext::new();
    ctx.write("specbridge.yaml", CHECKS);
    assert_eq!(ctx.run(&["run"]).code, 1);
    let dir = ctx.only_run_dir();
    let id = dir.file_name().unwrap().to_str().unwrap().to_string();
    let lock = RunLock::acquire(&dir, &id).unwrap();
    let out = ctx.run(&["resume", "latest"]);
    assert_eq!(out.code, 2, "{}", out.snapshot());
    assert!(
        out.stderr
            .contains("is in use by another specbridge process"),
        "{}",
        out.stderr
    );
    drop(lock);
    ctx.write("fixed", "");
    assert_eq!(ctx.run(&["resume", "latest"]).code, 0);
}

/// A child a crashed run had forked but that had not reached `exec` yet holds the
/// run's lock for a moment after its parent is gone: a resume started then waits
/// it out instead of calling the run in use. (`flock FILE sleep` stands in for
/// that child: another holder of the lock that goes away on its own.)
#[test]
fn a_lock_held_for_a_moment_after_a_crash_does_not_refuse_the_resume() {
    let ctx = TestContext::new();
    ctx.write("specbridge.yaml", CHECKS);
    assert_eq!(ctx.run(&["run"]).code, 1);
    let lock = ctx.only_run_dir().join(".lock");
    let mut holder = std::process::Command::new("flock")
        .arg(&lock)
        .args(["sleep", "0.3"])
        .spawn()
        .expect("util-linux flock");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !specbridge_engine::store::is_held(&lock, &specbridge_engine::store::held_flocks()) {
        assert!(Instant::now() < deadline, "flock never took the lock");
        std::thread::sleep(Duration::from_millis(5));
    }
    ctx.write("fixed", "");
    let out = ctx.run(&["resume", "latest"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    holder.wait().unwrap();
}

/// A resume leaves out the structural check only for the exact bytes the run
/// started with: any edit since, however small, is checked in full, with every
/// problem located and nothing written.
#[test]
fn a_pipeline_broken_since_the_run_is_refused_with_located_messages() {
    let ctx = TestContext::new();
    ctx.write("specbridge.yaml", CHECKS);
    assert_eq!(ctx.run(&["run"]).code, 1);
    let dir = ctx.only_run_dir();
    let run_before = std::fs::read(dir.join("run.json")).unwrap();
    let events_before = std::fs::read(dir.join("events.jsonl")).unwrap();
    ctx.write(
        "specbridge.yaml",
        &CHECKS
            .replace("argv: [echo, a]", "argz: [echo, a]")
            .replace("name: checks", "name: checks\nconcurrancy: 2"),
    );
    ctx.write("fixed", "");
    for dry in [false, true] {
        let args: &[&str] = if dry {
            &["resume", "latest", "--dry-run"]
        } else {
            &["resume", "latest"]
        };
        let out = ctx.run(args);
        assert_eq!(out.code, 2, "{}", out.snapshot());
        for expected in [
            "specbridge.yaml:5:27: error: unknown key `argz` in `stages[0]`",
            "help: did you mean `argv`?",
            "specbridge.yaml:3:1: error: unknown key `concurrancy` at the top level",
            "help: did you mean `concurrency`?",
        ] {
            assert!(out.stderr.contains(expected), "{expected}\n{}", out.stderr);
        }
        assert_eq!(std::fs::read(dir.join("run.json")).unwrap(), run_before);
        assert_eq!(
            std::fs::read(dir.join("events.jsonl")).unwrap(),
            events_before,
            "a refused resume writes nothing"
        );
    }
    ctx.write("specbridge.yaml", CHECKS);
    assert_eq!(ctx.run(&["resume", "latest"]).code, 0);
}

#[test]
fn tampered_records_are_refused_with_the_finding() {
    let ctx = TestContext::new();
    ctx.write("specbridge.yaml", CHECKS);
    assert_eq!(ctx.run(&["run"]).code, 1);
    let dir = ctx.only_run_dir();
    let path = dir.join("stages/b/stage.json");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("\"check-failed\"", "\"succeeded\"")).unwrap();
    let events_before = std::fs::read(dir.join("events.jsonl")).unwrap();
    let out = ctx.run(&["resume", "latest"]);
    assert_eq!(out.code, 6, "{}", out.snapshot());
    assert!(
        out.stderr.contains("fail the integrity checks"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("[file-hash-mismatch] stages/b/stage.json"),
        "{}",
        out.stderr
    );
    assert_eq!(
        std::fs::read(dir.join("events.jsonl")).unwrap(),
        events_before,
        "a refused resume writes nothing"
    );
    assert_eq!(ctx.run(&["resume", "latest", "--dry-run"]).code, 6);
}

#[test]
fn a_torn_last_event_is_set_aside_and_the_chain_goes_on() {
    let ctx = TestContext::new();
    ctx.write("specbridge.yaml", CHECKS);
    assert_eq!(ctx.run(&["run"]).code, 1);
    let dir = ctx.only_run_dir();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join("events.jsonl"))
        .unwrap();
    f.write_all(b"{\"seq\":99,\"at\":\"20").unwrap();
    drop(f);
    ctx.write("fixed", "");
    let out = ctx.run(&["resume", "latest"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert!(out.stderr.contains("incomplete line"), "{}", out.stderr);
    assert_eq!(
        std::fs::read(dir.join("events.jsonl.torn-1")).unwrap(),
        b"{\"seq\":99,\"at\":\"20"
    );
    let chain = verify_chain(&dir.join("events.jsonl")).unwrap();
    assert!(chain.is_intact() && chain.torn_tail.is_none());
    let run = read_json(&dir.join("run.json"));
    assert_eq!(run["resumes"][0]["tornTail"], "events.jsonl.torn-1");
    let audit = ctx.run(&["runs", "audit", "latest", "--json"]);
    assert_eq!(audit.code, 0, "{}", audit.snapshot());
    assert!(
        audit.stdout.contains("torn-tail"),
        "still reported: {}",
        audit.stdout
    );
}

#[test]
fn sigkill_during_a_stage_leaves_an_orphan_that_resume_ends_before_rerunning() {
    let ctx = TestContext::new();
    let marker = ctx.root().parent().unwrap().join(format!(
        "{}-pid",
        ctx.root().file_name().unwrap().to_string_lossy()
    ));
    let pipeline = format!(
        // Unconfined on purpose: the test needs the command's real pid and a marker
        // outside the repository, and it is about orphans that only an unconfined
        // command can leave (a confined one dies with bubblewrap).
        "version: 1\nname: crash\nstages:\n  - {{ id: first, kind: check, argv: [echo, first] }}\n  - {{ id: slow, kind: check, needs: [first], sandbox: off, argv: [sh, -c, \"if [ -f {m} ]; then exit 0; fi; echo $$ > {m}; exec sleep 120\"] }}\n",
        m = marker.display()
    );
    ctx.write("specbridge.yaml", &pipeline);
    let mut child = ctx
        .command()
        .arg("run")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    let pid: u32 = loop {
        if let Some(pid) = std::fs::read_to_string(&marker)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            break pid;
        }
        assert!(Instant::now() < until, "the slow stage never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    // The child can write its marker before specbridge logs its spawn (a busy
    // machine): a kill in between is a crash before the spawn was recorded, which
    // is not what this test is about.
    while !std::fs::read_dir(ctx.path(".specbridge/runs"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|run| {
            std::fs::read_to_string(run.path().join("events.jsonl")).is_ok_and(|log| {
                log.lines()
                    .any(|l| l.contains("\"process-spawned\"") && l.contains("\"slow\""))
            })
        })
    {
        assert!(
            Instant::now() < until,
            "the slow stage's spawn was never logged"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        process_alive(pid),
        "the stage's process outlives specbridge"
    );
    // A check stage's first attempt writes no `running` record (its start is in
    // the log and its attempt folder exists); the run still shows it running.
    assert!(!ctx.only_run_dir().join("stages/slow/stage.json").exists());
    let shown = ctx.run(&["runs", "show", "latest", "--json"]);
    assert_eq!(shown.code, 0, "{}", shown.snapshot());
    let shown: Value = serde_json::from_str(&shown.stdout).unwrap();
    let slow = shown["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stageId"] == "slow")
        .unwrap_or_else(|| panic!("slow is shown: {shown:#}"));
    assert_eq!(
        (&slow["status"], &slow["attempts"]),
        (&json!("running"), &json!(1))
    );

    assert_eq!(
        dry_run(&ctx),
        decisions(&[("first", "reuse", ""), ("slow", "rerun", "interrupted")])
    );
    let out = ctx.run(&["resume", "latest"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert!(!process_alive(pid), "the orphan was ended");
    assert!(out.stderr.contains("orphaned"), "{}", out.stderr);
    let slow = stage(&ctx, "slow");
    assert_eq!(slow["status"], "succeeded");
    assert_eq!(slow["attempts"], 2);
    assert!(reused_by_last_resume(&ctx, "first"));
    let run = read_json(&ctx.only_run_dir().join("run.json"));
    let resume = &run["resumes"][0];
    assert_eq!(resume["previousStatus"], "running");
    assert_eq!(resume["interrupted"], serde_json::json!(["slow"]));
    assert_eq!(resume["orphans"][0]["ended"], true);
    let events = std::fs::read_to_string(ctx.only_run_dir().join("events.jsonl")).unwrap();
    assert!(events.contains("\"type\":\"orphan-ended\""));
    assert!(events.contains("\"status\":\"interrupted\""));
    let _ = std::fs::remove_file(&marker);
    assert_audit_clean(&ctx);
}

/// An orphan is ended with the grace of its own stage, as a live cancel of that
/// stage would have: the pipeline's `killGrace` is long and the stage's short, and
/// the orphaned agent ignores SIGTERM, so only the stage's grace ends it quickly.
#[test]
fn an_orphan_is_ended_with_its_own_stages_kill_grace() {
    let mut ctx = TestContext::with_fake_claude("success");
    let stages = crate::common::SPEC_THEN_IMPLEMENT.replace(
        "    prompt: prompts/implement.md\n",
        "    prompt: prompts/implement.md\n    runner: { killGrace: 200ms }\n",
    );
    let (mut child, hung) = crate::common::run_until_the_execute_agent_hangs_with(
        &mut ctx,
        "ignore-sigterm",
        "  timeout: 10m\n  killGrace: 2m\n",
        &stages,
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(process_alive(hung.pid), "the agent outlives specbridge");

    let started = Instant::now();
    let out = ctx.run(&["resume", "latest"]);
    let took = started.elapsed();
    assert!(!process_alive(hung.pid), "the orphaned agent was ended");
    assert_eq!(out.code, 0, "{}", out.snapshot());
    // The pipeline's grace would have kept the resume waiting for two minutes.
    assert!(
        took < Duration::from_secs(60),
        "the resume took {took:?}: the orphan was given the pipeline's kill grace"
    );
    let run = read_json(&ctx.only_run_dir().join("run.json"));
    assert_eq!(run["resumes"][0]["orphans"][0]["stage"], "implement");
    assert_eq!(run["resumes"][0]["orphans"][0]["ended"], true);
}

#[test]
fn sigkill_during_an_execute_stage_continues_the_agent_session() {
    let mut ctx = TestContext::with_fake_claude("success");
    let (mut child, hung) = crate::common::run_until_the_execute_agent_hangs(&mut ctx);
    // Once its spawn is on record, specbridge dies without cleaning up.
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(process_alive(hung.pid), "the agent outlives specbridge");
    let request = read_json(
        &ctx.only_run_dir()
            .join("stages/implement/attempt-001/request.json"),
    );
    let session = request["sessionId"].as_str().unwrap().to_string();

    let out = ctx.run(&["resume", "latest"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert!(!process_alive(hung.pid), "the orphaned agent was ended");
    let runs = ctx.fake_agent_runs();
    assert_eq!(runs.len(), 3, "spec was not run again");
    let resumed = &runs[2];
    let at = resumed
        .argv
        .iter()
        .position(|a| a == "--resume")
        .expect("--resume");
    assert_eq!(resumed.argv[at + 1], session);
    assert!(!resumed.argv.iter().any(|a| a == "--session-id"));
    assert!(
        resumed.stdin.contains("was interrupted"),
        "{}",
        resumed.stdin
    );
    assert!(resumed.stdin.contains("Implement the feature."));

    let stage = read_json(&ctx.only_run_dir().join("stages/implement/stage.json"));
    assert_eq!(stage["status"], "succeeded", "{stage:#}");
    assert_eq!(stage["evidenceStatus"], "verified", "{stage:#}");
    assert_eq!(stage["attempts"], 2);
    let cont = read_json(
        &ctx.only_run_dir()
            .join("stages/implement/attempt-002/continuation.json"),
    );
    assert_eq!(cont["sessionId"], session.as_str());
    assert_eq!(cont["previousOutcome"], "interrupted");
    assert_eq!(cont["baselineAttempt"], 1);
    assert!(reused_by_last_resume(&ctx, "spec"));
    assert_audit_clean(&ctx);
}

#[test]
fn runs_show_verbose_adds_the_prompt_and_the_raw_output_of_each_attempt() {
    let ctx = TestContext::with_fake_claude("success");
    ctx.write(
        "prompts/spec.md",
        "Write the spec.\nMarker: show-verbose-31.\n",
    );
    ctx.write_agent_pipeline(
        "",
        "  - id: spec\n    kind: generate\n    prompt: prompts/spec.md\n    output: { schema: builtin:document }\n",
    );
    assert_eq!(ctx.run(&["run"]).code, 0);
    let plain = ctx.run(&["runs", "show", "latest"]);
    assert!(
        !plain.stdout.contains("show-verbose-31"),
        "{}",
        plain.stdout
    );
    let out = ctx.run(&["runs", "show", "latest", "--verbose"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert!(
        out.stdout.contains("stages/spec/attempt-001/prompt.md ("),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("    | Marker: show-verbose-31."),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("stages/spec/attempt-001/raw-stdout.log ("),
        "{}",
        out.stdout
    );
    let out = ctx.run(&["runs", "show", "latest", "--verbose", "--json"]);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let files = &v["attempts"]["spec"][0]["files"];
    assert_eq!(files[0]["path"], "stages/spec/attempt-001/prompt.md");
    assert!(files[0]["head"]
        .as_str()
        .unwrap()
        .contains("show-verbose-31"));
    assert!(files[1]["head"].as_str().unwrap().contains("\"type\""));
}
