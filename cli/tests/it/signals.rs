//! SIGTERM and SIGHUP (what `timeout`, CI runners, `docker stop` and a closed
//! terminal send) cancel a run exactly like Ctrl-C: the agent's process group is
//! ended, every record is written, the run is `cancelled` with exit 5, and
//! `resume` finishes it.

use crate::common::{process_alive, read_json, reused_by_last_resume, TestContext};

fn signal_during_an_agent_stage(signal: i32) {
    let mut ctx = TestContext::with_fake_claude("success");
    let (mut child, hung) = crate::common::run_until_the_execute_agent_hangs(&mut ctx);
    let events =
        || std::fs::read_to_string(ctx.only_run_dir().join("events.jsonl")).unwrap_or_default();
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
    assert!(reused_by_last_resume(&ctx, "spec"));
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
