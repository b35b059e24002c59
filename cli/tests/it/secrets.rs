//! Secrets never on disk (docs/claude-code-runner.md): canaries in specbridge's environment, in a
//! pipeline's `secrets:`, in argv, prompts, agent output and changes; no byte of
//! any of them may be found under `.specbridge/`, whatever the stage kind.

use std::os::unix::fs::PermissionsExt;

use crate::common::{read_json, TestContext};

/// Name-based: the variable's name says it holds a secret.
const MY_SECRET: &str = "canary-mysecret-7f3a9c2e";
const DB_PASSWORD: &str = "canary-pw-Hx81!q";
/// Shaped: found by its form even where no variable holds it.
const GITHUB_TOKEN: &str = "ghp_CanaryCANARY0123456789abcdefABCDEF01";
const ANTHROPIC_KEY: &str = "sk-ant-api03-CanaryCANARY0123456789abcdef-xyz";
const AWS_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYCANARYKEY1";
/// Declared in the pipeline's `secrets:`; its name says nothing.
const DEPLOY_HOOK: &str = "hook-canary-51d0e2b7";

fn canaries() -> [&'static str; 6] {
    [
        MY_SECRET,
        DB_PASSWORD,
        GITHUB_TOKEN,
        ANTHROPIC_KEY,
        AWS_SECRET,
        DEPLOY_HOOK,
    ]
}

fn with_canaries(ctx: &mut TestContext) {
    ctx.set_env("MY_SECRET", MY_SECRET);
    ctx.set_env("DB_PASSWORD", DB_PASSWORD);
    ctx.set_env("GITHUB_TOKEN", GITHUB_TOKEN);
    ctx.set_env("ANTHROPIC_API_KEY", ANTHROPIC_KEY);
    ctx.set_env("AWS_SECRET_ACCESS_KEY", AWS_SECRET);
    ctx.set_env("DEPLOY_HOOK", DEPLOY_HOOK);
}

/// No file under `.specbridge/` holds any canary byte sequence; every file is the
/// user's alone, and so is every folder.
fn assert_no_canary_on_disk(ctx: &TestContext) {
    let files = ctx.specbridge_files();
    assert!(!files.is_empty());
    for file in files {
        let bytes = std::fs::read(&file).unwrap();
        for canary in canaries() {
            assert!(
                !bytes.windows(canary.len()).any(|w| w == canary.as_bytes()),
                "{} holds {canary}:\n{}",
                file.display(),
                String::from_utf8_lossy(&bytes)
            );
        }
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{} is {mode:o}", file.display());
        let dir = file.parent().unwrap();
        let mode = std::fs::metadata(dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{} is {mode:o}", dir.display());
    }
}

const CHECKS: &str = r#"version: 1
name: canary-checks
secrets: [DEPLOY_HOOK]
verification: []
stages:
  - id: echo
    kind: check
    argv:
      - sh
      - -c
      - |
        echo "out $MY_SECRET $GITHUB_TOKEN $DEPLOY_HOOK $ANTHROPIC_API_KEY"
        echo "err $DB_PASSWORD" >&2
        echo "aws_secret_access_key = $AWS_SECRET_ACCESS_KEY"
        printf -- '-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2\n-----END RSA PRIVATE KEY-----\n'
        echo done
      - ghp_CanaryCANARY0123456789abcdefABCDEF01
  - id: big
    kind: check
    argv:
      - sh
      - -c
      - 'head -c 65530 /dev/zero | tr "\0" x; printf " %s\n" "$MY_SECRET"; head -c 200000 /dev/zero | tr "\0" y; printf " %s %s\n" "$GITHUB_TOKEN" "$DEPLOY_HOOK"'
"#;

#[test]
fn check_stage_output_argv_and_events_hold_no_canary() {
    let mut ctx = TestContext::new();
    with_canaries(&mut ctx);
    ctx.write("specbridge.yaml", CHECKS);
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_no_canary_on_disk(&ctx);

    let attempt = ctx.only_run_dir().join("stages/echo/attempt-001");
    let stdout = std::fs::read_to_string(attempt.join("raw-stdout.log")).unwrap();
    assert_eq!(
        stdout,
        "out <redacted> <redacted> <redacted> <redacted>\naws_secret_access_key = <redacted>\n<redacted>\ndone\n"
    );
    let stderr = std::fs::read_to_string(attempt.join("raw-stderr.log")).unwrap();
    assert_eq!(stderr, "err <redacted>\n");
    let process = read_json(&attempt.join("process.json"));
    assert_eq!(process["redactedArgv"][3], "<redacted>");
    // Bytes as the process wrote them; the log is shorter.
    assert!(process["stdoutBytes"].as_u64().unwrap() > stdout.len() as u64);

    // A log line longer than a 64 KiB read, secrets across the read boundaries.
    let big = std::fs::read_to_string(
        ctx.only_run_dir()
            .join("stages/big/attempt-001/raw-stdout.log"),
    )
    .unwrap();
    assert!(big.starts_with(&"x".repeat(65530)));
    assert!(big.contains(&format!("{} <redacted>\n", "x")));
    assert!(
        big.ends_with("y <redacted> <redacted>\n"),
        "{}",
        &big[big.len() - 80..]
    );
    assert_eq!(big.len(), 65530 + 12 + 200000 + 23);

    let audit = ctx.run(&["runs", "audit", "latest"]);
    assert_eq!(audit.code, 0, "{}", audit.snapshot());
    let show = ctx.run(&["runs", "show", "latest", "--verbose"]);
    assert_eq!(show.code, 0, "{}", show.snapshot());
    for canary in canaries() {
        assert!(!show.stdout.contains(canary), "runs show printed {canary}");
        assert!(!out.stdout.contains(canary) && !out.stderr.contains(canary));
    }
}

#[test]
fn a_failure_reason_naming_a_secret_is_redacted_in_records_and_events() {
    let mut ctx = TestContext::new();
    with_canaries(&mut ctx);
    ctx.write(
        "specbridge.yaml",
        &format!(
            "version: 1\nname: canary-missing\nstages:\n  - {{ id: missing, kind: check, argv: [\"{MY_SECRET}\", \"{GITHUB_TOKEN}\"] }}\n"
        ),
    );
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 4, "{}", out.snapshot());
    let stage = read_json(&ctx.only_run_dir().join("stages/missing/stage.json"));
    assert_eq!(
        stage["outcome"], "failed to find executable `<redacted>`",
        "{stage:#}"
    );
    let events = std::fs::read_to_string(ctx.only_run_dir().join("events.jsonl")).unwrap();
    assert!(events.contains("failed to find executable `<redacted>`"));
    // Nor on the terminal.
    for canary in canaries() {
        assert!(!out.stdout.contains(canary), "{}", out.snapshot());
        assert!(!out.stderr.contains(canary), "{}", out.snapshot());
    }
    assert_no_canary_on_disk(&ctx);
    // The pipeline is kept as loaded, secrets redacted.
    let kept = std::fs::read_to_string(ctx.only_run_dir().join("pipeline.yaml")).unwrap();
    assert!(
        kept.contains("argv: [\"<redacted>\", \"<redacted>\"]"),
        "{kept}"
    );
}

#[test]
fn the_run_store_is_excluded_from_git_once() {
    let mut ctx = TestContext::new();
    with_canaries(&mut ctx);
    ctx.write(
        "specbridge.yaml",
        "version: 1\nname: x\nstages:\n  - { id: a, kind: check, argv: [sh, -c, 'echo $MY_SECRET'] }\n",
    );
    for _ in 0..2 {
        assert_eq!(ctx.run(&["run"]).code, 0);
    }
    let exclude = ctx.read(".git/info/exclude");
    assert_eq!(
        exclude.lines().filter(|l| *l == ".specbridge/").count(),
        1,
        "{exclude}"
    );
    ctx.git(&["add", "-A"]);
    let staged = ctx.git(&["diff", "--cached", "--name-only"]);
    assert!(!staged.contains(".specbridge"), "{staged}");
    assert!(staged.contains("specbridge.yaml"));
}

/// An execute stage whose agent echoes the canaries in its text, in a tool input
/// (the file it writes) and in its structured output, whose change puts one into
/// the repository, and whose verification prints them.
fn execute_ctx(allow: bool) -> TestContext {
    let mut ctx = TestContext::with_fake_claude("write-file");
    with_canaries(&mut ctx);
    ctx.set_env(
        "FAKE_CLAUDE_WRITE",
        &format!("config.env=TOKEN={GITHUB_TOKEN}"),
    );
    ctx.set_env("FAKE_CLAUDE_RESULT", &format!("done, used {MY_SECRET}"));
    ctx.set_env(
        "FAKE_CLAUDE_OUTPUT",
        &serde_json::json!({
            "status": "completed",
            "summary": format!("wrote {DEPLOY_HOOK} and {ANTHROPIC_KEY}"),
            "changedFiles": ["config.env"],
            "commandsRun": [],
            "blockingQuestions": [],
        })
        .to_string(),
    );
    ctx.write(
        "prompts/implement.md",
        &format!("Implement it. The deploy hook is {DEPLOY_HOOK}.\n"),
    );
    let allow = if allow {
        "allowSecretInChange: true\n"
    } else {
        ""
    };
    ctx.write_agent_pipeline(
        &format!("  timeout: 20s\n  killGrace: 300ms\nsecrets: [DEPLOY_HOOK]\n{allow}"),
        "  - id: implement
    kind: execute
    prompt: prompts/implement.md
    verification:
      - { name: prints, argv: [sh, -c, 'echo \"v $MY_SECRET $DB_PASSWORD\"; echo \"$DEPLOY_HOOK\" >&2; grep -q TOKEN config.env'] }
",
    );
    ctx
}

#[test]
fn an_execute_stage_holds_no_canary_and_a_secret_in_its_change_fails_the_gate() {
    let ctx = execute_ctx(false);
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 1, "{}", out.snapshot());
    assert_no_canary_on_disk(&ctx);

    let attempt = ctx.only_run_dir().join("stages/implement/attempt-001");
    let patch = std::fs::read_to_string(attempt.join("diff.patch")).unwrap();
    assert!(patch.contains("+TOKEN=<redacted>"), "{patch}");
    // A run with execute stages takes the working-tree lock under `.specbridge/`
    // first; the run store is still kept out of git.
    let exclude = std::fs::read_to_string(ctx.path(".git/info/exclude")).unwrap();
    assert_eq!(
        exclude.lines().filter(|l| *l == ".specbridge/").count(),
        1,
        "{exclude}"
    );
    // The Write call's input held the token: recorded, redacted.
    let calls = std::fs::read_to_string(attempt.join("tool-calls.jsonl")).unwrap();
    assert!(
        calls.contains("\"tool\":\"Write\"") && calls.contains("TOKEN=<redacted>"),
        "{calls}"
    );
    let ev = read_json(&attempt.join("evidence.json"));
    let finding = &ev["findings"][0];
    assert_eq!(finding["code"], "secret-in-change", "{ev:#}");
    assert_eq!(finding["path"], "config.env");
    assert_eq!(finding["line"], 1);
    assert_eq!(finding["allowed"], false);
    assert_eq!(
        ev["diff"]["sha256"],
        specbridge_engine::store::sha256_file(&attempt.join("diff.patch")).unwrap()
    );
    let stage = read_json(&ctx.only_run_dir().join("stages/implement/stage.json"));
    let outcome = stage["outcome"].as_str().unwrap();
    assert!(
        outcome.contains("the change holds a GitHub token in config.env at line 1"),
        "{outcome}"
    );
    assert!(
        out.stdout.contains("a GitHub token in config.env"),
        "{}",
        out.snapshot()
    );

    let prompt = std::fs::read_to_string(attempt.join("prompt.md")).unwrap();
    assert!(
        prompt.contains("The deploy hook is <redacted>."),
        "{prompt}"
    );
    let stdout = std::fs::read_to_string(attempt.join("raw-stdout.log")).unwrap();
    assert!(
        stdout.contains("TOKEN=<redacted>"),
        "the tool input is kept, redacted"
    );
    let log = std::fs::read_to_string(attempt.join("verification-prints.stdout.log")).unwrap();
    assert_eq!(log, "v <redacted> <redacted>\n");
    let log = std::fs::read_to_string(attempt.join("verification-prints.stderr.log")).unwrap();
    assert_eq!(log, "<redacted>\n");
    let output = read_json(&ctx.only_run_dir().join("stages/implement/output.json"));
    assert_eq!(output["summary"], "wrote <redacted> and <redacted>");

    // The agent got the prompt as written; only the records are redacted.
    let runs = ctx.fake_agent_runs();
    assert!(runs[0].stdin.contains(DEPLOY_HOOK));

    let audit = ctx.run(&["runs", "audit", "latest"]);
    assert_eq!(audit.code, 0, "{}", audit.snapshot());
}

#[test]
fn a_secret_in_a_change_the_pipeline_allows_is_recorded_not_failed() {
    let ctx = execute_ctx(true);
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_no_canary_on_disk(&ctx);
    let ev = read_json(
        &ctx.only_run_dir()
            .join("stages/implement/attempt-001/evidence.json"),
    );
    assert_eq!(ev["findings"][0]["code"], "secret-in-change");
    assert_eq!(ev["findings"][0]["allowed"], true);
    assert_eq!(ev["status"], "verified");
}

#[test]
fn a_generated_document_holding_a_secret_is_not_written() {
    let mut ctx = TestContext::with_fake_claude("success");
    with_canaries(&mut ctx);
    ctx.set_env(
        "FAKE_CLAUDE_OUTPUT",
        &serde_json::json!({
            "summary": "a spec",
            "markdown": format!("# Spec\n\nDeploy with\n{GITHUB_TOKEN}\n"),
        })
        .to_string(),
    );
    ctx.write("prompts/spec.md", "Write the spec.\n");
    ctx.write_agent_pipeline(
        "  timeout: 20s\n",
        "  - id: spec
    kind: generate
    prompt: prompts/spec.md
    output: { schema: builtin:document, document: docs/spec.md }
",
    );
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 4, "{}", out.snapshot());
    let stage = read_json(&ctx.only_run_dir().join("stages/spec/stage.json"));
    assert_eq!(stage["status"], "failed");
    assert_eq!(
        stage["outcome"],
        "refusing to write document `docs/spec.md`: line 4 holds a GitHub token; the output is kept redacted in stages/spec/output.json"
    );
    assert!(!ctx.path("docs/spec.md").exists());
    assert_no_canary_on_disk(&ctx);
}
