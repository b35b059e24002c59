//! The safety scan of a pipeline file (docs/claude-code-runner.md): a forbidden flag or permission
//! mode anywhere a value can reach the agent's command line or environment.
//!
//! It runs on the raw document, so that it reports even in a file with structural
//! errors: a bypass attempt always ends with the safety exit code.

use std::path::Path;

use serde_json::Value;

use crate::diagnostic::{Diagnostic, DiagnosticClass};
use crate::pipeline::locate::{child_index, push_index, push_key, SourceIndex};
use crate::safety;

/// Every forbidden value of the document, each a safety-class error.
pub(crate) fn scan(document: &Value, index: &SourceIndex, file: &Path) -> Vec<Diagnostic> {
    let mut s = Scan {
        index,
        file,
        out: Vec::new(),
    };
    s.walk(document, &mut String::new(), false);
    s.out
}

struct Scan<'a> {
    index: &'a SourceIndex,
    file: &'a Path,
    out: Vec<Diagnostic>,
}

impl Scan<'_> {
    /// `path` is the node's path; children extend it and put it back, so a
    /// clean document costs no path per node.
    fn walk(&mut self, v: &Value, path: &mut String, in_env: bool) {
        let len = path.len();
        match v {
            Value::Object(map) => {
                for (k, child) in map {
                    if !in_env {
                        // Free text is not passed to the agent as flags.
                        if matches!(k.as_str(), "prompt" | "description" | "name") {
                            continue;
                        }
                    }
                    push_key(path, k);
                    if !in_env && k == "permissionMode" {
                        if let Some(mode) = child.as_str().and_then(safety::forbidden_mode) {
                            self.mode(mode, path);
                        }
                    } else {
                        self.walk(child, path, in_env || k == "env");
                    }
                    path.truncate(len);
                }
            }
            Value::Array(items) => {
                if items.iter().all(Value::is_string) {
                    let strings: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
                    if let Some((i, hit)) = safety::forbidden_in_args(&strings) {
                        self.flag(hit, &child_index(path, i));
                    }
                } else {
                    for (i, item) in items.iter().enumerate() {
                        push_index(path, i);
                        self.walk(item, path, in_env);
                        path.truncate(len);
                    }
                }
            }
            Value::String(text) => {
                if let Some(hit) = safety::forbidden_in(text) {
                    self.flag(hit, path);
                }
            }
            _ => {}
        }
    }

    fn mode(&mut self, mode: &str, path: &str) {
        let what = if mode == "auto" {
            "lets a classifier approve actions in the user's place"
        } else {
            "skips every permission check"
        };
        self.push(
            "forbidden-mode",
            path,
            format!("permission mode `{mode}` is forbidden: it {what}"),
            format!("use one of {}", safety::ALLOWED_MODES.join(", ")),
        );
    }

    fn flag(&mut self, hit: &str, path: &str) {
        let what = if hit.starts_with("--") && !hit.starts_with("--permission-mode") {
            "flag"
        } else {
            "permission mode"
        };
        self.push(
            "forbidden-flag",
            path,
            format!("forbidden {what} `{hit}` in `{path}`: specbridge never bypasses the agent's permission checks"),
            "remove it; grant what a stage needs with `tools`, `allowedBashRules` and an allowed `permissionMode`".into(),
        );
    }

    fn push(&mut self, code: &str, path: &str, message: String, help: String) {
        let mut d = Diagnostic::error(code, self.file, message)
            .at(self.index.value(path).or_else(|| self.index.nearest(path)))
            .with_path(path)
            .with_help(help);
        d.class = DiagnosticClass::Safety;
        self.out.push(d);
    }
}
