//! Recognising the agent's side requests, which are answered without consuming the script.

use serde_json::{json, Value};

use super::log::SideRequest;

/// What a request is: a side request (answered on the spot) or `None` for a scripted model request.
pub(super) fn classify(method: &str, path: &str, body: &Value) -> Option<SideRequest> {
    let route = path.split('?').next().unwrap_or(path);
    match (method, route) {
        ("HEAD", _) => Some(SideRequest::Probe),
        ("POST", "/v1/messages") => classify_messages(body),
        ("POST", "/v1/messages/count_tokens") => Some(SideRequest::CountTokens),
        _ => Some(SideRequest::Unknown),
    }
}

fn classify_messages(body: &Value) -> Option<SideRequest> {
    let model = body.get("model").and_then(Value::as_str).unwrap_or("");
    if model.to_ascii_lowercase().contains("haiku") {
        return Some(SideRequest::SmallModel);
    }
    if body
        .get("max_tokens")
        .and_then(Value::as_u64)
        .is_some_and(|max| max <= 1)
    {
        return Some(SideRequest::TokenProbe);
    }
    if last_user_text(body).is_some_and(|text| text.trim() == "Warmup") {
        return Some(SideRequest::Warmup);
    }
    let has_tools = body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|tools| !tools.is_empty());
    if !has_tools && output_schema(body).is_some() {
        return Some(SideRequest::FormatQuery);
    }
    None
}

fn last_user_text(body: &Value) -> Option<String> {
    let message = body
        .get("messages")?
        .as_array()?
        .iter()
        .rev()
        .find(|message| message.get("role").and_then(Value::as_str) == Some("user"))?;
    match message.get("content")? {
        Value::String(text) => Some(text.clone()),
        Value::Array(blocks) => Some(
            blocks
                .iter()
                .filter_map(|block| block.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
        ),
        _ => None,
    }
}

fn output_schema(body: &Value) -> Option<&Value> {
    let format = body.get("output_config")?.get("format")?;
    Some(format.get("schema").unwrap_or(format))
}

/// The text a side request to `/v1/messages` is answered with.
pub(super) fn side_answer_text(kind: SideRequest, body: &Value) -> String {
    match kind {
        SideRequest::FormatQuery => {
            example_for_schema(output_schema(body).unwrap_or(&Value::Null)).to_string()
        }
        _ => "OK".to_owned(),
    }
}

/// A small value that satisfies simple schemas (objects of strings, numbers, enums, arrays).
fn example_for_schema(schema: &Value) -> Value {
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|values| values.first())
    {
        return first.clone();
    }
    if let Some(constant) = schema.get("const") {
        return constant.clone();
    }
    let kind = match schema.get("type") {
        Some(Value::String(kind)) => kind.as_str(),
        Some(Value::Array(kinds)) => kinds.first().and_then(Value::as_str).unwrap_or("object"),
        _ if schema.get("properties").is_some() => "object",
        _ => "string",
    };
    match kind {
        "object" => Value::Object(
            schema
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .map(|(name, property)| (name.clone(), example_for_schema(property)))
                .collect(),
        ),
        "array" => json!([]),
        "integer" | "number" => json!(0),
        "boolean" => json!(false),
        "null" => Value::Null,
        _ => json!("Scripted session"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_each_kind_of_side_request() {
        let post = |body: Value| classify("POST", "/v1/messages?beta=true", &body);
        assert_eq!(
            classify("HEAD", "/api/hello", &Value::Null),
            Some(SideRequest::Probe)
        );
        assert_eq!(
            post(json!({"model": "claude-haiku-4-5", "tools": [{"name": "Read"}]})),
            Some(SideRequest::SmallModel)
        );
        assert_eq!(
            post(json!({"model": "opus", "max_tokens": 1})),
            Some(SideRequest::TokenProbe)
        );
        assert_eq!(
            post(
                json!({"model": "opus", "messages": [{"role": "user", "content": [{"type": "text", "text": "Warmup"}]}], "tools": [{"name": "Read"}]})
            ),
            Some(SideRequest::Warmup)
        );
        assert_eq!(
            post(
                json!({"model": "opus", "output_config": {"format": {"type": "json_schema", "schema": {}}}})
            ),
            Some(SideRequest::FormatQuery)
        );
        assert_eq!(
            classify("POST", "/v1/messages/count_tokens?beta=true", &json!({})),
            Some(SideRequest::CountTokens)
        );
        assert_eq!(
            classify("GET", "/v1/other", &Value::Null),
            Some(SideRequest::Unknown)
        );
    }

    #[test]
    fn main_turns_are_model_requests() {
        // The main turn carries output_config (effort) and tools: it must consume the script.
        let body = json!({
            "model": "claude-opus-5-5",
            "max_tokens": 128000,
            "tools": [{"name": "Read"}],
            "output_config": {"effort": "medium", "format": {"type": "json_schema", "schema": {}}},
            "messages": [{"role": "user", "content": "Warmup the oven"}],
        });
        assert_eq!(classify("POST", "/v1/messages?beta=true", &body), None);
    }

    #[test]
    fn format_queries_get_an_answer_shaped_by_their_schema() {
        let body = json!({"output_config": {"format": {"type": "json_schema", "schema": {
            "type": "object",
            "properties": {"title": {"type": "string"}, "n": {"type": "integer"}, "kind": {"enum": ["a", "b"]}},
        }}}});
        let answer: Value =
            serde_json::from_str(&side_answer_text(SideRequest::FormatQuery, &body)).unwrap();
        assert_eq!(
            answer,
            json!({"title": "Scripted session", "n": 0, "kind": "a"})
        );
    }
}
