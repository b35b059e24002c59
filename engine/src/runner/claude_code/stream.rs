//! Reads Claude Code's stdout one line at a time while it runs: the `system/init`
//! event (the tools actually offered), assistant turns and tool calls for live
//! progress, API retries, and the result envelope, whose arrival the supervisor is
//! told about so that a CLI that hangs after its result can be ended.
//!
//! `--output-format json` prints only the envelope; it is recognised the same way.

use std::collections::HashSet;

use serde_json::Value;

use super::envelope::{envelope_from_stdout, ResultEnvelope};

/// What the `system/init` event said.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InitInfo {
    pub session_id: Option<String>,
    /// The tools offered to the model (after `--tools` and `--disallowedTools`).
    pub tools: Vec<String>,
    pub model: Option<String>,
    pub permission_mode: Option<String>,
    /// Missing before 2.0.
    pub claude_code_version: Option<String>,
    pub cwd: Option<String>,
}

/// What one line was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    Blank,
    /// Not a JSON object (garbage, or one line of a pretty-printed object).
    NotJson,
    Init,
    Assistant,
    User,
    ApiRetry,
    /// The result envelope: the supervisor should be told the result was seen.
    Result,
    /// Any other event (`stream_event`, `system/status`, …).
    Other,
}

/// A snapshot for live display.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Progress {
    pub turns: u64,
    pub last_tool: Option<String>,
    /// Known once the result has arrived.
    pub cost_usd_so_far: Option<f64>,
    pub api_retries: u32,
}

#[derive(Debug, Clone, Default)]
pub struct StreamState {
    init: Option<InitInfo>,
    /// One API message can arrive as several assistant events (text, then tool use),
    /// all with the same message id: a turn is a distinct id.
    message_ids: HashSet<String>,
    assistant_events_without_id: u64,
    last_tool: Option<String>,
    api_retries: u32,
    assistant_error: Option<String>,
    result: Option<ResultEnvelope>,
    unparsed_lines: u64,
    calls: Vec<ObservedCall>,
}

/// One tool call seen in the stream, with its result once that arrived.
#[derive(Debug, Clone, PartialEq)]
pub struct ObservedCall {
    pub id: Option<String>,
    pub tool: String,
    /// The input with long texts cut (the arguments that name paths and commands
    /// are kept whole).
    pub input: Value,
    pub result: Option<CallResult>,
}

/// What the tool result said.
#[derive(Debug, Clone, PartialEq)]
pub struct CallResult {
    pub is_error: bool,
    /// The result text when it is an error (cut to [`MAX_ERROR_TEXT`]).
    pub error_text: Option<String>,
}

/// The longest error text kept per call.
pub(crate) const MAX_ERROR_TEXT: usize = 500;
/// The longest text kept of an input field that names no path and no command.
const MAX_INPUT_TEXT: usize = 200;
/// Input fields kept whole: what the policy check reads.
const CHECKED_FIELDS: &[&str] = &["file_path", "notebook_path", "path", "pattern", "command"];

impl StreamState {
    pub fn new() -> StreamState {
        StreamState::default()
    }

    /// Feeds one stdout line (with or without its line ending).
    pub fn feed_line(&mut self, line: &[u8]) -> LineKind {
        let line = trim_ascii(line);
        if line.is_empty() {
            return LineKind::Blank;
        }
        let Ok(Value::Object(event)) = serde_json::from_slice::<Value>(line) else {
            self.unparsed_lines += 1;
            return LineKind::NotJson;
        };
        let event = Value::Object(event);
        let kind = event.get("type").and_then(Value::as_str);
        let subtype = event.get("subtype").and_then(Value::as_str);
        match (kind, subtype) {
            (Some("system"), Some("init")) => {
                self.init = Some(init_info(&event));
                LineKind::Init
            }
            (Some("system"), Some("api_retry")) => {
                self.api_retries += 1;
                LineKind::ApiRetry
            }
            (Some("assistant"), _) => {
                self.assistant(&event);
                LineKind::Assistant
            }
            (Some("user"), _) => {
                self.user(&event);
                LineKind::User
            }
            (Some("result"), _) => {
                self.result = ResultEnvelope::from_value(event);
                LineKind::Result
            }
            _ => LineKind::Other,
        }
    }

    fn assistant(&mut self, event: &Value) {
        let message = event.get("message");
        match message.and_then(|m| m.get("id")).and_then(Value::as_str) {
            Some(id) => {
                self.message_ids.insert(id.to_owned());
            }
            None => self.assistant_events_without_id += 1,
        }
        let mut tools = message
            .and_then(|m| m.get("content"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("tool_use"))
            .filter_map(|block| block.get("name").and_then(Value::as_str));
        if let Some(tool) = tools.next_back() {
            self.last_tool = Some(tool.to_owned());
        }
        let uses = message
            .and_then(|m| m.get("content"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("tool_use"));
        for block in uses {
            self.calls.push(ObservedCall {
                id: block.get("id").and_then(Value::as_str).map(str::to_owned),
                tool: block
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                input: summarise_input(block.get("input").unwrap_or(&Value::Null)),
                result: None,
            });
        }
        // Failed requests end in a synthetic assistant message carrying the reason
        // (`authentication_failed` when not logged in).
        if let Some(error) = event.get("error").and_then(Value::as_str) {
            self.assistant_error = Some(error.to_owned());
        }
    }

    /// Tool results arrive on user events, naming the call they answer.
    fn user(&mut self, event: &Value) {
        let results = event
            .get("message")
            .and_then(|m| m.get("content"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("tool_result"));
        for block in results {
            let Some(id) = block.get("tool_use_id").and_then(Value::as_str) else {
                continue;
            };
            let is_error = block.get("is_error").and_then(Value::as_bool) == Some(true);
            let error_text =
                is_error.then(|| cut(&result_text(block.get("content")), MAX_ERROR_TEXT));
            if let Some(call) = self
                .calls
                .iter_mut()
                .rev()
                .find(|c| c.id.as_deref() == Some(id))
            {
                call.result = Some(CallResult {
                    is_error,
                    error_text,
                });
            }
        }
    }

    /// Every tool call seen so far, in stream order.
    pub fn tool_calls(&self) -> &[ObservedCall] {
        &self.calls
    }

    /// Called once stdout has ended: when no result line was recognised (a
    /// pretty-printed json-mode object), the whole stdout is tried.
    pub fn finish(&mut self, stdout: &[u8]) -> Option<&ResultEnvelope> {
        if self.result.is_none() {
            self.result = envelope_from_stdout(stdout);
        }
        self.result.as_ref()
    }

    /// Reads a whole stdout at once.
    pub fn parse_all(stdout: &[u8]) -> StreamState {
        let mut state = StreamState::new();
        for line in stdout.split(|b| *b == b'\n') {
            state.feed_line(line);
        }
        state.finish(stdout);
        state
    }

    pub fn result_seen(&self) -> bool {
        self.result.is_some()
    }

    pub fn result(&self) -> Option<&ResultEnvelope> {
        self.result.as_ref()
    }

    pub fn init(&self) -> Option<&InitInfo> {
        self.init.as_ref()
    }

    /// The `error` of the last assistant event that had one.
    pub fn assistant_error(&self) -> Option<&str> {
        self.assistant_error.as_deref()
    }

    #[cfg(test)]
    pub(crate) fn unparsed_lines(&self) -> u64 {
        self.unparsed_lines
    }

    pub fn progress(&self) -> Progress {
        let counted = self.message_ids.len() as u64 + self.assistant_events_without_id;
        Progress {
            turns: self
                .result
                .as_ref()
                .and_then(|r| r.num_turns)
                .unwrap_or(counted),
            last_tool: self.last_tool.clone(),
            cost_usd_so_far: self.result.as_ref().and_then(|r| r.total_cost_usd),
            api_retries: self.api_retries,
        }
    }
}

fn init_info(event: &Value) -> InitInfo {
    let string = |key: &str| event.get(key).and_then(Value::as_str).map(str::to_owned);
    InitInfo {
        session_id: string("session_id"),
        tools: event
            .get("tools")
            .and_then(Value::as_array)
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
        model: string("model"),
        permission_mode: string("permissionMode"),
        claude_code_version: string("claude_code_version"),
        cwd: string("cwd"),
    }
}

fn summarise_input(input: &Value) -> Value {
    match input {
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(k, v)| {
                    let v = match v {
                        Value::String(text) if !CHECKED_FIELDS.contains(&k.as_str()) => {
                            Value::String(cut(text, MAX_INPUT_TEXT))
                        }
                        Value::String(_) => v.clone(),
                        other => cut_value(other),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        other => cut_value(other),
    }
}

/// Nested values (MultiEdit's `edits`) are kept as a short JSON text.
fn cut_value(value: &Value) -> Value {
    match value {
        Value::Array(_) | Value::Object(_) => {
            let text = value.to_string();
            if text.len() <= MAX_INPUT_TEXT {
                value.clone()
            } else {
                Value::String(cut(&text, MAX_INPUT_TEXT))
            }
        }
        other => other.clone(),
    }
}

fn result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// At most `max` bytes, cut at a character boundary, marked when cut.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

fn trim_ascii(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |i| i + 1);
    &bytes[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_and_blank_lines_are_counted_not_fatal() {
        let mut state = StreamState::new();
        assert_eq!(state.feed_line(b"\r\n"), LineKind::Blank);
        assert_eq!(state.feed_line(b"not json"), LineKind::NotJson);
        assert_eq!(state.feed_line(b"\xff\xfe"), LineKind::NotJson);
        assert_eq!(state.feed_line(b"[1, 2]"), LineKind::NotJson);
        assert_eq!(state.unparsed_lines(), 3);
        assert!(!state.result_seen());
    }

    #[test]
    fn events_of_one_message_are_one_turn() {
        let mut state = StreamState::new();
        let text = br#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"hi"}]}}"#;
        let tool = br#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","name":"Read","input":{}}]}}"#;
        let next = br#"{"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"done"}]}}"#;
        for line in [&text[..], &tool[..], &next[..]] {
            assert_eq!(state.feed_line(line), LineKind::Assistant);
        }
        let progress = state.progress();
        assert_eq!(progress.turns, 2);
        assert_eq!(progress.last_tool.as_deref(), Some("Read"));
        assert_eq!(progress.cost_usd_so_far, None);
    }
}
