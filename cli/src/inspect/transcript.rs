//! The tool calls of an attempt: from `tool-calls.jsonl` when the attempt has one,
//! else read back from the stream-json in `raw-stdout.log`.

use std::collections::{BTreeSet, HashMap};

use serde::Serialize;
use serde_json::Value;
use specbridge_engine::runner::claude_code::observe::{CallVerdict, ToolCallRecord};
use specbridge_engine::store::layout::attempt;
use specbridge_engine::store::AttemptReader;

/// How long an input summary or a result excerpt may be.
const SUMMARY_CHARS: usize = 160;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolCall {
    pub tool: String,
    pub input: String,
    /// The CLI refused the call (a permission denial, or a tool it does not offer).
    pub refused: bool,
    /// The tool's error or the refusal's message.
    pub error: Option<String>,
    /// The start of what the tool returned.
    pub result: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum TranscriptSource {
    ToolCalls,
    Stream,
    None,
}

pub(super) fn read(
    dir: &AttemptReader,
    result: Option<&Value>,
) -> (Vec<ToolCall>, TranscriptSource) {
    if let Some(text) = dir
        .bytes(attempt::TOOL_CALLS)
        .and_then(|b| String::from_utf8(b).ok())
    {
        // The engine's own record type: one owner of the format.
        let calls = text
            .lines()
            .filter_map(|l| serde_json::from_str::<ToolCallRecord>(l).ok())
            .map(|r| from_record(&r))
            .collect();
        return (calls, TranscriptSource::ToolCalls);
    }
    match dir.bytes(attempt::RAW_STDOUT) {
        Some(bytes) => {
            let denied = denied_ids(result);
            let calls = from_stream(&String::from_utf8_lossy(&bytes), &denied);
            (calls, TranscriptSource::Stream)
        }
        None => (Vec::new(), TranscriptSource::None),
    }
}

/// One line of `tool-calls.jsonl`. A call the policy refuses is shown refused;
/// its message is what the CLI answered, else why the policy refuses it. One that
/// ran although refused (a violation) says so.
fn from_record(r: &ToolCallRecord) -> ToolCall {
    let refused = r.policy == CallVerdict::Refused;
    let error = match (&r.result_error, &r.reason) {
        _ if r.violation => Some(format!(
            "ran although the policy refuses it: {}",
            r.reason.as_deref().unwrap_or("refused")
        )),
        (Some(e), _) => Some(e.clone()),
        (None, Some(reason)) if refused => Some(reason.clone()),
        _ => None,
    };
    ToolCall {
        tool: r.tool.clone(),
        input: clip(&summarize_input(&r.tool, &r.input)),
        refused: refused && !r.violation,
        error: error.map(|e| clip(&e)),
        result: None,
    }
}

fn denied_ids(result: Option<&Value>) -> BTreeSet<String> {
    result
        .and_then(|r| r.get("permissionDenials"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|d| d.get("toolUseId").and_then(Value::as_str))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// What the CLI answers a call it refused with (FACTS: tools and permissions).
const REFUSAL_MARKERS: &[&str] = &[
    "haven't granted",
    "No such tool available",
    "needs approval",
    "requires approval",
    "denied by your permission settings",
    "sensitive file",
];

/// Tool calls in stream-json: each `tool_use` block of an assistant message, settled
/// by the `tool_result` block with its id in a later user message.
pub(super) fn from_stream(stdout: &str, denied: &BTreeSet<String>) -> Vec<ToolCall> {
    let mut calls: Vec<ToolCall> = Vec::new();
    let mut by_id: HashMap<String, usize> = HashMap::new();
    for line in stdout.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let blocks = event
            .pointer("/message/content")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        match event.get("type").and_then(Value::as_str) {
            Some("assistant") => {
                for b in blocks.iter().filter(|b| b["type"] == "tool_use") {
                    let tool = b["name"].as_str().unwrap_or("?").to_string();
                    let id = b["id"].as_str().unwrap_or_default().to_string();
                    // Partial messages repeat a block; the first one stands.
                    if !id.is_empty() && by_id.contains_key(&id) {
                        continue;
                    }
                    by_id.insert(id.clone(), calls.len());
                    calls.push(ToolCall {
                        input: clip(&summarize_input(&tool, &b["input"])),
                        refused: denied.contains(&id),
                        tool,
                        error: None,
                        result: None,
                    });
                }
            }
            Some("user") => {
                for b in blocks.iter().filter(|b| b["type"] == "tool_result") {
                    let Some(&i) = b["tool_use_id"].as_str().and_then(|id| by_id.get(id)) else {
                        continue;
                    };
                    let content = result_text(&b["content"]);
                    if b["is_error"].as_bool() == Some(true) {
                        if REFUSAL_MARKERS.iter().any(|m| content.contains(m)) {
                            calls[i].refused = true;
                        }
                        calls[i].error = Some(clip(&content));
                    } else {
                        calls[i].result = Some(clip(&content));
                    }
                }
            }
            _ => {}
        }
    }
    calls
}

fn result_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The part of a tool's input that says what it did: the command, the path, the
/// pattern; other inputs as compact JSON.
fn summarize_input(tool: &str, input: &Value) -> String {
    let s = |k: &str| input.get(k).and_then(Value::as_str);
    let chosen = match tool {
        "Bash" => s("command").map(str::to_owned),
        "Read" | "Write" | "Edit" | "MultiEdit" | "NotebookEdit" => {
            s("file_path").or(s("notebook_path")).map(str::to_owned)
        }
        "Glob" | "Grep" => s("pattern").map(|p| match s("path") {
            Some(path) => format!("{p} in {path}"),
            None => p.to_owned(),
        }),
        "WebFetch" => s("url").map(str::to_owned),
        "WebSearch" => s("query").map(str::to_owned),
        _ => None,
    };
    chosen.unwrap_or_else(|| match input {
        Value::Null => String::new(),
        other => other.to_string(),
    })
}

/// One line, at most [`SUMMARY_CHARS`] characters.
fn clip(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= SUMMARY_CHARS {
        one_line
    } else {
        let mut cut: String = one_line.chars().take(SUMMARY_CHARS - 1).collect();
        cut.push('…');
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captured_stream_gives_the_read_and_its_result() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../testkit/fixtures/claude-code/stream-json/2.1.332-tool-call.jsonl"
        );
        let Ok(text) = std::fs::read_to_string(path) else {
            panic!("fixture missing: {path}");
        };
        let calls = from_stream(&text, &BTreeSet::new());
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].tool, "Read");
        assert!(calls[0].input.ends_with("README.md"));
        assert!(!calls[0].refused);
        assert!(calls[0].result.as_deref().unwrap().contains("demo repo"));
    }

    #[test]
    fn refusals_come_from_denials_or_the_refusal_message() {
        let stream = [
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"a","name":"Write","input":{"file_path":"x.txt","content":"hi"}}]}}"#,
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"a","is_error":true,"content":"Claude requested permissions to write to x.txt, but you haven't granted it yet."}]}}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"b","name":"Bash","input":{"command":"cargo test"}}]}}"#,
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"b","is_error":true,"content":"test failed"}]}}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"c","name":"Bash","input":{"command":"curl x"}}]}}"#,
        ]
        .join("\n");
        let denied = BTreeSet::from(["c".to_string()]);
        let calls = from_stream(&stream, &denied);
        assert_eq!(calls.len(), 3);
        assert!(calls[0].refused && calls[0].input == "x.txt");
        assert!(!calls[1].refused && calls[1].error.as_deref() == Some("test failed"));
        assert!(calls[2].refused && calls[2].input == "curl x");
    }

    use specbridge_engine::runner::claude_code::observe::CallOutcome;

    #[test]
    fn tool_calls_records_are_read_with_the_engines_type() {
        let line = serde_json::json!({
            "schemaVersion": 1, "seq": 1, "toolUseId": "t1", "tool": "Bash",
            "input": {"command": "rm -rf x"}, "policy": "refused",
            "reason": "no allowed Bash rule matches", "outcome": "failed",
            "resultError": "needs approval", "violation": false
        });
        let r: ToolCallRecord = serde_json::from_value(line).unwrap();
        let a = from_record(&r);
        assert!(a.refused && a.input == "rm -rf x" && a.error.as_deref() == Some("needs approval"));
        let ran = ToolCallRecord {
            violation: true,
            outcome: CallOutcome::Succeeded,
            result_error: None,
            ..r
        };
        let b = from_record(&ran);
        assert!(
            !b.refused
                && b.error
                    .unwrap()
                    .starts_with("ran although the policy refuses it")
        );
    }
}
