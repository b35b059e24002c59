//! `schemas/event.schema.json`, generated from [`RunEvent`]: one closed object per
//! event type (per shape, for `process-spawned`), each with the log's envelope.

use schemars::schema_for;
use serde_json::{json, Map, Value};

use super::line::ENVELOPE;
use super::RunEvent;

/// The schema of one line of `events.jsonl`.
///
/// schemars describes each variant of the internally tagged enum with its payload
/// inlined beside the tag, and an untagged payload as an `anyOf` of references.
/// A line also carries the envelope, which the enum does not know of, and
/// `additionalProperties: false` only sees properties of its own object: so each
/// variant (each `anyOf` branch) becomes one object holding the envelope, the tag
/// and the payload, closed.
pub fn event_schema() -> Value {
    let mut root = serde_json::to_value(schema_for!(RunEvent)).expect("schema is JSON");
    let mut definitions = root
        .get_mut("definitions")
        .and_then(Value::as_object_mut)
        .map(std::mem::take)
        .unwrap_or_default();
    let variants = root
        .get_mut("oneOf")
        .and_then(Value::as_array_mut)
        .map(std::mem::take)
        .expect("RunEvent is an enum");
    let mut inlined = Vec::new();
    let mut lines = Vec::new();
    for variant in variants {
        for shape in shapes(&variant, &definitions, &mut inlined) {
            lines.push(close(shape));
        }
    }
    for name in inlined {
        definitions.remove(&name);
    }
    json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "events.jsonl line",
        "description": "One event of a run's append-only, hash-chained log: the envelope (`seq`, `at`, `prev`), the event's `type` and its fields. `prev` is the sha256 (hex) of the previous line's bytes without its newline, 64 zeros for the first line. Generated from the engine's `RunEvent`.",
        "oneOf": lines,
        "definitions": definitions,
    })
}

/// The objects one variant stands for: itself, or one per `anyOf` branch with the
/// branch's payload merged in.
fn shapes(
    variant: &Value,
    definitions: &Map<String, Value>,
    inlined: &mut Vec<String>,
) -> Vec<Value> {
    let Some(branches) = variant.get("anyOf").and_then(Value::as_array) else {
        return vec![variant.clone()];
    };
    branches
        .iter()
        .map(|branch| {
            let name = branch["$ref"]
                .as_str()
                .and_then(|r| r.strip_prefix("#/definitions/"))
                .expect("an untagged payload is a reference");
            inlined.push(name.to_string());
            let payload = &definitions[name];
            let mut shape = variant.clone();
            let obj = shape.as_object_mut().expect("a variant is an object");
            obj.remove("anyOf");
            merge(obj, "properties", payload);
            merge(obj, "required", payload);
            if let Some(d) = payload.get("description") {
                obj.insert("description".into(), d.clone());
            }
            shape
        })
        .collect()
}

fn merge(into: &mut Map<String, Value>, key: &str, from: &Value) {
    let Some(add) = from.get(key) else { return };
    match (into.entry(key).or_insert_with(|| add.clone()), add) {
        (Value::Object(have), Value::Object(add)) => {
            have.extend(add.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        (Value::Array(have), Value::Array(add)) => {
            for v in add {
                if !have.contains(v) {
                    have.push(v.clone());
                }
            }
        }
        _ => {}
    }
}

/// The envelope added and every other property refused.
fn close(mut shape: Value) -> Value {
    let envelope = json!({
        "properties": {
            "seq": { "type": "integer", "minimum": 1 },
            "at": { "type": "string", "description": "RFC 3339 UTC with milliseconds" },
            "prev": { "type": "string", "pattern": "^[0-9a-f]{64}$" },
        },
        "required": ENVELOPE,
    });
    let obj = shape.as_object_mut().expect("a variant is an object");
    merge(obj, "properties", &envelope);
    merge(obj, "required", &envelope);
    obj.insert("additionalProperties".into(), Value::Bool(false));
    shape
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_shape_is_closed_and_carries_the_envelope() {
        let schema = event_schema();
        let lines = schema["oneOf"].as_array().unwrap();
        // 16 types, `process-spawned` in two shapes.
        assert_eq!(lines.len(), 17);
        for line in lines {
            assert_eq!(line["additionalProperties"], false, "{line}");
            for field in ["seq", "at", "prev", "type"] {
                assert!(line["properties"].get(field).is_some(), "{field} in {line}");
                assert!(
                    line["required"].as_array().unwrap().contains(&json!(field)),
                    "{field} required in {line}"
                );
            }
        }
        assert!(schema["definitions"].get("StageProcess").is_none());
    }
}
