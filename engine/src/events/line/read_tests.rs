//! The reading of a line as the log writes it, held to the general reading (a
//! JSON value first) on every line the log writes and on lines mangled every
//! way a hand, a disk or an older version could: same envelope, same event or
//! same reason it is none.

use std::sync::LazyLock;

use proptest::prelude::*;
use serde_json::{json, Value};

use super::{as_written, read_line, read_line_as_value};
use crate::events::RunEvent;
use crate::store::events::{written_lines, GENESIS};

/// One event of every type the log writes, with escapes and non-ASCII text in
/// their strings.
fn every_kind() -> Vec<RunEvent> {
    let sha = "ab".repeat(32);
    [
        json!({"type": "run-started", "runId": "r-1", "specbridgeVersion": "0.1.0"}),
        json!({"type": "run-resumed", "resume": 1, "previousStatus": "failed", "pipelineSha256": sha}),
        json!({"type": "run-finished", "status": "succeeded", "exitCode": 0,
               "totals": {"costUsd": 0.0036, "invocations": 5, "turns": 14,
                          "tokens": {"input": 1, "output": 2, "cacheRead": 3, "cacheCreation": 4}},
               "error": "disk \"full\"\n"}),
        json!({"type": "record-intent", "path": "stages/s/stage.json", "sha256": sha}),
        json!({"type": "record-written", "path": "run.json", "sha256": sha, "recovered": true}),
        json!({"type": "stage-started", "stage": "s\u{e9}", "attempt": 2}),
        json!({"type": "stage-retrying", "stage": "s", "attempt": 1, "outcome": "rate\tlimited",
               "retry": 1, "delayMs": 500}),
        json!({"type": "stage-expanded", "stage": "each", "instances": ["each[0]", "each[1]"]}),
        json!({"type": "stage-finished", "stage": "s", "attempt": 1, "status": "succeeded",
               "outcome": null, "evidenceStatus": "verified"}),
        json!({"type": "process-spawned", "stage": "s", "attempt": 1, "pid": 7, "pgid": 7,
               "startTicks": 123_456}),
        json!({"type": "process-spawned", "verification": "tests",
               "attempt": "stages/s/attempt-001", "pid": 8, "pgid": 8}),
        json!({"type": "document-written", "stage": "design", "path": "docs/design.md", "sha256": sha}),
        json!({"type": "resume-decision", "stage": "s", "action": "rerun", "reason": "forced",
               "detail": "named with --rerun"}),
        json!({"type": "torn-tail-set-aside", "path": "events.jsonl.torn-1"}),
        json!({"type": "crash-repaired", "repaired": ["a", "b\\c"]}),
        json!({"type": "orphan-ended", "stage": "s", "attempt": 1, "pid": 9, "pgid": 9,
               "ended": true, "note": "\u{1f600}"}),
        json!({"type": "orphan-left", "stage": "s", "attempt": 1, "pid": 9, "pgid": 9, "ended": false}),
    ]
    .into_iter()
    .map(|v| serde_json::from_value(v).expect("a sample event"))
    .collect()
}

/// The lines of a log holding [`every_kind`], written once for every case.
static WRITTEN: LazyLock<Vec<Vec<u8>>> = LazyLock::new(|| written_lines(&every_kind()));

/// One way a line can differ from what the log wrote.
#[derive(Debug, Clone)]
enum Mangle {
    Kept,
    /// `,"key":value` before the closing brace.
    FieldAdded(&'static str, &'static str),
    /// The `seq` number's text replaced.
    Seq(&'static str),
    Space(usize),
    Cut(usize),
    Trailing(&'static str),
    Byte(usize, u8),
    Replaced(&'static str, &'static str),
}

fn mangle() -> impl Strategy<Value = Mangle> {
    let keys = prop::sample::select(vec![
        "seq", "at", "type", "prev", "stage", "path", "attempt", "status", "x",
    ]);
    let values = prop::sample::select(vec![
        "1",
        "\"a\"",
        "null",
        "\"stage-finished\"",
        "{}",
        "2.5",
    ]);
    prop_oneof![
        Just(Mangle::Kept),
        (keys, values).prop_map(|(k, v)| Mangle::FieldAdded(k, v)),
        prop::sample::select(vec![
            "01",
            "1.0",
            "-1",
            "1e2",
            "\"1\"",
            "null",
            "18446744073709551616",
            "0"
        ])
        .prop_map(Mangle::Seq),
        any::<usize>().prop_map(Mangle::Space),
        any::<usize>().prop_map(Mangle::Cut),
        prop::sample::select(vec![" ", "x", "}", "\t", ",{}"]).prop_map(Mangle::Trailing),
        (
            any::<usize>(),
            prop::sample::select(vec![b'"', b'\\', b'}', 0x01, 0xff, b'a', b'0'])
        )
            .prop_map(|(at, b)| Mangle::Byte(at, b)),
        prop::sample::select(vec![
            (",\"at\":\"", ",\"at\":\"\\u0032"),
            (",\"type\":\"", ",\"type\":\"x"),
            (",\"prev\":\"", ",\"prev\":\"\\n"),
            (",\"type\"", ",\"kind\""),
            ("{\"seq\"", "{ \"seq\""),
            (",\"prev\":", ",\"prev\" :"),
        ])
        .prop_map(|(from, to)| Mangle::Replaced(from, to)),
    ]
}

fn apply(line: &[u8], how: &Mangle) -> Vec<u8> {
    let mut out = line.to_vec();
    match how {
        Mangle::Kept => {}
        Mangle::FieldAdded(key, value) => {
            out.pop();
            out.extend_from_slice(format!(",\"{key}\":{value}}}").as_bytes());
        }
        Mangle::Seq(text) => {
            let digits = out[7..].iter().take_while(|b| b.is_ascii_digit()).count();
            out.splice(7..7 + digits, text.bytes());
        }
        Mangle::Space(at) => out.insert(at % out.len(), b' '),
        Mangle::Cut(at) => out.truncate(at % out.len()),
        Mangle::Trailing(text) => out.extend_from_slice(text.as_bytes()),
        Mangle::Byte(at, b) => {
            let at = at % out.len();
            out[at] = *b;
        }
        Mangle::Replaced(from, to) => {
            let text = String::from_utf8_lossy(&out).replacen(from, to, 1);
            out = text.into_bytes();
        }
    }
    out
}

/// The samples are one of every line shape the schema generated from
/// [`RunEvent`] knows: an event type added later is not left out of the
/// property below, whose proof leans on every payload refusing unknown fields.
#[test]
fn the_samples_cover_every_shape_of_line() {
    let schema = crate::events::schema::event_schema();
    let shapes = schema["oneOf"].as_array().expect("one schema a shape");
    let mut in_schema: Vec<String> = shapes
        .iter()
        .map(|shape| {
            shape["properties"]["type"]["enum"][0]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let mut sampled: Vec<String> = every_kind().iter().map(|e| e.kind().to_string()).collect();
    in_schema.sort();
    sampled.sort();
    assert_eq!(sampled, in_schema);
}

#[test]
fn every_line_the_log_writes_is_read_without_a_json_tree() {
    let events = every_kind();
    let lines = written_lines(&events);
    assert_eq!(lines.len(), events.len());
    let mut last = GENESIS.to_string();
    let mut payload = Vec::new();
    for (i, (line, event)) in lines.iter().zip(&events).enumerate() {
        let (envelope, parsed) = as_written(line, &last, &mut payload)
            .unwrap_or_else(|| panic!("line {} not read as written", i + 1));
        assert_eq!(envelope.seq, Some(i as u64 + 1));
        assert_eq!(envelope.prev, crate::store::events::Prev::Matches);
        assert_eq!(&parsed.expect("an event").event, event);
        last = crate::store::sha256_hex(line);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn both_readings_agree_on_any_line(
        index in 0..WRITTEN.len(),
        how in mangle(),
        line_no in 1u64..20,
        prev_known in any::<bool>(),
    ) {
        let written = &WRITTEN[index];
        let last = if prev_known {
            serde_json::from_slice::<Value>(written).unwrap()["prev"]
                .as_str()
                .unwrap()
                .to_string()
        } else {
            "not the hash".to_string()
        };
        let line = apply(written, &how);
        let mut payload = Vec::new();
        prop_assert_eq!(
            read_line(line_no, &line, &last, &mut payload),
            read_line_as_value(line_no, &line, &last)
        );
    }
}
