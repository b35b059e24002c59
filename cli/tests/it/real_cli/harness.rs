//! A sandbox per test: a fresh git repository, `HOME` in a temporary folder, and a
//! scripted model server of its own, with the `specbridge` binary run against the
//! installed Claude Code CLI.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use assert_cmd::cargo::CommandCargoExt;
use serde_json::Value;
use specbridge_testkit::model_server::{
    ModelServer, RecordedRequest, Reply, Script, ToolCall, ToolResult,
};

use crate::common::{Output, TestContext};

/// The CLI version whose behaviour these tests pin down (`.ci/install-claude-code`).
pub(super) const CLAUDE_VERSION: &str = "2.1.332";

/// Built-in tools that change files or run commands: none may be offered to a
/// generate stage.
pub(super) const MUTATING_TOOLS: &[&str] = &["Bash", "Edit", "MultiEdit", "Write", "NotebookEdit"];

/// An upper bound on one specbridge run, so that a regression cannot hang the suite.
const RUN_BOUND: Duration = Duration::from_secs(240);

/// The installed CLI: `SPECBRIDGE_CLAUDE_BIN`, else the cache folder the install script
/// uses. Missing, the tier skips with a visible message — except in CI, where it fails.
pub(super) fn claude_bin() -> Option<PathBuf> {
    let path = std::env::var_os("SPECBRIDGE_CLAUDE_BIN")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|home| {
                PathBuf::from(home).join(format!(
                    ".cache/specbridge/claude-code-{CLAUDE_VERSION}/node_modules/.bin/claude"
                ))
            })
        });
    match path {
        Some(path) if path.is_file() => Some(path),
        other => {
            let where_ = other.map_or_else(|| "(no HOME)".to_owned(), |p| p.display().to_string());
            let message = format!(
                "the real Claude Code CLI is not installed (looked at {where_}); \
                 run `.ci/install-claude-code` (it installs {CLAUDE_VERSION} and prints the \
                 path) or set SPECBRIDGE_CLAUDE_BIN to a `claude` executable"
            );
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("real-CLI tier required in CI: {message}");
            }
            // Written to the stream itself: the test harness captures `eprintln!`, and
            // a skip nobody sees would pass for a green tier.
            static ONCE: std::sync::Once = std::sync::Once::new();
            ONCE.call_once(|| {
                let _ = writeln!(
                    std::io::stderr(),
                    "skipping real-CLI tier (tests named real_cli::*): {message}"
                );
            });
            None
        }
    }
}

/// One scenario: its repository, its `HOME`, its model server.
pub(super) struct Sandbox {
    pub ctx: TestContext,
    pub home: tempfile::TempDir,
    pub server: ModelServer,
    pub claude: PathBuf,
}

impl Sandbox {
    /// `None` when the tier skips (see [`claude_bin`]). The script is made from the
    /// repository's canonical root, since the model names files by absolute path.
    pub(super) fn new(script: impl FnOnce(&Path) -> Script) -> Option<Sandbox> {
        let claude = claude_bin()?;
        let home = tempfile::Builder::new()
            .prefix("specbridge-home-")
            .tempdir()
            .expect("create HOME");
        let ctx = TestContext::new();
        let root = std::fs::canonicalize(ctx.root()).expect("canonical root");
        let server = ModelServer::start(script(&root));
        Some(Sandbox {
            ctx,
            home,
            server,
            claude,
        })
    }

    /// Writes `specbridge.yaml` with the real CLI as runner (by absolute path), the given
    /// runner keys (YAML lines indented two spaces) and stages, adds a README and commits
    /// everything, so that the tree is clean.
    pub(super) fn write_pipeline(&self, runner_keys: &str, rest: &str) {
        let pipeline = format!(
            "version: 1\nname: real-cli\nrunner:\n  command: {}\n{runner_keys}{rest}",
            self.claude.display()
        );
        self.ctx.write("specbridge.yaml", &pipeline);
        self.ctx.write("README.md", "# Test repository\n");
        self.ctx.commit_all("pipeline");
    }

    /// The binary with a cleared environment: nothing from the developer's may point the
    /// CLI elsewhere. specbridge passes its environment on to the agent.
    pub(super) fn command(&self) -> Command {
        let mut cmd = Command::cargo_bin("specbridge").expect("specbridge binary");
        self.environment(&mut cmd);
        cmd
    }

    /// The real CLI itself, in the repository, with the environment
    /// [`Self::command`] gives specbridge.
    pub(super) fn cli_command(&self) -> Command {
        let mut cmd = Command::new(&self.claude);
        self.environment(&mut cmd);
        cmd
    }

    fn environment(&self, cmd: &mut Command) {
        cmd.current_dir(self.ctx.root())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .env("NO_COLOR", "1")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("ANTHROPIC_BASE_URL", self.server.base_url())
            .env("ANTHROPIC_API_KEY", "sk-test")
            .env("CLAUDE_CODE_MAX_RETRIES", "1")
            // specbridge's own retry of a transient failure: milliseconds, not seconds.
            .env("SPECBRIDGE_RETRY_BASE_MS", "20")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
        // Verification commands and checks may run cargo, which lives under the real HOME.
        if let Some(real_home) = std::env::var_os("HOME").map(PathBuf::from) {
            for (name, default) in [("CARGO_HOME", ".cargo"), ("RUSTUP_HOME", ".rustup")] {
                let value =
                    std::env::var_os(name).unwrap_or_else(|| real_home.join(default).into());
                cmd.env(name, value);
            }
        }
    }

    /// Starts `specbridge run` in the background, its output discarded, for the
    /// tests that interrupt it.
    pub(super) fn spawn_run(&self) -> std::process::Child {
        self.command()
            .arg("run")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start specbridge run")
    }

    /// Runs specbridge to completion (within a generous bound).
    pub(super) fn run(&self, args: &[&str]) -> Output {
        let mut cmd = self.command();
        cmd.args(args);
        self.run_command(cmd)
    }

    /// Runs a command made by [`Self::command`] to completion (within a generous bound).
    pub(super) fn run_command(&self, mut cmd: Command) -> Output {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start specbridge");
        let mut stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let out_reader = std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = stdout.read_to_end(&mut buf);
            buf
        });
        let err_reader = std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = stderr.read_to_end(&mut buf);
            buf
        });
        let deadline = std::time::Instant::now() + RUN_BOUND;
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for specbridge") {
                break status;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("specbridge did not finish within {RUN_BOUND:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let out = std::process::Output {
            status,
            stdout: out_reader.join().unwrap(),
            stderr: err_reader.join().unwrap(),
        };
        self.ctx.output(out)
    }

    /// The model requests the server answered (side requests left out).
    pub(super) fn model_requests(&self) -> Vec<RecordedRequest> {
        self.server.model_requests()
    }

    /// What the CLI answered the model for tool call `id`.
    pub(super) fn tool_result(&self, id: &str) -> ToolResult {
        self.model_requests()
            .iter()
            .flat_map(RecordedRequest::tool_results)
            .find(|r| r.tool_use_id == id)
            .unwrap_or_else(|| panic!("no tool result for {id}"))
    }

    /// The tool use ids of the CLI's own list of its refusals
    /// (`permission_denials`, kept in the first attempt's `result.json`).
    pub(super) fn denied_ids(&self, stage: &str) -> Vec<String> {
        let result = self.attempt_json(stage, 1, "result.json");
        result["permissionDenials"]
            .as_array()
            .unwrap_or_else(|| panic!("permissionDenials recorded: {result:#}"))
            .iter()
            .map(|d| d["toolUseId"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Each call of `refused` is in specbridge's record of the first attempt
    /// (`tool-calls.jsonl`) as refused by the stage's policy, failed, and no
    /// violation; and the CLI's own list of refusals holds no other call. It
    /// is not required to hold each: in one run of the whole suite (CI,
    /// 2026-12-07, 2.1.332) it came back empty although two Bash calls had been
    /// refused in the stream ("… needs approval"), where every other run lists
    /// them. What a user audits is the refusal and specbridge's record of it.
    pub(super) fn assert_refused_on_record(&self, stage: &str, refused: &[&str]) {
        let calls = std::fs::read_to_string(self.attempt_dir(stage, 1).join("tool-calls.jsonl"))
            .expect("tool-calls.jsonl kept");
        for id in refused {
            let call: Value = calls
                .lines()
                .map(|line| serde_json::from_str::<Value>(line).expect("a JSON line"))
                .find(|c| c["toolUseId"] == *id)
                .unwrap_or_else(|| panic!("{id} not in tool-calls.jsonl: {calls}"));
            assert_eq!(call["policy"], "refused", "{call:#}");
            assert_eq!(call["outcome"], "failed", "{call:#}");
            assert_eq!(call["violation"], false, "{call:#}");
        }
        for denied in self.denied_ids(stage) {
            assert!(
                refused.contains(&denied.as_str()),
                "{denied} was refused too"
            );
        }
    }

    /// The single run folder.
    pub(super) fn run_dir(&self) -> PathBuf {
        self.ctx.only_run_dir()
    }

    pub(super) fn stage_json(&self, stage: &str) -> Value {
        read_json(&self.run_dir().join("stages").join(stage).join("stage.json"))
    }

    pub(super) fn attempt_dir(&self, stage: &str, attempt: u32) -> PathBuf {
        self.run_dir()
            .join("stages")
            .join(stage)
            .join(format!("attempt-{attempt:03}"))
    }

    pub(super) fn attempt_json(&self, stage: &str, attempt: u32, record: &str) -> Value {
        read_json(&self.attempt_dir(stage, attempt).join(record))
    }

    /// `git status --porcelain` lines, `.specbridge/` left out.
    pub(super) fn changed_paths(&self) -> Vec<String> {
        self.ctx
            .git(&["status", "--porcelain", "--untracked-files=all"])
            .lines()
            .filter(|line| !line[3..].starts_with(".specbridge/"))
            .map(str::to_owned)
            .collect()
    }

    /// Processes still alive whose environment carries this sandbox's `HOME`: any agent
    /// (or child of one) that escaped its process group would show up here.
    pub(super) fn leftover_processes(&self) -> Vec<u32> {
        let marker = format!("HOME={}", self.home.path().display());
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
                    environ
                        .split(|b| *b == 0)
                        .any(|var| var == marker.as_bytes())
                })
            })
            .filter(|pid| crate::common::process_alive(*pid))
            .collect()
    }
}

pub(super) use crate::common::read_json;

/// An execute stage's final answer: the task done, `changed` the files it changed.
pub(super) fn task_result(changed: &[&str]) -> Reply {
    Reply::structured_output(serde_json::json!({
        "status": "completed",
        "summary": "Done.",
        "changedFiles": changed,
        "commandsRun": [],
        "blockingQuestions": [],
    }))
}

/// A model turn that asks for one `Write` of `content` to `rel` in the repository.
pub(super) fn write_file(root: &Path, id: &str, rel: &str, content: &str) -> Reply {
    Reply::tool_uses(
        None,
        vec![ToolCall::new(
            "Write",
            serde_json::json!({"file_path": root.join(rel), "content": content}),
        )
        .with_id(id)],
    )
}
