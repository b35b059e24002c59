//! A run whose records cannot be written: its folder deleted while it runs, or a
//! full disk. It must end `failed` with exit 2 and an error naming the folder or
//! file — never `succeeded` — with no agent left running; a full disk's run then
//! resumes to success once space is free, redoing nothing that passed, and audits
//! clean (docs/resume.md, "When the records cannot be written").

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{process_alive, read_json, TestContext};

/// Waits for `child` at most `limit`; kills it and panics if it is still running.
fn wait_for(mut child: std::process::Child, limit: Duration) -> std::process::Output {
    let until = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > until {
            child.kill().ok();
            panic!("specbridge did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_run_folder_deleted_while_an_agent_works_fails_with_exit_2() {
    let ctx = TestContext::with_claude_script(
        r#"[
            {"match": "Write the spec", "scenario": "success"},
            {"match": "Implement the feature", "scenario": "hang-before-result"},
            {"match": "Write the spec", "scenario": "success"},
            {"match": "Implement the feature", "scenario": "write-file", "write": "feature.txt=done"}
        ]"#,
    );
    ctx.write("prompts/spec.md", "Write the spec.\n");
    ctx.write("prompts/implement.md", "Implement the feature.\n");
    ctx.write_agent_pipeline(
        "  timeout: 60s\n  killGrace: 300ms\n",
        crate::common::SPEC_THEN_IMPLEMENT,
    );
    let agents_before = ctx.fake_agent_runs().len();
    let child = ctx
        .command()
        .arg("run")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    let hung = loop {
        if let Some(run) = ctx.fake_agent_runs().get(agents_before + 1).cloned() {
            break run;
        }
        assert!(Instant::now() < until, "the execute stage never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    let run = ctx.only_run_dir();
    let events = || std::fs::read_to_string(run.join("events.jsonl")).unwrap_or_default();
    while !events().contains("\"stage\":\"implement\",\"attempt\":1,\"pid\"") {
        assert!(Instant::now() < until, "no process-spawned event");
        std::thread::sleep(Duration::from_millis(20));
    }

    std::fs::remove_dir_all(&run).unwrap();
    // The agent would hang for its 60 s timeout: the run must notice on its own.
    let out = ctx.output(wait_for(child, Duration::from_secs(30)));
    assert_eq!(out.code, 2, "{}", out.snapshot());
    let id = run.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        out.stderr.contains(&format!(".specbridge/runs/{id}"))
            || out.stderr.contains(".specbridge/runs/[UUID]"),
        "the error names the folder: {}",
        out.snapshot()
    );
    assert!(
        out.stderr.contains("no longer exists"),
        "{}",
        out.snapshot()
    );
    assert!(
        out.stderr.contains("cannot be resumed"),
        "{}",
        out.snapshot()
    );
    assert!(
        !out.stderr.contains("succeeded (exit 0)"),
        "{}",
        out.snapshot()
    );
    assert!(
        !process_alive(hung.pid),
        "the agent must not outlive the run"
    );
    // Nothing made the folder again piecemeal, and the other commands still work.
    assert!(!run.exists(), "the deleted run folder was made again");
    let list = ctx.run(&["runs", "list"]);
    assert_eq!(list.code, 0, "{}", list.snapshot());
    assert!(ctx.git(&["status", "--porcelain"]).trim().is_empty());

    // The working-tree lock was released: the next run takes it and finishes.
    let next = ctx.run(&["run"]);
    assert_eq!(next.code, 0, "{}", next.snapshot());
    assert_eq!(ctx.run(&["runs", "audit", "latest"]).code, 0);
}

const PIPELINE: &str = "  - id: spec
    kind: generate
    prompt: prompts/spec.md
    output: { schema: builtin:document }
  - id: wait
    kind: check
    needs: [spec]
    argv: [sleep, '2']
  - id: implement
    kind: execute
    needs: [wait]
    prompt: prompts/implement.md
    verification:
      - { name: feature done, argv: [grep, -q, done, feature.txt] }
";

fn repo() -> TestContext {
    let mut ctx = TestContext::with_fake_claude("success");
    let script = ctx.aux_path("script.json");
    let mut steps = Vec::new();
    for _ in 0..3 {
        steps.push(r#"{"match": "Write the spec", "scenario": "success"}"#);
        steps.push(
            r#"{"match": "Implement the feature", "scenario": "write-file", "write": "feature.txt=done"}"#,
        );
    }
    std::fs::write(&script, format!("[{}]", steps.join(","))).unwrap();
    ctx.set_env("FAKE_CLAUDE_SCRIPT", &script.display().to_string());
    ctx.write("prompts/spec.md", "Write the spec.\n");
    ctx.write("prompts/implement.md", "Implement the feature.\n");
    ctx.write_agent_pipeline("  timeout: 20s\n  killGrace: 200ms\n", PIPELINE);
    ctx
}

/// The stages whose last `stage-finished` event says `succeeded`.
fn passed(run: &Path) -> Vec<String> {
    let events = std::fs::read_to_string(run.join("events.jsonl")).unwrap_or_default();
    let mut last = std::collections::BTreeMap::new();
    for ev in events
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        if ev["type"] == "stage-finished" {
            last.insert(
                ev["stage"].as_str().unwrap_or("").to_string(),
                ev["status"] == "succeeded",
            );
        }
    }
    last.into_iter()
        .filter(|(_, p)| *p)
        .map(|(s, _)| s)
        .collect()
}

/// After a failed run: the error, then a resume with space free that redoes
/// nothing that passed and audits clean. `Err` says what went wrong.
fn fails_then_resumes(ctx: &TestContext, out: &crate::common::Output) -> Result<(), String> {
    let fail = |what: &str| Err(format!("{what}: {}", out.snapshot()));
    if out.code != 2 {
        return fail("expected exit 2");
    }
    if !out.stderr.contains("No space left on device") {
        return fail("the error names the cause");
    }
    let run = ctx.only_run_dir();
    if !run.join("run.json").is_file() {
        // Failed before its first record: nothing to resume, nothing spawned.
        return match ctx.fake_agent_runs().is_empty() {
            true => Ok(()),
            false => fail("no run.json but an agent ran"),
        };
    }
    if !out.stderr.contains(".json") && !out.stderr.contains(".log") {
        return fail("the error names the file");
    }
    if !out.stderr.contains("specbridge resume") {
        return fail("the error says how to go on");
    }
    // What the error says run.json says is what it says: `failed` when it was
    // settled, `running` when it could not be, or the status the run's own settle
    // had already renamed into place when one of its last events failed.
    let status = read_json(&run.join("run.json"))["status"].clone();
    let status = status.as_str().unwrap_or("missing");
    let told = if out.stderr.contains("run.json says `failed`") {
        "failed"
    } else if out.stderr.contains("still says `running`") {
        "running"
    } else {
        ["succeeded", "failed", "cancelled"]
            .into_iter()
            .find(|s| {
                out.stderr
                    .contains(&format!("and says `{s}`, without the events"))
            })
            .unwrap_or("nothing")
    };
    if status != told {
        return fail(&format!("run.json says {status}, the error {told}"));
    }
    let before = passed(&run);
    let resumed = ctx.run(&["resume", "latest"]);
    if resumed.code != 0 {
        return Err(format!("resume: {}", resumed.snapshot()));
    }
    for id in &before {
        let stage = read_json(&run.join(format!("stages/{id}/stage.json")));
        if !crate::common::reused_by_last_resume_in(&run, id) {
            return Err(format!("`{id}` had passed and ran again: {stage:#}"));
        }
    }
    let audit = ctx.run(&["runs", "audit", "latest"]);
    if audit.code != 0 {
        return Err(format!("audit after resume: {}", audit.snapshot()));
    }
    Ok(())
}

#[test]
fn writes_failing_with_enospc_end_the_run_failed_and_it_resumes_once_space_is_free() {
    let full = repo();
    let out = full.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let events = std::fs::read_to_string(full.only_run_dir().join("events.jsonl")).unwrap();
    // An upper bound of the writes of a run: events, record files, logs.
    let total = events.lines().count() * 2;
    // Points spread over the whole run, from its first record to its settle.
    let points: Vec<usize> = (1..=total).step_by((total / 14).max(1)).collect();
    let failures = std::sync::Mutex::new(Vec::new());
    let failed_runs = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for chunk in points.chunks(points.len().div_ceil(3)) {
            let failures = &failures;
            let failed_runs = &failed_runs;
            s.spawn(move || {
                for &n in chunk {
                    let mut ctx = repo();
                    ctx.set_env("SPECBRIDGE_TEST_FAIL_WRITES_AFTER", &n.to_string());
                    let out = ctx.run(&["run"]);
                    ctx.set_env("SPECBRIDGE_TEST_FAIL_WRITES_AFTER", "");
                    if out.code == 0 {
                        continue;
                    }
                    failed_runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if let Err(e) = fails_then_resumes(&ctx, &out) {
                        failures
                            .lock()
                            .unwrap()
                            .push(format!("after write {n}: {e}"));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    let failed_runs = failed_runs.into_inner();
    assert!(
        failed_runs * 3 >= points.len(),
        "only {failed_runs} of {} points hit a write of the run",
        points.len()
    );
}

#[test]
fn a_write_failing_once_settles_run_json_as_failed() {
    // The disk is full for one write, then has room again: the run still stops
    // at that write, and its one write after it settles run.json.
    let full = repo();
    assert_eq!(full.run(&["run"]).code, 0);
    let events = std::fs::read_to_string(full.only_run_dir().join("events.jsonl")).unwrap();
    // The record-intent of `wait`'s stage.json at its start: a record file write.
    let n = events
        .lines()
        .position(|l| l.contains("\"type\":\"stage-started\"") && l.contains("\"wait\""))
        .unwrap();
    let mut settled = 0;
    for n in [n / 2, n, n + 4] {
        let mut ctx = repo();
        ctx.set_env("SPECBRIDGE_TEST_FAIL_WRITES_AFTER", &format!("{n}:1"));
        let out = ctx.run(&["run"]);
        ctx.set_env("SPECBRIDGE_TEST_FAIL_WRITES_AFTER", "");
        assert_eq!(out.code, 2, "{}", out.snapshot());
        let run = ctx.only_run_dir();
        let record = read_json(&run.join("run.json"));
        if out.stderr.contains("run.json says `failed`") {
            settled += 1;
            assert_eq!(record["status"], "failed", "{record:#}");
            assert_eq!(record["exitCode"], 2, "{record:#}");
            let log = std::fs::read_to_string(run.join("events.jsonl")).unwrap();
            let last: Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
            assert_eq!(last["type"], "run-finished", "{last:#}");
            assert_eq!(last["exitCode"], 2);
            assert!(last["error"]
                .as_str()
                .unwrap()
                .contains("No space left on device"));
        } else {
            // The failed write was an event: the log may end torn, so nothing more
            // is appended, and run.json still says `running`.
            assert!(out.stderr.contains("events.jsonl"), "{}", out.snapshot());
            assert_eq!(record["status"], "running", "{record:#}");
        }
        fails_then_resumes(&ctx, &out).unwrap_or_else(|e| panic!("after write {n}: {e}"));
    }
    assert!(settled > 0, "no failure point settled run.json");
}

/// A small tmpfs mounted over a folder, unmounted when dropped.
struct Mount(PathBuf);

impl Mount {
    fn tmpfs(at: &Path, size: &str) -> Option<Mount> {
        std::fs::create_dir_all(at).ok()?;
        let ok = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(at)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Mount(at.to_path_buf()))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Fills the file system of `dir` with `name` until a write fails.
fn fill(dir: &Path, name: &str) {
    use std::io::Write;
    let mut f = std::fs::File::create(dir.join(name)).unwrap();
    let block = vec![0u8; 4096];
    while f.write_all(&block).and_then(|_| f.sync_data()).is_ok() {}
}

#[test]
fn a_full_disk_ends_the_run_failed_and_it_resumes_once_space_is_free() {
    let ctx = repo();
    // `.specbridge/` alone on a small file system, which the test fills while the
    // run waits in its check stage.
    let Some(_mount) = Mount::tmpfs(&ctx.path(".specbridge"), "8m") else {
        eprintln!(
            "cannot mount a tmpfs here (not root?): the full disk is covered by the injected \
             failures of writes_failing_with_enospc_end_the_run_failed_and_it_resumes_once_space_is_free"
        );
        return;
    };
    let child = ctx
        .command()
        .arg("run")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    let run = loop {
        let found = std::fs::read_dir(ctx.path(".specbridge/runs"))
            .ok()
            .and_then(|mut d| d.next())
            .and_then(std::result::Result::ok)
            .map(|e| e.path());
        if let Some(run) = found.filter(|r| {
            std::fs::read_to_string(r.join("events.jsonl")).is_ok_and(|e| {
                e.lines()
                    .any(|l| l.contains("\"type\":\"stage-started\"") && l.contains("\"wait\""))
            })
        }) {
            break run;
        }
        assert!(Instant::now() < until, "the check stage never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    fill(&ctx.path(".specbridge"), "filler");
    let out = ctx.output(wait_for(child, Duration::from_secs(60)));
    assert_eq!(out.code, 2, "{}", out.snapshot());
    assert!(
        out.stderr.contains("No space left on device"),
        "{}",
        out.snapshot()
    );
    assert_eq!(passed(&run), ["spec"]);
    std::fs::remove_file(ctx.path(".specbridge/filler")).unwrap();
    fails_then_resumes(&ctx, &out).unwrap();
    let agents = ctx.fake_agent_runs();
    assert_eq!(agents.len(), 2, "spec ran once, implement once");
}

/// Every write of a small run fails in turn, the settle's included: the error
/// always says what `run.json` really says — also when the failed write was one
/// of the run's last events, after the settle had renamed `run.json` into place
/// (which an error saying "still says `running`" once claimed) — and every one
/// resumes to success, redoing nothing that passed, and audits clean.
#[test]
fn a_failure_at_any_write_of_a_run_says_what_run_json_says_and_resumes() {
    let repo = || {
        // No agent runs; the fake is there for the check that none did.
        let ctx = TestContext::with_fake_claude("success");
        ctx.write(
            "specbridge.yaml",
            "version: 1\nname: sweep\nstages:\n  - { id: a, kind: check, sandbox: off, argv: [echo, a] }\n  - { id: b, kind: check, needs: [a], sandbox: off, argv: [echo, b] }\n",
        );
        ctx
    };
    let mut told_finished = 0;
    let mut n = 0;
    loop {
        n += 1;
        let mut ctx = repo();
        ctx.set_env("SPECBRIDGE_TEST_FAIL_WRITES_AFTER", &n.to_string());
        let out = ctx.run(&["run"]);
        ctx.set_env("SPECBRIDGE_TEST_FAIL_WRITES_AFTER", "");
        if out.code == 0 {
            break;
        }
        assert!(n < 500, "a run of two stages made over 500 writes");
        if out
            .stderr
            .contains("and says `succeeded`, without the events")
        {
            told_finished += 1;
        }
        fails_then_resumes(&ctx, &out).unwrap_or_else(|e| panic!("after write {n}: {e}"));
    }
    assert!(n > 10, "the run made {n} writes");
    assert!(
        told_finished > 0,
        "no write between the settle's rename of run.json and its last event failed"
    );
}
