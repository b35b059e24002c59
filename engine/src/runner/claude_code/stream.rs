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
}

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
            (Some("user"), _) => LineKind::User,
            (Some("result"), _) => {
                self.result = ResultEnvelope::from_value(&event);
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
        // Failed requests end in a synthetic assistant message carrying the reason
        // (`authentication_failed` when not logged in).
        if let Some(error) = event.get("error").and_then(Value::as_str) {
            self.assistant_error = Some(error.to_owned());
        }
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

    pub fn unparsed_lines(&self) -> u64 {
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
