//! The result envelope Claude Code prints last (`--output-format json`, and the last
//! line of stream-json), read leniently: fields come and go across versions, and a
//! field of an unexpected type is treated as missing rather than failing the parse.

use serde_json::Value;

use crate::tokens::TokenUsage;

/// A tool call the CLI refused (`permission_denials`).
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionDenial {
    pub tool_name: String,
    pub tool_use_id: Option<String>,
    pub tool_input: Value,
}

/// The parts of a result envelope specbridge reads.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResultEnvelope {
    pub subtype: Option<String>,
    pub is_error: Option<bool>,
    /// Missing on the error subtypes, which report `errors` instead.
    pub result: Option<String>,
    /// Present only when the CLI accepted structured output.
    pub structured_output: Option<Value>,
    pub session_id: Option<String>,
    pub num_turns: Option<u64>,
    /// `total_cost_usd`; 1.0.0 calls it `cost_usd` (and `total_cost`).
    pub total_cost_usd: Option<f64>,
    /// From `modelUsage`, else `usage`; missing in 1.0.0.
    pub tokens: Option<TokenUsage>,
    /// Missing before 1.0.128.
    pub permission_denials: Option<Vec<PermissionDenial>>,
    /// Missing before 2.1.100.
    pub terminal_reason: Option<String>,
    pub api_error_status: Option<u16>,
    pub api_error_type: Option<String>,
    pub errors: Vec<String>,
    pub stop_reason: Option<String>,
    pub duration_ms: Option<u64>,
}

impl ResultEnvelope {
    /// Reads an envelope from a JSON value; `None` unless it is a `type: "result"` object.
    pub fn from_value(value: Value) -> Option<ResultEnvelope> {
        let tokens = TokenUsage::from_envelope(&value);
        let Value::Object(mut object) = value else {
            return None;
        };
        if object.get("type").and_then(Value::as_str) != Some("result") {
            return None;
        }
        // Moved out, not copied: each holds the whole output, which may be
        // megabytes (docs/claude-code-runner.md).
        let result = match object.remove("result") {
            Some(Value::String(text)) => Some(text),
            _ => None,
        };
        let structured_output = object.remove("structured_output").filter(|v| !v.is_null());
        let string = |key: &str| object.get(key).and_then(Value::as_str).map(str::to_owned);
        let number = |key: &str| object.get(key).and_then(Value::as_f64);
        Some(ResultEnvelope {
            subtype: string("subtype"),
            is_error: object.get("is_error").and_then(Value::as_bool),
            result,
            structured_output,
            session_id: string("session_id"),
            num_turns: object.get("num_turns").and_then(Value::as_u64),
            total_cost_usd: number("total_cost_usd")
                .or_else(|| number("cost_usd"))
                .or_else(|| number("total_cost")),
            tokens,
            permission_denials: object
                .get("permission_denials")
                .and_then(Value::as_array)
                .map(|denials| denials.iter().filter_map(permission_denial).collect()),
            terminal_reason: string("terminal_reason"),
            api_error_status: object
                .get("api_error_status")
                .and_then(Value::as_u64)
                .and_then(|s| u16::try_from(s).ok()),
            api_error_type: string("api_error_type"),
            errors: object
                .get("errors")
                .and_then(Value::as_array)
                .map(|errors| {
                    errors
                        .iter()
                        .map(|e| match e {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            stop_reason: string("stop_reason"),
            duration_ms: object.get("duration_ms").and_then(Value::as_u64),
        })
    }

    /// Reads an envelope from JSON text.
    pub fn parse(text: &str) -> Option<ResultEnvelope> {
        let value: Value = serde_json::from_str(text.trim()).ok()?;
        ResultEnvelope::from_value(value)
    }
}

fn permission_denial(value: &Value) -> Option<PermissionDenial> {
    Some(PermissionDenial {
        tool_name: value.get("tool_name")?.as_str()?.to_owned(),
        tool_use_id: value
            .get("tool_use_id")
            .and_then(Value::as_str)
            .map(str::to_owned),
        tool_input: value.get("tool_input").cloned().unwrap_or(Value::Null),
    })
}

/// Finds the envelope in a whole stdout: the last non-empty line (stream-json, or the
/// single line of json mode), else the whole text (a pretty-printed object).
pub fn envelope_from_stdout(stdout: &[u8]) -> Option<ResultEnvelope> {
    let text = String::from_utf8_lossy(stdout);
    text.lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .and_then(ResultEnvelope::parse)
        .or_else(|| ResultEnvelope::parse(&text))
}

/// The JSON document in a text answer, for CLIs without `--json-schema`: the whole
/// text when it is a JSON object or array, else the last ```json fenced block.
pub(crate) fn json_from_result_text(text: &str) -> Option<Value> {
    let whole = text.trim();
    if let Ok(value @ (Value::Object(_) | Value::Array(_))) = serde_json::from_str(whole) {
        return Some(value);
    }
    let mut found = None;
    let mut rest = text;
    while let Some(start) = rest.find("```json") {
        let after_fence = &rest[start + "```json".len()..];
        // The info string ends the line; the block runs to the next fence.
        let Some(body_start) = after_fence.find('\n') else {
            break;
        };
        let body = &after_fence[body_start + 1..];
        let Some(end) = body.find("```") else {
            break;
        };
        if let Ok(value) = serde_json::from_str::<Value>(body[..end].trim()) {
            found = Some(value);
        }
        rest = &body[end + 3..];
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn old_cost_fields_are_read_as_total_cost() {
        let envelope = ResultEnvelope::from_value(json!({
            "type": "result", "subtype": "success", "cost_usd": 0.5, "is_error": false
        }))
        .unwrap();
        assert_eq!(envelope.total_cost_usd, Some(0.5));
        assert_eq!(envelope.permission_denials, None);
    }

    #[test]
    fn fields_of_unexpected_types_are_missing_not_fatal() {
        let envelope = ResultEnvelope::from_value(json!({
            "type": "result", "subtype": 3, "num_turns": "two", "structured_output": null,
            "errors": ["a", {"b": 1}]
        }))
        .unwrap();
        assert_eq!(envelope.subtype, None);
        assert_eq!(envelope.num_turns, None);
        assert_eq!(envelope.structured_output, None);
        assert_eq!(envelope.errors, ["a", r#"{"b":1}"#]);
        assert!(ResultEnvelope::from_value(json!({"type": "assistant"})).is_none());
    }

    #[test]
    fn pretty_printed_stdout_is_read_whole() {
        let stdout = b"{\n  \"type\": \"result\",\n  \"subtype\": \"success\"\n}\n";
        let envelope = envelope_from_stdout(stdout).unwrap();
        assert_eq!(envelope.subtype.as_deref(), Some("success"));
        assert!(envelope_from_stdout(b"not json\n").is_none());
    }

    #[test]
    fn json_is_taken_from_the_whole_text_or_the_last_fenced_block() {
        assert_eq!(json_from_result_text(" {\"a\": 1} "), Some(json!({"a": 1})));
        let text = "First try:\n```json\n{\"a\": 1}\n```\nBetter:\n```json\n{\"a\": 2}\n```\nDone.";
        assert_eq!(json_from_result_text(text), Some(json!({"a": 2})));
        assert_eq!(json_from_result_text("42"), None);
        assert_eq!(json_from_result_text("```json\n{broken\n```"), None);
    }
}
