//! `specbridge runner doctor` against shell-script stand-ins that print the captured
//! `--version`, `--help` and `auth status` outputs of real Claude Code versions.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use crate::common::{workspace_root, TestContext};

fn version_dir(version: &str) -> PathBuf {
    workspace_root()
        .join("testkit/fixtures/claude-code/versions")
        .join(version)
}

/// How the stand-in answers `auth status`.
enum Auth {
    /// Hangs like 1.0.0, which opens its interactive UI.
    Hangs,
    /// Prints this file and exits with this code.
    Prints(PathBuf, i32),
}

/// Writes `fake/claude`, which logs every argv to `fake/argv.log`.
fn fake_cli(ctx: &TestContext, version: &str, auth: Auth, help_body: Option<&str>) -> PathBuf {
    let dir = version_dir(version);
    let log = ctx.path("fake/argv.log");
    let help = help_body.map_or_else(
        || format!("cat '{}'", dir.join("help.txt").display()),
        String::from,
    );
    let auth = match auth {
        Auth::Hangs => "sleep 600".to_string(),
        Auth::Prints(file, code) => format!("cat '{}'; exit {code}", file.display()),
    };
    let script = format!(
        "#!/bin/sh\n\
         echo \"$*\" >> '{log}'\n\
         case \"$1\" in\n\
           --version) cat '{version}' ;;\n\
           --help) {help} ;;\n\
           auth) {auth} ;;\n\
           *) sleep 600 ;;\n\
         esac\n",
        log = log.display(),
        version = dir.join("version.txt").display(),
    );
    ctx.write("fake/claude", &script);
    let path = ctx.path("fake/claude");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The calls in order, except that `--version` and `--help`, asked at the same
/// time, are listed in that order whichever logged first.
fn logged_calls(ctx: &TestContext) -> Vec<String> {
    let mut calls: Vec<String> = ctx
        .read("fake/argv.log")
        .lines()
        .map(String::from)
        .collect();
    if calls.len() >= 2 && calls[0] == "--help" && calls[1] == "--version" {
        calls.swap(0, 1);
    }
    calls
}

/// A logged-in `auth status` for versions whose captures only show the logged-out one.
fn logged_in(ctx: &TestContext) -> PathBuf {
    ctx.write(
        "fake/logged-in.json",
        "{\n  \"loggedIn\": true,\n  \"authMethod\": \"api_key\",\n  \"apiProvider\": \"firstParty\"\n}\n",
    );
    ctx.path("fake/logged-in.json")
}

fn doctor(ctx: &TestContext, exe: &std::path::Path, extra: &[&str]) -> crate::common::Output {
    let mut args = vec!["runner", "doctor", "--command", exe.to_str().unwrap()];
    args.extend_from_slice(extra);
    ctx.run(&args)
}

#[test]
fn version_1_0_0_is_incompatible_and_never_asked_auth_status() {
    let ctx = TestContext::new();
    let exe = fake_cli(&ctx, "1.0.0", Auth::Hangs, None);
    let out = doctor(&ctx, &exe, &[]);
    assert_eq!(out.code, 3);
    assert_eq!(logged_calls(&ctx), ["--version", "--help"]);
    insta::assert_snapshot!("doctor-1.0.0", out.snapshot());
}

#[test]
fn version_2_0_50_is_available_and_degraded() {
    let ctx = TestContext::new();
    let exe = fake_cli(&ctx, "2.0.50", Auth::Hangs, None);
    let out = doctor(&ctx, &exe, &[]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_eq!(logged_calls(&ctx), ["--version", "--help"]);
    insta::assert_snapshot!("doctor-2.0.50", out.snapshot());
}

#[test]
fn versions_2_1_100_and_2_1_332_are_available() {
    for version in ["2.1.100", "2.1.332"] {
        let ctx = TestContext::new();
        let auth = logged_in(&ctx);
        let exe = fake_cli(&ctx, version, Auth::Prints(auth, 0), None);
        let out = doctor(&ctx, &exe, &[]);
        assert_eq!(out.code, 0, "{version}: {}", out.snapshot());
        assert_eq!(logged_calls(&ctx), ["--version", "--help", "auth status"]);
        insta::assert_snapshot!(format!("doctor-{version}"), out.snapshot());
    }
}

#[test]
fn a_logged_out_cli_is_unauthenticated_and_its_auth_output_is_never_echoed() {
    let ctx = TestContext::new();
    let auth = version_dir("2.1.332").join("auth-status.txt");
    let exe = fake_cli(&ctx, "2.1.332", Auth::Prints(auth, 1), None);
    for extra in [&[][..], &["--json"][..]] {
        let out = doctor(&ctx, &exe, extra);
        assert_eq!(out.code, 3);
        let all = format!("{}{}", out.stdout, out.stderr);
        assert!(all.contains("unauthenticated"), "{all}");
        for leaked in ["projectsDirectory", "/home/user", "firstParty", "loggedIn"] {
            assert!(!all.contains(leaked), "{leaked} echoed:\n{all}");
        }
    }
}

#[test]
fn json_output_follows_the_committed_schema() {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(workspace_root().join("schemas/doctor.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    for version in ["1.0.0", "2.0.50", "2.1.332"] {
        let ctx = TestContext::new();
        let auth = logged_in(&ctx);
        let exe = fake_cli(&ctx, version, Auth::Prints(auth, 0), None);
        let out = doctor(&ctx, &exe, &["--json"]);
        let report: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        assert!(validator.is_valid(&report), "{version}: {report:#}");
        let expected = if version == "1.0.0" {
            "incompatible"
        } else {
            "available"
        };
        assert_eq!(report["status"], expected, "{version}");
        assert_eq!(report["version"], version);
    }
    let ctx = TestContext::new();
    let out = ctx.run(&[
        "runner",
        "doctor",
        "--command",
        "/nonexistent/claude",
        "--json",
    ]);
    let report: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(validator.is_valid(&report), "{report:#}");
}

#[test]
fn a_missing_executable_is_unavailable() {
    let ctx = TestContext::new();
    let out = ctx.run(&["runner", "doctor", "--command", "/nonexistent/claude"]);
    assert_eq!(out.code, 3);
    insta::assert_snapshot!("doctor-missing", out.snapshot());

    let out = ctx
        .command()
        .args(["runner", "doctor"])
        .env("PATH", ctx.path("empty-path-dir"))
        .output()
        .unwrap();
    let out = ctx.output(out);
    assert_eq!(out.code, 3);
    assert!(
        out.stdout.contains("unavailable") && out.stdout.contains("in PATH"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_hanging_help_probe_is_an_error_within_the_timeout() {
    let ctx = TestContext::new();
    let exe = fake_cli(&ctx, "2.1.332", Auth::Hangs, Some("sleep 600"));
    let out = ctx
        .command()
        .args(["runner", "doctor", "--command", exe.to_str().unwrap()])
        .env("SPECBRIDGE_PROBE_TIMEOUT_MS", "500")
        .output()
        .unwrap();
    let out = ctx.output(out);
    assert_eq!(out.code, 3, "{}", out.snapshot());
    assert!(out.stdout.contains("status   error"), "{}", out.stdout);
    assert!(
        out.stdout.contains("--help` failed to finish within"),
        "{}",
        out.stdout
    );
    assert_eq!(logged_calls(&ctx), ["--version", "--help"]);
}

#[test]
fn a_failing_version_probe_is_an_error_with_its_message_redacted() {
    let ctx = TestContext::new();
    ctx.write(
        "fake/claude",
        "#!/bin/sh\necho \"native binary not installed; key $ANTHROPIC_API_KEY\" >&2\nexit 1\n",
    );
    let exe = ctx.path("fake/claude");
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = ctx
        .command()
        .args(["runner", "doctor", "--command", exe.to_str().unwrap()])
        .env("ANTHROPIC_API_KEY", "sk-canary-0123456789")
        .output()
        .unwrap();
    let out = ctx.output(out);
    assert_eq!(out.code, 3);
    assert!(
        !out.stdout.contains("sk-canary-0123456789"),
        "{}",
        out.stdout
    );
    insta::assert_snapshot!("doctor-version-fails", out.snapshot());
}

#[test]
fn an_unknown_runner_kind_is_a_usage_error() {
    let ctx = TestContext::new();
    let out = ctx.run(&["runner", "doctor", "codex"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("unknown runner kind `codex`"),
        "{}",
        out.stderr
    );
}

#[test]
fn without_command_the_pipelines_runner_is_probed() {
    let ctx = TestContext::new();
    let auth = logged_in(&ctx);
    fake_cli(&ctx, "2.1.332", Auth::Prints(auth, 0), None);
    // A relative command names a file in the repository, as it does for a run;
    // `claude` is not on this test's PATH, so only the pipeline can make it available.
    ctx.write(
        "specbridge.yaml",
        "version: 1\nname: p\nrunner:\n  command: fake/claude\nstages:\n  - { id: c, kind: check, argv: [\"true\"] }\n",
    );
    let out = ctx
        .command()
        .args(["runner", "doctor"])
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let out = ctx.output(out);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert!(out.stdout.contains("status   available"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("from     specbridge.yaml (runner.command)"),
        "{}",
        out.stdout
    );
    assert!(logged_calls(&ctx).iter().any(|c| c == "--version"));

    // An explicit --command wins over the pipeline.
    let missing = ctx.run(&["runner", "doctor", "--command", "/nonexistent/claude"]);
    assert_eq!(missing.code, 3, "{}", missing.snapshot());
    assert!(
        missing.stdout.contains("from     --command"),
        "{}",
        missing.stdout
    );
}
