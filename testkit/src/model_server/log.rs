//! What the agent sent: every request, kept in order so tests can assert what the model was shown.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Requests answered without consuming the script, by why they were recognised as such.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SideRequest {
    /// `HEAD` (e.g. `HEAD /api/hello`) or `GET` reachability checks.
    Probe,
    /// A model name containing "haiku" (background helpers such as titles and summaries).
    SmallModel,
    /// `max_tokens <= 1` (quota and key checks).
    TokenProbe,
    /// A user message that is just "Warmup" (cache warm-up of some versions).
    Warmup,
    /// A tool-less request with `output_config.format` (session titles).
    FormatQuery,
    /// `POST /v1/messages/count_tokens`.
    CountTokens,
    /// Any other path; answered 404.
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    pub method: String,
    /// Path with query, e.g. `/v1/messages?beta=true`.
    pub path: String,
    /// Lower-cased names; credentials are replaced by `<redacted>`.
    pub headers: BTreeMap<String, String>,
    /// Parsed JSON body; `null` when empty, a string when not JSON.
    pub body: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side: Option<SideRequest>,
    /// Index of the script reply that answered it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<usize>,
    /// Status of the reply sent.
    pub status: u16,
}

/// A `tool_result` block sent back to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    pub tool_use_id: String,
    pub content: Value,
    pub is_error: bool,
}

impl ToolResult {
    /// The content as text: a string as is, text blocks joined by newlines.
    pub fn text(&self) -> String {
        match &self.content {
            Value::String(text) => text.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter_map(|block| block.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            other => other.to_string(),
        }
    }
}

impl RecordedRequest {
    /// A request to the Messages API that the script answered (or should have).
    pub fn is_model_request(&self) -> bool {
        self.side.is_none()
    }

    /// Names of the tools offered to the model.
    pub fn tool_names(&self) -> Vec<String> {
        self.body
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|tool| tool.get("name").and_then(Value::as_str))
            .map(str::to_owned)
            .collect()
    }

    /// `tool_result` blocks of the last user message: the results of the previous reply's calls.
    pub fn tool_results(&self) -> Vec<ToolResult> {
        let Some(last_user) = self
            .body
            .get("messages")
            .and_then(Value::as_array)
            .and_then(|messages| {
                messages
                    .iter()
                    .rev()
                    .find(|message| message.get("role").and_then(Value::as_str) == Some("user"))
            })
        else {
            return Vec::new();
        };
        last_user
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("tool_result"))
            .map(|block| ToolResult {
                tool_use_id: block
                    .get("tool_use_id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                content: block.get("content").cloned().unwrap_or(Value::Null),
                is_error: block
                    .get("is_error")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            })
            .collect()
    }
}

/// In-memory request log, optionally mirrored to a JSON-lines file.
pub(crate) struct RequestLog {
    entries: Mutex<Vec<RecordedRequest>>,
    file: Option<Mutex<std::fs::File>>,
}

impl RequestLog {
    pub(crate) fn new(path: Option<&Path>) -> std::io::Result<Self> {
        let file = path
            .map(|path| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
            })
            .transpose()?;
        Ok(RequestLog {
            entries: Mutex::new(Vec::new()),
            file: file.map(Mutex::new),
        })
    }

    pub(crate) fn push(&self, request: RecordedRequest) {
        if let Some(file) = &self.file {
            let mut line = serde_json::to_string(&request).expect("a recorded request serializes");
            line.push('\n');
            let mut file = file
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            // A log write failure must not turn into a wrong reply to the agent.
            let _ = file.write_all(line.as_bytes()).and_then(|()| file.flush());
        }
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(request);
    }

    pub(crate) fn snapshot(&self) -> Vec<RecordedRequest> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_results_come_from_the_last_user_message() {
        let request = RecordedRequest {
            method: "POST".into(),
            path: "/v1/messages".into(),
            headers: BTreeMap::new(),
            body: json!({
                "tools": [{"name": "Read"}, {"name": "Write"}],
                "messages": [
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "old", "content": "x"}]},
                    {"role": "assistant", "content": [{"type": "tool_use", "id": "t1"}]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "is_error": true,
                         "content": [{"type": "text", "text": "No such tool"}]},
                        {"type": "text", "text": "go on"}
                    ]}
                ]
            }),
            side: None,
            step: Some(1),
            status: 200,
        };
        assert_eq!(request.tool_names(), vec!["Read", "Write"]);
        let results = request.tool_results();
        assert_eq!(results.len(), 1);
        assert_eq!(results[0].tool_use_id, "t1");
        assert!(results[0].is_error);
        assert_eq!(results[0].text(), "No such tool");
    }
}
