//! specbridge killed while the real CLI works in an execute stage: the orphaned CLI
//! is ended by the resume, its partial change is kept as the cut-off attempt's, and
//! the next attempt finishes on top of it (docs/resume.md, "A crash while an
//! execute agent works").

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use specbridge_testkit::model_server::{Reply, Script};

use super::harness::{write_file, Sandbox};

const STAGE: &str = "verification:
  - { name: notes-written, argv: [sh, -c, 'test \"$(cat notes.txt)\" = hello'], required: true }
stages:
  - id: implement
    kind: execute
    prompt: prompts/implement.md
    output: { schema: builtin:task-result }
";

#[test]
fn sigkill_while_the_real_cli_works_resumes_on_top_of_its_partial_change() {
    let Some(sandbox) = Sandbox::new(|root: &Path| {
        Script::new([
            // Attempt 1: half the change, then the model takes its time.
            write_file(root, "t_partial", "draft.txt", "half done\n"),
            Reply::text("Still thinking.").with_delay_ms(120_000),
            // Attempt 2 (after the resume): the rest.
            write_file(root, "t_notes", "notes.txt", "hello\n"),
            Reply::structured_output(json!({
                "status": "completed",
                "summary": "Wrote the notes.",
                "changedFiles": ["draft.txt", "notes.txt"],
                "commandsRun": [],
                "blockingQuestions": [],
            })),
        ])
    }) else {
        return;
    };
    sandbox.ctx.write(
        "prompts/implement.md",
        "Write notes.txt with the word hello.\n",
    );
    sandbox.write_pipeline(
        "  maxTurns: 8\n  timeout: 5m\n  killGrace: 500ms\n  tools: [Read, Write]\n",
        STAGE,
    );

    let mut child = sandbox.spawn_run();
    let until = Instant::now() + Duration::from_secs(120);
    while !sandbox.ctx.path("draft.txt").is_file() {
        assert!(
            Instant::now() < until,
            "the CLI never wrote its partial change"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: a signal to a child we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    assert!(
        !sandbox.leftover_processes().is_empty(),
        "the orphaned CLI works on after specbridge died"
    );

    let out = sandbox.run(&["resume", "latest"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert!(
        out.stderr
            .contains("kept as the partial work of `implement` attempt 1"),
        "{}",
        out.snapshot()
    );
    assert!(
        sandbox.leftover_processes().is_empty(),
        "the resume ended the orphaned CLI"
    );
    assert_eq!(sandbox.ctx.read("draft.txt"), "half done\n");
    assert_eq!(sandbox.ctx.read("notes.txt"), "hello\n");
    let stage = sandbox.stage_json("implement");
    assert_eq!(stage["status"], "succeeded", "{stage:#}");
    assert_eq!(stage["evidenceStatus"], "verified", "{stage:#}");
    assert_eq!(
        sandbox.attempt_json("implement", 2, "continuation.json")["baselineAttempt"],
        1
    );
    let changed = sandbox.attempt_json("implement", 2, "changed-files.json");
    let added: Vec<&str> = changed["added"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(added, ["draft.txt", "notes.txt"], "{changed:#}");
    let audit = sandbox.run(&["runs", "audit", "latest"]);
    assert_eq!(audit.code, 0, "{}", audit.snapshot());
}
