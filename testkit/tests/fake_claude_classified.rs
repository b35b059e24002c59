//! The fake's output, read and classified by the engine: each scenario lands on the
//! outcome its real counterpart gets.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use specbridge_engine::runner::claude_code::outcome::{classify, ClassifyInput, SchemaDelivery};
use specbridge_engine::runner::claude_code::stream::StreamState;
use specbridge_engine::StageStatus;

const SCHEMA: &str =
    r#"{"type":"object","required":["summary"],"properties":{"summary":{"type":"string"}}}"#;

fn run(dir: &std::path::Path, env: &[(&str, &str)], args: &[&str]) -> (Option<i32>, Vec<u8>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fake-claude"))
        .args(args)
        .envs(env.iter().copied())
        .env_remove("FAKE_CLAUDE_SCRIPT")
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The fake may refuse its arguments and exit before reading stdin.
    let _ = child.stdin.take().unwrap().write_all(b"prompt");
    let out = child.wait_with_output().unwrap();
    (out.status.code(), out.stdout)
}

#[test]
fn scenarios_classify_like_the_real_cli() {
    let dir = tempfile::tempdir().unwrap();
    assert!(Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir.path())
        .status()
        .unwrap()
        .success());
    let schema: Value = serde_json::from_str(SCHEMA).unwrap();
    let table = [
        ("success", StageStatus::Succeeded),
        ("text-only", StageStatus::MalformedOutput),
        ("schema-retries-exhausted", StageStatus::MalformedOutput),
        ("max-turns", StageStatus::MaxTurns),
        ("max-turns-old", StageStatus::MaxTurns),
        ("budget", StageStatus::BudgetExceeded),
        ("api-500", StageStatus::Failed),
        ("api-529", StageStatus::Failed),
        ("not-logged-in", StageStatus::RunnerUnavailable),
        ("garbage", StageStatus::Failed),
        ("write-file", StageStatus::Succeeded),
        ("stderr-flood", StageStatus::Succeeded),
    ];
    for (scenario, expected) in table {
        let (code, stdout) = run(
            dir.path(),
            &[("FAKE_CLAUDE_SCENARIO", scenario)],
            &[
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--json-schema",
                SCHEMA,
                "--tools",
                "Read",
            ],
        );
        let state = StreamState::parse_all(&stdout);
        let classification = classify(ClassifyInput {
            exit_code: code,
            envelope: state.result(),
            schema: Some(&schema),
            stream_error: state.assistant_error(),
            ..ClassifyInput::default()
        });
        assert_eq!(
            classification.status, expected,
            "{scenario}: {classification:?}"
        );
        if scenario != "garbage" {
            assert_eq!(
                state.init().unwrap().tools,
                ["Read", "StructuredOutput"],
                "{scenario}"
            );
        }
    }
}

#[test]
fn an_old_version_without_the_schema_flag_answers_in_text() {
    let dir = tempfile::tempdir().unwrap();
    let schema: Value = serde_json::from_str(SCHEMA).unwrap();
    let (code, stdout) = run(
        dir.path(),
        &[
            ("FAKE_CLAUDE_VERSION", "1.0.0"),
            ("FAKE_CLAUDE_OUTPUT", r#"{"summary":"old"}"#),
        ],
        &["-p", "--output-format", "json"],
    );
    let state = StreamState::parse_all(&stdout);
    let classification = classify(ClassifyInput {
        exit_code: code,
        envelope: state.result(),
        schema: Some(&schema),
        schema_delivery: SchemaDelivery::ResultText,
        ..ClassifyInput::default()
    });
    assert_eq!(
        classification.status,
        StageStatus::Succeeded,
        "{classification:?}"
    );
    assert!(classification.degraded);
    assert_eq!(
        classification.structured_output,
        Some(json!({"summary": "old"}))
    );
}
