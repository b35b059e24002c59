//! The whole `examples/spec-to-task` pipeline under the real CLI: three read-only
//! generate stages, a fan-out of two execute stages (the second depending on the
//! first) that change real Rust code, verification with cargo, and a check stage.

use std::path::Path;

use serde_json::{json, Value};
use specbridge_testkit::model_server::{Reply, Script, ToolCall};

use super::harness::{read_json, Sandbox};
use crate::common::workspace_root;

const DESIGN_MARKER: &str = "design-marker-0b7d";

const LIB_WITH_COUNT: &str = r#"//! Statistics about a text.

/// The number of lines of `text`; a final line without a newline counts.
pub fn count_lines(text: &str) -> usize {
    text.lines().count()
}

/// The words of `text`, lower-cased: maximal runs of letters, digits and apostrophes.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

/// The number of words of `text`.
pub fn count_words(text: &str) -> usize {
    words(text).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_lines() {
        assert_eq!(count_lines(""), 0);
        assert_eq!(count_lines("one\ntwo\n"), 2);
        assert_eq!(count_lines("one\ntwo"), 2);
    }

    #[test]
    fn counts_words() {
        assert_eq!(count_words(""), 0);
        assert_eq!(count_words("It's a dog's life, a DOG's."), 6);
    }
}
"#;

const TOP_WORDS: &str = r#"
/// The `n` most frequent words with their counts, most frequent first, ties broken
/// alphabetically.
pub fn top_words(text: &str, n: usize) -> Vec<(String, usize)> {
    let mut counts = std::collections::BTreeMap::new();
    for word in words(text) {
        *counts.entry(word).or_insert(0) += 1;
    }
    let mut pairs: Vec<(String, usize)> = counts.into_iter().collect();
    pairs.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    pairs.truncate(n);
    pairs
}

#[cfg(test)]
mod top_words_tests {
    use super::*;

    #[test]
    fn lists_the_most_frequent_first_ties_alphabetically() {
        let top = top_words("b a B c a b", 2);
        assert_eq!(top, vec![("b".to_string(), 3), ("a".to_string(), 2)]);
        assert_eq!(top_words("y x", 5), vec![("x".to_string(), 1), ("y".to_string(), 1)]);
    }
}
"#;

fn document(summary: &str, markdown: &str) -> Reply {
    Reply::structured_output(json!({"summary": summary, "markdown": markdown}))
}

/// What a model implementing one task does: read the file, write it whole, report.
fn implement(root: &Path, id: &str, content: &str) -> [Reply; 3] {
    let lib = root.join("src/lib.rs");
    [
        Reply::tool_uses(
            None,
            vec![ToolCall::new("Read", json!({"file_path": lib})).with_id(format!("{id}-read"))],
        ),
        Reply::tool_uses(
            None,
            vec![
                ToolCall::new("Write", json!({"file_path": lib, "content": content}))
                    .with_id(format!("{id}-write")),
            ],
        ),
        Reply::structured_output(json!({
            "status": "completed",
            "summary": format!("Implemented {id}."),
            "changedFiles": ["src/lib.rs"],
            "commandsRun": [],
            "blockingQuestions": [],
        })),
    ]
}

fn script(root: &Path) -> Script {
    let tasks = json!({
        "summary": "Two tasks.",
        "markdown": "- [ ] word-count\n- [ ] top-words\n",
        "tasks": [
            {"id": "word-count", "title": "Count words", "details": "Add count_words to src/lib.rs.",
             "dependsOn": [], "requirements": ["R1"]},
            {"id": "top-words", "title": "List the most frequent words",
             "details": "Add top_words to src/lib.rs.", "dependsOn": ["word-count"],
             "requirements": ["R2"]},
        ],
    });
    let mut replies = vec![
        document(
            "Two requirements.",
            "# Requirements\n\n- R1: count words.\n- R2: list the most frequent words.\n",
        ),
        document(
            "One module.",
            &format!("# Design\n\nBoth functions live in src/lib.rs ({DESIGN_MARKER}).\n"),
        ),
        Reply::structured_output(tasks),
    ];
    replies.extend(implement(root, "word-count", LIB_WITH_COUNT));
    replies.extend(implement(
        root,
        "top-words",
        &format!("{LIB_WITH_COUNT}{TOP_WORDS}"),
    ));
    Script::new(replies)
}

#[test]
fn the_spec_to_task_example_runs_through_and_audits_clean() {
    let Some(sandbox) = Sandbox::new(script) else {
        return;
    };
    crate::common::copy_tree(
        &workspace_root().join("examples/spec-to-task"),
        sandbox.ctx.root(),
    );
    // The example as shipped, with only the runner pointed at the installed CLI.
    let pipeline = sandbox.ctx.read("specbridge.yaml");
    assert_eq!(pipeline.matches("command: claude\n").count(), 1);
    sandbox.ctx.write(
        "specbridge.yaml",
        &pipeline.replace(
            "command: claude\n",
            &format!("command: {}\n", sandbox.claude.display()),
        ),
    );
    sandbox.ctx.commit_all("the example");

    let out = sandbox.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    for stage in [
        "requirements",
        "design",
        "tasks",
        "implement.word-count",
        "implement.top-words",
        "test",
    ] {
        let record = sandbox.stage_json(stage);
        assert_eq!(record["status"], "succeeded", "{stage}: {record:#}");
    }
    for task in ["implement.word-count", "implement.top-words"] {
        let record = sandbox.stage_json(task);
        assert_eq!(record["evidenceStatus"], "verified", "{task}: {record:#}");
        let verification = sandbox.attempt_json(task, 1, "verification.json");
        assert_eq!(
            verification["commands"][0]["passed"], true,
            "{verification:#}"
        );
    }

    // The repository: three documents written by specbridge, the code by the agents.
    assert!(sandbox
        .ctx
        .read("specs/word-frequencies/design.md")
        .contains(DESIGN_MARKER));
    assert!(sandbox.ctx.read("src/lib.rs").contains("pub fn top_words"));
    let mut changed = sandbox.changed_paths();
    changed.sort();
    assert_eq!(
        changed,
        [
            " M src/lib.rs",
            "?? specs/word-frequencies/design.md",
            "?? specs/word-frequencies/requirements.md",
            "?? specs/word-frequencies/tasks.md",
        ]
    );

    // The server's log: nine turns in dependency order; the second task's prompt
    // was rendered from its item and the design document.
    let requests = sandbox.model_requests();
    assert_eq!(requests.len(), 9);
    assert_eq!(sandbox.server.remaining(), 0);
    let second_task_prompt = requests[6].body["messages"][0].to_string();
    assert!(second_task_prompt.contains("Task `top-words`: List the most frequent words"));
    assert!(second_task_prompt.contains(DESIGN_MARKER));
    for (index, request) in requests.iter().enumerate() {
        let model = request.body["model"].as_str().unwrap_or_default();
        assert!(model.contains("sonnet"), "request {index} used {model}");
    }
    for id in ["word-count-write", "top-words-write"] {
        let result = requests
            .iter()
            .flat_map(specbridge_testkit::model_server::RecordedRequest::tool_results)
            .find(|r| r.tool_use_id == id)
            .unwrap_or_else(|| panic!("no result for {id}"));
        assert!(!result.is_error, "{result:?}");
    }

    let plan = read_json(&sandbox.run_dir().join("plan.json"));
    assert!(plan.to_string().contains("implement.top-words"), "{plan:#}");

    let audit = sandbox.run(&["runs", "audit", "latest", "--json"]);
    assert_eq!(audit.code, 0, "{}", audit.snapshot());
    let report: Value = serde_json::from_str(&audit.stdout).expect("audit JSON");
    assert_eq!(report["findings"], json!([]), "{report:#}");
    // Every event the run wrote is one of the shapes the committed schema holds.
    crate::events::assert_events_match_schema(&sandbox.run_dir());

    // `SPECBRIDGE_RECORD_EXAMPLE=DIR` keeps this run as a recording (how
    // `.specbridge-example/` is made: see docs/replay.md).
    if let Some(dest) = std::env::var_os("SPECBRIDGE_RECORD_EXAMPLE") {
        keep_recording(&sandbox.run_dir(), Path::new(&dest));
    }
}

/// Copy a finished run folder to `dest` (replaced), without its lock file.
fn keep_recording(run_dir: &Path, dest: &Path) {
    if dest.exists() {
        std::fs::remove_dir_all(dest).unwrap();
    }
    std::fs::create_dir_all(dest).unwrap();
    crate::common::copy_tree(run_dir, dest);
    let _ = std::fs::remove_file(dest.join(".lock"));
    eprintln!("recorded the example run into {}", dest.display());
}
