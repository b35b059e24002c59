//! Result envelopes and stream-json transcripts captured from real Claude Code
//! versions, read and classified the way the runner does.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use specbridge_engine::runner::claude_code::envelope::{envelope_from_stdout, ResultEnvelope};
use specbridge_engine::runner::claude_code::outcome::{
    classify, validate_output, ClassifyInput, SchemaDelivery,
};
use specbridge_engine::runner::claude_code::record::ResultRecord;
use specbridge_engine::runner::claude_code::stream::{LineKind, StreamState};
use specbridge_engine::StageStatus;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testkit/fixtures/claude-code")
}

fn envelope(name: &str) -> ResultEnvelope {
    let text = std::fs::read_to_string(
        fixtures()
            .join("result-envelopes")
            .join(format!("{name}.json")),
    )
    .unwrap_or_else(|e| panic!("{name}: {e}"));
    ResultEnvelope::parse(&text).unwrap_or_else(|| panic!("{name} is not an envelope"))
}

/// The schema the captured structured-output runs used.
fn capture_schema() -> Value {
    json!({
        "type": "object",
        "required": ["summary", "count"],
        "properties": {"summary": {"type": "string"}, "count": {"type": "integer"}}
    })
}

/// The CLI exits 1 exactly when `is_error` is true (FACTS: errors exit 1; old limit
/// errors exit 0 with `is_error: false`).
fn exit_code_of(envelope: &ResultEnvelope) -> i32 {
    if envelope.is_error == Some(true) {
        1
    } else {
        0
    }
}

#[derive(Clone, Copy)]
enum Schema {
    None,
    Flag,
    ResultText,
}

fn classify_fixture(
    name: &str,
    schema: Schema,
) -> specbridge_engine::runner::claude_code::outcome::Classification {
    let envelope = envelope(name);
    let schema_value = capture_schema();
    classify(ClassifyInput {
        exit_code: Some(exit_code_of(&envelope)),
        envelope: Some(&envelope),
        schema: match schema {
            Schema::None => None,
            Schema::Flag | Schema::ResultText => Some(&schema_value),
        },
        schema_delivery: match schema {
            Schema::ResultText => SchemaDelivery::ResultText,
            _ => SchemaDelivery::Flag,
        },
        ..ClassifyInput::default()
    })
}

const TABLE: &[(&str, Schema, StageStatus)] = &[
    ("1.0.0-error_max_turns", Schema::None, StageStatus::MaxTurns),
    ("1.0.0-success", Schema::None, StageStatus::Succeeded),
    (
        "1.0.0-success",
        Schema::ResultText,
        StageStatus::MalformedOutput,
    ),
    (
        "2.0.50-error_max_turns",
        Schema::None,
        StageStatus::MaxTurns,
    ),
    ("2.0.50-success", Schema::None, StageStatus::Succeeded),
    (
        "2.1.100-error_max_turns",
        Schema::Flag,
        StageStatus::MaxTurns,
    ),
    ("2.1.100-success", Schema::None, StageStatus::Succeeded),
    ("2.1.332-00-smoke", Schema::None, StageStatus::Succeeded),
    (
        "2.1.332-a1-readonly-tools",
        Schema::Flag,
        StageStatus::Succeeded,
    ),
    (
        "2.1.332-a2-allowedtools-only",
        Schema::Flag,
        StageStatus::Succeeded,
    ),
    (
        "2.1.332-b-acceptedits",
        Schema::Flag,
        StageStatus::Succeeded,
    ),
    (
        "2.1.332-c3-schema-text-only",
        Schema::Flag,
        StageStatus::MalformedOutput,
    ),
    (
        "2.1.332-c3-schema-text-only",
        Schema::None,
        StageStatus::Succeeded,
    ),
    (
        "2.1.332-c4-schema-invalid-forever-no-maxturns",
        Schema::Flag,
        StageStatus::MalformedOutput,
    ),
    (
        "2.1.332-d1-max-turns-1-json",
        Schema::Flag,
        StageStatus::MaxTurns,
    ),
    (
        "2.1.332-f2-budget-single-text",
        Schema::None,
        StageStatus::BudgetExceeded,
    ),
    (
        "2.1.332-g1b-http500-forever-full",
        Schema::Flag,
        StageStatus::Failed,
    ),
    (
        "2.1.332-g2-http529-forever",
        Schema::Flag,
        StageStatus::Failed,
    ),
    (
        "2.1.332-g3b-http401-full",
        Schema::Flag,
        StageStatus::RunnerUnavailable,
    ),
    ("2.1.332-g7-http400", Schema::None, StageStatus::Failed),
];

#[test]
fn every_captured_envelope_maps_to_its_outcome() {
    let mut report = String::new();
    for (name, schema, expected) in TABLE {
        let classification = classify_fixture(name, *schema);
        assert_eq!(
            classification.status, *expected,
            "{name}: {classification:?}"
        );
        assert_eq!(
            classification.status == StageStatus::Succeeded,
            classification.failure_reason.is_none(),
            "{name}"
        );
        assert_eq!(
            classification.degraded,
            matches!(schema, Schema::ResultText),
            "{name}"
        );
        let mode = match schema {
            Schema::None => "no schema",
            Schema::Flag => "--json-schema",
            Schema::ResultText => "schema in text",
        };
        report.push_str(&format!(
            "{name} ({mode}): {} — {}\n",
            classification.status,
            classification.failure_reason.as_deref().unwrap_or("-")
        ));
    }
    insta::assert_snapshot!("captured_envelope_outcomes", report);
}

#[test]
fn every_captured_envelope_is_in_the_table() {
    for entry in std::fs::read_dir(fixtures().join("result-envelopes")).unwrap() {
        let name = entry
            .unwrap()
            .file_name()
            .to_string_lossy()
            .trim_end_matches(".json")
            .to_owned();
        assert!(
            TABLE.iter().any(|(n, _, _)| *n == name),
            "{name} has no expected outcome"
        );
    }
}

#[test]
fn accepted_structured_output_is_returned_and_fields_are_read_across_versions() {
    let classification = classify_fixture("2.1.332-a1-readonly-tools", Schema::Flag);
    assert_eq!(
        classification.structured_output,
        Some(json!({"summary": "done", "count": 3}))
    );
    assert_eq!(classification.num_turns, Some(3));
    assert_eq!(classification.total_cost_usd, Some(0.0016));
    assert_eq!(
        classification.session_id.as_deref(),
        Some("25fcd60c-4c87-4da9-907b-3c89a2884547")
    );

    let old = envelope("1.0.0-success");
    assert_eq!(old.total_cost_usd, Some(0.00136));
    assert_eq!(old.permission_denials, None);
    assert_eq!(old.terminal_reason, None);

    let denied = envelope("2.1.332-a2-allowedtools-only");
    let denials = denied.permission_denials.as_ref().unwrap();
    assert_eq!(denials.len(), 1);
    assert_eq!(denials[0].tool_name, "Write");

    let api = envelope("2.1.332-g2-http529-forever");
    assert_eq!(
        (api.subtype.as_deref(), api.api_error_status),
        (Some("success"), Some(529))
    );
    assert!(envelope("2.1.332-f2-budget-single-text").result.is_none());
}

#[test]
fn a_success_envelope_is_not_enough() {
    let success = envelope("2.1.332-a1-readonly-tools");
    let schema = capture_schema();
    let base = ClassifyInput {
        exit_code: Some(0),
        envelope: Some(&success),
        schema: Some(&schema),
        ..ClassifyInput::default()
    };
    let cases = [
        (
            "output past its limit",
            ClassifyInput {
                output_limit: Some("stdout passed its limit (maxStdoutBytes: 1MiB)".into()),
                ..base.clone()
            },
            StageStatus::Failed,
        ),
        (
            "timed out",
            ClassifyInput {
                timed_out: true,
                ..base.clone()
            },
            StageStatus::TimedOut,
        ),
        (
            "cancelled",
            ClassifyInput {
                cancelled: true,
                timed_out: true,
                ..base.clone()
            },
            StageStatus::Cancelled,
        ),
        (
            "nonzero exit",
            ClassifyInput {
                exit_code: Some(1),
                ..base.clone()
            },
            StageStatus::Failed,
        ),
        (
            "signal",
            ClassifyInput {
                exit_code: None,
                ..base.clone()
            },
            StageStatus::Failed,
        ),
        (
            "signal after result",
            ClassifyInput {
                exit_code: None,
                hung_after_result: true,
                ..base.clone()
            },
            StageStatus::Succeeded,
        ),
        (
            "no envelope",
            ClassifyInput {
                envelope: None,
                ..base.clone()
            },
            StageStatus::Failed,
        ),
    ];
    for (what, input, expected) in cases {
        let classification = classify(input);
        assert_eq!(
            classification.status, expected,
            "{what}: {classification:?}"
        );
        if expected != StageStatus::Succeeded {
            assert_eq!(classification.structured_output, None, "{what}");
        }
    }
}

#[test]
fn structured_output_is_validated_again() {
    let mut envelope = envelope("2.1.332-a1-readonly-tools");
    envelope.structured_output = Some(json!({"summary": 3}));
    let schema = capture_schema();
    let classification = classify(ClassifyInput {
        exit_code: Some(0),
        envelope: Some(&envelope),
        schema: Some(&schema),
        ..ClassifyInput::default()
    });
    assert_eq!(classification.status, StageStatus::MalformedOutput);
    assert_eq!(classification.structured_output, None);
    let reason = classification.failure_reason.unwrap();
    assert!(
        reason.contains("/summary") && reason.contains("count"),
        "{reason}"
    );
    assert_eq!(
        validate_output(&schema, &json!({"summary": "s", "count": 1})),
        Ok(())
    );
    assert!(validate_output(&json!({"type": 12}), &json!({})).is_err());
}

#[test]
fn without_the_schema_flag_json_comes_from_the_result_text() {
    let mut envelope = envelope("2.0.50-success");
    envelope.result = Some("Here it is:\n```json\n{\"summary\": \"s\", \"count\": 2}\n```".into());
    let schema = capture_schema();
    let classification = classify(ClassifyInput {
        exit_code: Some(0),
        envelope: Some(&envelope),
        schema: Some(&schema),
        schema_delivery: SchemaDelivery::ResultText,
        ..ClassifyInput::default()
    });
    assert_eq!(classification.status, StageStatus::Succeeded);
    assert!(classification.degraded);
    assert_eq!(
        classification.structured_output,
        Some(json!({"summary": "s", "count": 2}))
    );
}

#[test]
fn not_logged_in_is_runner_unavailable() {
    let not_logged_in = ResultEnvelope::parse(
        r#"{"type":"result","subtype":"success","is_error":true,"result":"Not logged in · Please run /login","terminal_reason":"api_error","api_error_status":null}"#,
    )
    .unwrap();
    let classification = classify(ClassifyInput {
        exit_code: Some(1),
        envelope: Some(&not_logged_in),
        ..ClassifyInput::default()
    });
    assert_eq!(classification.status, StageStatus::RunnerUnavailable);
    // A successful answer that merely mentions logging in is not an auth failure.
    let chatty = ResultEnvelope::parse(
        r#"{"type":"result","subtype":"success","is_error":false,"result":"The user is not logged in here."}"#,
    )
    .unwrap();
    let classification = classify(ClassifyInput {
        exit_code: Some(0),
        envelope: Some(&chatty),
        ..ClassifyInput::default()
    });
    assert_eq!(classification.status, StageStatus::Succeeded);
}

fn transcript(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join("stream-json").join(name)).unwrap()
}

#[test]
fn every_captured_transcript_is_followed_to_its_result() {
    // (file, offered tools contain, last tool, api retries, classified as)
    let table: &[(&str, &str, Option<&str>, u32, StageStatus)] = &[
        (
            "1.0.30-tool-call.jsonl",
            "Write",
            Some("Read"),
            0,
            StageStatus::Succeeded,
        ),
        (
            "2.0.50-tool-call.jsonl",
            "Write",
            Some("Read"),
            0,
            StageStatus::Succeeded,
        ),
        (
            "2.1.100-tool-call.jsonl",
            "Write",
            Some("Read"),
            0,
            StageStatus::Succeeded,
        ),
        (
            "2.1.332-api-retry-529.jsonl",
            "Read",
            None,
            2,
            StageStatus::Failed,
        ),
        (
            "2.1.332-partial-messages.jsonl",
            "Read",
            Some("Read"),
            0,
            StageStatus::Succeeded,
        ),
        (
            "2.1.332-structured-output.jsonl",
            "StructuredOutput",
            Some("StructuredOutput"),
            0,
            StageStatus::Succeeded,
        ),
        (
            "2.1.332-tool-call.jsonl",
            "Read",
            Some("Read"),
            0,
            StageStatus::Succeeded,
        ),
    ];
    let files: Vec<String> = std::fs::read_dir(fixtures().join("stream-json"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for file in &files {
        assert!(
            table.iter().any(|row| row.0 == file),
            "{file} is not in the table"
        );
    }
    for (file, tool, last_tool, retries, expected) in table {
        let stdout = transcript(file);
        let mut state = StreamState::new();
        let lines: Vec<&[u8]> = stdout
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        for (index, line) in lines.iter().enumerate() {
            let kind = state.feed_line(line);
            assert_eq!(
                kind == LineKind::Result,
                index == lines.len() - 1,
                "{file} line {index}"
            );
            assert_ne!(kind, LineKind::NotJson, "{file} line {index}");
        }
        assert!(state.result_seen(), "{file}");
        let init = state.init().unwrap_or_else(|| panic!("{file}: no init"));
        assert!(
            init.tools.iter().any(|t| t == tool),
            "{file}: {:?}",
            init.tools
        );
        assert_eq!(init.cwd.as_deref(), Some("/home/user/project"));
        assert_eq!(
            init.session_id,
            state.result().unwrap().session_id,
            "{file}"
        );
        let progress = state.progress();
        assert_eq!(progress.last_tool.as_deref(), *last_tool, "{file}");
        assert_eq!(progress.api_retries, *retries, "{file}");
        assert!(progress.turns >= 1, "{file}");
        assert_eq!(
            progress.cost_usd_so_far,
            state.result().unwrap().total_cost_usd
        );

        let schema = capture_schema();
        let structured = file.contains("structured-output");
        let classification = classify(ClassifyInput {
            exit_code: Some(exit_code_of(state.result().unwrap())),
            envelope: state.result(),
            schema: structured.then_some(&schema),
            stream_error: state.assistant_error(),
            ..ClassifyInput::default()
        });
        assert_eq!(
            classification.status, *expected,
            "{file}: {classification:?}"
        );
    }
    let state = StreamState::parse_all(&transcript("2.1.332-tool-call.jsonl"));
    assert_eq!(
        state.init().unwrap().claude_code_version.as_deref(),
        Some("2.1.332")
    );
    assert_eq!(state.init().unwrap().tools, ["Read"]);
    assert_eq!(
        state.init().unwrap().permission_mode.as_deref(),
        Some("default")
    );
}

#[test]
fn json_mode_output_is_found_on_one_line_or_pretty() {
    let pretty =
        std::fs::read(fixtures().join("result-envelopes/2.1.332-d1-max-turns-1-json.json"))
            .unwrap();
    let mut state = StreamState::new();
    for line in pretty.split(|b| *b == b'\n') {
        assert_ne!(state.feed_line(line), LineKind::Result);
    }
    let found = state.finish(&pretty).expect("found in the whole text");
    assert_eq!(found.subtype.as_deref(), Some("error_max_turns"));

    let one_line = serde_json::to_vec(&serde_json::from_slice::<Value>(&pretty).unwrap()).unwrap();
    let mut state = StreamState::new();
    assert_eq!(state.feed_line(&one_line), LineKind::Result);
    assert_eq!(envelope_from_stdout(&one_line), state.result().cloned());
}

#[test]
fn result_records_carry_the_envelope_and_the_outcome() {
    let envelope = envelope("2.1.332-a2-allowedtools-only");
    let schema = capture_schema();
    let classification = classify(ClassifyInput {
        exit_code: Some(0),
        envelope: Some(&envelope),
        schema: Some(&schema),
        ..ClassifyInput::default()
    });
    let record = ResultRecord::new(
        &classification,
        Some(&envelope),
        Some(vec!["Read".into(), "Write".into()]),
    );
    let value = serde_json::to_value(&record).unwrap();
    insta::assert_json_snapshot!("result_record_with_denial", value);
    let schema: Value = serde_json::from_str(&ResultRecord::json_schema()).unwrap();
    assert_eq!(validate_output(&schema, &value), Ok(()));
    let back: ResultRecord = serde_json::from_value(value).unwrap();
    assert_eq!(back, record);
}
