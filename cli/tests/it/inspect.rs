//! Reading runs back: `runs show RUN STAGE`, `--json` errors for every exit code,
//! and no colour escapes when colour is off.

use serde_json::{json, Value};

use crate::common::{fake_claude_bin, read_json, TestContext};

/// An execute stage whose agent is refused a Bash call, writes a file, and whose
/// required verification then fails.
fn refused_and_failed() -> TestContext {
    let mut ctx = TestContext::with_fake_claude("refused-then-write");
    ctx.set_env("FAKE_CLAUDE_WRITE", "src/value.txt=41\n");
    ctx.write("prompts/implement.md", "Make the value 42.\n");
    ctx.write("expected.txt", "42\n");
    ctx.write_agent_pipeline(
        "  timeout: 20s\n",
        r"  - id: implement
    kind: execute
    prompt: prompts/implement.md
    verification:
      - { name: answer, argv: [diff, expected.txt, src/value.txt] }
      - { name: whitespace, argv: [git, diff, --check], required: false }
",
    );
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 1, "{}", out.snapshot());
    ctx
}

#[test]
fn a_stage_story_shows_the_refusal_and_the_failed_verification() {
    let ctx = refused_and_failed();
    let out = ctx.run(&["runs", "show", "latest", "implement"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let fake = fake_claude_bin().display().to_string();
    let text = ctx
        .filter(&out.stdout)
        .replace(&fake, "[FAKE]")
        .lines()
        .map(|l| {
            // Durations and the tmp path of the write vary from run to run.
            let l = regex::Regex::new(r"\b\d+(\.\d+)?(ms|s)\b")
                .unwrap()
                .replace_all(l, "[T]");
            l.to_string()
        })
        .collect::<Vec<_>>()
        .join("\n");
    insta::assert_snapshot!("runs-show-stage-refusal", text);
    assert!(text.contains("REFUSED Bash curl"), "{text}");
    assert!(text.contains("FAIL answer (required, exit 1"), "{text}");
    assert!(
        text.contains("| > 41"),
        "the failing command's output: {text}"
    );

    let json_out = ctx.run(&["runs", "show", "latest", "implement", "--json"]);
    let v: Value = serde_json::from_str(&json_out.stdout).expect("one JSON object");
    let attempt = &v["stage"]["attempts"][0];
    assert_eq!(attempt["toolCalls"][0]["refused"], json!(true), "{v:#}");
    assert_eq!(attempt["verification"][0]["passed"], json!(false), "{v:#}");
    assert_eq!(
        attempt["evidenceStatus"],
        json!("implemented-unverified"),
        "{v:#}"
    );
    assert!(attempt["tokens"]["input"].as_u64().unwrap() > 0, "{v:#}");

    let diff = ctx.run(&["runs", "show", "latest", "implement", "--diff"]);
    assert!(diff.stdout.contains("+41"), "{}", diff.snapshot());
    let bad = ctx.run(&["runs", "show", "latest", "implement", "--attempt", "7"]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("has attempts 1"), "{}", bad.stderr);
}

/// `runs show RUN` answers from the stage records and each attempt's
/// `result.json`: it must not open a prompt, a log, a transcript or a diff (a
/// 1,000-stage run would read them all). Each becomes a FIFO with no writer, which
/// blocks whoever opens it.
#[test]
fn runs_show_opens_no_prompt_log_transcript_or_diff() {
    let ctx = refused_and_failed();
    let before = ctx.run(&["runs", "show", "latest"]);
    assert_eq!(before.code, 0, "{}", before.snapshot());
    let attempt = ctx.only_run_dir().join("stages/implement/attempt-001");
    let mut fifos = 0;
    for entry in std::fs::read_dir(&attempt).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".log")
            || ["prompt.md", "tool-calls.jsonl", "diff.patch"].contains(&name.as_str())
        {
            std::fs::remove_file(entry.path()).unwrap();
            let made = std::process::Command::new("mkfifo")
                .arg(entry.path())
                .status()
                .unwrap();
            assert!(made.success());
            fifos += 1;
        }
    }
    assert!(
        fifos >= 5,
        "only {fifos} files replaced in {}",
        attempt.display()
    );
    let child = ctx
        .command()
        .args(["runs", "show", "latest"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run specbridge");
    let pid = child.id();
    // A reader blocked on a FIFO never ends by itself: end it, so the test fails
    // instead of hanging.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    let out = match rx.recv_timeout(std::time::Duration::from_secs(120)) {
        Ok(out) => out.expect("wait for specbridge"),
        Err(_) => {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
            panic!("`runs show` blocked opening an attempt's file");
        }
    };
    let after = ctx.output(out);
    assert_eq!(after.code, 0, "{}", after.snapshot());
    assert_eq!(after.stdout, before.stdout);
}

#[test]
fn tokens_and_cost_are_summed_over_attempts_and_runs() {
    // Cut off by the turn limit, the stage runs again on resume: a second attempt.
    let mut ctx = TestContext::with_fake_claude("success");
    let script = ctx.aux_path("script.json");
    std::fs::write(&script, r#"["max-turns", "write-file"]"#).unwrap();
    ctx.set_env("FAKE_CLAUDE_SCRIPT", &script.display().to_string());
    ctx.write("prompts/implement.md", "Write a file.\n");
    ctx.write_agent_pipeline(
        "  timeout: 20s\n",
        "  - { id: implement, kind: execute, prompt: prompts/implement.md, verification: [{ name: t, argv: [\"true\"] }] }\n",
    );
    let first = ctx.run(&["run"]);
    assert_eq!(first.code, 4, "{}", first.snapshot());
    let out = ctx.run(&["resume", "latest"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let run = ctx.only_run_dir();
    let per_attempt: Vec<Value> = (1..=2)
        .map(|n| read_json(&run.join(format!("stages/implement/attempt-{n:03}/result.json"))))
        .collect();
    let input: u64 = per_attempt
        .iter()
        .map(|r| r["tokens"]["input"].as_u64().expect("tokens recorded"))
        .sum();
    assert!(input > 0);
    let cost: f64 = per_attempt
        .iter()
        .map(|r| r["totalCostUsd"].as_f64().unwrap())
        .sum();
    let shown = ctx.run(&["runs", "show", "latest", "implement", "--json"]);
    let v: Value = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(
        v["stage"]["spent"]["tokens"]["input"],
        json!(input),
        "{v:#}"
    );
    assert_eq!(v["stage"]["spent"]["invocations"], json!(2));
    assert!((v["stage"]["spent"]["costUsd"].as_f64().unwrap() - cost).abs() < 1e-9);
    let record = read_json(&run.join("run.json"));
    assert_eq!(
        record["totals"]["tokens"]["input"],
        json!(input),
        "{record:#}"
    );
    let list = ctx.run(&["runs", "list", "--json"]);
    let rows: Value = serde_json::from_str(&list.stdout).unwrap();
    assert_eq!(rows[0]["tokens"]["input"], json!(input), "{rows:#}");
}

/// Each exit code with `--json`: stdout is exactly one JSON value, and an error is
/// `{"error": {"code", "message", "exitCode"}}`.
#[test]
fn json_mode_prints_one_object_for_every_exit_code() {
    fn check_pipeline(ctx: &TestContext, argv: &str, extra: &str) {
        ctx.write(
            "specbridge.yaml",
            &format!("version: 1\nname: j\nstages:\n  - id: c\n    kind: check\n    argv: {argv}\n{extra}"),
        );
        ctx.commit_all("pipeline");
    }
    let expect = |ctx: &TestContext, args: &[&str], code: i32, error: Option<&str>| {
        let out = ctx.run(args);
        assert_eq!(out.code, code, "{args:?}: {}", out.snapshot());
        let v: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{args:?}: stdout is not one JSON value ({e}): {}",
                out.snapshot()
            )
        });
        match error {
            Some(name) => {
                assert_eq!(v["error"]["code"], json!(name), "{args:?}: {v:#}");
                assert_eq!(v["error"]["exitCode"], json!(code), "{v:#}");
                assert!(
                    v["error"]["message"]
                        .as_str()
                        .is_some_and(|m| !m.is_empty()),
                    "{v:#}"
                );
            }
            None => assert!(v.get("error").is_none(), "{args:?}: {v:#}"),
        }
    };
    let ctx = TestContext::new();
    check_pipeline(&ctx, r#"["true"]"#, "");
    expect(&ctx, &["run", "--json"], 0, None);
    check_pipeline(&ctx, r#"["false"]"#, "");
    expect(&ctx, &["run", "--json"], 1, None);
    // An output limit is a runner failure.
    ctx.write(
        "specbridge.yaml",
        "version: 1\nname: j\nrunner:\n  maxStdoutBytes: 16\nstages:\n  - { id: c, kind: check, argv: [\"yes\"] }\n",
    );
    ctx.commit_all("limit");
    expect(&ctx, &["run", "--json"], 4, None);
    expect(
        &ctx,
        &["runs", "show", "no-such-run", "--json"],
        2,
        Some("usage-or-config"),
    );
    expect(
        &ctx,
        &["runs", "show", "--json", "--no-such-flag", "x"],
        2,
        Some("usage-or-config"),
    );
    check_pipeline(&ctx, r#"["sleep", "30"]"#, "    timeout: 1s\n");
    expect(&ctx, &["run", "--json"], 5, None);
    ctx.write(
        "specbridge.yaml",
        "version: 1\nname: j\nrunner:\n  permissionMode: bypassPermissions\nstages:\n  - { id: c, kind: check, argv: [\"true\"] }\n",
    );
    ctx.commit_all("unsafe");
    expect(&ctx, &["run", "--json"], 6, Some("safety-violation"));

    let agent = TestContext::new();
    agent.write("p.md", "hi\n");
    agent.write(
        "specbridge.yaml",
        "version: 1\nname: j\nrunner:\n  command: /nonexistent/claude\nstages:\n  - { id: g, kind: generate, prompt: p.md, output: { schema: builtin:document } }\n",
    );
    agent.commit_all("agent");
    expect(&agent, &["run", "--json"], 3, Some("runner-unavailable"));

    let gate = refused_and_failed();
    expect(&gate, &["resume", "latest", "--json"], 1, None);
}

/// Commands whose output is coloured on a terminal, run under a pseudo-terminal
/// (`script`): coloured by default, and not one escape byte with `--color never`
/// or NO_COLOR.
#[test]
fn no_escape_byte_when_colour_is_off() {
    let ctx = refused_and_failed();
    // A warning (weak verification) from validate, a refusal in runs show, and a
    // usage error from clap.
    let commands = [
        "validate -f missing.yaml",
        "runs show latest implement",
        "runner doctor --command /nonexistent/claude",
        "run --no-such-flag",
    ];
    let bin = assert_cmd::cargo::cargo_bin("specbridge");
    let under_pty = |args: &str, env: &[(&str, &str)]| -> Vec<u8> {
        let mut cmd = std::process::Command::new("script");
        cmd.args(["-qec", &format!("{} {args}", bin.display()), "/dev/null"])
            .current_dir(ctx.root())
            .env_remove("NO_COLOR")
            .env("TERM", "xterm-256color");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("run script").stdout
    };
    let coloured: usize = commands
        .iter()
        .filter(|c| under_pty(c, &[]).contains(&0x1b))
        .count();
    assert_eq!(
        coloured,
        commands.len(),
        "colour on a terminal is the control: {coloured} of {}",
        commands.len()
    );
    for c in commands {
        for (label, args, env) in [
            ("--color never", format!("--color never {c}"), vec![]),
            ("NO_COLOR=1", c.to_string(), vec![("NO_COLOR", "1")]),
        ] {
            let out = under_pty(&args, &env);
            assert!(
                !out.contains(&0x1b),
                "{label} {c}: {}",
                String::from_utf8_lossy(&out)
            );
        }
    }
}

#[test]
fn dry_run_shows_the_schema_by_its_digest_and_the_record_keeps_it_whole() {
    let ctx = TestContext::with_fake_claude("success");
    ctx.write("p.md", "Write it.\n");
    ctx.write_agent_pipeline(
        "",
        "  - { id: g, kind: generate, prompt: p.md, output: { schema: builtin:document } }\n",
    );
    let out = ctx.run(&["run", "--dry-run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let digest = regex::Regex::new(r"--json-schema '?<schema sha256:[0-9a-f]{64}>'?").unwrap();
    assert!(digest.is_match(&out.stdout), "{}", out.stdout);
    assert!(!out.stdout.contains("\"properties\""), "{}", out.stdout);
    let run = ctx.run(&["run"]);
    assert_eq!(run.code, 0, "{}", run.snapshot());
    let process = read_json(&ctx.only_run_dir().join("stages/g/attempt-001/process.json"));
    let argv: Vec<&str> = process["redactedArgv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let at = argv.iter().position(|a| *a == "--json-schema").unwrap();
    assert!(argv[at + 1].contains("\"properties\""), "{argv:?}");
}
