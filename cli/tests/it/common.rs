//! `TestContext`: a temporary git repository, the built binary, and output filters.

#![allow(
    dead_code,
    reason = "helpers for every test module; a test filter compiles them all"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

use assert_cmd::cargo::CommandCargoExt;

pub(crate) struct TestContext {
    pub dir: tempfile::TempDir,
    /// Extra environment for every command run in this context.
    pub env: Vec<(String, String)>,
    /// A folder outside the repository (the fake agent's invocation log, pid files).
    pub aux: Option<tempfile::TempDir>,
    /// `XDG_CACHE_HOME` of every command: runner detection is remembered per test.
    pub cache: tempfile::TempDir,
}

/// What a finished command printed, with temporary paths replaced by `[ROOT]`.
pub(crate) struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl TestContext {
    /// A fresh folder that is a git repository with a committer configured locally,
    /// so tests never depend on the machine's git config.
    pub(crate) fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("specbridge-test-")
            .tempdir()
            .expect("create temp dir");
        let ctx = TestContext {
            dir,
            env: Vec::new(),
            aux: None,
            cache: tempfile::Builder::new()
                .prefix("specbridge-cache-")
                .tempdir()
                .expect("create cache dir"),
        };
        ctx.git(&["init", "-q", "-b", "main"]);
        ctx.git(&["config", "user.email", "test@example.com"]);
        ctx.git(&["config", "user.name", "specbridge test"]);
        ctx.git(&["config", "commit.gpgsign", "false"]);
        ctx
    }

    pub(crate) fn root(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    pub(crate) fn write(&self, rel: &str, text: &str) -> &Self {
        let p = self.path(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(p, text).expect("write file");
        self
    }

    pub(crate) fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
    }

    pub(crate) fn git(&self, args: &[&str]) -> String {
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
    pub(crate) fn commit_all(&self, message: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
    }

    /// The binary, run in the repository with a clean, predictable environment.
    pub(crate) fn command(&self) -> Command {
        let mut cmd = Command::cargo_bin("specbridge").expect("specbridge binary");
        cmd.current_dir(self.root())
            .env("NO_COLOR", "1")
            .env_remove("CLICOLOR_FORCE")
            .env_remove("SPECBRIDGE_LOG")
            // A target folder outside the test repository is read-only to the
            // confined `cargo test` of a check or verification command.
            .env_remove("CARGO_TARGET_DIR")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("XDG_CACHE_HOME", self.cache.path())
            // Transient failures are retried after a backoff of seconds: the
            // documented test hook keeps it to milliseconds.
            .env("SPECBRIDGE_RETRY_BASE_MS", "20");
        for name in FAKE_CLAUDE_VARS {
            cmd.env_remove(name);
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd
    }

    /// The binary run in another folder (a scaffold), with the plain environment.
    pub(crate) fn command_in(dir: &Path, args: &[&str]) -> std::process::Output {
        Command::cargo_bin("specbridge")
            .expect("specbridge binary")
            .args(args)
            .current_dir(dir)
            .env("NO_COLOR", "1")
            .env_remove("CARGO_TARGET_DIR")
            .output()
            .expect("run specbridge")
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        let out = self.command().args(args).output().expect("run specbridge");
        self.output(out)
    }

    pub(crate) fn output(&self, out: std::process::Output) -> Output {
        Output {
            code: out.status.code().unwrap_or(-1),
            stdout: self.filter(&String::from_utf8_lossy(&out.stdout)),
            stderr: self.filter(&String::from_utf8_lossy(&out.stderr)),
        }
    }

    /// Replace what changes from run to run: the temporary root, run ids, times.
    pub(crate) fn filter(&self, text: &str) -> String {
        let root = self.root().to_string_lossy().into_owned();
        let canon = std::fs::canonicalize(self.root())
            .map_or_else(|_| root.clone(), |p| p.to_string_lossy().into_owned());
        let mut t = text.replace(&canon, "[ROOT]").replace(&root, "[ROOT]");
        for (re, with) in filters() {
            t = re.replace_all(&t, *with).into_owned();
        }
        t
    }

    /// The single run folder under `.specbridge/runs/`.
    pub(crate) fn only_run_dir(&self) -> PathBuf {
        let runs = self.path(".specbridge/runs");
        let mut dirs: Vec<_> = std::fs::read_dir(&runs)
            .unwrap_or_else(|e| panic!("read {}: {e}", runs.display()))
            .filter_map(std::result::Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        assert_eq!(dirs.len(), 1, "expected exactly one run, found {dirs:?}");
        dirs.pop().unwrap()
    }
}

impl Output {
    /// stdout and stderr with the exit code, for snapshots.
    pub(crate) fn snapshot(&self) -> String {
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
            (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z", "[TIME]"),
            (r"\b\d+(\.\d+)?(ms|s)\b", "[DUR]"),
        ]
        .into_iter()
        .map(|(re, with)| (regex::Regex::new(re).unwrap(), with))
        .collect()
    })
}

/// The repository's own folder (for examples and fixtures).
pub(crate) fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Every variable the fake agent CLI reads, cleared before a test sets its own.
const FAKE_CLAUDE_VARS: &[&str] = &[
    "FAKE_CLAUDE_VERSION",
    "FAKE_CLAUDE_SCENARIO",
    "FAKE_CLAUDE_OUTPUT",
    "FAKE_CLAUDE_RESULT",
    "FAKE_CLAUDE_COST",
    "FAKE_CLAUDE_SCRIPT",
    "FAKE_CLAUDE_LOG",
    "FAKE_CLAUDE_WRITE",
    "FAKE_CLAUDE_PROTECTED",
    "FAKE_CLAUDE_GRANDCHILD_PIDFILE",
    "FAKE_CLAUDE_HANG_SECS",
    "FAKE_CLAUDE_LOGGED_OUT",
];

/// The testkit's `fake-claude` binary, built once per test process (cargo builds
/// only this package's binaries for its tests).
pub(crate) fn fake_claude_bin() -> PathBuf {
    use std::sync::OnceLock;
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args([
                "build",
                "--quiet",
                "-p",
                "specbridge-testkit",
                "--bin",
                "fake-claude",
            ])
            .current_dir(workspace_root())
            .status()
            .expect("run cargo build for fake-claude");
        assert!(status.success(), "building fake-claude failed");
        let specbridge = assert_cmd::cargo::cargo_bin("specbridge");
        let bin = specbridge.with_file_name("fake-claude");
        assert!(bin.exists(), "no fake-claude at {}", bin.display());
        bin
    })
    .clone()
}

impl TestContext {
    /// A repository whose agent runs are answered by the fake CLI playing `scenario`.
    /// The fake logs every invocation outside the repository ([`Self::fake_log`]).
    pub(crate) fn with_fake_claude(scenario: &str) -> Self {
        let mut ctx = TestContext::new();
        let aux = tempfile::Builder::new()
            .prefix("specbridge-aux-")
            .tempdir()
            .expect("create aux dir");
        let log = aux.path().join("fake-claude.jsonl");
        ctx.aux = Some(aux);
        ctx.set_env("FAKE_CLAUDE_SCENARIO", scenario);
        ctx.set_env("FAKE_CLAUDE_LOG", &log.display().to_string());
        // A hanging fake that escaped every kill still ends on its own.
        ctx.set_env("FAKE_CLAUDE_HANG_SECS", "120");
        ctx
    }

    /// The fake CLI answering each invocation by the first entry of `script` (a
    /// JSON array of `{"match", "scenario", …}`) whose `match` the prompt contains.
    pub(crate) fn with_claude_script(script: &str) -> Self {
        let mut ctx = TestContext::with_fake_claude("success");
        let path = ctx.aux_path("script.json");
        std::fs::write(&path, script).expect("write the fake CLI's script");
        ctx.set_env("FAKE_CLAUDE_SCRIPT", &path.display().to_string());
        ctx
    }

    pub(crate) fn set_env(&mut self, name: &str, value: &str) -> &mut Self {
        self.env.retain(|(k, _)| k != name);
        self.env.push((name.to_string(), value.to_string()));
        self
    }

    /// Puts `dir` first on the run's `PATH`, before this process's own.
    pub(crate) fn prepend_path(&mut self, dir: &Path) -> &mut Self {
        let path = format!(
            "{}:{}",
            dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        self.set_env("PATH", &path)
    }

    /// A path in the folder outside the repository.
    /// Slows the run's snapshots down: every `git status` of its `PATH`
    /// sleeps `seconds` first (the first `first` only, when given;
    /// [`write_slow_git`]).
    pub(crate) fn slow_git_status(&mut self, seconds: &str, first: Option<u32>) -> &mut Self {
        let slow = self.aux_path("slow-git");
        std::fs::create_dir(&slow).unwrap();
        write_slow_git(&slow, seconds, first);
        self.prepend_path(&slow)
    }

    pub(crate) fn aux_path(&self, name: &str) -> PathBuf {
        self.aux
            .as_ref()
            .expect("a context made by with_fake_claude")
            .path()
            .join(name)
    }

    /// Every invocation of the fake so far (probes included).
    pub(crate) fn fake_log(
        &self,
    ) -> Vec<specbridge_testkit::fake::invocation_log::LoggedInvocation> {
        specbridge_testkit::fake::invocation_log::read(&self.aux_path("fake-claude.jsonl"))
    }

    /// The fake's print-mode invocations (agent runs, not detection probes).
    pub(crate) fn fake_agent_runs(
        &self,
    ) -> Vec<specbridge_testkit::fake::invocation_log::LoggedInvocation> {
        self.fake_log()
            .into_iter()
            .filter(|i| i.argv.iter().any(|a| a == "--print" || a == "-p"))
            .collect()
    }

    /// Writes `specbridge.yaml` with the fake as runner (by absolute path), the given
    /// extra runner keys (YAML lines, indented two spaces) and stages, and commits
    /// everything so the tree is clean.
    pub(crate) fn write_agent_pipeline(&self, runner_keys: &str, stages: &str) {
        let pipeline = format!(
            "version: 1\nname: agent-test\nrunner:\n  command: {}\n{runner_keys}stages:\n{stages}",
            fake_claude_bin().display()
        );
        self.write("specbridge.yaml", &pipeline);
        self.write("README.md", "# Test repository\n");
        self.commit_all("pipeline");
    }

    /// Every file under `.specbridge/`, recursively.
    pub(crate) fn specbridge_files(&self) -> Vec<PathBuf> {
        fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
            let Ok(entries) = std::fs::read_dir(dir) else {
                return;
            };
            for e in entries.flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else {
                    out.push(p);
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.path(".specbridge"), &mut out);
        out
    }
}

/// Whether a process with this pid exists (a zombie counts as gone).
pub(crate) fn process_alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"));
    match stat {
        Ok(text) => !text
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Validates a JSON file against a schema in `schemas/`.
/// Live (not zombie) processes on this machine with `arg` as one of their
/// arguments: how a test finds a command that ran in a PID namespace.
pub(crate) fn live_processes_with_arg(arg: &str) -> Vec<u32> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let zombie =
            std::fs::read_to_string(e.path().join("stat")).map_or(true, |s| s.contains(") Z "));
        if !zombie && cmdline.split(|b| *b == 0).any(|a| a == arg.as_bytes()) {
            found.push(pid);
        }
    }
    found
}

/// Writes an executable shell script (or any text made executable) at `path`.
pub(crate) fn write_script(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Writes at `path` a script that runs the fake CLI, first running the shell
/// command `on_print` when it is called in print mode (`-p`, `--print`) — an
/// agent's spawn marked or slowed down; the detection probes pass through.
pub(crate) fn write_fake_wrapper(path: &Path, on_print: &str) {
    write_script(
        path,
        &format!(
            "#!/bin/sh\ncase \" $* \" in *\" -p \"*|*\" --print \"*) {on_print} ;; esac\nexec '{}' \"$@\"\n",
            fake_claude_bin().display()
        ),
    );
}

/// Writes into `dir` a `git` that sleeps `seconds` before every `git status`
/// (before the first `first` of them only, when given), then runs the real
/// one: put first on a run's `PATH`, every snapshot slowed down.
pub(crate) fn write_slow_git(dir: &Path, seconds: &str, first: Option<u32>) {
    let git = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|dir| dir.join("git"))
        .find(|git| git.is_file())
        .expect("git on PATH");
    let sleep = match first {
        Some(n) => format!(
            "echo >> '{0}'; [ \"$(wc -l < '{0}')\" -gt {n} ] || sleep {seconds}",
            dir.join("calls").display()
        ),
        None => format!("sleep {seconds}"),
    };
    write_script(
        &dir.join("git"),
        &format!(
            "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = status ] && {{ {sleep}; break; }}; done\nexec '{}' \"$@\"\n",
            git.display()
        ),
    );
}

pub(crate) fn assert_matches_schema(file: &Path, schema_name: &str) {
    let schema_path = workspace_root().join("schemas").join(schema_name);
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&schema_path).unwrap()).unwrap();
    let value: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(file).unwrap_or_else(|e| panic!("read {}: {e}", file.display())),
    )
    .unwrap_or_else(|e| panic!("parse {}: {e}", file.display()));
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| e.to_string())
        .collect();
    assert!(
        errors.is_empty(),
        "{} does not match {schema_name}: {errors:?}",
        file.display()
    );
}

/// A JSON file, parsed; panics with the path when it is missing or broken.
pub(crate) fn read_json(path: &Path) -> serde_json::Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

/// Copy a folder's files into `to` (created), leaving out build output and runs.
pub(crate) fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("read {}: {e}", from.display()))
    {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == "target" || name == ".specbridge" {
            continue;
        }
        let dst = to.join(&name);
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &dst);
        } else {
            std::fs::copy(entry.path(), &dst).unwrap();
        }
    }
}

/// `(id, status)` of every node of `graph --run … --format json` output.
pub(crate) fn graph_statuses(json: &str) -> Vec<(String, String)> {
    let v: serde_json::Value = serde_json::from_str(json).expect("graph JSON");
    v["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| {
            (
                n["id"].as_str().unwrap().to_string(),
                n["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// spec → implement, for tests that interrupt a run while its execute agent works:
/// the agent hangs on its first attempt and writes `feature.txt` on its second.
pub(crate) const SPEC_THEN_IMPLEMENT: &str = "  - id: spec
    kind: generate
    prompt: prompts/spec.md
    output: { schema: builtin:document }
  - id: implement
    kind: execute
    needs: [spec]
    prompt: prompts/implement.md
    verification:
      - { name: feature done, argv: [grep, -q, done, feature.txt] }
";

/// Starts `specbridge run` of [`SPEC_THEN_IMPLEMENT`] and returns once the hung
/// execute agent's spawn is on record: the running specbridge and that agent.
pub(crate) fn run_until_the_execute_agent_hangs(
    ctx: &mut TestContext,
) -> (
    std::process::Child,
    specbridge_testkit::fake::invocation_log::LoggedInvocation,
) {
    run_until_the_execute_agent_hangs_with(
        ctx,
        "hang-before-result",
        "  timeout: 60s\n  killGrace: 300ms\n",
        SPEC_THEN_IMPLEMENT,
    )
}

/// [`run_until_the_execute_agent_hangs`] with the hung agent's scenario, the
/// pipeline's runner keys and its stages (an `implement` execute stage that needs
/// a `spec` generate stage, prompted as [`SPEC_THEN_IMPLEMENT`] is).
pub(crate) fn run_until_the_execute_agent_hangs_with(
    ctx: &mut TestContext,
    hang: &str,
    runner_keys: &str,
    stages: &str,
) -> (
    std::process::Child,
    specbridge_testkit::fake::invocation_log::LoggedInvocation,
) {
    use std::time::{Duration, Instant};
    let script = ctx.aux_path("script.json");
    std::fs::write(
        &script,
        format!(
            r#"[
            {{"match": "Write the spec", "scenario": "success"}},
            {{"match": "Implement the feature", "scenario": "{hang}"}},
            {{"match": "Implement the feature", "scenario": "write-file", "write": "feature.txt=done"}}
        ]"#
        ),
    )
    .unwrap();
    ctx.set_env("FAKE_CLAUDE_SCRIPT", &script.display().to_string());
    ctx.write("prompts/spec.md", "Write the spec.\n");
    ctx.write("prompts/implement.md", "Implement the feature.\n");
    ctx.write_agent_pipeline(runner_keys, stages);

    let child = ctx
        .command()
        .arg("run")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    let hung = loop {
        if let Some(run) = ctx.fake_agent_runs().get(1).cloned() {
            break run;
        }
        assert!(Instant::now() < until, "the execute stage never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    let events =
        || std::fs::read_to_string(ctx.only_run_dir().join("events.jsonl")).unwrap_or_default();
    while !events().contains("\"stage\":\"implement\",\"attempt\":1,\"pid\"") {
        assert!(Instant::now() < until, "no process-spawned event");
        std::thread::sleep(Duration::from_millis(20));
    }
    (child, hung)
}

/// Whether the last resume of the only run reused `stage`, by its decision in
/// `run.json`. A reused stage's records are left as they were: the helper fails
/// when the log shows its `stage.json` written again after that resume began.
pub(crate) fn reused_by_last_resume(ctx: &TestContext, stage: &str) -> bool {
    reused_by_last_resume_in(&ctx.only_run_dir(), stage)
}

/// [`reused_by_last_resume`] of the run folder `dir`.
pub(crate) fn reused_by_last_resume_in(dir: &Path, stage: &str) -> bool {
    let run = read_json(&dir.join("run.json"));
    let last = run["resumes"]
        .as_array()
        .and_then(|r| r.last())
        .unwrap_or_else(|| panic!("the run was never resumed: {run:#}"));
    let reused = last["decisions"]
        .as_array()
        .unwrap_or_else(|| panic!("no decisions in {last:#}"))
        .iter()
        .any(|d| d["stage"] == stage && d["action"] == "reuse");
    if reused {
        let log = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
        let events: Vec<serde_json::Value> = log
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let began = events
            .iter()
            .rposition(|e| e["type"] == "run-resumed")
            .expect("a run-resumed event");
        let record = format!("stages/{stage}/stage.json");
        let rewritten = events[began..]
            .iter()
            // Its decision, and crash recovery confirming what an earlier
            // process wrote, are not writes of its records.
            .filter(|e| e["type"] != "resume-decision" && e["recovered"] != true)
            .find(|e| e["path"] == record.as_str() || e["stage"] == stage);
        assert!(
            rewritten.is_none(),
            "`{stage}` was reused but its records changed: {rewritten:?}"
        );
    }
    reused
}
