//! specbridge killed while the real CLI works in an execute stage: the orphaned CLI
//! is ended by the resume, its partial change is kept as the cut-off attempt's, and
//! the next attempt finishes on top of it (docs/resume.md, "A crash while an
//! execute agent works").

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use specbridge_testkit::model_server::{Reply, Script};

use super::harness::{read_json, write_file, Sandbox};

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

/// specbridge dying after the CLI is spawned and before it is given its prompt
/// (the attempt's records are written in that window, docs/run-directory.md):
/// the CLI reads the end of its input and exits on its own, asking the model
/// nothing and changing nothing. Every crash point up to the spawn event is
/// tried (`SPECBRIDGE_TEST_ABORT_AFTER_WRITES`); those that fall in the window
/// are told by the log: the attempt's records intended, no spawn event. The
/// same CLI given an input that ends at once, seen directly: the real CLI's
/// `Error: Input must be provided…`, exit 1, nothing on stdout.
#[test]
fn specbridge_dying_before_the_prompt_leaves_a_cli_that_asks_nothing_and_exits() {
    let Some(sandbox) = Sandbox::new(|_| {
        Script::new([Reply::structured_output(
            json!({"summary": "s", "markdown": "# Notes\n"}),
        )])
    }) else {
        return;
    };
    sandbox
        .ctx
        .write("prompts/notes.md", "Write short notes.\n");
    sandbox.write_pipeline(
        "",
        "stages:\n  - id: notes\n    kind: generate\n    prompt: prompts/notes.md\n    output: { schema: builtin:document, document: notes.md }\n",
    );
    // A clean run first: how many counted writes (each event appended, each
    // record renamed into place) come before the spawn event.
    let out = sandbox.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let events = std::fs::read_to_string(sandbox.run_dir().join("events.jsonl")).unwrap();
    let before_spawn: Vec<Value> = events
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .take_while(|e| e["type"] != "process-spawned")
        .collect();
    let renames = before_spawn
        .iter()
        .filter(|e| e["type"] == "record-written")
        .count();
    let writes = before_spawn.len() + renames;
    let argv = read_json(&sandbox.attempt_dir("notes", 1).join("process.json"))["redactedArgv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect::<Vec<_>>();
    let asked = sandbox.model_requests().len();
    std::fs::remove_file(sandbox.ctx.path("notes.md")).unwrap();
    let runs = sandbox.ctx.path(".specbridge/runs");
    let request = "stages/notes/attempt-001/request.json";

    let (mut in_window, mut seen_waiting) = (0, 0);
    for n in 1..=writes {
        let before: std::collections::BTreeSet<_> = std::fs::read_dir(&runs)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        let mut cmd = sandbox.command();
        cmd.args(["run"])
            .env("SPECBRIDGE_TEST_ABORT_AFTER_WRITES", n.to_string());
        let out = sandbox.run_command(cmd);
        assert_ne!(out.code, 0, "write {n} of {writes} did not abort the run");
        let left = sandbox.leftover_processes();
        let new_run = std::fs::read_dir(&runs)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .find(|name| !before.contains(name));
        let log = new_run
            .map(|id| std::fs::read_to_string(runs.join(id).join("events.jsonl")))
            .and_then(Result::ok)
            .unwrap_or_default();
        let intended = log.contains(&format!("\"path\":\"{request}\""));
        if !intended || log.contains("\"process-spawned\"") {
            continue;
        }
        in_window += 1;
        if !left.is_empty() {
            seen_waiting += 1;
        }
        let until = Instant::now() + Duration::from_secs(30);
        while !sandbox.leftover_processes().is_empty() {
            assert!(
                Instant::now() < until,
                "write {n}: the CLI given no prompt is still running"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    assert!(
        in_window > 0,
        "no crash point fell between the spawn and the prompt"
    );
    assert!(
        seen_waiting > 0,
        "no CLI was found waiting for its prompt right after specbridge died"
    );

    // What such a CLI meets, seen directly: the argv specbridge gave it (a
    // session id of its own), its input ended before a byte was written.
    let mut argv = argv[1..].to_vec();
    let session = argv.iter().position(|a| a == "--session-id").unwrap() + 1;
    argv[session] = "6f1c2a4e-0b7d-4c3e-9a51-2d8e7f6b5c40".to_owned();
    let mut cli = sandbox
        .cli_command()
        .args(&argv)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(cli.stdin.take());
    let ended = cli.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&ended.stderr);
    assert_eq!(ended.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "Input must be provided either through stdin or as a prompt argument when using --print"
        ),
        "{stderr}"
    );
    assert!(ended.stdout.is_empty(), "{:?}", ended.stdout);
    assert_eq!(
        sandbox.model_requests().len(),
        asked,
        "a CLI without its prompt asked the model"
    );
    assert!(
        sandbox.changed_paths().is_empty(),
        "{:?}",
        sandbox.changed_paths()
    );
}
