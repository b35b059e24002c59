//! Execute stages under the real CLI: the file tools pre-approved, Bash only through
//! rules, in-repository shell mutations denied, and the outcome decided by evidence
//! and verification (docs/stage-kinds.md execute, docs/evidence.md).

use std::path::Path;

use serde_json::json;
use specbridge_testkit::model_server::{Reply, Script, ToolCall};

use super::harness::{read_json, write_file, Sandbox};

const STAGE: &str = "verification:
  - { name: notes-written, argv: [sh, -c, 'test \"$(cat notes.txt)\" = hello'], required: true }
stages:
  - id: implement
    kind: execute
    prompt: prompts/implement.md
    output: { schema: builtin:task-result }
";

fn bash(id: &str, command: &str) -> Reply {
    Reply::tool_uses(
        None,
        vec![ToolCall::new("Bash", json!({"command": command, "description": id})).with_id(id)],
    )
}

fn task_result(changed: &[&str], commands: &[&str]) -> Reply {
    Reply::structured_output(json!({
        "status": "completed",
        "summary": "Wrote the notes.",
        "changedFiles": changed,
        "commandsRun": commands,
        "blockingQuestions": [],
    }))
}

/// A tracked folder and a tracked file for the model to try to destroy.
fn write_tracked_files(sandbox: &Sandbox) {
    sandbox.ctx.write("src/lib.txt", "library\n");
    sandbox.ctx.write("keep.txt", "keep me\n");
    sandbox.ctx.write(
        "prompts/implement.md",
        "Write notes.txt with the word hello.\n",
    );
}

/// A sandbox whose model writes `notes.txt` with `content` (one `Write`),
/// then returns its task result, over the tracked files; `None` where the
/// tier skips.
fn notes_sandbox(content: &'static str) -> Option<Sandbox> {
    let sandbox = Sandbox::new(|root: &Path| {
        Script::new([
            write_file(root, "t_write", "notes.txt", content),
            task_result(&["notes.txt"], &[]),
        ])
    })?;
    write_tracked_files(&sandbox);
    Some(sandbox)
}

fn assert_tracked_files_intact(sandbox: &Sandbox) {
    assert_eq!(sandbox.ctx.read("src/lib.txt"), "library\n");
    assert_eq!(sandbox.ctx.read("keep.txt"), "keep me\n");
}

#[test]
fn execute_stage_writes_runs_allowed_commands_and_is_refused_destruction() {
    let Some(sandbox) = Sandbox::new(|root: &Path| {
        Script::new([
            Reply::tool_uses(
                Some("Writing the notes.".into()),
                vec![ToolCall::new(
                    "Write",
                    json!({"file_path": root.join("notes.txt"), "content": "hello\n"}),
                )
                .with_id("t_write")],
            ),
            bash("t_status", "git status"),
            bash("t_rm", "rm -rf src"),
            // Inside the sandbox the CLI lets a redirection into the working
            // directory through, but not into a protected path (a deny rule).
            bash("t_echo", "echo x > specbridge.yaml"),
            task_result(&["notes.txt"], &["git status"]),
        ])
    }) else {
        return;
    };
    write_tracked_files(&sandbox);
    sandbox.write_pipeline(
        "  maxTurns: 8\n  tools: [Read, Glob, Grep, Edit, Write, Bash]\n  allowedBashRules: [\"Bash(git status:*)\"]\n",
        STAGE,
    );

    let out = sandbox.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let stage = sandbox.stage_json("implement");
    assert_eq!(stage["status"], "succeeded", "{stage:#}");
    assert_eq!(stage["evidenceStatus"], "verified", "{stage:#}");

    // The repository: the written file, and nothing else changed.
    assert_eq!(sandbox.ctx.read("notes.txt"), "hello\n");
    assert_tracked_files_intact(&sandbox);
    assert_eq!(sandbox.changed_paths(), ["?? notes.txt"]);

    // The server's log: Write ran, `git status` ran (and saw the new file), the two
    // in-repository mutations were refused by the CLI in `default` mode.
    assert!(!sandbox.tool_result("t_write").is_error);
    let status = sandbox.tool_result("t_status");
    assert!(!status.is_error, "{status:?}");
    assert!(status.text().contains("notes.txt"), "{status:?}");
    let refused = sandbox.tool_result("t_rm");
    assert!(refused.is_error, "{refused:?}");
    // 2.1.332 words it either way ("needs approval" / "requires approval").
    let text = refused.text();
    assert!(
        text.contains("needs approval") || text.contains("requires approval"),
        "{refused:?}"
    );
    let refused = sandbox.tool_result("t_echo");
    assert!(refused.is_error, "{refused:?}");
    assert!(refused.text().contains("has been denied"), "{refused:?}");
    assert_eq!(sandbox.model_requests().len(), 5);
    assert_eq!(sandbox.server.remaining(), 0);

    // The records: both refusals, Bash offered but never approved as a whole.
    sandbox.assert_refused_on_record("implement", &["t_rm", "t_echo"]);
    let result = sandbox.attempt_json("implement", 1, "result.json");
    assert!(result["offeredTools"]
        .as_array()
        .unwrap()
        .contains(&json!("Bash")));
    let request = sandbox.attempt_json("implement", 1, "request.json");
    let allowed = request["toolPolicy"]["allowedTools"].as_array().unwrap();
    assert!(!allowed.contains(&json!("Bash")), "{request:#}");
    assert!(
        allowed.contains(&json!("Bash(git status:*)")),
        "{request:#}"
    );
    let verification = sandbox.attempt_json("implement", 1, "verification.json");
    assert_eq!(verification["commands"][0]["name"], "notes-written");
    assert_eq!(
        verification["commands"][0]["passed"], true,
        "{verification:#}"
    );
    let evidence = sandbox.attempt_json("implement", 1, "evidence.json");
    assert_eq!(evidence["status"], "verified", "{evidence:#}");
    assert_eq!(evidence["changed"]["added"], 1, "{evidence:#}");
    assert_eq!(evidence["changed"]["deleted"], 0, "{evidence:#}");
    assert_eq!(evidence["changed"]["modified"], 0, "{evidence:#}");
    let output = read_json(&sandbox.run_dir().join("stages/implement/output.json"));
    assert_eq!(output["changedFiles"], json!(["notes.txt"]));
}

#[test]
fn accept_edits_gets_deny_rules_that_stop_rm_under_the_real_cli() {
    let Some(sandbox) = Sandbox::new(|root: &Path| {
        Script::new([
            bash("t_rm", "rm -rf src"),
            bash("t_mv", "mv keep.txt moved.txt"),
            write_file(root, "t_write", "notes.txt", "hello\n"),
            task_result(&["notes.txt"], &[]),
        ])
    }) else {
        return;
    };
    write_tracked_files(&sandbox);
    sandbox.write_pipeline(
        "  maxTurns: 8\n  permissionMode: acceptEdits\n  tools: [Read, Glob, Grep, Edit, Write, Bash]\n  allowedBashRules: [\"Bash(git status:*)\"]\n",
        STAGE,
    );

    let out = sandbox.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert!(
        out.stderr.contains("acceptEdits"),
        "the mode's risk is warned about: {}",
        out.snapshot()
    );
    let stage = sandbox.stage_json("implement");
    assert_eq!(stage["status"], "succeeded", "{stage:#}");
    assert_eq!(stage["evidenceStatus"], "verified", "{stage:#}");
    assert_tracked_files_intact(&sandbox);
    assert!(!sandbox.ctx.path("moved.txt").exists());
    assert_eq!(sandbox.changed_paths(), ["?? notes.txt"]);

    // Refused by a deny rule ("has been denied"), not by the mode ("needs approval"):
    // acceptEdits alone would have let both commands run.
    for id in ["t_rm", "t_mv"] {
        let refused = sandbox.tool_result(id);
        assert!(refused.is_error, "{refused:?}");
        assert!(refused.text().contains("has been denied"), "{refused:?}");
    }
    sandbox.assert_refused_on_record("implement", &["t_rm", "t_mv"]);
    let request = sandbox.attempt_json("implement", 1, "request.json");
    assert_eq!(request["toolPolicy"]["permissionMode"], "acceptEdits");
    let disallowed = request["toolPolicy"]["disallowedTools"].as_array().unwrap();
    assert!(disallowed.contains(&json!("Bash(rm:*)")), "{request:#}");
    assert!(disallowed.contains(&json!("Bash(mv:*)")), "{request:#}");
}

/// The real CLI writes the wrong content: verification fails, the stage is
/// `unverified` (never `succeeded`), the check after it is `blocked`, exit 1. The
/// user fixes the file by hand and commits; `resume --reverify` accepts it with no
/// model request, the change attributed to `human`, and the run ends green.
#[test]
fn unverified_blocks_and_a_hand_fix_is_accepted_by_reverify() {
    let Some(sandbox) = notes_sandbox("helo\n") else {
        return;
    };
    sandbox.write_pipeline(
        "  maxTurns: 6\n  tools: [Read, Glob, Grep, Edit, Write]\n",
        &format!(
            "{STAGE}  - id: after\n    kind: check\n    needs: [implement]\n    argv: [echo, after]\n"
        ),
    );

    let out = sandbox.run(&["run"]);
    assert_eq!(out.code, 1, "{}", out.snapshot());
    let stage = sandbox.stage_json("implement");
    assert_eq!(stage["status"], "unverified", "{stage:#}");
    assert_eq!(stage["evidenceStatus"], "implemented-unverified");
    let after = sandbox.stage_json("after");
    assert_eq!(after["status"], "blocked", "{after:#}");
    assert!(
        after["outcome"]
            .as_str()
            .unwrap()
            .contains("blocked by `implement`"),
        "{after:#}"
    );
    assert_eq!(sandbox.ctx.read("notes.txt"), "helo\n");
    let requests = sandbox.model_requests().len();

    sandbox.ctx.write("notes.txt", "hello\n");
    sandbox.ctx.git(&["add", "notes.txt"]);
    sandbox
        .ctx
        .git(&["commit", "-q", "-m", "fix the notes by hand"]);
    let out = sandbox.run(&["resume", "latest", "--reverify"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_eq!(
        sandbox.model_requests().len(),
        requests,
        "no agent was spawned"
    );
    let stage = sandbox.stage_json("implement");
    assert_eq!(stage["status"], "succeeded", "{stage:#}");
    assert_eq!(stage["evidenceStatus"], "verified");
    let changed = read_json(
        &sandbox
            .attempt_dir("implement", 2)
            .join("changed-files.json"),
    );
    assert_eq!(changed["attributedTo"], "human", "{changed:#}");
    assert_eq!(sandbox.stage_json("after")["status"], "succeeded");
    assert_eq!(sandbox.run(&["runs", "audit", "latest"]).code, 0);
}

/// A change the run did not make, made while it goes on (by a check stage
/// before the execute stage), is refused with the real CLI too: the CLI,
/// spawned while the snapshot is finished, is stopped before it has its
/// prompt and asks the model nothing; the agent's write never happens.
#[test]
fn a_tree_made_dirty_during_the_run_is_refused_before_the_model_is_asked() {
    let Some(sandbox) = notes_sandbox("hello\n") else {
        return;
    };
    sandbox.write_pipeline(
        "  maxTurns: 6\n  tools: [Read, Glob, Grep, Edit, Write]\n",
        &STAGE.replace(
            "stages:\n",
            "stages:\n  - { id: stray, kind: check, argv: [sh, -c, 'echo stray > stray.txt'], sandbox: off }\n",
        )
        .replace(
            "    output: { schema: builtin:task-result }\n",
            "    output: { schema: builtin:task-result }\n    needs: [stray]\n",
        ),
    );

    let out = sandbox.run(&["run"]);
    assert_eq!(out.code, 4, "a stage failed: {}", out.snapshot());
    let stage = sandbox.stage_json("implement");
    assert_eq!(stage["status"], "failed", "{stage:#}");
    assert!(
        stage["outcome"]
            .as_str()
            .is_some_and(|o| o.contains("uncommitted change(s) (stray.txt)")),
        "{stage:#}"
    );
    // The CLI was spawned while the snapshot was finished, and stopped.
    let result = sandbox.attempt_json("implement", 1, "result.json");
    assert!(
        result["failureReason"]
            .as_str()
            .is_some_and(|r| r.contains("it was stopped before it was given any")),
        "{result:#}"
    );
    assert!(sandbox.model_requests().is_empty(), "the model was asked");
    assert_eq!(sandbox.server.remaining(), 2);
    assert!(!sandbox.ctx.path("notes.txt").exists(), "the agent wrote");
    assert_tracked_files_intact(&sandbox);
    assert_eq!(sandbox.run(&["runs", "audit", "latest"]).code, 0);
}
