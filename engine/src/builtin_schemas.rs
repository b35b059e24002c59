//! The built-in output schemas (docs/stage-kinds.md), addressed in pipelines as `builtin:NAME`.
//!
//! The files in `schemas/` are the source; they are embedded so that the binary
//! never depends on the source tree at run time.

/// `builtin:document`: `{summary, markdown}`.
pub(crate) const DOCUMENT: &str = include_str!("../../schemas/document.schema.json");
/// `builtin:tasks`: `{summary, markdown, tasks: [{id, title, details, dependsOn, requirements}]}`.
pub(crate) const TASKS: &str = include_str!("../../schemas/tasks.schema.json");
/// `builtin:task-result`: `{status, summary, changedFiles, commandsRun, blockingQuestions}`.
pub(crate) const TASK_RESULT: &str = include_str!("../../schemas/task-result.schema.json");

/// The prefix that names a built-in schema in `output.schema`.
pub const PREFIX: &str = "builtin:";

/// Every built-in schema by name, in documentation order.
pub const ALL: [(&str, &str); 3] = [
    ("document", DOCUMENT),
    ("tasks", TASKS),
    ("task-result", TASK_RESULT),
];

/// The text of a built-in schema, by its name without the prefix.
pub fn builtin(name: &str) -> Option<&'static str> {
    ALL.iter().find(|(n, _)| *n == name).map(|(_, text)| *text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn schema(name: &str) -> Value {
        serde_json::from_str(builtin(name).unwrap()).unwrap()
    }

    #[test]
    fn every_builtin_is_a_valid_schema_known_to_validation() {
        for (name, text) in ALL {
            let value: Value = serde_json::from_str(text).unwrap();
            jsonschema::validator_for(&value).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(crate::pipeline::validate::BUILTIN_SCHEMAS.contains(&name));
        }
        assert_eq!(
            crate::pipeline::validate::BUILTIN_SCHEMAS.len(),
            ALL.len(),
            "validation and the embedded schemas list the same names"
        );
    }

    #[test]
    fn tasks_refuse_ids_that_could_leave_their_folder() {
        let task = |id: &str| {
            json!({"summary": "s", "markdown": "m", "tasks": [
                {"id": id, "title": "t", "details": "d", "dependsOn": [], "requirements": []}
            ]})
        };
        let v = jsonschema::validator_for(&schema("tasks")).unwrap();
        assert!(v.is_valid(&task("t1")));
        assert!(v.is_valid(&task("add-queue.v2")));
        for bad in ["../x", ".hidden", "a/b", ""] {
            assert!(!v.is_valid(&task(bad)), "{bad}");
        }
    }

    #[test]
    fn task_results_are_completed_or_blocked() {
        let v = jsonschema::validator_for(&schema("task-result")).unwrap();
        let result = |status: &str| json!({"status": status, "summary": "s", "changedFiles": [], "commandsRun": [], "blockingQuestions": []});
        assert!(v.is_valid(&result("completed")));
        assert!(v.is_valid(&result("blocked")));
        assert!(!v.is_valid(&result("done")));
    }
}
