//! specbridge's own writes and the run's records under the real CLI (docs/stage-kinds.md, docs/claude-code-runner.md):
//! documents never go through a symlink, an agent that edits its own run's records
//! is a safety violation at once, and two runs with execute stages never share the
//! working tree.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;
use specbridge_testkit::model_server::{Reply, Script, ToolCall};

use super::harness::{read_json, task_result, write_file, Sandbox};

/// Text that would run a command on the next `git status` if it landed in
/// `.git/config`.
const HOSTILE_CONFIG: &str = "[core]\n\tfsmonitor = touch fsmonitor-ran\n";

fn document_reply() -> Reply {
    Reply::structured_output(json!({"summary": "Config.", "markdown": HOSTILE_CONFIG}))
}

#[test]
fn documents_through_a_symlink_into_git_or_out_of_the_repository_are_refused() {
    let outside = tempfile::tempdir().unwrap();
    let Some(sandbox) = Sandbox::new(|_: &Path| Script::new([document_reply(), document_reply()]))
    else {
        return;
    };
    // Present in the repository: `notes -> .git`. Created by an earlier stage, after
    // validation has looked: `out -> <a folder outside>`.
    std::os::unix::fs::symlink(".git", sandbox.ctx.path("notes")).unwrap();
    sandbox
        .ctx
        .write("prompts/doc.md", "Write the configuration document.\n");
    sandbox.write_pipeline(
        "  maxTurns: 4\n",
        &format!(
            "stages:
  - id: link
    kind: check
    argv: [ln, -s, {}, out]
  - id: into-git
    kind: generate
    needs: [link]
    prompt: prompts/doc.md
    output: {{ schema: builtin:document, document: notes/config }}
  - id: out-of-repo
    kind: generate
    needs: [link]
    prompt: prompts/doc.md
    output: {{ schema: builtin:document, document: out/doc.md }}
",
            outside.path().display()
        ),
    );
    let git_config = std::fs::read(sandbox.ctx.path(".git/config")).unwrap();

    let out = sandbox.run(&["run"]);
    assert_eq!(out.code, 6, "{}", out.snapshot());
    for (stage, component) in [("into-git", "notes"), ("out-of-repo", "out")] {
        let record = sandbox.stage_json(stage);
        assert_eq!(record["status"], "safety-violation", "{record:#}");
        let reason = record["outcome"].as_str().unwrap();
        assert!(
            reason.contains(&format!("its component `{component}` is a symbolic link")),
            "{reason}"
        );
        assert!(reason.contains(&format!("stage `{stage}`")), "{reason}");
    }
    assert_eq!(
        std::fs::read(sandbox.ctx.path(".git/config")).unwrap(),
        git_config,
        ".git/config was written"
    );
    assert_eq!(
        std::fs::read_dir(outside.path()).unwrap().count(),
        0,
        "a file was written outside the repository"
    );
    sandbox.ctx.git(&["status"]);
    assert!(!sandbox.ctx.path("fsmonitor-ran").exists());
}

#[test]
fn an_agent_editing_its_own_run_records_is_a_safety_violation_at_once() {
    let Some(sandbox) = Sandbox::new(|root: &Path| {
        Script::new([
            write_file(root, "t_notes", "notes.txt", "hello\n"),
            // Matches its rule, so only the check of the records can notice. (The
            // CLI refuses a glob in a command that writes: the run id is not known
            // to the script, so a committed script does the editing.)
            Reply::tool_uses(
                None,
                vec![ToolCall::new("Bash", json!({"command": "sh tamper.sh"})).with_id("t_sed")],
            ),
            task_result(&["notes.txt"]),
        ])
    }) else {
        return;
    };
    sandbox.ctx.write(
        "prompts/implement.md",
        "Write notes.txt with the word hello.\n",
    );
    sandbox.ctx.write(
        "tamper.sh",
        "for f in .specbridge/runs/*/pipeline.yaml; do sed -i s/real-cli/tampered/ \"$f\"; done\n",
    );
    sandbox.write_pipeline(
        "  maxTurns: 8\n  tools: [Read, Edit, Write, Bash]\n  allowedBashRules: [\"Bash(sh tamper.sh)\"]\n",
        "verification:
  - { name: notes-written, argv: [test, -f, notes.txt], required: true }
stages:
  - id: implement
    kind: execute
    prompt: prompts/implement.md
  - id: after
    kind: check
    needs: [implement]
    argv: [\"true\"]
",
    );

    let out = sandbox.run(&["run"]);
    let sed = sandbox.tool_result("t_sed");
    assert!(!sed.is_error, "the CLI refused the edit: {sed:?}");
    assert_eq!(out.code, 6, "{}", out.snapshot());
    let stage = sandbox.stage_json("implement");
    assert_eq!(stage["status"], "safety-violation", "{stage:#}");
    let reason = stage["outcome"].as_str().unwrap();
    assert!(
        reason.contains("the run record `pipeline.yaml` changed after specbridge wrote it"),
        "{reason}"
    );
    // At once: nothing built on the attempt.
    assert_eq!(sandbox.stage_json("after")["status"], "blocked");
    let calls =
        std::fs::read_to_string(sandbox.attempt_dir("implement", 1).join("tool-calls.jsonl"))
            .unwrap();
    assert!(calls.contains("\"policy\":\"allowed\""), "{calls}");
    assert!(!calls.contains("\"violation\":true"), "{calls}");
}

/// A record the first agent attempt's check found as announced, and settled,
/// is not read again at the next check while its stat data stays. An edit in
/// place that keeps its size and puts its modification time back still moves
/// its change time: the second agent's edit is found at once.
#[test]
fn an_agent_editing_a_settled_record_in_place_is_a_safety_violation_at_once() {
    let Some(sandbox) = Sandbox::new(|root: &Path| {
        Script::new([
            write_file(root, "t_notes", "notes.txt", "hello\n"),
            task_result(&["notes.txt"]),
            Reply::tool_uses(
                None,
                vec![ToolCall::new("Bash", json!({"command": "sh tamper.sh"})).with_id("t_dd")],
            ),
            task_result(&["ref.yaml"]),
        ])
    }) else {
        return;
    };
    sandbox
        .ctx
        .write("prompts/implement.md", "Write notes.txt.\n");
    // One byte overwritten in place, the modification time put back.
    sandbox.ctx.write(
        "tamper.sh",
        "for f in .specbridge/runs/*/pipeline.yaml; do cp -p \"$f\" ref.yaml; \
         printf X | dd of=\"$f\" bs=1 count=1 conv=notrunc 2>/dev/null; touch -r ref.yaml \"$f\"; done\n",
    );
    sandbox.write_pipeline(
        "  maxTurns: 8\n  tools: [Read, Edit, Write, Bash]\n  allowedBashRules: [\"Bash(sh tamper.sh)\"]\n",
        "verification:
  - { name: notes-written, argv: [test, -f, notes.txt], required: true }
stages:
  - id: first
    kind: execute
    prompt: prompts/implement.md
  - id: second
    kind: execute
    needs: [first]
    prompt: prompts/implement.md
",
    );

    let out = sandbox.run(&["run"]);
    let dd = sandbox.tool_result("t_dd");
    assert!(!dd.is_error, "the CLI refused the edit: {dd:?}");
    assert_eq!(out.code, 6, "{}", out.snapshot());
    assert_eq!(sandbox.stage_json("first")["status"], "succeeded");
    let stage = sandbox.stage_json("second");
    assert_eq!(stage["status"], "safety-violation", "{stage:#}");
    let reason = stage["outcome"].as_str().unwrap();
    assert!(
        reason.contains("the run record `pipeline.yaml` changed after specbridge wrote it"),
        "{reason}"
    );
}

#[test]
fn a_second_run_with_execute_stages_in_the_same_repository_is_refused() {
    let Some(sandbox) = Sandbox::new(|root: &Path| {
        Script::new([
            // Slow enough that the second run starts while the first holds the tree.
            write_file(root, "t_first", "first.txt", "first\n").with_delay_ms(6000),
            task_result(&["first.txt"]),
        ])
    }) else {
        return;
    };
    sandbox
        .ctx
        .write("prompts/implement.md", "Write first.txt.\n");
    sandbox.write_pipeline(
        "  maxTurns: 6\n",
        "verification:
  - { name: written, argv: [test, -f, first.txt], required: true }
stages:
  - id: implement
    kind: execute
    prompt: prompts/implement.md
",
    );

    let mut first = sandbox.spawn_run();
    let lock = sandbox.ctx.path(".specbridge/worktree.lock");
    let deadline = Instant::now() + Duration::from_secs(60);
    let first_id = loop {
        let holder = std::fs::read_to_string(&lock).unwrap_or_default();
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&holder) {
            if let Some(id) = v["runId"].as_str() {
                break id.to_owned();
            }
        }
        assert!(
            Instant::now() < deadline,
            "the first run never took the lock"
        );
        std::thread::sleep(Duration::from_millis(50));
    };

    let second = sandbox
        .command()
        .arg("run")
        .stdin(Stdio::null())
        .output()
        .expect("run the second");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "in use by run {first_id} (`specbridge run`, pid {}",
            first.id()
        )),
        "{stderr}"
    );
    let status = first.wait().expect("the first run ends");
    assert_eq!(status.code(), Some(0));

    // One run folder: the refused run created nothing.
    let stage = sandbox.stage_json("implement");
    assert_eq!(stage["status"], "succeeded", "{stage:#}");
    assert_eq!(stage["evidenceStatus"], "verified", "{stage:#}");
    let changed = read_json(
        &sandbox
            .attempt_dir("implement", 1)
            .join("changed-files.json"),
    );
    assert_eq!(changed["added"], json!(["first.txt"]), "{changed:#}");
}
