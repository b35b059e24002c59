//! The fake agent CLI, run as a binary the way specbridge runs it.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use specbridge_testkit::fake::invocation_log;
use specbridge_testkit::fake::{Scenario, VersionCapture};

const FAKE: &str = env!("CARGO_BIN_EXE_fake-claude");

const SCHEMA: &str = r#"{"type":"object","required":["summary","count","tags"],"properties":{"summary":{"type":"string"},"count":{"type":"integer","minimum":1},"tags":{"type":"array","items":{"type":"string"}}}}"#;

struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    fn new() -> Repo {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("README.md"), "# demo repo\n").unwrap();
        let repo = Repo { dir };
        repo.git(&["init", "-q", "-b", "main"]);
        repo.git(&["add", "README.md"]);
        repo.git(&["commit", "-q", "-m", "init"]);
        repo
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn log(&self) -> PathBuf {
        // Outside the repository, so that scenarios that commit leave it alone.
        self.path().with_extension("fake-log.jsonl")
    }

    fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .current_dir(self.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    fn command(&self, env: &[(&str, &str)], args: &[&str]) -> Command {
        let mut command = Command::new(FAKE);
        command
            .args(args)
            .current_dir(self.path())
            .env_remove("FAKE_CLAUDE_SCENARIO")
            .env_remove("FAKE_CLAUDE_VERSION")
            .env_remove("FAKE_CLAUDE_SCRIPT")
            .env_remove("FAKE_CLAUDE_OUTPUT")
            .env("FAKE_CLAUDE_LOG", self.log())
            .env("FAKE_CLAUDE_HANG_SECS", "60");
        for (name, value) in env {
            command.env(name, value);
        }
        command
    }

    fn run(&self, env: &[(&str, &str)], args: &[&str], stdin: &str) -> Output {
        let mut child = self
            .command(env, args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        // The fake may refuse its arguments and exit before reading stdin.
        let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
        child.wait_with_output().unwrap()
    }

    /// A print-mode stream-json run of one scenario.
    fn stream(&self, scenario: &str, extra: &[&str]) -> Output {
        let mut args = vec!["-p", "--output-format", "stream-json", "--verbose"];
        args.extend_from_slice(extra);
        self.run(&[("FAKE_CLAUDE_SCENARIO", scenario)], &args, "do the thing")
    }
}

fn lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:.200}")))
        .collect()
}

fn last(out: &Output) -> Value {
    lines(out).pop().expect("some output")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn version_help_and_auth_status_replay_the_captures_byte_for_byte() {
    let repo = Repo::new();
    for version in ["1.0.0", "2.0.50", "2.1.100", "2.1.332"] {
        let capture = VersionCapture::lookup(version).unwrap();
        let env = [("FAKE_CLAUDE_VERSION", version)];
        let out = repo.run(&env, &["--version"], "");
        assert_eq!(out.stdout, capture.version_txt.as_bytes(), "{version}");
        let out = repo.run(&env, &["--help"], "");
        assert_eq!(out.stdout, capture.help_txt.as_bytes(), "{version}");
        assert!(out.status.success());
    }
    let env = [("FAKE_CLAUDE_VERSION", "2.1.332")];
    let out = repo.run(&env, &["auth", "status"], "");
    assert_eq!(
        out.stdout,
        VersionCapture::lookup("2.1.332")
            .unwrap()
            .auth_status_api_key
            .unwrap()
            .as_bytes()
    );
    assert_eq!(out.status.code(), Some(0));
    let out = repo.run(
        &[
            ("FAKE_CLAUDE_VERSION", "2.1.100"),
            ("FAKE_CLAUDE_LOGGED_OUT", "1"),
        ],
        &["auth", "status"],
        "",
    );
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["loggedIn"], json!(false));
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn auth_status_is_a_prompt_where_there_is_no_auth_command() {
    let repo = Repo::new();
    let out = repo.run(
        &[("FAKE_CLAUDE_VERSION", "2.0.50")],
        &["auth", "status"],
        "",
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "Invalid API key · Please run /login"
    );
    assert_eq!(out.status.code(), Some(1));
    let logged = invocation_log::read(&repo.log());
    assert_eq!(logged.last().unwrap().argv, ["auth", "status"]);
}

#[test]
fn success_with_a_schema_synthesises_a_valid_instance() {
    let repo = Repo::new();
    let out = repo.stream(
        "success",
        &["--json-schema", SCHEMA, "--tools", "Read,Grep"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = lines(&out);
    let init = &events[0];
    assert_eq!(
        (init["type"].as_str(), init["subtype"].as_str()),
        (Some("system"), Some("init"))
    );
    assert_eq!(init["tools"], json!(["Grep", "Read", "StructuredOutput"]));
    assert_eq!(init["claude_code_version"], json!("2.1.332"));
    assert_eq!(init["cwd"], json!(repo.path().display().to_string()));
    let result = events.last().unwrap();
    assert_eq!(result["type"], json!("result"));
    assert_eq!(result["subtype"], json!("success"));
    assert_eq!(result["is_error"], json!(false));
    assert_eq!(result["terminal_reason"], json!("completed"));
    let output = &result["structured_output"];
    assert!(output["summary"].is_string(), "{output}");
    assert!(output["count"].as_i64().unwrap() >= 1, "{output}");
    assert!(output["tags"].is_array(), "{output}");
    // From 2.1.200 `result` is the structured output as JSON text.
    assert_eq!(
        serde_json::from_str::<Value>(result["result"].as_str().unwrap()).unwrap(),
        *output
    );
    assert_eq!(result["session_id"], init["session_id"]);
}

#[test]
fn given_output_and_session_id_are_echoed() {
    let repo = Repo::new();
    let id = "0191e1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b";
    let out = repo.run(
        &[(
            "FAKE_CLAUDE_OUTPUT",
            r#"{"summary":"mine","count":7,"tags":[]}"#,
        )],
        &[
            "-p",
            "--output-format",
            "json",
            "--json-schema",
            SCHEMA,
            "--session-id",
            id,
        ],
        "prompt",
    );
    let envelope = last(&out);
    assert_eq!(
        envelope["structured_output"],
        json!({"summary": "mine", "count": 7, "tags": []})
    );
    assert_eq!(envelope["session_id"], json!(id));
    assert_eq!(lines(&out).len(), 1, "json mode prints one object");
}

#[test]
fn scenarios_end_with_the_captured_envelope_shapes() {
    let repo = Repo::new();
    // (scenario, subtype, is_error, exit code, terminal_reason)
    let table = [
        ("text-only", "success", false, 0, Some("completed")),
        (
            "schema-retries-exhausted",
            "error_max_structured_output_retries",
            true,
            1,
            Some("structured_output_retry_exhausted"),
        ),
        ("max-turns", "error_max_turns", true, 1, Some("max_turns")),
        ("max-turns-old", "error_max_turns", false, 0, None),
        (
            "budget",
            "error_max_budget_usd",
            true,
            1,
            Some("budget_exhausted"),
        ),
        ("api-500", "success", true, 1, Some("api_error")),
        ("api-529", "success", true, 1, Some("api_error")),
        ("not-logged-in", "success", true, 1, Some("api_error")),
    ];
    for (scenario, subtype, is_error, code, terminal_reason) in table {
        let out = repo.stream(
            scenario,
            &[
                "--json-schema",
                SCHEMA,
                "--max-turns",
                "3",
                "--max-budget-usd",
                "0.5",
            ],
        );
        let envelope = last(&out);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{scenario}: {}",
            stderr(&out)
        );
        assert_eq!(envelope["subtype"], json!(subtype), "{scenario}");
        assert_eq!(envelope["is_error"], json!(is_error), "{scenario}");
        assert_eq!(
            envelope["terminal_reason"].as_str(),
            terminal_reason,
            "{scenario}"
        );
        assert!(envelope.get("structured_output").is_none(), "{scenario}");
        if subtype.starts_with("error_") {
            assert!(
                envelope.get("result").is_none(),
                "{scenario}: error subtypes drop result"
            );
        }
    }
    let max_turns = last(&repo.stream("max-turns", &["--max-turns", "3"]));
    assert_eq!(max_turns["num_turns"], json!(4));
    assert_eq!(
        max_turns["errors"],
        json!(["Reached maximum number of turns (3)"])
    );
    let api = last(&repo.stream("api-529", &[]));
    assert_eq!(api["api_error_status"], json!(529));
    let retries = lines(&repo.stream("api-529", &[]))
        .iter()
        .filter(|e| e["subtype"] == json!("api_retry"))
        .count();
    assert_eq!(retries, 2);
    let logged_out = lines(&repo.stream("not-logged-in", &[]));
    assert!(logged_out
        .iter()
        .any(|e| e["type"] == json!("assistant") && e["error"] == json!("authentication_failed")));
    assert_eq!(
        logged_out.last().unwrap()["result"],
        json!("Not logged in · Please run /login")
    );
}

#[test]
fn old_versions_print_old_envelope_shapes() {
    let repo = Repo::new();
    let json_args = ["-p", "--output-format", "json", "--max-turns", "1"];
    let old = repo.run(
        &[
            ("FAKE_CLAUDE_VERSION", "1.0.0"),
            ("FAKE_CLAUDE_SCENARIO", "max-turns"),
        ],
        &json_args,
        "p",
    );
    let envelope = last(&old);
    assert_eq!(old.status.code(), Some(0));
    assert_eq!(envelope["is_error"], json!(false));
    assert!(envelope.get("cost_usd").is_some() && envelope.get("total_cost_usd").is_none());
    assert!(envelope.get("permission_denials").is_none());
    let v2 = last(&repo.run(&[("FAKE_CLAUDE_VERSION", "2.0.50")], &json_args, "p"));
    assert!(v2.get("permission_denials").is_some() && v2.get("terminal_reason").is_none());
    let out = repo.run(
        &[("FAKE_CLAUDE_VERSION", "1.0.0")],
        &["-p", "--output-format", "json", "--json-schema", SCHEMA],
        "p",
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out).trim(), "error: unknown option '--json-schema'");
}

#[test]
fn refusals_use_the_real_messages() {
    let repo = Repo::new();
    let cases: [(&[&str], &str); 5] = [
        (&["-p", "--output-format", "stream-json"], "Error: When using --print, --output-format=stream-json requires --verbose"),
        (&["-p", "--session-id", "not-a-uuid"], "Error: Invalid session ID. Must be a valid UUID."),
        (&["-p", "--json-schema", "schemas/out.json"], "Error: --json-schema is not valid JSON"),
        (&["-p", "--permission-mode", "default", "--permission-mode", "yolo"], "argument 'yolo' is invalid. Allowed choices are acceptEdits, auto, bypassPermissions, manual, dontAsk, plan."),
        (&["-p", "--dangerously-skip-permissions"], "cannot be used with root/sudo privileges"),
    ];
    let root = unsafe { libc::geteuid() } == 0;
    for (args, message) in cases {
        if !root && message.contains("root") {
            continue;
        }
        let out = repo.run(&[], args, "p");
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn offered_tools_follow_tools_not_allowed_tools() {
    let repo = Repo::new();
    let tools = |args: &[&str]| {
        let mut all = vec!["--model", "sonnet"];
        all.extend_from_slice(args);
        lines(&repo.stream("success", &all))[0]["tools"].clone()
    };
    assert_eq!(
        tools(&["--tools", "Read,Write,NoSuchTool"]),
        json!(["Read", "Write"])
    );
    let defaults = tools(&["--allowedTools", "Read", "Bash(git status:*)"]);
    assert!(defaults.as_array().unwrap().len() > 10 && defaults.to_string().contains("\"Write\""));
    assert_eq!(tools(&["--tools", ""]), json!([]));
}

#[test]
fn the_log_records_argv_stdin_and_credential_names_only() {
    let repo = Repo::new();
    repo.run(
        &[
            ("ANTHROPIC_API_KEY", "sk-ant-canary-123"),
            ("GITHUB_TOKEN", "ghp_canary"),
        ],
        &[
            "-p",
            "--output-format",
            "json",
            "--resume",
            "0191e1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b",
        ],
        "the prompt\nline two",
    );
    let logged = invocation_log::read(&repo.log());
    let entry = logged.last().unwrap();
    assert_eq!(
        entry.argv,
        [
            "-p",
            "--output-format",
            "json",
            "--resume",
            "0191e1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b"
        ]
    );
    assert_eq!(entry.stdin, "the prompt\nline two");
    assert_eq!(entry.scenario.as_deref(), Some("success"));
    assert!(entry.env.contains(&"ANTHROPIC_API_KEY".to_owned()));
    assert!(entry.env.contains(&"GITHUB_TOKEN".to_owned()));
    let raw = std::fs::read_to_string(repo.log()).unwrap();
    assert!(!raw.contains("canary"), "values must never be logged");
}

#[test]
fn a_script_is_consumed_one_item_per_invocation() {
    let repo = Repo::new();
    let script = repo.path().with_extension("script.json");
    std::fs::write(
        &script,
        json!([
            {"match": "STAGE implement", "scenario": "max-turns"},
            {"scenario": "success", "output": {"summary": "spec", "count": 2, "tags": ["a"]}},
            "text-only"
        ])
        .to_string(),
    )
    .unwrap();
    let script_env = script.display().to_string();
    let env = [("FAKE_CLAUDE_SCRIPT", script_env.as_str())];
    let args = ["-p", "--output-format", "json", "--json-schema", SCHEMA];
    let first = last(&repo.run(&env, &args, "STAGE spec"));
    assert_eq!(
        first["structured_output"],
        json!({"summary": "spec", "count": 2, "tags": ["a"]})
    );
    let second = last(&repo.run(&env, &args, "STAGE implement"));
    assert_eq!(second["subtype"], json!("error_max_turns"));
    let third = last(&repo.run(&env, &args, "STAGE review"));
    assert!(third.get("structured_output").is_none());
    let exhausted = repo.run(&env, &args, "STAGE more");
    assert_eq!(exhausted.status.code(), Some(99));
    assert!(stderr(&exhausted).contains("script exhausted"));
    // Probes do not consume items.
    assert!(repo.run(&env, &["--version"], "").status.success());
}

#[test]
fn garbage_and_floods() {
    let repo = Repo::new();
    let garbage = repo.stream("garbage", &[]);
    assert_eq!(garbage.status.code(), Some(2));
    let text = String::from_utf8_lossy(&garbage.stdout);
    assert!(text
        .lines()
        .any(|l| serde_json::from_str::<Value>(l).is_err()));

    let flood = repo.stream("stdout-flood", &[]);
    assert_eq!(flood.status.code(), Some(0));
    assert!(
        flood.stdout.len() >= 50 * 1024 * 1024,
        "{}",
        flood.stdout.len()
    );
    assert_eq!(last(&flood)["subtype"], json!("success"));

    let flood = repo.stream("stderr-flood", &[]);
    assert_eq!(flood.status.code(), Some(0));
    assert!(
        flood.stderr.len() >= 5 * 1024 * 1024,
        "{}",
        flood.stderr.len()
    );
    assert_eq!(last(&flood)["subtype"], json!("success"));
}

#[test]
fn side_effect_scenarios_change_the_repository() {
    let repo = Repo::new();
    let out = repo.stream("write-file", &[]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(repo.path().join("fake-output.txt")).unwrap(),
        "written by fake-claude\n"
    );
    let out = repo.run(
        &[
            ("FAKE_CLAUDE_SCENARIO", "write-file"),
            ("FAKE_CLAUDE_WRITE", "src/new.rs=fn main() {}"),
        ],
        &["-p", "--output-format", "json"],
        "p",
    );
    assert!(out.status.success());
    assert_eq!(
        std::fs::read_to_string(repo.path().join("src/new.rs")).unwrap(),
        "fn main() {}\n"
    );

    std::fs::write(repo.path().join("specbridge.yaml"), "version: 1\n").unwrap();
    assert!(repo.stream("touch-protected", &[]).status.success());
    assert_ne!(
        std::fs::read_to_string(repo.path().join("specbridge.yaml")).unwrap(),
        "version: 1\n"
    );

    let head = repo.git(&["rev-parse", "HEAD"]);
    let out = repo.stream("git-commit", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_ne!(
        repo.git(&["rev-parse", "HEAD"]),
        head,
        "the fake agent commits"
    );
}

/// Spawns a scenario in its own process group with stdout piped; returns the child and
/// a reader of its stdout lines.
fn spawn(repo: &Repo, scenario: &str) -> (Child, impl Iterator<Item = String>) {
    let mut child = repo
        .command(
            &[("FAKE_CLAUDE_SCENARIO", scenario)],
            &["-p", "--output-format", "stream-json", "--verbose"],
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    use std::io::Write;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"p").unwrap();
    drop(stdin);
    let stdout = child.stdout.take().unwrap();
    let lines = BufReader::new(stdout).lines().map(|l| l.unwrap());
    (child, lines)
}

/// Waits for an exit within a generous bound (a bound against hanging tests, not a
/// timing assertion).
fn wait_exit(child: &mut Child) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

fn signal(pid: u32, signal: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal).unwrap();
}

#[test]
fn hangs_before_and_after_the_result() {
    use nix::sys::signal::Signal;
    let repo = Repo::new();

    let (mut child, mut lines) = spawn(&repo, "hang-before-result");
    let init: Value = serde_json::from_str(&lines.next().unwrap()).unwrap();
    assert_eq!(init["subtype"], json!("init"));
    let _assistant = lines.next().unwrap();
    assert!(
        child.try_wait().unwrap().is_none(),
        "still running, no result"
    );
    signal(child.id(), Signal::SIGTERM);
    assert!(wait_exit(&mut child).is_some(), "SIGTERM ends it");

    let (mut child, lines) = spawn(&repo, "hang-after-result");
    let result = lines
        .map(|l| serde_json::from_str::<Value>(&l).unwrap())
        .find(|e| e["type"] == json!("result"))
        .expect("a result arrives");
    assert_eq!(result["subtype"], json!("success"));
    assert!(
        child.try_wait().unwrap().is_none(),
        "it does not exit after the result"
    );
    signal(child.id(), Signal::SIGKILL);
    wait_exit(&mut child);
}

#[test]
fn ignore_sigterm_needs_sigkill() {
    use nix::sys::signal::Signal;
    let repo = Repo::new();
    let (mut child, mut lines) = spawn(&repo, "ignore-sigterm");
    // The disposition is set before the first event is printed.
    let _init = lines.next().unwrap();
    signal(child.id(), Signal::SIGTERM);
    std::thread::sleep(Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "SIGTERM is ignored");
    signal(child.id(), Signal::SIGKILL);
    let status = wait_exit(&mut child).expect("SIGKILL ends it");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9));
}

#[test]
fn grandchild_outlives_the_fake_in_its_process_group() {
    let repo = Repo::new();
    let pidfile = repo.path().with_extension("grandchild.pid");
    let stdout = repo.path().with_extension("grandchild.out");
    let prompt = repo.path().with_extension("prompt.md");
    std::fs::write(&prompt, "p").unwrap();
    // stdout to a file: a pipe would stay open as long as the grandchild lives.
    let mut child = repo
        .command(
            &[
                ("FAKE_CLAUDE_SCENARIO", "grandchild"),
                (
                    "FAKE_CLAUDE_GRANDCHILD_PIDFILE",
                    &pidfile.display().to_string(),
                ),
            ],
            &["-p", "--output-format", "json"],
        )
        .stdin(std::fs::File::open(&prompt).unwrap())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let fake_pid = child.id() as i32;
    let status = wait_exit(&mut child).expect("the fake exits");
    assert!(status.success());
    let grandchild: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let grandchild = nix::unistd::Pid::from_raw(grandchild);
    assert_eq!(
        nix::unistd::getpgid(Some(grandchild)).unwrap().as_raw(),
        fake_pid
    );
    assert!(
        nix::sys::signal::kill(grandchild, None).is_ok(),
        "still alive"
    );
    let envelope: Value =
        serde_json::from_str(std::fs::read_to_string(&stdout).unwrap().trim()).unwrap();
    assert_eq!(envelope["subtype"], json!("success"));
    nix::sys::signal::kill(grandchild, nix::sys::signal::Signal::SIGKILL).unwrap();
}

#[test]
fn every_scenario_has_a_stable_name() {
    for scenario in Scenario::ALL {
        assert_eq!(scenario.name().parse::<Scenario>(), Ok(scenario));
    }
    assert!("nope".parse::<Scenario>().is_err());
}

/// As Claude Code 2.1.332 does: a prompt that has not begun to arrive 3 s
/// after the start is given up on, with the real warning and refusal, and a
/// prompt written late is never read; one written within the wait is.
#[test]
fn a_prompt_that_comes_after_the_clis_wait_is_not_read() {
    use std::io::Write;
    let repo = Repo::new();
    let args = ["-p", "--output-format", "stream-json", "--verbose"];
    let spawn = || {
        repo.command(&[("FAKE_CLAUDE_SCENARIO", "success")], &args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let late = |delay: Duration| {
        let mut child = spawn();
        let mut stdin = child.stdin.take().unwrap();
        std::thread::sleep(delay);
        // A fake that gave up has closed its end: the broken pipe is expected.
        let _ = stdin.write_all(b"do the thing");
        drop(stdin);
        child.wait_with_output().unwrap()
    };
    let out = late(specbridge_testkit::fake::STDIN_WAIT + Duration::from_millis(500));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(
        stderr(&out).lines().collect::<Vec<_>>(),
        [
            specbridge_testkit::fake::NO_STDIN_WARNING,
            "Error: Input must be provided either through stdin or as a prompt argument when using --print"
        ]
    );
    assert!(out.stdout.is_empty());
    let out = late(Duration::from_millis(500));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(last(&out)["subtype"], "success");
}
