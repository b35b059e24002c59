//! Detection before a run on the real CLI (docs/claude-code-runner.md, "Known
//! versions"): the built-in capabilities of the pinned version are what its
//! `--help` lists, and a run in a fresh `HOME` uses them without starting the CLI
//! to ask; anything else is probed, then remembered.

use std::os::unix::fs::PermissionsExt;

use serde_json::{json, Value};
use specbridge_engine::runner::claude_code::known;
use specbridge_testkit::model_server::{Reply, Script};

use super::harness::{read_json, Sandbox, CLAUDE_VERSION};

const STAGE: &str = "stages:
  - id: notes
    kind: generate
    prompt: prompts/notes.md
    output: { schema: builtin:document, document: notes.md }
";

fn sandbox() -> Option<Sandbox> {
    let sandbox = Sandbox::new(|_| {
        Script::new([
            Reply::structured_output(json!({"summary": "s", "markdown": "# Notes\n"})).forever(),
        ])
    })?;
    sandbox
        .ctx
        .write("prompts/notes.md", "Write short notes.\n");
    Some(sandbox)
}

/// Runs the pipeline and returns how run.json says the runner was detected.
fn detected_by(sandbox: &Sandbox, args: &[&str]) -> Value {
    let _ = std::fs::remove_file(sandbox.ctx.path("notes.md"));
    let out = sandbox.run(args);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    // Run ids are UUID v7: the newest sorts last.
    let latest = std::fs::read_dir(sandbox.ctx.path(".specbridge/runs"))
        .expect("runs folder")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_dir())
        .max()
        .expect("a run folder");
    let run = read_json(&latest.join("run.json"));
    assert_eq!(run["runner"]["version"], CLAUDE_VERSION, "{run:#}");
    run["runner"]["detectedBy"].clone()
}

fn cache_file(sandbox: &Sandbox) -> std::path::PathBuf {
    sandbox
        .home
        .path()
        .join(".cache/specbridge/runner-detection.json")
}

#[test]
fn the_built_in_capabilities_are_what_the_installed_cli_lists() {
    let Some(sandbox) = Sandbox::new(|_| Script::new([])) else {
        return;
    };
    let exe = std::fs::canonicalize(&sandbox.claude).expect("canonical CLI path");
    assert_eq!(
        known::installed_version(&exe).as_deref(),
        Some(CLAUDE_VERSION),
        "the package next to {} names another version",
        exe.display()
    );
    assert!(known::KNOWN.contains(&CLAUDE_VERSION));
    // The doctor never uses the built-in table: it asks `--version` and `--help`.
    let claude = sandbox.claude.display().to_string();
    let out = sandbox.run(&["runner", "doctor", "--command", &claude, "--json"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let report: Value = serde_json::from_str(&out.stdout).expect("doctor JSON");
    assert_eq!(report["version"], CLAUDE_VERSION, "{report:#}");
    let built_in = known::capabilities(CLAUDE_VERSION).expect("built in");
    assert_eq!(
        report["capabilities"],
        serde_json::to_value(&built_in).unwrap(),
        "the built-in capabilities of {CLAUDE_VERSION} drifted from its --help"
    );
}

#[test]
fn a_fresh_home_detects_the_pinned_version_without_asking_it() {
    let Some(sandbox) = sandbox() else {
        return;
    };
    sandbox.write_pipeline("", STAGE);
    assert_eq!(detected_by(&sandbox, &["run"]), "built-in");
    // Nothing was probed, so nothing was remembered.
    assert!(!cache_file(&sandbox).exists());
    // `--refresh-runner` asks the CLI whatever its version.
    assert_eq!(detected_by(&sandbox, &["run", "--refresh-runner"]), "probe");
    assert!(cache_file(&sandbox).exists());
}

#[test]
fn a_wrapper_script_is_probed_then_remembered() {
    let Some(sandbox) = sandbox() else {
        return;
    };
    // Not the package's executable: its version cannot be read without asking.
    let wrapper = sandbox.home.path().join("claude-wrapper");
    std::fs::write(
        &wrapper,
        format!("#!/bin/sh\nexec '{}' \"$@\"\n", sandbox.claude.display()),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let pipeline = format!(
        "version: 1\nname: real-cli\nrunner:\n  command: {}\n{STAGE}",
        wrapper.display()
    );
    sandbox.ctx.write("specbridge.yaml", &pipeline);
    sandbox.ctx.write("README.md", "# Test repository\n");
    sandbox.ctx.commit_all("pipeline");
    assert_eq!(detected_by(&sandbox, &["run"]), "probe");
    assert_eq!(detected_by(&sandbox, &["run"]), "cache");
}
