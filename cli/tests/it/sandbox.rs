//! Commands specbridge runs itself (check stages, verification commands) run in
//! bubblewrap (docs/claude-code-runner.md): each test tries to break out the way an agent's test
//! or build script would — a file outside the repository, a connection to a
//! listener on this machine, `.git` — against the fake CLI on real repositories.

use std::io::ErrorKind;
use std::net::TcpListener;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{assert_matches_schema, live_processes_with_arg, read_json, TestContext};

/// Tries a write outside the repository and a connection to `port`; says which
/// worked; exits 3 when both were blocked, 0 when either got through.
fn hostile_script(outside: &Path, port: u16) -> String {
    format!(
        "w=blocked; n=blocked
if echo pwned > {out} 2>/dev/null; then w=open; fi
if (echo hello > /dev/tcp/127.0.0.1/{port}) 2>/dev/null; then n=open; fi
echo \"write=$w network=$n\"
[ \"$w$n\" = blockedblocked ] && exit 3
exit 0",
        out = outside.join("escaped.txt").display()
    )
}

/// A repository where the fake agent writes `hostile.sh` in an execute stage and
/// a check after it runs the script; a folder outside the repository (not under
/// `/tmp`, whose private copy would hide a write anyway) and a listener on
/// 127.0.0.1 to see what got out.
struct Hostile {
    ctx: TestContext,
    outside: tempfile::TempDir,
    listener: TcpListener,
}

impl Hostile {
    /// `gate_sandbox`: YAML lines for the check stage (indented four spaces).
    fn new(gate_sandbox: impl Fn(&Path) -> String) -> Hostile {
        let outside = tempfile::Builder::new()
            .prefix("outside-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut ctx = TestContext::with_fake_claude("write-file");
        ctx.set_env(
            "FAKE_CLAUDE_WRITE",
            &format!("hostile.sh={}", hostile_script(outside.path(), port)),
        );
        ctx.write("prompts/implement.md", "Write the tests.\n");
        let stages = format!(
            "  - id: implement
    kind: execute
    prompt: prompts/implement.md
    verification:
      - {{ name: written, argv: [test, -f, hostile.sh] }}
  - id: gate
    kind: check
    needs: [implement]
    argv: [bash, hostile.sh]
{}",
            gate_sandbox(outside.path())
        );
        ctx.write_agent_pipeline("  timeout: 30s\n", &stages);
        Hostile {
            ctx,
            outside,
            listener,
        }
    }

    fn escaped(&self) -> bool {
        self.outside.path().join("escaped.txt").exists()
    }

    fn connected(&self) -> bool {
        match self.listener.accept() {
            Ok(_) => true,
            Err(e) if e.kind() == ErrorKind::WouldBlock => false,
            Err(e) => panic!("accept: {e}"),
        }
    }

    fn gate(&self) -> PathBuf {
        self.ctx.only_run_dir().join("stages/gate")
    }

    fn gate_said(&self) -> String {
        std::fs::read_to_string(self.gate().join("attempt-001/raw-stdout.log")).unwrap()
    }

    fn gate_sandbox(&self) -> Value {
        let process = self.gate().join("attempt-001/process.json");
        assert_matches_schema(&process, "process.schema.json");
        let p = read_json(&process);
        assert_eq!(
            p["redactedArgv"],
            serde_json::json!(["bash", "hostile.sh"]),
            "the record keeps the command as written: {p:#}"
        );
        p["sandbox"].clone()
    }
}

fn canonical(p: &Path) -> String {
    std::fs::canonicalize(p).unwrap().display().to_string()
}

#[test]
fn a_check_after_an_execute_stage_cannot_write_outside_or_reach_the_network() {
    let h = Hostile::new(|_| String::new());
    let out = h.ctx.run(&["run"]);
    // A check whose command fails is a gate failure (exit 1), not a runner failure.
    assert_eq!(out.code, 1, "{}", out.snapshot());
    let stage = read_json(&h.gate().join("stage.json"));
    assert_eq!(stage["status"], "check-failed", "{stage:#}");
    assert_eq!(stage["outcome"], "exit code 3", "{stage:#}");
    assert_eq!(h.gate_said(), "write=blocked network=blocked\n");
    assert!(!h.escaped(), "a file outside the repository was written");
    assert!(!h.connected(), "the listener saw a connection");

    let sandbox = h.gate_sandbox();
    assert_eq!(sandbox["mode"], "bubblewrap", "{sandbox:#}");
    assert_eq!(sandbox["network"], false);
    assert_eq!(
        sandbox["writable"],
        serde_json::json!([canonical(h.ctx.root())])
    );
    let bwrap = sandbox["bubblewrap"].as_str().unwrap();
    assert!(bwrap.ends_with("/bwrap"), "{sandbox:#}");
    assert_eq!(sandbox["wrapperArgv"][0], bwrap);
    assert_eq!(
        sandbox["wrapperArgv"].as_array().unwrap().last().unwrap(),
        "--"
    );
    // The verification command of the execute stage ran confined too.
    let verification = read_json(
        &h.ctx
            .only_run_dir()
            .join("stages/implement/attempt-001/verification.json"),
    );
    assert_eq!(
        verification["commands"][0]["passed"], true,
        "{verification:#}"
    );
    assert_eq!(verification["commands"][0]["sandbox"]["mode"], "bubblewrap");
    let run = read_json(&h.ctx.only_run_dir().join("run.json"));
    assert!(!run["warnings"].to_string().contains("sandbox"), "{run:#}");
}

#[test]
fn sandbox_off_runs_with_full_rights_and_is_warned_on_every_run() {
    let h = Hostile::new(|_| "    sandbox: off\n".into());
    let out = h.ctx.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_eq!(h.gate_said(), "write=open network=open\n");
    assert!(h.escaped() && h.connected(), "unconfined, both get through");
    let warning = "check stage `gate` (`bash hostile.sh`) runs without a sandbox";
    assert!(out.stderr.contains(warning), "{}", out.snapshot());
    let run = read_json(&h.ctx.only_run_dir().join("run.json"));
    assert!(run["warnings"].to_string().contains(warning), "{run:#}");
    assert_eq!(h.gate_sandbox()["mode"], "off");
}

/// Many unconfined commands share one warning line, on the terminal and in
/// `run.json`, on every run; each attempt still records its own sandbox.
#[test]
fn many_unconfined_checks_are_warned_in_one_line_and_each_recorded_off() {
    let ctx = TestContext::new();
    let mut yaml = String::from("version: 1\nname: many-off\nstages:\n");
    for i in 0..5 {
        yaml.push_str(&format!(
            "  - {{ id: c{i}, kind: check, argv: [\"true\"], sandbox: off }}\n"
        ));
    }
    ctx.write("specbridge.yaml", &yaml);
    for run in 0..2 {
        let out = ctx.run(&["run"]);
        assert_eq!(out.code, 0, "{}", out.snapshot());
        let warned: Vec<&str> = out
            .stderr
            .lines()
            .filter(|l| l.contains("without a sandbox"))
            .collect();
        assert_eq!(
            warned,
            ["warning: 5 commands run without a sandbox (`sandbox: off`): the code they run has your full rights: check stage `c0` (`true`), check stage `c1` (`true`), check stage `c2` (`true`) and 2 more (each attempt's process.json records its sandbox)"],
            "{}",
            out.snapshot()
        );
        if run > 0 {
            continue;
        }
        let dir = ctx.only_run_dir();
        let run = read_json(&dir.join("run.json"));
        let warnings = run["warnings"].as_array().unwrap();
        let off: Vec<_> = warnings
            .iter()
            .filter(|w| w.as_str().unwrap().contains("without a sandbox"))
            .collect();
        assert_eq!(off.len(), 1, "{run:#}");
        for i in 0..5 {
            let process = read_json(&dir.join(format!("stages/c{i}/attempt-001/process.json")));
            assert_eq!(process["sandbox"]["mode"], "off", "c{i}: {process:#}");
        }
    }
}

#[test]
fn a_writable_opt_in_opens_that_folder_and_nothing_else() {
    let h = Hostile::new(|outside| {
        format!("    sandbox: {{ writable: [\"{}\"] }}\n", outside.display())
    });
    let out = h.ctx.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_eq!(h.gate_said(), "write=open network=blocked\n");
    assert!(h.escaped());
    assert!(!h.connected());
    let sandbox = h.gate_sandbox();
    assert_eq!(
        sandbox["writable"],
        serde_json::json!([canonical(h.ctx.root()), canonical(h.outside.path())])
    );
    assert_eq!(sandbox["network"], false);
}

#[test]
fn a_network_opt_in_opens_the_network_and_nothing_else() {
    let h = Hostile::new(|_| "    sandbox: { network: true }\n".into());
    let out = h.ctx.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_eq!(h.gate_said(), "write=blocked network=open\n");
    assert!(!h.escaped());
    assert!(h.connected());
    assert_eq!(h.gate_sandbox()["network"], true);
}

#[test]
fn git_and_the_run_records_stay_read_only_inside_the_repository() {
    let ctx = TestContext::new();
    ctx.write(
        "specbridge.yaml",
        r#"
version: 1
name: inside
stages:
  - id: poke
    kind: check
    argv: [sh, -c, "echo ok > inrepo.txt; echo '[core]' >> .git/config && exit 10; ls .specbridge/runs/*/run.json >/dev/null && touch .specbridge/forged && exit 11; touch /tmp/private; exit 0"]
"#,
    );
    let config = ctx.read(".git/config");
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_eq!(ctx.read("inrepo.txt"), "ok\n", "the repository is writable");
    assert_eq!(ctx.read(".git/config"), config);
    assert!(!ctx.path(".specbridge/forged").exists());
    let sandbox = read_json(
        &ctx.only_run_dir()
            .join("stages/poke/attempt-001/process.json"),
    )["sandbox"]
        .clone();
    let root = canonical(ctx.root());
    assert_eq!(
        sandbox["readOnly"],
        serde_json::json!([format!("{root}/.git"), format!("{root}/.specbridge")])
    );
}

/// A folder with only the given programs (symlinks): a PATH without `bwrap`.
fn path_with(programs: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for p in programs {
        let real = specbridge_engine::sandbox::find_on_path(p).unwrap();
        symlink(real, dir.path().join(p)).unwrap();
    }
    dir
}

const WITHOUT_BWRAP: &str = r"
version: 1
name: no-bwrap
concurrency: 1
stages:
  - { id: first, kind: check, argv: [touch, spawned], sandbox: off }
  - { id: tests, kind: check, needs: [first], argv: [echo, hi]SANDBOX }
";

#[test]
fn without_bubblewrap_a_confined_command_refuses_the_run_before_anything_runs() {
    let mut ctx = TestContext::new();
    ctx.write("specbridge.yaml", &WITHOUT_BWRAP.replace("SANDBOX", ""));
    let bin = path_with(&["touch", "echo"]);
    ctx.set_env("PATH", &bin.path().display().to_string());
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 2, "{}", out.snapshot());
    assert!(
        out.stderr
            .contains("check stage `tests` (`echo hi`) runs confined in bubblewrap, but bubblewrap (`bwrap`) is not on PATH; install bubblewrap and socat (Debian/Ubuntu: `apt-get install bubblewrap socat`)"),
        "{}",
        out.snapshot()
    );
    assert!(out.stderr.contains("sandbox: off"), "{}", out.snapshot());
    assert!(!ctx.path("spawned").exists(), "a stage was spawned");
    assert!(!ctx.path(".specbridge").exists(), "a run was created");

    // Turned off explicitly, the same machine runs it (with the warning).
    ctx.write(
        "specbridge.yaml",
        &WITHOUT_BWRAP.replace("SANDBOX", ", sandbox: off"),
    );
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert!(ctx.path("spawned").exists());
    assert!(out
        .stderr
        .contains("check stage `tests` (`echo hi`) runs without a sandbox"));
}

/// A resume starts its bubblewrap probe beside the audit, before it knows the
/// pipeline: a confined command without bubblewrap still refuses the resume, at
/// the same check, before anything of the run changes.
#[test]
fn without_bubblewrap_a_resume_of_a_confined_command_is_refused_before_the_run_changes() {
    let mut ctx = TestContext::new();
    ctx.write(
        "specbridge.yaml",
        "version: 1\nname: resume-no-bwrap\nstages:\n  - { id: tests, kind: check, argv: [test, -f, ready.txt] }\n",
    );
    let first = ctx.run(&["run"]);
    assert_eq!(first.code, 1, "{}", first.snapshot());
    let run_dir = ctx.only_run_dir();
    let before = |name: &str| std::fs::read(run_dir.join(name)).unwrap();
    let (events, record) = (before("events.jsonl"), before("run.json"));

    let bin = path_with(&["test"]);
    ctx.set_env("PATH", &bin.path().display().to_string());
    let out = ctx.run(&["resume", "latest"]);
    assert_eq!(out.code, 2, "{}", out.snapshot());
    assert!(
        out.stderr.contains(
            "check stage `tests` (`test -f ready.txt`) runs confined in bubblewrap, but bubblewrap (`bwrap`) is not on PATH"
        ),
        "{}",
        out.snapshot()
    );
    assert_eq!(before("events.jsonl"), events, "the log changed");
    assert_eq!(before("run.json"), record, "run.json changed");
}

#[test]
fn a_timed_out_confined_command_leaves_no_process_behind() {
    let ctx = TestContext::new();
    // One sleeper leaves the process group (`setsid`), which the group kill alone
    // would miss; the PID namespace ends it with the sandbox. The shell ignores
    // SIGTERM, so the kill grace and SIGKILL are needed too. (`grep -xz` matches a
    // whole argument: the shell's own script names the sleeper too.)
    ctx.write(
        "specbridge.yaml",
        r#"
version: 1
name: slow
runner: { killGrace: 300ms }
stages:
  - id: slow
    kind: check
    timeout: 2s
    argv: [sh, -c, "trap '' TERM; setsid sleep 3000.137 & until grep -qsxzF 3000.137 /proc/[0-9]*/cmdline; do sleep 0.05; done; echo started > started; sleep 3000.138; echo survived > survived"]
"#,
    );
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 5, "{}", out.snapshot());
    assert!(ctx.path("started").exists(), "both sleepers were running");
    let stage = read_json(&ctx.only_run_dir().join("stages/slow/stage.json"));
    assert_eq!(stage["status"], "timed-out", "{stage:#}");
    for arg in ["3000.137", "3000.138"] {
        assert_eq!(
            live_processes_with_arg(arg),
            Vec::<u32>::new(),
            "`sleep {arg}` outlived the run"
        );
    }
    assert!(!ctx.path("survived").exists());
}

#[test]
fn a_confined_command_dies_with_specbridge() {
    let ctx = TestContext::new();
    ctx.write(
        "specbridge.yaml",
        r#"
version: 1
name: orphan
stages:
  - { id: long, kind: check, argv: [sh, -c, "echo started > started; exec sleep 3000.271"] }
"#,
    );
    let mut child = ctx
        .command()
        .arg("run")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // `started` is written before the `exec`, so wait for the sleeper itself.
    let until = Instant::now() + Duration::from_secs(60);
    while live_processes_with_arg("3000.271").is_empty() {
        assert!(Instant::now() < until, "the check never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(ctx.path("started").exists());
    assert_eq!(live_processes_with_arg("3000.271").len(), 1);
    // No cleanup by specbridge: only bubblewrap's --die-with-parent can end it.
    child.kill().unwrap();
    child.wait().unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while !live_processes_with_arg("3000.271").is_empty() {
        assert!(
            Instant::now() < until,
            "the confined command outlived a SIGKILLed specbridge"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn validate_reports_bad_sandbox_values_where_they_are() {
    let cases: [(&str, &str); 4] = [
        ("sandbox: of", "specbridge.yaml:7:"),
        ("sandbox: { writable: [target] }", "specbridge.yaml:7:"),
        ("sandbox: { writeable: [/x] }", "specbridge.yaml:7:"),
        (
            "sandbox: { writable: [\"~bob/cache\"] }",
            "specbridge.yaml:7:",
        ),
    ];
    for (line, at) in cases {
        let ctx = TestContext::new();
        ctx.write(
            "specbridge.yaml",
            &format!(
                "version: 1\nname: v\nstages:\n  - id: t\n    kind: check\n    argv: [cargo, test]\n    {line}\n"
            ),
        );
        let out = ctx.run(&["validate"]);
        assert_eq!(out.code, 2, "{line}: {}", out.snapshot());
        assert!(
            out.stderr.contains(at) || out.stdout.contains(at),
            "{line}: {}",
            out.snapshot()
        );
    }
    let ctx = TestContext::new();
    ctx.write(
        "specbridge.yaml",
        "version: 1\nname: v\nstages:\n  - id: t\n    kind: check\n    argv: [cargo, test]\n    sandbox: of\n",
    );
    let out = ctx.run(&["validate"]);
    assert!(
        out.stderr.contains("specbridge.yaml:7:14: error: `of` is not a valid value for `stages[0].sandbox`: expected `off` or a mapping"),
        "{}",
        out.snapshot()
    );
    // On an agent stage it is the wrong key, said so with the right one.
    let ctx = TestContext::new();
    ctx.write(
        "specbridge.yaml",
        "version: 1\nname: v\nstages:\n  - id: impl\n    kind: execute\n    prompt: \"do\\nit\\n\"\n    sandbox: off\n",
    );
    let out = ctx.run(&["validate"]);
    assert_eq!(out.code, 2, "{}", out.snapshot());
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(text.contains("specbridge.yaml:7:"), "{text}");
    assert!(text.contains("runner.sandbox"), "{text}");
    // A verification command's opt-ins are checked the same way.
    let ctx = TestContext::new();
    ctx.write(
        "specbridge.yaml",
        "version: 1\nname: v\nverification:\n  - name: t\n    argv: [cargo, test]\n    sandbox: { writable: [../cache] }\nstages:\n  - { id: c, kind: check, argv: [\"true\"] }\n",
    );
    let out = ctx.run(&["validate"]);
    assert_eq!(out.code, 2, "{}", out.snapshot());
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(text.contains("specbridge.yaml:6:"), "{text}");
}

#[test]
fn a_cargo_target_dir_outside_the_repository_is_named_before_the_run() {
    let mut ctx = TestContext::new();
    ctx.write(
        "specbridge.yaml",
        "version: 1\nname: t\nstages:\n  - { id: test, kind: check, argv: [cargo, test, --offline] }\n",
    );
    ctx.set_env("CARGO_TARGET_DIR", "/var/cache/shared-target");
    let out = ctx.run(&["run", "--dry-run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert!(
        out.stderr.contains("check stage `test` (`cargo test --offline`) is confined, and CARGO_TARGET_DIR (/var/cache/shared-target) is outside the repository"),
        "{}",
        out.snapshot()
    );
}

/// A confined command that leaves nothing behind is not recorded as having left
/// orphans: bubblewrap's own namespace init, exiting with the command, is not one
/// (it was counted for about a third of such stages).
#[test]
fn a_confined_command_that_leaves_nothing_behind_records_no_orphans() {
    let ctx = TestContext::new();
    let stages: String = (0..8)
        .map(|i| format!("  - {{ id: s{i}, kind: check, argv: [sh, -c, \"true\"] }}\n"))
        .collect();
    ctx.write(
        "specbridge.yaml",
        &format!("version: 1\nname: quiet\nstages:\n{stages}"),
    );
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let run = ctx.only_run_dir();
    for i in 0..8 {
        let process = read_json(&run.join(format!("stages/s{i}/attempt-001/process.json")));
        assert_eq!(process["sandbox"]["mode"], "bubblewrap", "s{i}");
        assert_eq!(process["orphansKilled"], false, "s{i}: {process:#}");
    }
}

/// A linked worktree's git folder is its main checkout's, outside the worktree.
/// A confined command reads it (git works, even when the main checkout lies
/// under the private `/tmp`) and cannot write it, not even through an opt-in
/// over the whole main checkout: a hook written there would run at the user's
/// next commit, outside any sandbox.
#[test]
fn a_linked_worktrees_git_folder_stays_visible_and_read_only() {
    let ctx = TestContext::new();
    ctx.write("README.md", "# main checkout\n");
    ctx.commit_all("main");
    let place = tempfile::Builder::new()
        .prefix("specbridge-worktree-")
        .tempdir()
        .unwrap();
    let worktree = place.path().join("wt");
    ctx.git(&["worktree", "add", "-q", worktree.to_str().unwrap()]);
    let main = canonical(ctx.root());
    let hook = format!("{main}/.git/hooks/pre-commit");
    std::fs::write(
        worktree.join("specbridge.yaml"),
        format!(
            r#"version: 1
name: worktree
stages:
  - id: reads
    kind: check
    argv: [sh, -c, "git status --porcelain >/dev/null && echo git-ok"]
  - id: opened
    kind: check
    sandbox: {{ writable: ["{main}"] }}
    argv: [sh, -c, "if echo pwned > {hook} 2>/dev/null; then echo wrote; else echo refused; fi"]
"#
        ),
    )
    .unwrap();
    let git = |args: &[&str]| {
        let done = std::process::Command::new("git")
            .arg("-C")
            .arg(&worktree)
            .args(args)
            .status()
            .unwrap();
        assert!(done.success(), "git {args:?}");
    };
    git(&["add", "-A"]);
    git(&["commit", "-qm", "pipeline"]);

    let out = ctx.output(
        ctx.command()
            .arg("-C")
            .arg(&worktree)
            .arg("run")
            .output()
            .unwrap(),
    );
    let runs: Vec<_> = std::fs::read_dir(worktree.join(".specbridge/runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    let said = |stage: &str| {
        std::fs::read_to_string(runs[0].join(format!("stages/{stage}/attempt-001/raw-stdout.log")))
            .unwrap()
    };
    assert_eq!(said("reads"), "git-ok\n", "{}", out.snapshot());
    assert_eq!(said("opened"), "refused\n", "{}", out.snapshot());
    assert!(
        !Path::new(&hook).exists(),
        "a hook was written into {main}/.git"
    );
    let process = read_json(&runs[0].join("stages/opened/attempt-001/process.json"));
    assert!(
        process["sandbox"]["readOnly"]
            .as_array()
            .unwrap()
            .contains(&Value::from(format!("{main}/.git"))),
        "{process:#}"
    );
    assert_eq!(out.code, 0, "{}", out.snapshot());
}
