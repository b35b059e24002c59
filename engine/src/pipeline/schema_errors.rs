//! Structural problems of a pipeline file, all at once: the document is checked
//! against the generated schema, and each schema error becomes a message a user can
//! act on (unknown key with a "did you mean", missing key, wrong type), located
//! through the [`SourceIndex`].
//!
//! serde stops at the first problem; this runs before it so that a file with five
//! mistakes gets five messages.

use std::path::Path;

use jsonschema::error::ValidationErrorKind;
use serde_json::Value;

use crate::diagnostic::Diagnostic;
use crate::pipeline::locate::{child_key, pointer_to_path, SourceIndex};
use crate::pipeline::schema;
use crate::pipeline::suggest::did_you_mean;
use crate::pipeline::units::UnitError;

/// Every structural problem of `doc` (the YAML document as JSON).
pub(crate) fn check(doc: &Value, index: &SourceIndex, file: &Path) -> Vec<Diagnostic> {
    let root = schema::cached();
    let mut ctx = Ctx {
        root,
        doc,
        index,
        file,
        out: Vec::new(),
    };
    ctx.validate(root, doc, "");
    ctx.out
}

struct Ctx<'a> {
    root: &'a Value,
    doc: &'a Value,
    index: &'a SourceIndex,
    file: &'a Path,
    out: Vec<Diagnostic>,
}

impl Ctx<'_> {
    /// Validate `instance` (found at `base` in the document) against `schema`, a
    /// node of the root schema.
    fn validate(&mut self, schema: &Value, instance: &Value, base: &str) {
        let mut standalone = schema.clone();
        if let (Some(obj), Some(defs)) = (standalone.as_object_mut(), self.root.get("definitions"))
        {
            obj.entry("definitions").or_insert_with(|| defs.clone());
        }
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft7)
            .build(&standalone)
            .expect("the generated pipeline schema compiles");
        let errors: Vec<_> = validator
            .iter_errors(instance)
            .map(|e| {
                // The library's own wording, for the kinds not put in words here.
                let message = e.to_string();
                let parts = e.into_parts();
                (
                    format!("{base}{}", parts.instance_path.as_str()),
                    parts.instance.into_owned(),
                    parts.kind,
                    message,
                )
            })
            .collect();
        for (pointer, value, kind, message) in errors {
            self.translate(&pointer, &value, kind, &message);
        }
    }

    fn translate(
        &mut self,
        pointer: &str,
        value: &Value,
        kind: ValidationErrorKind,
        message: &str,
    ) {
        let path = pointer_to_path(self.doc, pointer);
        match kind {
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                let allowed = self.allowed_keys(pointer);
                for key in unexpected {
                    let at = self.index.key(&child_key(&path, &key));
                    let help = match did_you_mean(&key, allowed.iter().map(String::as_str)) {
                        Some(s) => format!("did you mean `{s}`?"),
                        None => format!("allowed keys here: {}", allowed.join(", ")),
                    };
                    self.push(
                        Diagnostic::error(
                            "unknown-key",
                            self.file,
                            format!("unknown key `{key}` {}", place(&path)),
                        )
                        .at(at)
                        .with_path(child_key(&path, &key))
                        .with_help(help),
                    );
                }
            }
            ValidationErrorKind::Required { property } => {
                let key = property.as_str().unwrap_or_default().to_string();
                let d = Diagnostic::error(
                    "missing-key",
                    self.file,
                    format!("missing required key `{key}` {}", place(&path)),
                )
                .at(self.index.value(&path))
                .with_path(child_key(&path, &key));
                self.push(d);
            }
            ValidationErrorKind::Type { .. }
            | ValidationErrorKind::AnyOf { .. }
            | ValidationErrorKind::OneOfNotValid { .. } => self.mismatch(pointer, &path, value),
            ValidationErrorKind::Enum { options } => {
                let options: Vec<String> = options
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|o| o.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                let text = value
                    .as_str()
                    .map_or_else(|| value.to_string(), String::from);
                let mut d = Diagnostic::error(
                    "invalid-value",
                    self.file,
                    format!(
                        "`{text}` is not a valid value for `{path}`: expected one of {}",
                        options.join(", ")
                    ),
                )
                .at(self.index.value(&path))
                .with_path(&path);
                if let Some(s) = did_you_mean(&text, options.iter().map(String::as_str)) {
                    d = d.with_help(format!("did you mean `{s}`?"));
                }
                self.push(d);
            }
            ValidationErrorKind::Minimum { limit } | ValidationErrorKind::Maximum { limit } => {
                let bound = if value.as_f64() < limit.as_f64() {
                    "at least"
                } else {
                    "at most"
                };
                let limit = limit
                    .as_f64()
                    .filter(|f| f.fract() == 0.0)
                    .map_or_else(|| limit.to_string(), |f| format!("{f:.0}"));
                self.push(
                    Diagnostic::error(
                        "invalid-value",
                        self.file,
                        format!("`{path}` must be {bound} {limit}, found {value}"),
                    )
                    .at(self.index.value(&path))
                    .with_path(&path),
                );
            }
            _ => {
                self.push(
                    Diagnostic::error(
                        "invalid-value",
                        self.file,
                        format!("invalid value for `{path}`: {message}"),
                    )
                    .at(self.index.value(&path))
                    .with_path(&path),
                );
            }
        }
    }

    /// A value of the wrong shape. When one alternative of the schema has the same
    /// shape (a mapping where a mapping is expected), the problem is inside it:
    /// validate against that alternative to name the exact key.
    fn mismatch(&mut self, pointer: &str, path: &str, value: &Value) {
        let Some(node) = schema_at(self.root, pointer) else {
            return self.wrong_type(pointer, path, value, "a different value".into());
        };
        let named = ref_name(node);
        match (named.as_deref(), value) {
            (Some("Duration"), Value::String(s)) => {
                let msg = UnitError::Duration(s.clone()).to_string();
                return self.push(
                    Diagnostic::error("invalid-duration", self.file, format!("`{path}`: {msg}"))
                        .at(self.index.value(path))
                        .with_path(path),
                );
            }
            (Some("CommandSandbox"), Value::String(s)) => {
                return self.push(
                    Diagnostic::error(
                        "invalid-value",
                        self.file,
                        format!("`{s}` is not a valid value for `{path}`: expected `off` or a mapping such as `{{ writable: [\"~/.cache/x\"], network: true }}`"),
                    )
                    .at(self.index.value(path))
                    .with_path(path)
                    .with_help("leave `sandbox` out to run the command confined with nothing opened up"),
                );
            }
            (Some("ByteSize"), Value::String(s)) => {
                let msg = UnitError::Size(s.clone()).to_string();
                return self.push(
                    Diagnostic::error("invalid-size", self.file, format!("`{path}`: {msg}"))
                        .at(self.index.value(path))
                        .with_path(path),
                );
            }
            _ => {}
        }
        let same_shape = branches(node, self.root).into_iter().find(|b| {
            shape_of(b).is_some_and(|s| s == value_shape(value)) && value_shape(value) != "scalar"
        });
        match same_shape {
            Some(branch) if branch != node => {
                let before = self.out.len();
                self.validate(branch, value, pointer);
                if self.out.len() == before {
                    self.wrong_type(pointer, path, value, expectation(node, self.root));
                }
            }
            _ => self.wrong_type(pointer, path, value, expectation(node, self.root)),
        }
    }

    fn wrong_type(&mut self, pointer: &str, path: &str, value: &Value, expected: String) {
        let options = schema_at(self.root, pointer)
            .map(|n| enum_options(n, self.root))
            .unwrap_or_default();
        if let (false, Some(text)) = (options.is_empty(), value.as_str()) {
            let mut d = Diagnostic::error(
                "invalid-value",
                self.file,
                format!("`{text}` is not a valid value for `{path}`: expected {expected}"),
            )
            .at(self.index.value(path))
            .with_path(path);
            if let Some(s) = did_you_mean(text, options.iter().map(String::as_str)) {
                d = d.with_help(format!("did you mean `{s}`?"));
            }
            return self.push(d);
        }
        let mut d = Diagnostic::error(
            "wrong-type",
            self.file,
            format!("`{path}` must be {expected}, found {}", found(value)),
        )
        .at(self.index.value(path))
        .with_path(path);
        if matches!(value, Value::Number(_) | Value::Bool(_)) && expected == "a string" {
            d = d.with_help(format!("quote it: \"{value}\""));
        }
        self.push(d);
    }

    fn allowed_keys(&self, pointer: &str) -> Vec<String> {
        let Some(node) = schema_at(self.root, pointer) else {
            return Vec::new();
        };
        let mut keys: Vec<String> = branches(node, self.root)
            .into_iter()
            .filter_map(|b| b.get("properties").and_then(Value::as_object))
            .flat_map(|p| p.keys().cloned())
            .collect();
        keys.dedup();
        keys
    }

    fn push(&mut self, d: Diagnostic) {
        if !self.out.contains(&d) {
            self.out.push(d);
        }
    }
}

fn place(path: &str) -> String {
    if path.is_empty() {
        "at the top level".into()
    } else {
        format!("in `{path}`")
    }
}

fn found(value: &Value) -> String {
    match value {
        Value::Null => "nothing (null)".into(),
        Value::Bool(b) => format!("`{b}`"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) if s.chars().count() > 40 => "a string".into(),
        Value::String(s) => format!("the string \"{s}\""),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "a mapping".into(),
    }
}

fn value_shape(value: &Value) -> &'static str {
    match value {
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        _ => "scalar",
    }
}

fn shape_of(schema: &Value) -> Option<&'static str> {
    if schema.get("properties").is_some() || schema.get("additionalProperties").is_some() {
        return Some("object");
    }
    if schema.get("items").is_some() {
        return Some("array");
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("object") => Some("object"),
        Some("array") => Some("array"),
        Some(_) => Some("scalar"),
        None => None,
    }
}

fn resolve<'a>(node: &'a Value, root: &'a Value) -> &'a Value {
    let mut node = node;
    for _ in 0..16 {
        match node.get("$ref").and_then(Value::as_str) {
            Some(r) => match r.strip_prefix('#').and_then(|p| root.pointer(p)) {
                Some(target) => node = target,
                None => break,
            },
            None => break,
        }
    }
    node
}

/// The alternatives a node allows, with references followed and nested
/// `anyOf`/`oneOf`/`allOf` flattened, leaving out `null`.
fn branches<'a>(node: &'a Value, root: &'a Value) -> Vec<&'a Value> {
    let node = resolve(node, root);
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(list) = node.get(key).and_then(Value::as_array) {
            return list
                .iter()
                .flat_map(|b| branches(b, root))
                .filter(|b| b.get("type").and_then(Value::as_str) != Some("null"))
                .collect();
        }
    }
    vec![node]
}

/// The definition a node refers to, directly or as the one non-null alternative.
fn ref_name(node: &Value) -> Option<String> {
    let direct = |n: &Value| {
        n.get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.rsplit('/').next())
            .map(String::from)
    };
    if let Some(name) = direct(node) {
        return Some(name);
    }
    let list = node.get("anyOf").and_then(Value::as_array)?;
    let non_null: Vec<&Value> = list
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) != Some("null"))
        .collect();
    match non_null.as_slice() {
        [only] => ref_name(only),
        _ => None,
    }
}

/// The schema node that describes the value at `pointer`.
fn schema_at<'a>(root: &'a Value, pointer: &str) -> Option<&'a Value> {
    let mut node = root;
    for raw in pointer.split('/').skip(1) {
        let seg = raw.replace("~1", "/").replace("~0", "~");
        node = branches(node, root).into_iter().find_map(|b| {
            if let Some(p) = b.get("properties").and_then(|p| p.get(&seg)) {
                return Some(p);
            }
            if seg.parse::<usize>().is_ok() {
                if let Some(items) = b.get("items").filter(|i| i.is_object()) {
                    return Some(items);
                }
            }
            b.get("additionalProperties").filter(|a| a.is_object())
        })?;
    }
    Some(node)
}

/// The allowed values when a node is a choice of constants (schemars writes an
/// enum with documented variants as one `enum` per variant).
fn enum_options(node: &Value, root: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for b in branches(node, root) {
        let Some(list) = b.get("enum").and_then(Value::as_array) else {
            return Vec::new();
        };
        out.extend(
            list.iter()
                .map(|o| o.as_str().map_or_else(|| o.to_string(), String::from)),
        );
    }
    out
}

/// What a schema node expects, in words.
fn expectation(node: &Value, root: &Value) -> String {
    match ref_name(node).as_deref() {
        Some("Duration") => {
            return "a duration such as 90s, 15m, 1h or an integer of milliseconds".into()
        }
        Some("ByteSize") => return "a size such as 10MiB or an integer of bytes".into(),
        Some("Argv") => return "a list of strings such as [cargo, test]".into(),
        _ => {}
    }
    let options = enum_options(node, root);
    if !options.is_empty() {
        return format!("one of {}", options.join(", "));
    }
    let mut words: Vec<String> = Vec::new();
    for b in branches(node, root) {
        let w = {
            let types: Vec<&str> = match b.get("type") {
                Some(Value::String(t)) => vec![t.as_str()],
                Some(Value::Array(ts)) => ts
                    .iter()
                    .filter_map(Value::as_str)
                    .filter(|t| *t != "null")
                    .collect(),
                _ => Vec::new(),
            };
            match types.first().copied() {
                Some("string") => "a string".into(),
                Some("integer") => "a whole number".into(),
                Some("number") => "a number".into(),
                Some("boolean") => "true or false".into(),
                Some("object") => "a mapping".into(),
                Some("array") => {
                    let item = b.get("items").map(|i| expectation(i, root));
                    match item.as_deref() {
                        Some("a string") => "a list of strings".into(),
                        _ => "a list".into(),
                    }
                }
                _ if b.get("properties").is_some() => "a mapping".into(),
                _ => continue,
            }
        };
        if !words.contains(&w) {
            words.push(w);
        }
    }
    if words.is_empty() {
        "a different value".into()
    } else {
        words.join(" or ")
    }
}
