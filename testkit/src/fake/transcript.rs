//! Builds stream-json events and result envelopes in the shapes the captured versions
//! print, starting from the captured objects so that unlisted fields come along too.

use serde_json::{json, Map, Value};

use super::captures::VersionCapture;

/// What stays the same across one invocation's events.
#[derive(Debug, Clone)]
pub struct Session {
    pub capture: VersionCapture,
    pub session_id: String,
    pub model: String,
    pub cwd: String,
    pub tools: Vec<String>,
    pub permission_mode: String,
    next_id: u64,
}

/// The variable parts of a result envelope.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvelopeSpec {
    pub subtype: &'static str,
    pub is_error: bool,
    pub result: Option<String>,
    pub structured_output: Option<Value>,
    pub num_turns: u64,
    pub cost_usd: f64,
    /// `errors`, on versions whose envelopes have the field.
    pub errors: Option<Vec<String>>,
    /// `terminal_reason`, on versions whose envelopes have the field.
    pub terminal_reason: Option<&'static str>,
    /// `api_error_status` and `api_error_type`, on versions that report them.
    pub api_error: Option<(u16, &'static str)>,
    pub stop_reason: &'static str,
    pub permission_denials: Vec<Value>,
}

impl EnvelopeSpec {
    pub fn success(result: String, num_turns: u64, cost_usd: f64) -> EnvelopeSpec {
        EnvelopeSpec {
            subtype: "success",
            is_error: false,
            result: Some(result),
            structured_output: None,
            num_turns,
            cost_usd,
            errors: None,
            terminal_reason: Some("completed"),
            api_error: None,
            stop_reason: "end_turn",
            permission_denials: Vec::new(),
        }
    }
}

impl Session {
    pub fn new(
        capture: VersionCapture,
        session_id: String,
        model: String,
        cwd: String,
        tools: Vec<String>,
        permission_mode: String,
    ) -> Session {
        Session {
            capture,
            session_id,
            model,
            cwd,
            tools,
            permission_mode,
            next_id: 0,
        }
    }

    fn has_uuids(&self) -> bool {
        self.capture.semver() >= (2, 0, 0)
    }

    fn fresh_id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        let random = uuid::Uuid::new_v4().simple().to_string();
        format!("{prefix}_fake_{}{}", self.next_id, &random[..16])
    }

    fn stamp(&self, mut event: Map<String, Value>) -> Value {
        event.insert("parent_tool_use_id".into(), Value::Null);
        event.insert("session_id".into(), json!(self.session_id));
        if self.has_uuids() {
            event.insert("uuid".into(), json!(uuid::Uuid::new_v4().to_string()));
        }
        Value::Object(event)
    }

    /// `system/init`: the captured event with this session's facts in place.
    pub fn init_event(&self) -> Value {
        let mut init = self.capture.init_template();
        let object = init.as_object_mut().expect("init is an object");
        object.insert("cwd".into(), json!(self.cwd));
        object.insert("session_id".into(), json!(self.session_id));
        object.insert("tools".into(), json!(self.tools));
        object.insert("model".into(), json!(self.model));
        object.insert("permissionMode".into(), json!(self.permission_mode));
        if object.contains_key("claude_code_version") {
            object.insert("claude_code_version".into(), json!(self.capture.version));
        }
        for path_key in ["original_cwd"] {
            if object.contains_key(path_key) {
                object.insert(path_key.into(), json!(self.cwd));
            }
        }
        if object.contains_key("uuid") {
            object.insert("uuid".into(), json!(uuid::Uuid::new_v4().to_string()));
        }
        init
    }

    fn assistant(&mut self, content: Value, stop_reason: Value) -> Map<String, Value> {
        let mut event = Map::new();
        event.insert("type".into(), json!("assistant"));
        event.insert(
            "message".into(),
            json!({
                "id": self.fresh_id("msg"),
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": content,
                "stop_reason": stop_reason,
                "stop_sequence": null,
                "usage": {"input_tokens": 100, "output_tokens": 20,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
            }),
        );
        event
    }

    pub fn assistant_text(&mut self, text: &str) -> Value {
        let event = self.assistant(json!([{"type": "text", "text": text}]), json!("end_turn"));
        self.stamp(event)
    }

    /// An assistant message calling one tool; returns the event and the tool use id.
    pub fn assistant_tool_use(&mut self, name: &str, input: Value) -> (Value, String) {
        let id = self.fresh_id("toolu");
        let event = self.assistant(
            json!([{"type": "tool_use", "id": id, "name": name, "input": input}]),
            json!("tool_use"),
        );
        (self.stamp(event), id)
    }

    /// The synthetic assistant message the CLI prints when a request fails.
    pub fn assistant_api_error(&mut self, text: &str, error: &str, status: Option<u16>) -> Value {
        let mut event = self.assistant(
            json!([{"type": "text", "text": text}]),
            json!("stop_sequence"),
        );
        if let Some(message) = event.get_mut("message").and_then(Value::as_object_mut) {
            message.insert("model".into(), json!("<synthetic>"));
        }
        event.insert("error".into(), json!(error));
        event.insert("is_api_error_message".into(), json!(true));
        if let Some(status) = status {
            event.insert("api_error_status".into(), json!(status));
        }
        self.stamp(event)
    }

    pub fn user_tool_result(&mut self, tool_use_id: &str, content: &str, is_error: bool) -> Value {
        let mut block =
            json!({"tool_use_id": tool_use_id, "type": "tool_result", "content": content});
        if is_error {
            block["is_error"] = json!(true);
        }
        let mut event = Map::new();
        event.insert("type".into(), json!("user"));
        event.insert(
            "message".into(),
            json!({"role": "user", "content": [block]}),
        );
        self.stamp(event)
    }

    pub fn api_retry(&self, attempt: u32, max_retries: u32, status: u16, error: &str) -> Value {
        json!({
            "type": "system",
            "subtype": "api_retry",
            "attempt": attempt,
            "max_retries": max_retries,
            "retry_delay_ms": 500 * attempt,
            "error_status": status,
            "error": error,
            "session_id": self.session_id,
            "uuid": uuid::Uuid::new_v4().to_string(),
        })
    }

    /// The result envelope: the captured success envelope of this version with the
    /// spec's fields set, and the fields this version does not print left out.
    pub fn envelope(&self, spec: &EnvelopeSpec) -> Value {
        let mut envelope = self.capture.envelope_template();
        let object = envelope.as_object_mut().expect("envelope is an object");
        object.insert("subtype".into(), json!(spec.subtype));
        object.insert("is_error".into(), json!(spec.is_error));
        object.insert("num_turns".into(), json!(spec.num_turns));
        object.insert("session_id".into(), json!(self.session_id));
        object.insert("duration_ms".into(), json!(40 + 10 * spec.num_turns));
        object.insert("duration_api_ms".into(), json!(10 * spec.num_turns));
        if object.contains_key("uuid") {
            object.insert("uuid".into(), json!(uuid::Uuid::new_v4().to_string()));
        }
        for cost_key in ["total_cost_usd", "cost_usd", "total_cost"] {
            if object.contains_key(cost_key) {
                object.insert(cost_key.into(), json!(spec.cost_usd));
            }
        }
        if object.contains_key("stop_reason") {
            object.insert("stop_reason".into(), json!(spec.stop_reason));
        }
        match &spec.result {
            Some(result) => {
                object.insert("result".into(), json!(result));
            }
            None => {
                object.remove("result");
            }
        }
        match &spec.structured_output {
            Some(output) => {
                object.insert("structured_output".into(), output.clone());
            }
            None => {
                object.remove("structured_output");
            }
        }
        if object.contains_key("permission_denials") {
            object.insert("permission_denials".into(), json!(spec.permission_denials));
        }
        if object.contains_key("terminal_reason") {
            match spec.terminal_reason {
                Some(reason) => object.insert("terminal_reason".into(), json!(reason)),
                None => object.remove("terminal_reason"),
            };
        }
        if object.contains_key("api_error_status") {
            match spec.api_error {
                Some((status, kind)) => {
                    object.insert("api_error_status".into(), json!(status));
                    object.insert("api_error_type".into(), json!(kind));
                }
                None => {
                    object.insert("api_error_status".into(), Value::Null);
                }
            }
        }
        // 1.0.0 envelopes carry no `errors`; from 2.0.50 the error subtypes add it.
        if let Some(errors) = &spec.errors {
            if self.capture.semver() >= (2, 0, 0) {
                object.insert("errors".into(), json!(errors));
            }
        }
        envelope
    }
}
