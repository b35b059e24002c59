//! SIGTERM and SIGHUP (what `timeout`, CI runners, `docker stop` and a closed
//! terminal send) cancel a run exactly like Ctrl-C: the agent's process group is
//! ended, every record is written, the run is `cancelled` with exit 5, and
//! `resume` finishes it.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::{process_alive, read_json, TestContext};

const SPEC_THEN_IMPLEMENT: &str = "  - id: spec
    kind: generate
    prompt: prompts/spec.md
    output: { schema: builtin:document }
  - id: implement
    kind: execute
    needs: [spec]
    prompt: prompts/implement.md
    verification:
      - { name: feature done, argv: [grep, -q, done, feature.txt] }
";

fn signal_during_an_agent_stage(signal: i32) {
    let mut ctx = TestContext::with_fake_claude("success");
    let script = ctx.aux_path("script.json");
    std::fs::write(
        &script,
        r#"[
            {"match": "Write the spec", "scenario": "success"},
            {"match": "Implement the feature", "scenario": "hang-before-result"},
            {"match": "Implement the feature", "scenario": "write-file", "write": "feature.txt=done"}
        ]"#,
    )
    .unwrap();
    ctx.set_env("FAKE_CLAUDE_SCRIPT", &script.display().to_string());
    ctx.write("prompts/spec.md", "Write the spec.\n");
    ctx.write("prompts/implement.md", "Implement the feature.\n");
    ctx.write_agent_pipeline("  timeout: 60s\n  killGrace: 300ms\n", SPEC_THEN_IMPLEMENT);

    let mut child = ctx
        .command()
        .arg("run")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    let hung = loop {
        if let Some(run) = ctx.fake_agent_runs().get(1).cloned() {
            break run;
        }
        assert!(Instant::now() < until, "the execute stage never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    let events =
        || std::fs::read_to_string(ctx.only_run_dir().join("events.jsonl")).unwrap_or_default();
    while !events().contains("\"stage\":\"implement\",\"attempt\":1,\"pid\"") {
        assert!(Instant::now() < until, "no process-spawned event");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: sending a signal to a child we spawned.
    unsafe { libc::kill(child.id() as i32, signal) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(5), "signal {signal}");
    assert!(
        !process_alive(hung.pid),
        "the agent must not outlive the cancelled run"
    );
    let run = ctx.only_run_dir();
    let run_json = read_json(&run.join("run.json"));
    assert_eq!(run_json["status"], "cancelled", "{run_json:#}");
    assert_eq!(run_json["exitCode"], 5);
    assert_eq!(
        read_json(&run.join("stages/implement/stage.json"))["status"],
        "cancelled"
    );
    let process = read_json(&run.join("stages/implement/attempt-001/process.json"));
    assert_eq!(process["cancelled"], true, "{process:#}");
    assert!(events().contains("\"type\":\"run-finished\""));
    assert_eq!(ctx.run(&["runs", "audit", "latest"]).code, 0);

    let out = ctx.run(&["resume", "latest"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_eq!(ctx.fake_agent_runs().len(), 3, "spec was not run again");
    let stage = read_json(&run.join("stages/implement/stage.json"));
    assert_eq!(stage["status"], "succeeded", "{stage:#}");
    assert_eq!(
        read_json(&run.join("stages/spec/stage.json"))["reused"],
        true
    );
    assert_eq!(ctx.run(&["runs", "audit", "latest"]).code, 0);
}

#[test]
fn sigterm_during_an_agent_stage_cancels_and_resume_finishes() {
    signal_during_an_agent_stage(libc::SIGTERM);
}

#[test]
fn sighup_during_an_agent_stage_cancels_and_resume_finishes() {
    signal_during_an_agent_stage(libc::SIGHUP);
}
