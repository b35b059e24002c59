//! Builds a small instance of a JSON Schema, so that a pipeline whose stages use output
//! schemas runs end to end against the fake without scripting every output.

use serde_json::{Map, Value};

/// A minimal value that validates against `schema` for the schemas pipelines use
/// (objects with required properties, arrays, scalars, enums, local `$ref`s).
pub fn minimal_instance(schema: &Value) -> Value {
    instance(schema, schema, 0)
}

fn instance(root: &Value, schema: &Value, depth: usize) -> Value {
    // Recursive `$ref`s must end somewhere.
    if depth > 32 {
        return Value::Null;
    }
    let Some(object) = schema.as_object() else {
        return Value::Null;
    };
    if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
        if let Some(target) = resolve(root, reference) {
            return instance(root, target, depth + 1);
        }
    }
    if let Some(value) = object.get("const") {
        return value.clone();
    }
    if let Some(first) = object
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    if let Some(value) = object.get("default") {
        return value.clone();
    }
    for combinator in ["allOf", "anyOf", "oneOf"] {
        if let Some(first) = object
            .get(combinator)
            .and_then(Value::as_array)
            .and_then(|a| a.first())
        {
            return instance(root, first, depth + 1);
        }
    }
    let ty = match object.get("type") {
        Some(Value::String(ty)) => ty.as_str(),
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if object.contains_key("properties") => "object",
        _ if object.contains_key("items") => "array",
        _ => "object",
    };
    match ty {
        "object" => {
            let mut out = Map::new();
            let properties = object.get("properties").and_then(Value::as_object);
            let required = object.get("required").and_then(Value::as_array);
            for name in required.into_iter().flatten().filter_map(Value::as_str) {
                let property = properties.and_then(|p| p.get(name)).unwrap_or(&Value::Null);
                out.insert(name.to_owned(), instance(root, property, depth + 1));
            }
            Value::Object(out)
        }
        "array" => {
            let count = object.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            let items = object.get("items").unwrap_or(&Value::Null);
            Value::Array(
                (0..count)
                    .map(|_| instance(root, items, depth + 1))
                    .collect(),
            )
        }
        "string" => {
            let length = object.get("minLength").and_then(Value::as_u64).unwrap_or(1);
            Value::String("x".repeat(length as usize))
        }
        "integer" | "number" => {
            let minimum = object
                .get("minimum")
                .or_else(|| object.get("exclusiveMinimum"))
                .and_then(Value::as_f64)
                .unwrap_or(0.0)
                .max(0.0);
            let value = if object.contains_key("exclusiveMinimum") {
                minimum.floor() + 1.0
            } else {
                minimum.ceil()
            };
            Value::from(value as i64)
        }
        "boolean" => Value::Bool(false),
        _ => Value::Null,
    }
}

fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    root.pointer(pointer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn required_properties_get_type_appropriate_values() {
        let schema = json!({
            "type": "object",
            "required": ["summary", "count", "tasks", "status", "ok"],
            "properties": {
                "summary": {"type": "string", "minLength": 3},
                "count": {"type": "integer", "minimum": 2},
                "tasks": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/task"}},
                "status": {"enum": ["completed", "blocked"]},
                "ok": {"type": "boolean"},
                "optional": {"type": "string"}
            },
            "$defs": {"task": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}}}
        });
        assert_eq!(
            minimal_instance(&schema),
            json!({"summary": "xxx", "count": 2, "tasks": [{"id": "x"}], "status": "completed", "ok": false})
        );
    }
}
