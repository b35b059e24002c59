//! Tolerant readers for the records audit looks into. Records are read as plain
//! JSON and only the fields a check needs are picked, so a record from another
//! version of specbridge is checked as far as it can be, never rejected whole.

use serde_json::Value;

use crate::audit::files::RunFiles;
use crate::audit::report::{Finding, FindingCode};

/// Read a JSON record. Absent (or unreadable, already reported by the file pass)
/// is `None`; a record that does not parse is a finding and `None`.
pub(crate) fn read_record(run: &RunFiles, rel: &str, findings: &mut Vec<Finding>) -> Option<Value> {
    let bytes = run.bytes(rel)?;
    match serde_json::from_slice(&bytes) {
        Ok(v) => Some(v),
        Err(e) => {
            findings.push(
                Finding::new(
                    FindingCode::RecordUnparseable,
                    format!("does not parse as JSON: {e}"),
                )
                .file(rel),
            );
            None
        }
    }
}

pub(crate) fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// `redactedArgv` of a `process.json`, when it is a list of strings.
pub(crate) fn redacted_argv(process: &Value) -> Option<Vec<String>> {
    process
        .get("redactedArgv")?
        .as_array()?
        .iter()
        .map(|a| a.as_str().map(str::to_string))
        .collect()
}

/// The parts of `evidence.json` audit checks.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Evidence {
    pub status: Option<String>,
    /// Attributed changes: added + modified + deleted.
    pub changed: u64,
    /// Up to a few changed paths, for messages.
    pub examples: Vec<String>,
}

const EXAMPLES: usize = 3;

/// Read `changed: {added, modified, deleted}` where each is a count or a list of
/// paths (or of objects with a `path`); a bare `changed` list counts too.
pub(crate) fn evidence(v: &Value) -> Evidence {
    let mut ev = Evidence {
        status: str_field(v, "status")
            .or_else(|| str_field(v, "evidenceStatus"))
            .map(str::to_string),
        ..Default::default()
    };
    let mut count = |item: &Value| match item {
        Value::Number(n) => ev.changed += n.as_u64().unwrap_or(0),
        Value::Array(items) => {
            ev.changed += items.len() as u64;
            for it in items {
                let path = it.as_str().or_else(|| str_field(it, "path"));
                if let Some(p) = path.filter(|_| ev.examples.len() < EXAMPLES) {
                    ev.examples.push(p.to_string());
                }
            }
        }
        _ => {}
    };
    match v.get("changed") {
        Some(Value::Object(parts)) => {
            for key in ["added", "modified", "deleted"] {
                if let Some(part) = parts.get(key) {
                    count(part);
                }
            }
        }
        Some(list @ Value::Array(_)) => count(list),
        _ => {}
    }
    ev
}

/// One verification command's result.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CommandResult {
    pub name: String,
    /// Absent means required: only an explicit `false` makes a command optional.
    pub required: bool,
    /// `passed`, or else `exitCode == 0`; neither means it did not pass.
    pub passed: bool,
    pub exit_code: Option<i64>,
}

/// `verification.json`'s `commands`, or `None` when there is no such list.
pub(crate) fn verification(v: &Value) -> Option<Vec<CommandResult>> {
    let commands = v.get("commands")?.as_array()?;
    Some(
        commands
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let exit_code = c.get("exitCode").and_then(Value::as_i64);
                CommandResult {
                    name: str_field(c, "name")
                        .map_or_else(|| format!("#{}", i + 1), str::to_string),
                    required: c.get("required").and_then(Value::as_bool).unwrap_or(true),
                    passed: c
                        .get("passed")
                        .and_then(Value::as_bool)
                        .unwrap_or(exit_code == Some(0)),
                    exit_code,
                }
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn changes_are_counted_from_counts_lists_and_objects() {
        let e = evidence(&json!({
            "status": "verified",
            "changed": {"added": ["a.rs"], "modified": [{"path": "b.rs", "sha256": "x"}], "deleted": 2}
        }));
        assert_eq!(e.status.as_deref(), Some("verified"));
        assert_eq!(e.changed, 4);
        assert_eq!(e.examples, ["a.rs", "b.rs"]);
        assert_eq!(evidence(&json!({"changed": ["x"]})).changed, 1);
        assert_eq!(evidence(&json!({"changed": {"added": []}})).changed, 0);
        assert_eq!(evidence(&json!({})), Evidence::default());
    }

    #[test]
    fn verification_reads_required_and_passed_with_defaults() {
        let cmds = verification(&json!({"commands": [
            {"name": "test", "required": true, "passed": false, "exitCode": 1},
            {"name": "lint", "required": false, "exitCode": 0},
            {"exitCode": 0}
        ]}))
        .unwrap();
        assert_eq!(
            cmds.iter()
                .map(|c| (c.name.as_str(), c.required, c.passed))
                .collect::<Vec<_>>(),
            [
                ("test", true, false),
                ("lint", false, true),
                ("#3", true, true)
            ]
        );
        assert!(verification(&json!({"results": []})).is_none());
    }
}
