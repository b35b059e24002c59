//! Runner detection before a run: probed once, remembered in the cache folder
//! (`XDG_CACHE_HOME`, one per test context), probed again when the executable
//! changes, the entry expires, the cache is unreadable or `--refresh-runner` asks.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::common::{fake_claude_bin, read_json, TestContext};

const CACHE_FILE: &str = "specbridge/runner-detection.json";

/// A one-stage generate pipeline whose runner is a private copy of the fake, so
/// that a test can change the executable.
fn ctx_with_copy(scenario: &str) -> (TestContext, PathBuf) {
    let ctx = TestContext::with_fake_claude(scenario);
    let exe = ctx.aux_path("claude");
    std::fs::copy(fake_claude_bin(), &exe).unwrap();
    ctx.write("prompts/p.md", "Write the requirements.\n");
    ctx.write(
        "specbridge.yaml",
        &format!(
            "version: 1\nname: cache-test\nrunner:\n  command: {}\nstages:\n  - id: requirements\n    kind: generate\n    prompt: prompts/p.md\n    output: {{ schema: builtin:document }}\n",
            exe.display()
        ),
    );
    ctx.commit_all("pipeline");
    (ctx, exe)
}

/// The probes (not agent runs) the fake has answered so far.
fn probes(ctx: &TestContext) -> Vec<String> {
    ctx.fake_log()
        .into_iter()
        .filter(|i| !i.argv.iter().any(|a| a == "--print" || a == "-p"))
        .map(|i| i.argv.join(" "))
        .collect()
}

fn run_ok(ctx: &TestContext, args: &[&str]) {
    let out = ctx.run(args);
    assert_eq!(out.code, 0, "{}", out.snapshot());
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn set_mtime(path: &Path, t: SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

#[test]
fn a_second_run_spawns_no_probes_and_refresh_runner_probes_again() {
    let (ctx, _) = ctx_with_copy("success");
    run_ok(&ctx, &["run"]);
    // Version and help only: authentication is left to the run itself.
    assert_eq!(sorted(probes(&ctx)), ["--help", "--version"]);
    let cache = read_json(&ctx.cache.path().join(CACHE_FILE));
    assert_eq!(cache["entries"].as_object().unwrap().len(), 1, "{cache:#}");

    run_ok(&ctx, &["run"]);
    assert_eq!(probes(&ctx).len(), 2, "the second run probed again");
    assert_eq!(ctx.fake_agent_runs().len(), 2);
    let runs: Vec<_> = std::fs::read_dir(ctx.path(".specbridge/runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    for run in runs {
        let run_json = read_json(&run.join("run.json"));
        assert_eq!(run_json["runner"]["version"], "2.1.332", "{run_json:#}");
    }

    run_ok(&ctx, &["run", "--refresh-runner"]);
    assert_eq!(probes(&ctx).len(), 4);
}

#[test]
fn a_changed_mtime_size_or_content_invalidates_the_entry() {
    let (ctx, exe) = ctx_with_copy("success");
    let t = SystemTime::now() - Duration::from_secs(3600);
    set_mtime(&exe, t);
    run_ok(&ctx, &["run"]);
    assert_eq!(probes(&ctx).len(), 2);

    set_mtime(&exe, t + Duration::from_secs(1));
    run_ok(&ctx, &["run"]);
    assert_eq!(probes(&ctx).len(), 4, "a new mtime was not noticed");

    // Same mtime, one byte longer (an ELF ignores trailing bytes).
    let mut bytes = std::fs::read(&exe).unwrap();
    bytes.push(0);
    std::fs::write(&exe, bytes).unwrap();
    set_mtime(&exe, t + Duration::from_secs(1));
    run_ok(&ctx, &["run"]);
    assert_eq!(probes(&ctx).len(), 6, "a new size was not noticed");

    // Same size and mtime, one byte rewritten in place: only its change time
    // tells (given a clock tick to move past).
    std::thread::sleep(Duration::from_millis(20));
    let mut bytes = std::fs::read(&exe).unwrap();
    *bytes.last_mut().unwrap() = 1;
    std::fs::write(&exe, bytes).unwrap();
    set_mtime(&exe, t + Duration::from_secs(1));
    run_ok(&ctx, &["run"]);
    assert_eq!(probes(&ctx).len(), 8, "a rewrite in place was not noticed");
}

#[test]
fn an_expired_entry_is_probed_again() {
    let (ctx, _) = ctx_with_copy("success");
    run_ok(&ctx, &["run"]);
    let file = ctx.cache.path().join(CACHE_FILE);
    let mut cache = read_json(&file);
    for entry in cache["entries"].as_object_mut().unwrap().values_mut() {
        let at = entry["checkedAt"].as_u64().unwrap();
        entry["checkedAt"] = Value::from(at - 16 * 60);
    }
    std::fs::write(&file, serde_json::to_vec(&cache).unwrap()).unwrap();
    run_ok(&ctx, &["run"]);
    assert_eq!(probes(&ctx).len(), 4);
    let cache = read_json(&file);
    let entry = cache["entries"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap();
    let at = entry["checkedAt"].as_u64().unwrap();
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(now - at < 15 * 60, "the refreshed entry was not written");
}

#[test]
fn a_corrupt_cache_file_is_ignored_and_replaced() {
    let (ctx, _) = ctx_with_copy("success");
    let file = ctx.cache.path().join(CACHE_FILE);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    for garbage in [&b"{\"format\":1,\"entries\":{\"x\""[..], b"\xff\xfe", b"[]"] {
        std::fs::write(&file, garbage).unwrap();
        let before = probes(&ctx).len();
        run_ok(&ctx, &["run"]);
        assert_eq!(probes(&ctx).len(), before + 2);
        assert!(read_json(&file)["entries"].is_object());
    }
}

#[test]
fn a_refused_runner_is_not_remembered() {
    let (mut ctx, _) = ctx_with_copy("success");
    ctx.set_env("FAKE_CLAUDE_VERSION", "1.0.0");
    for _ in 0..2 {
        let out = ctx.run(&["run"]);
        assert_eq!(out.code, 3, "{}", out.snapshot());
        assert!(out.stderr.contains("is incompatible"), "{}", out.stderr);
    }
    assert_eq!(probes(&ctx).len(), 4);
    assert!(!ctx.path(".specbridge/runs").exists());
}

#[test]
fn not_logged_in_is_found_by_the_run_and_exits_3() {
    let (ctx, _) = ctx_with_copy("not-logged-in");
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 3, "{}", out.snapshot());
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(all.contains("not authenticated"), "{}", out.snapshot());
    assert!(!probes(&ctx).iter().any(|p| p.starts_with("auth")));
    let stage = read_json(&ctx.only_run_dir().join("stages/requirements/stage.json"));
    assert_eq!(stage["status"], "runner-unavailable", "{stage:#}");
}
