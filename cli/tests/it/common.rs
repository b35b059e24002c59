//! `TestContext`: a temporary git repository, the built binary, and output filters.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use assert_cmd::cargo::CommandCargoExt;

pub struct TestContext {
    pub dir: tempfile::TempDir,
}

/// What a finished command printed, with temporary paths replaced by `[ROOT]`.
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl TestContext {
    /// A fresh folder that is a git repository with a committer configured locally,
    /// so tests never depend on the machine's git config.
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("specbridge-test-")
            .tempdir()
            .expect("create temp dir");
        let ctx = TestContext { dir };
        ctx.git(&["init", "-q", "-b", "main"]);
        ctx.git(&["config", "user.email", "test@example.com"]);
        ctx.git(&["config", "user.name", "specbridge test"]);
        ctx.git(&["config", "commit.gpgsign", "false"]);
        ctx
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    pub fn write(&self, rel: &str, text: &str) -> &Self {
        let p = self.path(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(p, text).expect("write file");
        self
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
    }

    pub fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(self.root())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("run git");
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Stage and commit everything.
    pub fn commit_all(&self, message: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
    }

    /// The binary, run in the repository with a clean, predictable environment.
    pub fn command(&self) -> Command {
        let mut cmd = Command::cargo_bin("specbridge").expect("specbridge binary");
        cmd.current_dir(self.root())
            .env("NO_COLOR", "1")
            .env_remove("CLICOLOR_FORCE")
            .env_remove("SPECBRIDGE_LOG")
            .env("GIT_CONFIG_NOSYSTEM", "1");
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Output {
        let out = self.command().args(args).output().expect("run specbridge");
        self.output(out)
    }

    pub fn output(&self, out: std::process::Output) -> Output {
        Output {
            code: out.status.code().unwrap_or(-1),
            stdout: self.filter(&String::from_utf8_lossy(&out.stdout)),
            stderr: self.filter(&String::from_utf8_lossy(&out.stderr)),
        }
    }

    /// Replace what changes from run to run: the temporary root, run ids, times.
    pub fn filter(&self, text: &str) -> String {
        let root = self.root().to_string_lossy().into_owned();
        let canon = std::fs::canonicalize(self.root())
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|_| root.clone());
        let mut t = text.replace(&canon, "[ROOT]").replace(&root, "[ROOT]");
        for (re, with) in filters() {
            t = re.replace_all(&t, *with).into_owned();
        }
        t
    }

    /// The single run folder under `.specbridge/runs/`.
    pub fn only_run_dir(&self) -> PathBuf {
        let runs = self.path(".specbridge/runs");
        let mut dirs: Vec<_> = std::fs::read_dir(&runs)
            .unwrap_or_else(|e| panic!("read {}: {e}", runs.display()))
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        assert_eq!(dirs.len(), 1, "expected exactly one run, found {dirs:?}");
        dirs.pop().unwrap()
    }
}

impl Output {
    /// stdout and stderr with the exit code, for snapshots.
    pub fn snapshot(&self) -> String {
        format!(
            "exit: {}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

fn filters() -> &'static [(regex::Regex, &'static str)] {
    use std::sync::OnceLock;
    static F: OnceLock<Vec<(regex::Regex, &'static str)>> = OnceLock::new();
    F.get_or_init(|| {
        [
            (
                r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
                "[UUID]",
            ),
            (
                r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z",
                "[TIME]",
            ),
            (r"\b\d+(\.\d+)?(ms|s)\b", "[DUR]"),
        ]
        .into_iter()
        .map(|(re, with)| (regex::Regex::new(re).unwrap(), with))
        .collect()
    })
}

/// The repository's own folder (for examples and fixtures).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}
