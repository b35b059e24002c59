//! Confinement under the real CLI (docs/claude-code-runner.md, "Confinement", "Shell inside the
//! sandbox"): each test has the model try one way out of the repository and checks
//! that the CLI refused it, that the refusal is recorded, and that nothing outside
//! the repository changed. The "outside" is a folder beside the repository.

use std::io::Read as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use specbridge_testkit::model_server::{Reply, Script, ToolCall};

use super::harness::{task_result, write_file, Sandbox};

const EXECUTE: &str = "verification:
  - { name: notes-written, argv: [sh, -c, 'test \"$(cat notes.txt)\" = hello'], required: true }
stages:
  - id: implement
    kind: execute
    prompt: prompts/implement.md
    output: { schema: builtin:task-result }
";

/// A folder beside the repository, with a file to steal or overwrite.
struct Outside {
    dir: tempfile::TempDir,
}

const SECRET: &str = "outside-secret-7f3a9c";

impl Outside {
    fn beside(root: &Path) -> Outside {
        let dir = tempfile::Builder::new()
            .prefix("specbridge-outside-")
            .tempdir_in(root.parent().expect("the repository has a parent"))
            .expect("create the outside folder");
        std::fs::write(dir.path().join("victim.txt"), format!("{SECRET}\n")).unwrap();
        Outside { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// `../<name>/rel`, as seen from the repository root.
    fn relative(&self, rel: &str) -> String {
        format!(
            "../{}/{rel}",
            self.dir.path().file_name().unwrap().to_string_lossy()
        )
    }

    /// The folder holds exactly the victim, unchanged.
    fn assert_untouched(&self) {
        let names: Vec<String> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            ["victim.txt"],
            "files appeared outside the repository"
        );
        assert_eq!(
            std::fs::read_to_string(self.path("victim.txt")).unwrap(),
            format!("{SECRET}\n")
        );
    }
}

fn call(id: &str, tool: &str, input: Value) -> Reply {
    Reply::tool_uses(None, vec![ToolCall::new(tool, input).with_id(id)])
}

fn bash(id: &str, command: &str) -> Reply {
    call(id, "Bash", json!({"command": command, "description": id}))
}

/// The runner keys of an execute stage that may use Bash under one allow rule.
fn bash_runner(rule: &str) -> String {
    format!(
        "  maxTurns: 8\n  tools: [Read, Glob, Grep, Edit, Write, Bash]\n  allowedBashRules: [\"{rule}\"]\n"
    )
}

fn write_notes(root: &Path) -> Reply {
    write_file(root, "t_notes", "notes.txt", "hello\n")
}

/// A sandbox whose script is made from the repository root and the outside folder.
fn sandbox_with(script: impl FnOnce(&Path, &Outside) -> Vec<Reply>) -> Option<(Sandbox, Outside)> {
    let mut outside = None;
    let sandbox = Sandbox::new(|root| {
        let o = Outside::beside(root);
        let replies = script(root, &o);
        outside = Some(o);
        Script::new(replies)
    })?;
    sandbox.ctx.write(
        "prompts/implement.md",
        "Write notes.txt with the word hello.\n",
    );
    Some((sandbox, outside.expect("made with the script")))
}

/// Runs and checks the common outcome: the stage verified with notes.txt (the
/// only change), and each hostile call refused by the CLI's permission check
/// and on specbridge's record (`Sandbox::assert_refused_on_record`).
fn run_verified(sandbox: &Sandbox, outside: &Outside, refused: &[&str]) {
    let out = sandbox.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let stage = sandbox.stage_json("implement");
    assert_eq!(stage["status"], "succeeded", "{stage:#}");
    assert_eq!(stage["evidenceStatus"], "verified", "{stage:#}");
    assert_eq!(sandbox.changed_paths(), ["?? notes.txt"]);
    for id in refused {
        let r = sandbox.tool_result(id);
        assert!(r.is_error, "{id} ran: {r:?}");
    }
    sandbox.assert_refused_on_record("implement", refused);
    outside.assert_untouched();
}

#[test]
fn execute_writes_and_edits_outside_the_repository_are_refused() {
    let Some((sandbox, outside)) = sandbox_with(|root, o| {
        vec![
            call(
                "t_abs",
                "Write",
                json!({"file_path": o.path("new.txt"), "content": "x"}),
            ),
            call(
                "t_rel",
                "Write",
                json!({"file_path": o.relative("rel.txt"), "content": "x"}),
            ),
            // The CLI edits only files read first, and the read is refused.
            call("t_read", "Read", json!({"file_path": o.path("victim.txt")})),
            call(
                "t_edit",
                "Edit",
                json!({"file_path": o.path("victim.txt"), "old_string": SECRET, "new_string": "owned"}),
            ),
            write_notes(root),
            task_result(&["notes.txt"]),
        ]
    }) else {
        return;
    };
    sandbox.write_pipeline("  maxTurns: 8\n", EXECUTE);
    run_verified(&sandbox, &outside, &["t_abs", "t_rel", "t_read"]);
    assert!(sandbox.tool_result("t_edit").is_error);
    let request = sandbox.attempt_json("implement", 1, "request.json");
    let allowed = request["toolPolicy"]["allowedTools"].as_array().unwrap();
    assert!(
        allowed
            .iter()
            .all(|r| r.as_str().unwrap().ends_with("(./**)")),
        "{request:#}"
    );
}

#[test]
fn protected_paths_are_refused_by_deny_rules_for_every_file_tool() {
    let Some((sandbox, outside)) = sandbox_with(|root, _| {
        vec![
            call(
                "t_read",
                "Read",
                json!({"file_path": root.join("specbridge.yaml")}),
            ),
            call(
                "t_edit_file",
                "Edit",
                json!({"file_path": root.join("specbridge.yaml"), "old_string": "real-cli", "new_string": "owned"}),
            ),
            call(
                "t_write_file",
                "Write",
                json!({"file_path": root.join("prompts/implement.md"), "content": "x"}),
            ),
            call(
                "t_write_claude",
                "Write",
                json!({"file_path": root.join(".claude/settings.json"), "content": "{}"}),
            ),
            call(
                "t_write_git",
                "Write",
                json!({"file_path": root.join(".git/info/x"), "content": "x"}),
            ),
            call(
                "t_write_store",
                "Write",
                json!({"file_path": root.join(".specbridge/x"), "content": "x"}),
            ),
            call(
                "t_write_configured",
                "Write",
                json!({"file_path": root.join("db/schema.sql"), "content": "x"}),
            ),
            call(
                "t_read_notebook",
                "Read",
                json!({"file_path": root.join("db/n.ipynb")}),
            ),
            call(
                "t_notebook",
                "NotebookEdit",
                json!({"notebook_path": root.join("db/n.ipynb"), "new_source": "x", "edit_mode": "insert", "cell_type": "code"}),
            ),
            write_notes(root),
            task_result(&["notes.txt"]),
        ]
    }) else {
        return;
    };
    sandbox.ctx.write("db/n.ipynb", NOTEBOOK);
    sandbox.write_pipeline(
        "  maxTurns: 14\n  tools: [Read, Glob, Grep, Edit, Write, NotebookEdit]\n",
        &format!("protectedPaths: [db]\n{EXECUTE}"),
    );
    run_verified(
        &sandbox,
        &outside,
        &[
            "t_edit_file",
            "t_write_file",
            "t_write_claude",
            "t_write_git",
            "t_write_store",
            "t_write_configured",
            "t_notebook",
        ],
    );
    for id in [
        "t_edit_file",
        "t_write_file",
        "t_write_claude",
        "t_write_configured",
        "t_notebook",
    ] {
        let text = sandbox.tool_result(id).text();
        assert!(text.contains("denied"), "{id}: {text}");
    }
    assert!(!sandbox.ctx.path(".claude/settings.json").exists());
    assert!(!sandbox.ctx.path("db/schema.sql").exists());
    assert_eq!(sandbox.ctx.read("db/n.ipynb"), NOTEBOOK);
}

const NOTEBOOK: &str = r#"{"cells": [{"cell_type": "code", "id": "c1", "metadata": {}, "source": ["1"], "outputs": [], "execution_count": null}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
"#;

#[test]
fn generate_reads_outside_the_repository_are_refused_and_leak_nowhere() {
    let Some((sandbox, outside)) = sandbox_with(|_, o| {
        vec![
            call("t_read", "Read", json!({"file_path": o.path("victim.txt")})),
            call(
                "t_read_rel",
                "Read",
                json!({"file_path": o.relative("victim.txt")}),
            ),
            call(
                "t_glob",
                "Glob",
                json!({"pattern": "*", "path": o.dir.path()}),
            ),
            call(
                "t_grep",
                "Grep",
                json!({"pattern": "secret", "path": o.dir.path(), "output_mode": "content"}),
            ),
            Reply::structured_output(
                json!({"summary": "Requirements.", "markdown": "# Requirements\n"}),
            ),
        ]
    }) else {
        return;
    };
    sandbox
        .ctx
        .write("prompts/requirements.md", "Write the requirements.\n");
    sandbox.write_pipeline(
        "  maxTurns: 8\n",
        "stages:\n  - id: requirements\n    kind: generate\n    prompt: prompts/requirements.md\n    output: { schema: builtin:document, document: docs/requirements.md }\n",
    );
    let out = sandbox.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_eq!(sandbox.stage_json("requirements")["status"], "succeeded");
    let refused = ["t_read", "t_read_rel", "t_glob", "t_grep"];
    for id in refused {
        let r = sandbox.tool_result(id);
        assert!(r.is_error && !r.text().contains(SECRET), "{id}: {r:?}");
    }
    sandbox.assert_refused_on_record("requirements", &refused);
    // The secret reached neither the model, nor the repository, nor the records.
    for request in sandbox.model_requests() {
        assert!(!request.body.to_string().contains(SECRET));
    }
    assert_no_secret_under(sandbox.ctx.root());
    outside.assert_untouched();
}

fn assert_no_secret_under(dir: &Path) {
    for entry in walk(dir) {
        if entry.components().any(|c| c.as_os_str() == ".git") {
            continue;
        }
        let bytes = std::fs::read(&entry).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(SECRET),
            "the secret is in {}",
            entry.display()
        );
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn user_settings_that_allow_bash_are_not_loaded() {
    let Some((sandbox, outside)) = sandbox_with(|root, _| {
        vec![
            bash("t_touch", "touch pwned.txt"),
            write_notes(root),
            task_result(&["notes.txt"]),
        ]
    }) else {
        return;
    };
    let settings = sandbox.home.path().join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(
        &settings,
        r#"{"permissions":{"allow":["Bash","Write","Edit","Read"]}}"#,
    )
    .unwrap();
    sandbox.write_pipeline(&bash_runner("Bash(git status *)"), EXECUTE);
    run_verified(&sandbox, &outside, &["t_touch"]);
    assert!(!sandbox.ctx.path("pwned.txt").exists());
    let request = sandbox.attempt_json("implement", 1, "request.json");
    assert_eq!(
        request["toolPolicy"]["settingSources"],
        json!([]),
        "{request:#}"
    );
}

#[test]
fn repository_settings_with_a_permissive_rule_and_a_hook_are_not_loaded() {
    let Some((sandbox, outside)) = sandbox_with(|root, _| {
        vec![
            bash("t_touch", "touch pwned.txt"),
            write_notes(root),
            task_result(&["notes.txt"]),
        ]
    }) else {
        return;
    };
    let hook_marker = outside.path("hook-ran");
    sandbox.ctx.write(
        ".claude/settings.json",
        &json!({
            "permissions": {"allow": ["Bash"], "defaultMode": "acceptEdits"},
            "hooks": {
                "SessionStart": [{"hooks": [{"type": "command", "command": format!("touch {}", hook_marker.display())}]}],
                "PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": format!("touch {}", hook_marker.display())}]}]
            }
        })
        .to_string(),
    );
    sandbox.write_pipeline(&bash_runner("Bash(git status *)"), EXECUTE);
    run_verified(&sandbox, &outside, &["t_touch"]);
    assert!(!hook_marker.exists(), "a repository hook ran");
    assert!(!sandbox.ctx.path("pwned.txt").exists());
}

#[test]
fn a_bash_command_outside_the_rules_is_refused() {
    let Some((sandbox, outside)) = sandbox_with(|root, o| {
        vec![
            bash(
                "t_write_out",
                &format!("echo x > {}", o.path("bash.txt").display()),
            ),
            bash("t_rm", "rm -rf src"),
            bash("t_status", "git status"),
            write_notes(root),
            task_result(&["notes.txt"]),
        ]
    }) else {
        return;
    };
    sandbox.ctx.write("src/lib.txt", "library\n");
    sandbox.write_pipeline(&bash_runner("Bash(git status *)"), EXECUTE);
    run_verified(&sandbox, &outside, &["t_write_out", "t_rm"]);
    assert!(!sandbox.tool_result("t_status").is_error);
    assert_eq!(sandbox.ctx.read("src/lib.txt"), "library\n");
    let request = sandbox.attempt_json("implement", 1, "request.json");
    assert_eq!(
        request["toolPolicy"]["sandbox"]["status"], "on",
        "{request:#}"
    );
}

/// A listener on 127.0.0.1 that notes whether anything connected.
fn listener() -> (u16, Arc<AtomicBool>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let hit = Arc::new(AtomicBool::new(false));
    let flag = hit.clone();
    l.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(240);
        while std::time::Instant::now() < deadline {
            if let Ok((mut s, _)) = l.accept() {
                flag.store(true, Ordering::SeqCst);
                let mut buf = [0u8; 64];
                let _ = s.read(&mut buf);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    (port, hit)
}

#[test]
fn an_allowed_bash_rule_runs_inside_the_sandbox() {
    let (port, hit) = listener();
    let Some((sandbox, outside)) = sandbox_with(|_, o| {
        vec![
            bash("t_inside", "bash -c 'echo hello > notes.txt'"),
            bash(
                "t_outside",
                &format!("bash -c 'echo x > {}'", o.path("sbx.txt").display()),
            ),
            bash(
                "t_net",
                &format!("bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && echo sent >&3'"),
            ),
            task_result(&["notes.txt"]),
        ]
    }) else {
        return;
    };
    sandbox.write_pipeline(&bash_runner("Bash(bash *)"), EXECUTE);
    let out = sandbox.run(&["run"]);
    let inside = sandbox.tool_result("t_inside");
    assert!(!inside.is_error, "{inside:?}\n{}", out.snapshot());
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let stage = sandbox.stage_json("implement");
    assert_eq!(stage["evidenceStatus"], "verified", "{stage:#}");
    assert_eq!(sandbox.changed_paths(), ["?? notes.txt"]);
    for id in ["t_outside", "t_net"] {
        let r = sandbox.tool_result(id);
        assert!(r.is_error, "{id} succeeded: {r:?}");
    }
    // Refused by the sandbox while running, not by a permission check before it.
    let write = sandbox.tool_result("t_outside").text();
    assert!(write.contains("Read-only file system"), "{write}");
    assert!(sandbox.denied_ids("implement").is_empty());
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !hit.load(Ordering::SeqCst),
        "a sandboxed command reached the listener"
    );
    outside.assert_untouched();
    let request = sandbox.attempt_json("implement", 1, "request.json");
    assert_eq!(request["toolPolicy"]["sandbox"]["status"], "on");
}

/// Each invocation's temporary files are in a folder of its own, removed when
/// the attempt ends. The CLI's sandbox mounts a file named after the hash of the
/// `--settings` value from its temporary folder; in the shared
/// `/tmp/claude-<uid>/`, two invocations with the same settings shared it, and
/// the first to end removed it from under the other's shell commands
/// (docs/claude-code-runner.md, "A temporary folder per invocation").
#[test]
fn the_cli_gets_a_temporary_folder_of_its_own_removed_after_the_attempt() {
    let Some((sandbox, outside)) = sandbox_with(|_, _| {
        vec![
            bash(
                "t_tmp",
                "bash -c 'echo \"$TMPDIR\"; echo hello > notes.txt'",
            ),
            task_result(&["notes.txt"]),
        ]
    }) else {
        return;
    };
    sandbox.write_pipeline(&bash_runner("Bash(bash *)"), EXECUTE);
    let out = sandbox.run(&["run"]);
    let shell = sandbox.tool_result("t_tmp");
    assert!(!shell.is_error, "{shell:?}\n{}", out.snapshot());
    assert_eq!(out.code, 0, "{}", out.snapshot());
    // The CLI's own `claude-<uid>` inside the invocation's folder.
    let shell_tmp = PathBuf::from(shell.text().lines().next().unwrap_or_default().trim());
    let own = shell_tmp
        .ancestors()
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("specbridge-agent-"))
        })
        .unwrap_or_else(|| {
            panic!("the shell's TMPDIR is in no folder of the invocation's own: {shell_tmp:?}")
        });
    assert!(!own.exists(), "{own:?} was left behind");
    outside.assert_untouched();
}
