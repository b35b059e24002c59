//! The ordered list of replies a scripted model server gives to the agent's model requests.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Failures while loading a script file.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    #[error("failed to read script {path}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("failed to parse script {path} as JSON")]
    Json {
        path: String,
        source: serde_json::Error,
    },
    #[error("failed to parse script {path} as YAML")]
    Yaml {
        path: String,
        source: serde_yaml::Error,
    },
}

/// Ordered replies; each model request consumes the next one (side requests consume nothing).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Script {
    pub replies: Vec<Reply>,
}

impl Script {
    pub fn new(replies: impl IntoIterator<Item = Reply>) -> Self {
        Script {
            replies: replies.into_iter().collect(),
        }
    }

    /// Loads a JSON file (`.json`) or YAML file (anything else; YAML also reads JSON).
    pub fn from_file(path: &Path) -> Result<Self, ScriptError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: shown.clone(),
            source,
        })?;
        let is_json = path.extension().is_some_and(|ext| ext == "json");
        if is_json {
            Self::from_json(&text).map_err(|source| ScriptError::Json {
                path: shown,
                source,
            })
        } else {
            Self::from_yaml(&text).map_err(|source| ScriptError::Yaml {
                path: shown,
                source,
            })
        }
    }

    /// A bare list of replies or an object with a `replies` list.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        // Dispatching on the shape first keeps serde's error message about the actual field.
        let value: Value = serde_json::from_str(text)?;
        if value.is_array() {
            serde_json::from_value(value).map(|replies| Script { replies })
        } else {
            serde_json::from_value(value)
        }
    }

    /// A bare list of replies or a mapping with a `replies` list.
    pub fn from_yaml(text: &str) -> Result<Self, serde_yaml::Error> {
        let value: serde_yaml::Value = serde_yaml::from_str(text)?;
        if value.is_sequence() {
            serde_yaml::from_value(value).map(|replies| Script { replies })
        } else {
            serde_yaml::from_value(value)
        }
    }
}

/// One scripted answer, with how often it is given and how long to stall before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    #[serde(flatten)]
    pub kind: ReplyKind,
    /// Stall before answering; longer than the client's timeout simulates a hung model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Repeat::is_once")]
    pub repeat: Repeat,
    /// Token counts reported to the client, which derives its cost figures from them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ReplyKind {
    /// An assistant message with one text block; `stop_reason: end_turn`.
    Text { text: String },
    /// Tool calls, optionally preceded by text; `stop_reason: tool_use`.
    ToolUse {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        calls: Vec<ToolCall>,
    },
    /// A call of the `StructuredOutput` tool the CLI offers under `--json-schema`.
    StructuredOutput { input: Value },
    /// An HTTP error reply. Without `body` an Anthropic-style error object for the status is sent.
    Error {
        status: u16,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        body: Option<Value>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        headers: BTreeMap<String, String>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub name: String,
    pub input: Value,
    /// Generated (`toolu_…`) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Default for Usage {
    fn default() -> Self {
        Usage {
            input_tokens: 100,
            output_tokens: 20,
        }
    }
}

/// How many model requests one reply answers: `repeat: 3` or `repeat: forever`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeat {
    Times(u32),
    Forever,
}

impl Default for Repeat {
    fn default() -> Self {
        Repeat::Times(1)
    }
}

impl Repeat {
    fn is_once(&self) -> bool {
        *self == Repeat::Times(1)
    }

    /// Whether a reply given `used` times may still be given again.
    pub fn allows(&self, used: u32) -> bool {
        match self {
            Repeat::Times(n) => used < *n,
            Repeat::Forever => true,
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum RepeatRepr {
    Times(u32),
    Word(RepeatWord),
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum RepeatWord {
    Forever,
}

impl Serialize for Repeat {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Repeat::Times(n) => RepeatRepr::Times(*n),
            Repeat::Forever => RepeatRepr::Word(RepeatWord::Forever),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Repeat {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match RepeatRepr::deserialize(deserializer).map_err(|_| {
            serde::de::Error::custom("repeat must be a positive count or \"forever\"")
        })? {
            RepeatRepr::Times(0) => Err(serde::de::Error::custom(
                "repeat must be a positive count or \"forever\"",
            )),
            RepeatRepr::Times(n) => Ok(Repeat::Times(n)),
            RepeatRepr::Word(RepeatWord::Forever) => Ok(Repeat::Forever),
        }
    }
}

impl Reply {
    fn of(kind: ReplyKind) -> Self {
        Reply {
            kind,
            delay_ms: None,
            repeat: Repeat::default(),
            usage: None,
        }
    }

    pub fn text(text: impl Into<String>) -> Self {
        Self::of(ReplyKind::Text { text: text.into() })
    }

    pub fn tool_use(name: impl Into<String>, input: Value) -> Self {
        Self::tool_uses(None, vec![ToolCall::new(name, input)])
    }

    /// Several tool calls in one assistant message, with optional leading text.
    pub fn tool_uses(text: Option<String>, calls: Vec<ToolCall>) -> Self {
        Self::of(ReplyKind::ToolUse { text, calls })
    }

    pub fn structured_output(input: Value) -> Self {
        Self::of(ReplyKind::StructuredOutput { input })
    }

    pub fn error(status: u16) -> Self {
        Self::of(ReplyKind::Error {
            status,
            body: None,
            headers: BTreeMap::new(),
        })
    }

    /// Replaces the body of an `Error` reply; no effect on other replies.
    pub fn with_body(mut self, new_body: Value) -> Self {
        if let ReplyKind::Error { body, .. } = &mut self.kind {
            *body = Some(new_body);
        }
        self
    }

    /// Adds a response header to an `Error` reply; no effect on other replies.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let ReplyKind::Error { headers, .. } = &mut self.kind {
            headers.insert(name.into(), value.into());
        }
        self
    }

    pub fn with_delay_ms(mut self, delay_ms: u64) -> Self {
        self.delay_ms = Some(delay_ms);
        self
    }

    pub fn repeated(mut self, times: u32) -> Self {
        self.repeat = Repeat::Times(times.max(1));
        self
    }

    pub fn forever(mut self) -> Self {
        self.repeat = Repeat::Forever;
        self
    }

    pub fn with_usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.usage = Some(Usage {
            input_tokens,
            output_tokens,
        });
        self
    }
}

impl ToolCall {
    pub fn new(name: impl Into<String>, input: Value) -> Self {
        ToolCall {
            name: name.into(),
            input,
            id: None,
        }
    }

    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn yaml_script_reads_every_reply_kind() {
        let script = Script::from_yaml(
            r#"
replies:
  - type: text
    text: hello
  - type: tool_use
    text: Writing it.
    calls:
      - name: Write
        input: {file_path: a.txt, content: hi}
        id: toolu_1
  - type: structured_output
    input: {summary: ok}
    usage: {input_tokens: 5, output_tokens: 6}
  - type: error
    status: 529
    headers: {x-should-retry: "true"}
    repeat: forever
    delay_ms: 10
"#,
        )
        .unwrap();
        assert_eq!(
            script.replies,
            vec![
                Reply::text("hello"),
                Reply::tool_uses(
                    Some("Writing it.".into()),
                    vec![
                        ToolCall::new("Write", json!({"file_path": "a.txt", "content": "hi"}))
                            .with_id("toolu_1")
                    ]
                ),
                Reply::structured_output(json!({"summary": "ok"})).with_usage(5, 6),
                Reply::error(529)
                    .with_header("x-should-retry", "true")
                    .forever()
                    .with_delay_ms(10),
            ]
        );
    }

    #[test]
    fn json_script_may_be_a_bare_list_and_round_trips() {
        let script = Script::new([Reply::text("a").repeated(3), Reply::error(401)]);
        let text = serde_json::to_string(&script.replies).unwrap();
        assert_eq!(Script::from_json(&text).unwrap(), script);
    }

    #[test]
    fn repeat_zero_is_rejected() {
        let err = Script::from_yaml("- {type: text, text: a, repeat: 0}").unwrap_err();
        assert!(err.to_string().contains("repeat must be"), "{err}");
    }
}
