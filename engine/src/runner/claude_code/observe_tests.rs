use serde_json::json;

use super::*;
use crate::runner::claude_code::stream::{CallResult, StreamState};

fn policy(tools: &[&str], allowed: &[&str], disallowed: &[&str]) -> ToolPolicy {
    let strings = |l: &[&str]| l.iter().map(std::string::ToString::to_string).collect();
    ToolPolicy {
        tools: strings(tools),
        allowed_tools: strings(allowed),
        disallowed_tools: strings(disallowed),
        permission_mode: "manual".into(),
        ..ToolPolicy::default()
    }
}

fn init(tools: &[&str], mode: &str) -> InitInfo {
    InitInfo {
        tools: tools.iter().map(std::string::ToString::to_string).collect(),
        permission_mode: Some(mode.into()),
        ..Default::default()
    }
}

#[test]
fn init_reporting_what_was_asked_passes() {
    let p = policy(&["Read", "Glob", "Grep"], &["Read(./**)"], &[]);
    let expected = InitExpectation {
        policy: &p,
        tools_restricted: true,
        schema: true,
    };
    // `manual` is reported as `default`; StructuredOutput comes with the schema;
    // a requested tool the CLI does not have is simply not offered.
    let seen = init(&["Glob", "Read", "StructuredOutput"], "default");
    assert_eq!(check_init(&seen, &expected), None);
}

#[test]
fn extra_tools_or_another_mode_are_mismatches() {
    let p = policy(&["Read", "Glob", "Grep"], &[], &[]);
    let expected = InitExpectation {
        policy: &p,
        tools_restricted: true,
        schema: false,
    };
    let m = check_init(
        &init(&["Read", "Bash", "StructuredOutput"], "default"),
        &expected,
    )
    .expect("mismatch");
    assert_eq!(m.extra_tools, ["Bash", "StructuredOutput"]);
    assert_eq!(m.mode, None);
    let m = check_init(&init(&["Read"], "acceptEdits"), &expected).expect("mismatch");
    assert!(m.extra_tools.is_empty());
    assert_eq!(m.mode, Some(("manual".into(), "acceptEdits".into())));
    assert!(
        m.to_string().contains("permission mode `acceptEdits`"),
        "{m}"
    );
}

#[test]
fn without_tools_flag_only_denied_tools_must_be_missing() {
    let p = policy(&["Read"], &[], &["Bash", "Write"]);
    let expected = InitExpectation {
        policy: &p,
        tools_restricted: false,
        schema: false,
    };
    assert_eq!(
        check_init(&init(&["Read", "Task", "Glob"], "default"), &expected),
        None
    );
    let m = check_init(&init(&["Read", "Write"], "default"), &expected).unwrap();
    assert_eq!(m.extra_tools, ["Write"]);
}

fn call(tool: &str, input: serde_json::Value, error: Option<&str>) -> ObservedCall {
    ObservedCall {
        id: Some(format!("toolu_{tool}")),
        tool: tool.into(),
        input,
        result: Some(CallResult {
            is_error: error.is_some(),
            error_text: error.map(str::to_owned),
        }),
    }
}

fn verdicts(calls: &[ObservedCall], p: &ToolPolicy, root: &Path) -> Vec<(bool, bool)> {
    let protected = vec!["specbridge.yaml".to_string()];
    check_calls(
        calls,
        &CallContext {
            policy: p,
            root,
            protected: &protected,
            recorded_root: None,
        },
    )
    .iter()
    .map(|r| (r.policy == CallVerdict::Refused, r.violation))
    .collect()
}

#[test]
fn file_tools_outside_the_repository_or_on_protected_paths_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::os::unix::fs::symlink(dir.path(), root.join("up")).unwrap();
    std::os::unix::fs::symlink(root.join(".git"), root.join("notes")).unwrap();
    let p = policy(
        &["Read", "Write", "Edit", "Glob", "Grep"],
        &["Edit(./**)"],
        &[],
    );
    let inside = root.join("src/a.rs").display().to_string();
    let cases = [
        (
            call("Write", json!({"file_path": inside}), None),
            (false, false),
        ),
        (
            call("Write", json!({"file_path": "src/b.rs"}), None),
            (false, false),
        ),
        (
            call("Write", json!({"file_path": "/tmp/x"}), None),
            (true, true),
        ),
        (
            call("Write", json!({"file_path": "../x"}), None),
            (true, true),
        ),
        (
            call("Write", json!({"file_path": "src/../../x"}), None),
            (true, true),
        ),
        (
            call("Edit", json!({"file_path": "up/x"}), None),
            (true, true),
        ),
        (
            call("Write", json!({"file_path": "/tmp/x"}), Some("denied")),
            (true, false),
        ),
        (
            call("Write", json!({"file_path": "notes/config"}), None),
            (true, true),
        ),
        (
            call(
                "Edit",
                json!({"file_path": ".specbridge/runs/x/run.json"}),
                None,
            ),
            (true, true),
        ),
        (
            call("Edit", json!({"file_path": "specbridge.yaml"}), None),
            (true, true),
        ),
        (
            call("Read", json!({"file_path": "specbridge.yaml"}), None),
            (false, false),
        ),
        (
            call("Read", json!({"file_path": "/etc/passwd"}), None),
            (true, true),
        ),
        (
            call("Glob", json!({"pattern": "/etc/*"}), None),
            (true, true),
        ),
        (
            call("Glob", json!({"pattern": "../**/*.md"}), None),
            (true, true),
        ),
        (
            call("Glob", json!({"pattern": "**/*.rs"}), None),
            (false, false),
        ),
        (
            call("Grep", json!({"pattern": "x", "path": "/root"}), None),
            (true, true),
        ),
        (
            call("Grep", json!({"pattern": "../x"}), None),
            (false, false),
        ),
        (
            call("Read", json!({"file_path": "~/.ssh/id_rsa"}), None),
            (true, true),
        ),
        (
            call("NotebookEdit", json!({"notebook_path": "a.ipynb"}), None),
            (true, true),
        ),
        (
            call("StructuredOutput", json!({"x": 1}), None),
            (false, false),
        ),
        (
            call("WebFetch", json!({"url": "http://x"}), None),
            (true, true),
        ),
    ];
    let calls: Vec<ObservedCall> = cases.iter().map(|(c, _)| c.clone()).collect();
    let got = verdicts(&calls, &p, &root);
    for ((c, want), got) in cases.iter().zip(got) {
        assert_eq!(got, *want, "{} {}", c.tool, c.input);
    }
}

#[test]
fn bash_must_match_an_allowed_rule_and_no_deny_rule() {
    let dir = tempfile::tempdir().unwrap();
    let p = policy(
        &["Read", "Bash"],
        &["Read(./**)", "Bash(git status *)", "Bash(cargo test:*)"],
        &["Bash(rm:*)"],
    );
    let cases = [
        (
            call("Bash", json!({"command": "git status"}), None),
            (false, false),
        ),
        (
            call("Bash", json!({"command": "cargo test -q"}), None),
            (false, false),
        ),
        (call("Bash", json!({"command": "ls"}), None), (true, true)),
        (
            call("Bash", json!({"command": "git status && curl x"}), None),
            (true, true),
        ),
        (
            call(
                "Bash",
                json!({"command": "touch /x"}),
                Some("needs approval"),
            ),
            (true, false),
        ),
        (
            call("Bash", json!({"command": "cargo test; rm -rf x"}), None),
            (true, true),
        ),
    ];
    let calls: Vec<ObservedCall> = cases.iter().map(|(c, _)| c.clone()).collect();
    for ((c, want), got) in cases.iter().zip(verdicts(&calls, &p, dir.path())) {
        assert_eq!(got, *want, "{}", c.input);
    }
}

#[test]
fn calls_and_results_are_paired_from_the_stream() {
    let mut state = StreamState::new();
    let long = "x".repeat(5000);
    state.feed_line(
        json!({"type": "assistant", "message": {"id": "m1", "content": [
            {"type": "tool_use", "id": "t1", "name": "Write",
             "input": {"file_path": "/tmp/out", "content": long}},
            {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "ls"}}
        ]}})
        .to_string()
        .as_bytes(),
    );
    state.feed_line(
        json!({"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": "t2", "content": "ok", "is_error": false},
            {"type": "tool_result", "tool_use_id": "t1", "is_error": true,
             "content": [{"type": "text", "text": "haven't granted it yet"}]}
        ]}})
        .to_string()
        .as_bytes(),
    );
    let calls = state.tool_calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].input["file_path"], "/tmp/out");
    assert!(calls[0].input["content"].as_str().unwrap().len() < 300);
    let r = calls[0].result.as_ref().unwrap();
    assert!(r.is_error);
    assert_eq!(r.error_text.as_deref(), Some("haven't granted it yet"));
    assert_eq!(
        calls[1].result,
        Some(CallResult {
            is_error: false,
            error_text: None
        })
    );
}

#[test]
fn a_recording_is_judged_against_the_folder_it_was_made_in() {
    let dir = tempfile::tempdir().unwrap();
    let p = policy(&["Read", "Write"], &["Edit(./**)"], &[]);
    let calls = [
        call(
            "Write",
            json!({"file_path": "/tmp/rec-root/src/lib.rs"}),
            None,
        ),
        call("Write", json!({"file_path": "/tmp/rec-root-other/x"}), None),
        call(
            "Write",
            json!({"file_path": "/tmp/rec-root/.git/config"}),
            None,
        ),
    ];
    let records = check_calls(
        &calls,
        &CallContext {
            policy: &p,
            root: dir.path(),
            protected: &[],
            recorded_root: Some("/tmp/rec-root"),
        },
    );
    let violations: Vec<bool> = records.iter().map(|r| r.violation).collect();
    assert_eq!(violations, [false, true, true]);
    // The record keeps the input as it was recorded.
    assert_eq!(records[0].input["file_path"], "/tmp/rec-root/src/lib.rs");
}
