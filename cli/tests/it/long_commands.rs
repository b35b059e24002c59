//! A command runs for as long as it needs, whichever of specbridge's threads
//! started it.
//!
//! Linux ends a child that asked to die with its parent — bubblewrap's
//! `--die-with-parent`, which every confined command runs under, or any
//! program's own `prctl(PR_SET_PDEATHSIG)` — when the *thread* that started it
//! ends, not the process. The runtime's threads come and go: a worker that
//! waits for the disk hands its place to a new thread and is ended after 10 s
//! idle. A `cargo test` of more than ten seconds, started from such a thread,
//! was killed by SIGKILL mid-run and its stage recorded as failed. These tests
//! end idle threads after 50 ms (`SPECBRIDGE_TEST_THREAD_KEEP_ALIVE_MS`, a test
//! hook) and run commands of two seconds; one runs with the runtime as users
//! have it, for eleven.

use serde_json::Value;

use crate::common::{read_json, TestContext};

/// Idle runtime threads end this soon in these tests (10 s otherwise).
const KEEP_ALIVE_MS: &str = "50";

fn stage(ctx: &TestContext, id: &str) -> Value {
    read_json(&ctx.only_run_dir().join(format!("stages/{id}/stage.json")))
}

fn stdout_of(ctx: &TestContext, id: &str) -> String {
    std::fs::read_to_string(
        ctx.only_run_dir()
            .join(format!("stages/{id}/attempt-001/raw-stdout.log")),
    )
    .unwrap()
}

/// Runs `pipeline` with idle threads ended after 50 ms (or as users have them)
/// and expects every stage in `ids` to have succeeded and printed `done`.
fn expect_all_done(pipeline: &str, ids: &[&str], keep_alive: Option<&str>) {
    let mut ctx = TestContext::new();
    if let Some(ms) = keep_alive {
        ctx.set_env("SPECBRIDGE_TEST_THREAD_KEEP_ALIVE_MS", ms);
    }
    ctx.write("specbridge.yaml", pipeline);
    ctx.commit_all("pipeline");
    let out = ctx.run(&["run"]);
    for id in ids {
        let s = stage(&ctx, id);
        assert_eq!(s["status"], "succeeded", "{id}: {s:#}\n{}", out.snapshot());
        assert_eq!(stdout_of(&ctx, id), "done\n", "{id}");
    }
    assert_eq!(out.code, 0, "{}", out.snapshot());
}

#[test]
fn confined_checks_outlive_the_threads_that_started_them() {
    // The first stage's start is written before its command (a wait for the
    // disk on its thread); the second starts beside the batch that ends the
    // first. Both commands outlast an idle thread's 50 ms many times over.
    expect_all_done(
        r#"
version: 1
name: long-confined
stages:
  - { id: first, kind: check, argv: [sh, -c, "sleep 2; echo done"] }
  - { id: second, kind: check, needs: [first], argv: [sh, -c, "sleep 2; echo done"] }
"#,
        &["first", "second"],
        Some(KEEP_ALIVE_MS),
    );
}

#[test]
fn an_unconfined_command_that_asks_to_die_with_its_parent_runs_to_its_end() {
    // `setpriv --pdeathsig KILL` asks, as a test runner or a supervisor of
    // its own might: its parent is the thread that started it.
    expect_all_done(
        r#"
version: 1
name: long-unconfined
stages:
  - id: first
    kind: check
    sandbox: off
    argv: [setpriv, --pdeathsig, KILL, sh, -c, "sleep 2; echo done"]
"#,
        &["first"],
        Some(KEEP_ALIVE_MS),
    );
}

#[test]
fn a_confined_check_of_more_than_ten_seconds_succeeds_as_users_run_it() {
    // The runtime as it is built for users: its idle threads end after 10 s.
    expect_all_done(
        r#"
version: 1
name: long-as-built
stages:
  - { id: first, kind: check, argv: [sh, -c, "sleep 11; echo done"] }
"#,
        &["first"],
        None,
    );
}

#[test]
fn an_execute_stages_confined_verification_runs_to_its_end() {
    // The stage's flushes and its agent wait on its task's threads before the
    // verification command starts — the spec-to-task example's `cargo test`,
    // killed at ten seconds.
    let mut ctx = TestContext::with_fake_claude("write-file");
    ctx.set_env("FAKE_CLAUDE_WRITE", "feature.txt=done");
    ctx.set_env("SPECBRIDGE_TEST_THREAD_KEEP_ALIVE_MS", KEEP_ALIVE_MS);
    ctx.write("prompts/implement.md", "Implement the feature.\n");
    ctx.write_agent_pipeline(
        "  timeout: 30s\n",
        "  - id: implement
    kind: execute
    prompt: prompts/implement.md
    verification:
      - { name: slow test, argv: [sh, -c, \"sleep 2 && grep -q done feature.txt\"] }
",
    );
    let out = ctx.run(&["run"]);
    let s = stage(&ctx, "implement");
    let verification = read_json(
        &ctx.only_run_dir()
            .join("stages/implement/attempt-001/verification.json"),
    );
    assert_eq!(
        verification["commands"][0]["passed"], true,
        "{verification:#}"
    );
    assert_eq!(verification["commands"][0]["sandbox"]["mode"], "bubblewrap");
    assert_eq!(s["status"], "succeeded", "{s:#}\n{}", out.snapshot());
    assert_eq!(s["evidenceStatus"], "verified", "{s:#}");
    assert_eq!(out.code, 0, "{}", out.snapshot());
}
