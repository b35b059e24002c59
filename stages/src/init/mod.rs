//! `specbridge init`: starter files for a new pipeline, fitted to the project it is
//! run in (its test command becomes the verification gate and a Bash rule the agent
//! may use). Never overwrites without `force`: if any file it would write exists, it
//! writes nothing.

mod detect;

use std::path::{Path, PathBuf};

pub use detect::{detect, TestCommand};

/// A starter template: relative path and content of each file. Markers `@@…@@` are
/// filled in by [`init`].
pub struct Template {
    pub name: &'static str,
    pub files: &'static [(&'static str, &'static str)],
}

pub(crate) const TEMPLATES: &[Template] = &[Template {
    name: "spec-to-task",
    files: &[
        (
            "specbridge.yaml",
            include_str!("../../templates/spec-to-task/specbridge.yaml"),
        ),
        (
            "prompts/requirements.md",
            include_str!("../../templates/spec-to-task/prompts/requirements.md"),
        ),
        (
            "prompts/design.md",
            include_str!("../../templates/spec-to-task/prompts/design.md"),
        ),
        (
            "prompts/tasks.md",
            include_str!("../../templates/spec-to-task/prompts/tasks.md"),
        ),
        (
            "prompts/implement.md",
            include_str!("../../templates/spec-to-task/prompts/implement.md"),
        ),
    ],
}];

/// The spec the requirements stage reads; written only when absent (it is the
/// user's, never replaced).
pub const SPEC_FILE: &str = "SPEC.md";
const SPEC_STUB: &str = include_str!("../../templates/SPEC.md");

#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error("unknown template `{name}`; available: {available}")]
    UnknownTemplate { name: String, available: String },
    #[error("refusing to overwrite existing files: {} (--force replaces them)", .0.join(", "))]
    WouldOverwrite(Vec<String>),
    #[error("failed to write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub struct InitOptions<'a> {
    pub template: &'a str,
    /// Replace the template's files when they exist.
    pub force: bool,
    /// The test command to use instead of the detected one.
    pub test: Option<TestCommand>,
}

/// What `init` did.
#[derive(Debug, Default)]
pub struct InitReport {
    pub written: Vec<String>,
    /// The test command put in `verification` and `allowedBashRules`; `None` when
    /// nothing was detected (the starter then has a placeholder check).
    pub test: Option<TestCommand>,
    /// `SPEC.md` existed and was kept.
    pub kept_spec: bool,
    /// `.specbridge/` was added to `.gitignore`.
    pub gitignore_updated: bool,
}

/// The template's files with the project's test command filled in.
pub fn render(template: &Template, test: Option<&TestCommand>) -> Vec<(String, String)> {
    let (detected, verification, rule, test_rule) = match test {
        Some(t) => (
            format!("detected from {}: `{}`", t.found, t.display()),
            format!(
                "  - {{ name: {}, argv: [{}], timeout: 15m, required: true }}",
                t.name,
                t.argv
                    .iter()
                    .map(|a| serde_json::to_string(a).expect("strings serialise"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            format!("    - {:?}", t.bash_rule),
            format!(
                "- Run `{}` and make it pass before you answer. specbridge runs it\n  again afterwards; your changes count only when it passes.",
                t.display()
            ),
        ),
        None => (
            "none was detected: replace the placeholder".to_string(),
            "  # No test command was detected. This placeholder cannot fail a broken\n  # build: replace it with your tests (and add a matching allowedBashRules entry).\n  - { name: whitespace, argv: [git, diff, --check], timeout: 5m, required: true }".to_string(),
            String::new(),
            "- specbridge runs the verification commands of `specbridge.yaml` after you\n  answer; your changes count only when they pass.".to_string(),
        ),
    };
    template
        .files
        .iter()
        .map(|(rel, text)| {
            let filled = text
                .replace("@@DETECTED@@", &detected)
                .replace("@@VERIFICATION@@", &verification)
                .replace("@@TEST_RULE@@", &test_rule)
                .replace(
                    "@@BASH_RULE@@\n",
                    &if rule.is_empty() {
                        rule.clone()
                    } else {
                        format!("{rule}\n")
                    },
                );
            (rel.to_string(), filled)
        })
        .collect()
}

pub(crate) fn find_template(name: &str) -> Result<&'static Template, InitError> {
    TEMPLATES
        .iter()
        .find(|t| t.name == name)
        .ok_or_else(|| InitError::UnknownTemplate {
            name: name.to_string(),
            available: TEMPLATES
                .iter()
                .map(|t| t.name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// Write a template's files under `root`, `SPEC.md` when absent, and `.specbridge/`
/// into `.gitignore`.
pub fn init(root: &Path, options: InitOptions<'_>) -> Result<InitReport, InitError> {
    let template = find_template(options.template)?;
    let test = options.test.or_else(|| detect(root));
    let files = render(template, test.as_ref());
    if !options.force {
        let existing: Vec<String> = files
            .iter()
            .filter(|(rel, _)| root.join(rel).symlink_metadata().is_ok())
            .map(|(rel, _)| rel.clone())
            .collect();
        if !existing.is_empty() {
            return Err(InitError::WouldOverwrite(existing));
        }
    }
    let mut report = InitReport {
        test,
        ..Default::default()
    };
    for (rel, content) in &files {
        write_file(&root.join(rel), content, options.force)?;
        report.written.push(rel.clone());
    }
    if root.join(SPEC_FILE).symlink_metadata().is_ok() {
        report.kept_spec = true;
    } else {
        write_file(&root.join(SPEC_FILE), SPEC_STUB, false)?;
        report.written.push(SPEC_FILE.to_string());
    }
    report.gitignore_updated = ignore_run_folders(root)?;
    Ok(report)
}

fn write_file(path: &Path, content: &str, replace: bool) -> Result<(), InitError> {
    let write = || -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        if replace {
            // Through a symlink would write wherever it points: replace the link.
            if path
                .symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink())
            {
                std::fs::remove_file(path)?;
            }
            return std::fs::write(path, content);
        }
        // create_new: a file appearing between the check and now is not
        // overwritten either.
        use std::io::Write;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)?
            .write_all(content.as_bytes())
    };
    write().map_err(|source| InitError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Adds `.specbridge/` to `.gitignore` unless a line already ignores it; `true`
/// when the file changed. The same rule as the run store's `.git/info/exclude`
/// entry, so the two never disagree on what "already ignored" means.
fn ignore_run_folders(root: &Path) -> Result<bool, InitError> {
    let path = root.join(".gitignore");
    specbridge_engine::store::add_exclude_line(&path)
        .map_err(|source| InitError::Write { path, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendered_files_keep_no_marker_and_no_example_leftovers() {
        let test = TestCommand {
            found: "Cargo.toml",
            name: "tests",
            argv: vec!["cargo".into(), "test".into()],
            bash_rule: "Bash(cargo test:*)".into(),
        };
        for t in [Some(&test), None] {
            for (rel, text) in render(&TEMPLATES[0], t) {
                assert!(!text.contains("@@"), "{rel} keeps a marker:\n{text}");
                for leftover in ["word-count", "words", "punctuation", "empty text"] {
                    assert!(!text.contains(leftover), "{rel} mentions `{leftover}`");
                }
            }
        }
        let files = render(&TEMPLATES[0], Some(&test));
        let yaml = &files[0].1;
        assert!(yaml.contains(r#"argv: ["cargo", "test"]"#), "{yaml}");
        assert!(yaml.contains(r#"- "Bash(cargo test:*)""#), "{yaml}");
        let implement = &files
            .iter()
            .find(|(r, _)| r == "prompts/implement.md")
            .unwrap()
            .1;
        assert!(implement.contains("Run `cargo test`"), "{implement}");
    }

    #[test]
    fn gitignore_gets_one_line_once() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".gitignore"), "target").unwrap();
        assert!(ignore_run_folders(dir.path()).unwrap());
        assert!(!ignore_run_folders(dir.path()).unwrap());
        let text = std::fs::read_to_string(dir.path().join(".gitignore")).unwrap();
        assert!(text.starts_with("target\n# specbridge"), "{text}");
        assert_eq!(text.matches(".specbridge/").count(), 1);
    }
}
