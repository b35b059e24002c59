//! What kind of project `init` is in, and so which command tests it.

use std::path::Path;

/// The command that tests a project, and the Bash rule that lets the agent run it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestCommand {
    /// What was found: `Cargo.toml`, `package.json`, …
    pub found: &'static str,
    /// The verification command's name in the pipeline.
    pub name: &'static str,
    pub argv: Vec<String>,
    /// The scoped rule for `allowedBashRules`: the command and any arguments after it.
    pub bash_rule: String,
}

impl TestCommand {
    fn new(found: &'static str, name: &'static str, argv: &[&str]) -> TestCommand {
        let mut t = TestCommand::from_argv(
            found,
            argv.iter().map(std::string::ToString::to_string).collect(),
        );
        t.name = name;
        t
    }

    /// A test command given as an argv (not empty).
    pub fn from_argv(found: &'static str, argv: Vec<String>) -> TestCommand {
        // The program and its subcommand: `go test ./pkg` and `cargo test -p x` match too.
        let bash_rule = format!("Bash({}:*)", argv[..argv.len().min(2)].join(" "));
        TestCommand {
            found,
            name: "tests",
            argv,
            bash_rule,
        }
    }

    /// The command as the agent would type it.
    pub fn display(&self) -> String {
        self.argv.join(" ")
    }
}

/// The first marker found, in this order: Cargo.toml, package.json with a `test`
/// script, pyproject.toml / pytest.ini / setup.cfg / tox.ini / conftest.py, go.mod,
/// a Makefile with a `test` target. `None` when nothing is recognised.
pub fn detect(root: &Path) -> Option<TestCommand> {
    let has = |name: &str| root.join(name).is_file();
    if has("Cargo.toml") {
        return Some(TestCommand::new("Cargo.toml", "tests", &["cargo", "test"]));
    }
    if let Some(runner) = node_runner(root) {
        return Some(TestCommand::new("package.json", "tests", &[runner, "test"]));
    }
    if [
        "pyproject.toml",
        "pytest.ini",
        "setup.cfg",
        "tox.ini",
        "conftest.py",
    ]
    .iter()
    .any(|f| has(f))
    {
        return Some(TestCommand::new("a Python project", "tests", &["pytest"]));
    }
    if has("go.mod") {
        return Some(TestCommand::new(
            "go.mod",
            "tests",
            &["go", "test", "./..."],
        ));
    }
    for makefile in ["GNUmakefile", "makefile", "Makefile"] {
        if make_has_test_target(&root.join(makefile)) {
            return Some(TestCommand::new(
                "a Makefile test target",
                "tests",
                &["make", "test"],
            ));
        }
    }
    None
}

/// `npm`, `yarn` or `pnpm` (by lock file) when package.json has a `test` script
/// other than npm's placeholder, which always fails.
fn node_runner(root: &Path) -> Option<&'static str> {
    let text = std::fs::read_to_string(root.join("package.json")).ok()?;
    let package: serde_json::Value = serde_json::from_str(&text).ok()?;
    let script = package.pointer("/scripts/test")?.as_str()?;
    if script.contains("no test specified") {
        return None;
    }
    Some(if root.join("yarn.lock").is_file() {
        "yarn"
    } else if root.join("pnpm-lock.yaml").is_file() {
        "pnpm"
    } else {
        "npm"
    })
}

fn make_has_test_target(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|text| {
        text.lines().any(|l| {
            l.strip_prefix("test")
                .is_some_and(|rest| rest.trim_start().starts_with(':') && !rest.starts_with(":="))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        dir
    }

    fn argv(files: &[(&str, &str)]) -> Option<String> {
        detect(project(files).path()).map(|t| format!("{} | {}", t.display(), t.bash_rule))
    }

    #[test]
    fn each_kind_of_project_gets_its_test_command() {
        assert_eq!(
            argv(&[("Cargo.toml", "[package]")]).as_deref(),
            Some("cargo test | Bash(cargo test:*)")
        );
        let node = r#"{"scripts": {"test": "node --test"}}"#;
        assert_eq!(
            argv(&[("package.json", node)]).as_deref(),
            Some("npm test | Bash(npm test:*)")
        );
        assert_eq!(
            argv(&[("package.json", node), ("yarn.lock", "")]).as_deref(),
            Some("yarn test | Bash(yarn test:*)")
        );
        assert_eq!(
            argv(&[("pyproject.toml", "[project]")]).as_deref(),
            Some("pytest | Bash(pytest:*)")
        );
        assert_eq!(
            argv(&[("go.mod", "module x")]).as_deref(),
            Some("go test ./... | Bash(go test:*)")
        );
        assert_eq!(
            argv(&[("Makefile", "all:\n\tcc x.c\ntest: all\n\t./x\n")]).as_deref(),
            Some("make test | Bash(make test:*)")
        );
    }

    #[test]
    fn placeholders_and_lookalikes_are_not_test_commands() {
        let npm_default = r#"{"scripts": {"test": "echo \"Error: no test specified\" && exit 1"}}"#;
        assert_eq!(argv(&[("package.json", npm_default)]), None);
        assert_eq!(argv(&[("package.json", r#"{"scripts": {}}"#)]), None);
        assert_eq!(argv(&[("Makefile", "testing:\n\ttrue\nTEST := 1\n")]), None);
        assert_eq!(argv(&[("README.md", "# hi")]), None);
    }
}
