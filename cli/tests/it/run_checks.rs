//! `specbridge run` on check-only pipelines: scheduling, records, crash safety.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use specbridge_engine::store::verify_chain;

use crate::common::{
    graph_statuses, live_processes_with_arg, read_json, workspace_root, TestContext,
};

/// A diamond (a → b, c → d), a failing branch (c fails its gate, so d is blocked) and an
/// independent stage (e) that must still run.
const DIAMOND: &str = r#"
version: 1
name: diamond
concurrency: 2
stages:
  - { id: a, kind: check, argv: [echo, a] }
  - { id: b, kind: check, needs: [a], argv: [echo, b] }
  - { id: c, kind: check, needs: [a], argv: [sh, -c, "echo failing >&2; exit 3"] }
  - { id: d, kind: check, needs: [b, c], argv: [echo, d] }
  - { id: e, kind: check, argv: [echo, e] }
"#;

fn schema(name: &str) -> jsonschema::Validator {
    let s = read_json(&workspace_root().join("schemas").join(name));
    jsonschema::validator_for(&s).unwrap()
}

fn assert_valid(validator: &jsonschema::Validator, path: &Path) {
    let v = read_json(path);
    let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
    assert!(
        errors.is_empty(),
        "{} breaks its schema: {errors:?}",
        path.display()
    );
}

#[test]
fn diamond_with_a_failing_branch_records_every_file() {
    let ctx = TestContext::new();
    ctx.write("specbridge.yaml", DIAMOND);
    let out = ctx.run(&["run"]);
    assert_eq!(
        out.code,
        1,
        "a failed check is a gate failure: {}",
        out.snapshot()
    );

    let run = ctx.only_run_dir();
    let status =
        |id: &str| read_json(&run.join(format!("stages/{id}/stage.json")))["status"].clone();
    assert_eq!(status("a"), "succeeded");
    assert_eq!(status("b"), "succeeded");
    assert_eq!(status("c"), "check-failed");
    assert_eq!(status("d"), "blocked");
    assert_eq!(status("e"), "succeeded");
    let c = read_json(&run.join("stages/c/stage.json"));
    assert_eq!(c["outcome"], "exit code 3");
    let d = read_json(&run.join("stages/d/stage.json"));
    assert!(
        d["outcome"]
            .as_str()
            .unwrap()
            .contains("blocked by `c` (check-failed: exit code 3)"),
        "{d}"
    );
    assert!(
        !run.join("stages/d/attempt-001").exists(),
        "a blocked stage spawns nothing"
    );

    // Every file of the run directory that applies, against its schema.
    assert_eq!(
        std::fs::read(run.join("pipeline.yaml")).unwrap(),
        DIAMOND.as_bytes()
    );
    assert_valid(&schema("run.schema.json"), &run.join("run.json"));
    assert_valid(&schema("plan.schema.json"), &run.join("plan.json"));
    let stage_schema = schema("stage.schema.json");
    let process_schema = schema("process.schema.json");
    for id in ["a", "b", "c", "d", "e"] {
        assert_valid(&stage_schema, &run.join(format!("stages/{id}/stage.json")));
    }
    for id in ["a", "b", "c", "e"] {
        let attempt = run.join(format!("stages/{id}/attempt-001"));
        assert_valid(&process_schema, &attempt.join("process.json"));
        assert!(attempt.join("raw-stdout.log").is_file());
        assert!(attempt.join("raw-stderr.log").is_file());
    }
    assert_eq!(
        std::fs::read_to_string(run.join("stages/c/attempt-001/raw-stderr.log")).unwrap(),
        "failing\n"
    );
    let run_json = read_json(&run.join("run.json"));
    assert_eq!(run_json["status"], "failed");
    assert_eq!(run_json["exitCode"], 1);
    assert_eq!(run_json["stageCounts"]["succeeded"], 3);

    // The event chain verifies and every line fits the event schema.
    let events = run.join("events.jsonl");
    let check = verify_chain(&events).unwrap();
    assert!(
        check.is_intact() && check.torn_tail.is_none(),
        "{:?}",
        check.problems
    );
    let event_schema = schema("event.schema.json");
    for line in std::fs::read_to_string(&events).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        assert!(event_schema.is_valid(&v), "{line}");
    }
    // The announced sha256 of run.json is its content's.
    let text = std::fs::read_to_string(&events).unwrap();
    let last_run_json = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .rfind(|e| e["type"] == "record-written" && e["path"] == "run.json")
        .unwrap();
    assert_eq!(
        last_run_json["sha256"],
        specbridge_engine::store::sha256_file(&run.join("run.json")).unwrap()
    );
}

#[test]
fn fail_fast_starts_nothing_after_the_first_failure() {
    let ctx = TestContext::new();
    ctx.write(
        "specbridge.yaml",
        r#"
version: 1
name: ff
concurrency: 1
stages:
  - { id: a, kind: check, argv: ["false"] }
  - { id: b, kind: check, argv: [echo, b] }
"#,
    );
    let out = ctx.run(&["run", "--fail-fast"]);
    assert_eq!(out.code, 1);
    let run = ctx.only_run_dir();
    assert_eq!(
        read_json(&run.join("stages/b/stage.json"))["status"],
        "skipped"
    );
    assert!(!run.join("stages/b/attempt-001").exists());
}

#[test]
fn only_runs_the_named_stages_and_what_they_need() {
    let ctx = TestContext::new();
    ctx.write("specbridge.yaml", DIAMOND);
    let out = ctx.run(&["run", "--only", "b", "--json"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let summary: Value =
        serde_json::from_str(&out.stdout).expect("--json prints one JSON document");
    let ids: Vec<&str> = summary["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a", "b"]);
    let out = ctx.run(&["run", "--only", "bb"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("--only bb: no stage has this id (did you mean `b`?)"),
        "{}",
        out.stderr
    );
}

#[test]
fn dry_run_prints_every_argv_and_spawns_nothing() {
    let ctx = TestContext::new();
    ctx.write("specbridge.yaml", DIAMOND);
    let out = ctx.run(&["run", "--dry-run"]);
    assert_eq!(out.code, 0);
    insta::assert_snapshot!(out.stdout, @r#"
    dry run: nothing will be spawned
    a [check]
        $ echo a
    b [check] (needs a)
        $ echo b
    c [check] (needs a)
        $ sh -c 'echo failing >&2; exit 3'
    d [check] (needs b, c)
        $ echo d
    e [check]
        $ echo e
    "#);
    assert!(
        !ctx.path(".specbridge").exists(),
        "a dry run records nothing"
    );
}

#[test]
fn a_timed_out_check_is_stopped_and_exits_5() {
    let ctx = TestContext::new();
    ctx.write(
        "specbridge.yaml",
        r#"
version: 1
name: slow
runner: { killGrace: 200ms }
stages:
  - { id: slow, kind: check, argv: [sleep, "30"], timeout: 300ms }
"#,
    );
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 5, "{}", out.snapshot());
    let run = ctx.only_run_dir();
    let p = read_json(&run.join("stages/slow/attempt-001/process.json"));
    assert_eq!(p["timedOut"], true);
    assert_eq!(
        read_json(&run.join("stages/slow/stage.json"))["status"],
        "timed-out"
    );
}

#[test]
fn a_check_past_its_output_limit_is_stopped_and_says_which_limit() {
    let ctx = TestContext::new();
    ctx.write(
        "specbridge.yaml",
        r#"
version: 1
name: loud
runner: { maxStdoutBytes: 4KiB }
stages:
  - { id: loud, kind: check, argv: ["yes"] }
"#,
    );
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 4, "{}", out.snapshot());
    let run = ctx.only_run_dir();
    let attempt = run.join("stages/loud/attempt-001");
    assert_eq!(
        read_json(&attempt.join("process.json"))["limitExceeded"],
        "stdout"
    );
    assert_eq!(
        std::fs::metadata(attempt.join("raw-stdout.log"))
            .unwrap()
            .len(),
        4096
    );
    let stage = read_json(&run.join("stages/loud/stage.json"));
    assert_eq!(stage["status"], "failed");
    let reason = "stopped: stdout passed its limit (maxStdoutBytes: 4KiB)";
    assert_eq!(stage["outcome"], reason, "{stage:#}");
    assert!(out.stderr.contains(reason), "{}", out.snapshot());
}

#[test]
fn runs_list_and_show_describe_the_run() {
    let ctx = TestContext::new();
    ctx.write("specbridge.yaml", DIAMOND);
    ctx.run(&["run"]);
    let list = ctx.run(&["runs", "list", "--json"]);
    assert_eq!(list.code, 0);
    let v: Value = serde_json::from_str(&list.stdout).unwrap();
    assert_eq!(v[0]["pipeline"], "diamond");
    assert_eq!(v[0]["status"], "failed");
    assert_eq!(v[0]["stagesSucceeded"], 3);
    assert_eq!(v[0]["stagesTotal"], 5);

    let show = ctx.run(&["runs", "show", "latest"]);
    assert_eq!(show.code, 0);
    assert!(
        show.stdout.contains("c      check-failed"),
        "{}",
        show.stdout
    );
    // Plan order: a stage after everything it needs.
    let rows: Vec<&str> = show
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| ["a", "b", "c", "d", "e"].contains(w))
        .collect();
    let at = |id: &str| rows.iter().position(|r| *r == id).unwrap();
    assert!(
        at("a") < at("b") && at("b") < at("d") && at("c") < at("d"),
        "{rows:?}"
    );
    assert!(
        show.stdout
            .contains("blocked by `c` (check-failed: exit code 3)"),
        "{}",
        show.stdout
    );

    let missing = ctx.run(&["runs", "show", "ffff"]);
    assert_eq!(missing.code, 2);
    assert!(
        missing.stderr.contains("no run matches `ffff`"),
        "{}",
        missing.stderr
    );
}

/// SIGKILL specbridge in the middle of a run: every JSON record still parses, the
/// event log has no torn line that cannot be told apart, and a new process can
/// take the run's lock.
#[test]
fn a_killed_run_leaves_parseable_records_and_a_free_lock() {
    let ctx = TestContext::new();
    let mut stages = String::new();
    for i in 0..40 {
        stages.push_str(&format!(
            "  - {{ id: s{i:02}, kind: check, argv: [sh, -c, \"sleep 0.05; echo {i}\"] }}\n"
        ));
    }
    ctx.write(
        "specbridge.yaml",
        &format!("version: 1\nname: long\nconcurrency: 2\nstages:\n{stages}"),
    );
    let mut child = ctx.command().arg("run").spawn().unwrap();
    let runs = ctx.path(".specbridge/runs");
    let deadline = Instant::now() + Duration::from_secs(30);
    // Wait until some stages have finished, then kill without warning.
    loop {
        let done = std::fs::read_dir(&runs)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(std::result::Result::ok)
            .map(|e| e.path().join("stages/s03/stage.json"))
            .filter(|p| p.exists())
            .is_some();
        if done || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();

    let run = ctx.only_run_dir();
    let mut json_files = 0;
    for entry in walk(&run) {
        if entry.extension().is_some_and(|e| e == "json") {
            read_json(&entry);
            json_files += 1;
        }
        let name = entry.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            !name.starts_with(".tmp-") || !name.ends_with(".json"),
            "temporary file left as a record: {name}"
        );
    }
    assert!(json_files > 3);
    let check = verify_chain(&run.join("events.jsonl")).unwrap();
    assert!(check.is_intact(), "{:?}", check.problems);
    let id = run.file_name().unwrap().to_str().unwrap();
    // The kernel drops the lock when the last process holding the file open is gone.
    // A child caught between fork and exec when specbridge died holds it for that
    // moment (on a loaded machine, a few milliseconds), so allow it a few seconds.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match specbridge_engine::store::RunLock::acquire(&run, id) {
            Ok(_) => break,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("the lock is still held after the crash: {e}"),
        }
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Ctrl-C: the running command is stopped, every record is written, and the run
/// ends `cancelled` with exit 5; stages not started are `cancelled` too.
#[test]
fn ctrl_c_cancels_gracefully_and_records_everything() {
    let ctx = TestContext::new();
    ctx.write(
        "specbridge.yaml",
        r#"
version: 1
name: cancel-me
concurrency: 1
runner: { killGrace: 500ms }
stages:
  - { id: long, kind: check, argv: [sh, -c, "echo started > pid; exec sleep 30.4217"] }
  - { id: after, kind: check, needs: [long], argv: [echo, never] }
"#,
    );
    let mut child = ctx.command().arg("run").spawn().unwrap();
    let pid_file = ctx.path("pid");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !pid_file.exists()
        || std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .is_empty()
    {
        assert!(Instant::now() < deadline, "the check never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: sending a signal to a child we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(5));

    let run = ctx.only_run_dir();
    assert_eq!(read_json(&run.join("run.json"))["status"], "cancelled");
    assert_eq!(
        read_json(&run.join("stages/long/stage.json"))["status"],
        "cancelled"
    );
    assert_eq!(
        read_json(&run.join("stages/after/stage.json"))["status"],
        "cancelled"
    );
    assert_eq!(
        read_json(&run.join("stages/long/attempt-001/process.json"))["cancelled"],
        true
    );
    // Found by its argv: inside the sandbox's PID namespace `$$` is not a host pid.
    assert_eq!(
        live_processes_with_arg("30.4217"),
        Vec::<u32>::new(),
        "the cancelled command must not outlive the run"
    );
    assert!(verify_chain(&run.join("events.jsonl")).unwrap().is_intact());
}

#[test]
fn graph_of_a_run_shows_each_node_status() {
    let ctx = TestContext::new();
    ctx.write("specbridge.yaml", DIAMOND);
    ctx.run(&["run"]);
    let out = ctx.run(&["graph", "--run", "latest", "--format", "json"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let status = graph_statuses(&out.stdout);
    let get = |id: &str| status.iter().find(|(i, _)| i == id).unwrap().1.clone();
    assert_eq!(get("c"), "check-failed");
    assert_eq!(get("d"), "blocked");
    let mermaid = ctx.run(&["graph", "--run", "latest"]);
    assert!(
        mermaid.stdout.contains("d<br/>check · blocked"),
        "{}",
        mermaid.stdout
    );
    // Each outcome is drawn its own way: a gate failure is never styled as a pass.
    for line in [
        "class s_a passed",
        "class s_c gateFailed",
        "class s_d blocked",
        "classDef gateFailed",
    ] {
        assert!(mermaid.stdout.contains(line), "{line}: {}", mermaid.stdout);
    }
    assert!(
        !mermaid.stdout.contains("class s_c passed"),
        "{}",
        mermaid.stdout
    );
    let dot = ctx.run(&["graph", "--run", "latest", "--format", "dot"]);
    let c_line = dot
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("\"c\" ["))
        .unwrap_or_else(|| panic!("{}", dot.stdout));
    assert!(c_line.contains("fillcolor=\"#fff3cd\""), "{c_line}");
}

#[test]
fn a_recorded_run_audits_clean_and_tampering_is_found() {
    let ctx = TestContext::new();
    ctx.write("specbridge.yaml", DIAMOND);
    ctx.run(&["run"]);
    let clean = ctx.run(&["runs", "audit", "latest"]);
    assert_eq!(clean.code, 0, "{}", clean.snapshot());
    assert!(clean.stdout.contains(": clean ("), "{}", clean.stdout);

    let run = ctx.only_run_dir();
    let stage = run.join("stages/b/stage.json");
    let text = std::fs::read_to_string(&stage).unwrap();
    std::fs::write(&stage, text.replace("succeeded", "failed\u{20}\u{20}")).unwrap();
    let out = ctx.run(&["runs", "audit", "latest", "--json"]);
    assert_eq!(out.code, 1);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let codes: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"file-hash-mismatch"), "{codes:?}");
    let all = ctx.run(&["runs", "audit", "--all"]);
    assert_eq!(all.code, 1);
}

/// A failed gate blocks its dependents, and each blocked stage blocks its own in
/// turn: every stage down the chain ends `blocked`, naming the stage before it
/// (not `skipped` as never ready) and the failure that blocked the chain, once:
/// a reason does not grow with the chain above it.
#[test]
fn a_failed_stage_blocks_every_stage_down_its_chain() {
    let ctx = TestContext::new();
    ctx.write(
        "specbridge.yaml",
        r#"
version: 1
name: chain
stages:
  - { id: a, kind: check, argv: [sh, -c, "exit 3"] }
  - { id: b, kind: check, needs: [a], argv: [echo, b] }
  - { id: c, kind: check, needs: [b], argv: [echo, c] }
  - { id: d, kind: check, needs: [c], argv: [echo, d] }
"#,
    );
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 1, "{}", out.snapshot());
    let run = ctx.only_run_dir();
    let outcomes: Vec<String> = ["b", "c", "d"]
        .iter()
        .map(|id| {
            let stage = read_json(&run.join(format!("stages/{id}/stage.json")));
            assert_eq!(stage["status"], "blocked", "{id}: {stage:#}");
            stage["outcome"].as_str().unwrap_or_default().to_string()
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            "blocked by `a` (check-failed: exit code 3)",
            "blocked by `b`, itself blocked by `a` (check-failed: exit code 3)",
            "blocked by `c`, itself blocked by `a` (check-failed: exit code 3)",
        ]
    );
    assert!(
        out.stderr
            .contains("blocked    d (-): blocked by `c`, itself blocked by `a`"),
        "{}",
        out.snapshot()
    );
    assert_eq!(ctx.run(&["runs", "audit", "latest"]).code, 0);
}

/// `-C .` and `-C ..` name the repository as well as an absolute path does: the
/// run records the absolute root, and a confined command starts in the
/// repository (inside the sandbox a relative path would name its `/`).
#[test]
fn a_relative_repository_path_runs_confined_commands_in_the_repository() {
    let ctx = TestContext::new();
    ctx.write(
        "specbridge.yaml",
        r#"
version: 1
name: relative
stages:
  - { id: write, kind: check, argv: [sh, -c, "pwd > where.txt"] }
"#,
    );
    std::fs::create_dir_all(ctx.path("sub")).unwrap();
    let root = std::fs::canonicalize(ctx.root()).unwrap();
    for (cwd, dir) in [(ctx.root().to_path_buf(), "."), (ctx.path("sub"), "..")] {
        let _ = std::fs::remove_file(ctx.path("where.txt"));
        let out = ctx
            .command()
            .current_dir(&cwd)
            .args(["-C", dir, "run"])
            .output()
            .unwrap();
        let out = ctx.output(out);
        assert_eq!(out.code, 0, "-C {dir}: {}", out.snapshot());
        assert_eq!(ctx.read("where.txt").trim(), root.display().to_string());
        let run = read_json(
            &ctx.path(".specbridge/runs")
                .join(
                    specbridge_engine::store::RunStore::new(ctx.root())
                        .select("latest")
                        .unwrap()
                        .0,
                )
                .join("run.json"),
        );
        assert_eq!(run["root"], root.display().to_string(), "-C {dir}");
    }
}
