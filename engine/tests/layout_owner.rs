//! The run-directory layout has one owner, `engine/src/store/layout.rs`: no other
//! source file of the workspace spells a record's name or a run folder's path
//! itself. Test code is exempt (it checks the layout as a user sees it on disk),
//! and so are comments.

use std::path::{Path, PathBuf};

use regex::Regex;
use specbridge_engine::store::layout::{self, attempt};

/// Every file and folder name the layout defines.
fn names() -> Vec<&'static str> {
    vec![
        layout::RUN,
        layout::PLAN,
        layout::PIPELINE,
        layout::EVENTS,
        layout::LOCK,
        layout::STAGE,
        layout::OUTPUT,
        attempt::PROMPT,
        attempt::REQUEST,
        attempt::OUTPUT_SCHEMA,
        attempt::PROCESS,
        attempt::RAW_STDOUT,
        attempt::RAW_STDERR,
        attempt::RESULT,
        attempt::TOOL_CALLS,
        attempt::GIT_BEFORE,
        attempt::GIT_AFTER,
        attempt::CHANGED_FILES,
        attempt::DIFF,
        attempt::VERIFICATION,
        attempt::EVIDENCE,
        attempt::CONTINUATION,
        attempt::REPLAY,
    ]
}

struct Scanner {
    literal: Regex,
    folder: Regex,
    names: Vec<&'static str>,
}

impl Scanner {
    fn new() -> Scanner {
        Scanner {
            literal: Regex::new(r#""((?:[^"\\]|\\.)*)""#).unwrap(),
            // A folder of the layout joined by hand: `.join("stages")`,
            // `Component::Normal("runs"…)`, a path matched part by part.
            folder: Regex::new(&format!(
                r#"(join|Normal|Some|strip_prefix)\(\s*"({}|{}|{})""#,
                regex::escape(layout::STAGES),
                regex::escape(layout::RUNS_DIR),
                regex::escape(layout::STORE_DIR),
            ))
            .unwrap(),
            names: names(),
        }
    }

    /// `(line number, line)` of each line of non-test code that builds a run
    /// path from a literal.
    fn offences(&self, source: &str) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        let mut in_tests = false;
        let mut lines = source.lines().enumerate().peekable();
        while let Some((i, line)) = lines.next() {
            let code = line.trim_start();
            // A test module runs to the end of its file (the convention here).
            if code.starts_with("#[cfg(test)]")
                && lines
                    .peek()
                    .is_some_and(|(_, next)| next.trim_start().contains("mod "))
            {
                in_tests = true;
            }
            if in_tests || code.starts_with("//") {
                continue;
            }
            let hit = self.folder.is_match(code)
                || self
                    .literal
                    .captures_iter(code)
                    .any(|c| self.names_a_record(&c[1]));
            if hit {
                out.push((i + 1, line.to_string()));
            }
        }
        out
    }

    /// A string that is a record's name, a path ending in one, or a piece of a
    /// stage or attempt path.
    fn names_a_record(&self, s: &str) -> bool {
        s.contains(&format!("{}/", layout::STAGES))
            || s.starts_with(layout::ATTEMPT_PREFIX)
            || self
                .names
                .iter()
                .any(|n| s == *n || s.ends_with(&format!("/{n}")))
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_source_file_outside_the_layout_builds_a_run_path_from_a_literal() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let owner = workspace.join("engine/src/store/layout.rs");
    let mut files = Vec::new();
    for krate in ["engine", "stages", "cli", "testkit"] {
        rust_files(&workspace.join(krate).join("src"), &mut files);
    }
    assert!(files.len() > 50, "found only {} source files", files.len());
    let scanner = Scanner::new();
    let mut offences = Vec::new();
    for file in files.iter().filter(|f| **f != owner) {
        let name = file.file_name().unwrap().to_string_lossy();
        if name == "tests.rs" || name.ends_with("_tests.rs") {
            continue;
        }
        let source = std::fs::read_to_string(file).unwrap();
        for (line, text) in scanner.offences(&source) {
            let rel = file.strip_prefix(workspace).unwrap().display();
            offences.push(format!("{rel}:{line}: {}", text.trim()));
        }
    }
    assert!(
        offences.is_empty(),
        "run-directory paths built outside engine/src/store/layout.rs \
         (use store::layout and store::RunReader):\n{}",
        offences.join("\n")
    );
}

#[test]
fn the_scan_catches_each_way_of_spelling_a_path() {
    let scanner = Scanner::new();
    for offence in [
        r#"let p = dir.join("stages").join(id);"#,
        r#"let p = run_dir.join("run.json");"#,
        r#"run.write_json(&format!("{attempt_rel}/evidence.json"), &r)"#,
        r#"let rel = format!("stages/{id}/attempt-{n:03}");"#,
        r#"name.strip_prefix("attempt-")"#,
        r#"runs_dir: root.join(".specbridge").join("runs"),"#,
        r#"(Some("runs"), Some(dir)) => true,"#,
    ] {
        assert_eq!(scanner.offences(offence).len(), 1, "{offence}");
    }
    for fine in [
        r#"// reads dir.join("run.json")"#,
        r#"let at = self.at_key("stages");"#,
        r#"printer.json(&json!({ "stages": stages }));"#,
        r#"return fail(format!("failed to write evidence.json: {e}"));"#,
        "#[cfg(test)]\nmod tests {\n    let p = dir.join(\"run.json\");\n}",
    ] {
        assert!(scanner.offences(fine).is_empty(), "{fine}");
    }
}
