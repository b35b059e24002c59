//! Execute stages end to end against the fake Claude Code CLI on temporary git
//! repositories: one test per evidence path (docs/evidence.md).

use std::path::PathBuf;

use serde_json::Value;

use crate::common::{assert_matches_schema, copy_tree, read_json, TestContext};

/// Short limits so a hang ends quickly.
const QUICK_RUNNER: &str = "  timeout: 20s
  killGrace: 300ms
";

/// One execute stage whose verification passes once `feature.txt` says `done`.
const EXECUTE_STAGE: &str = "  - id: implement
    kind: execute
    prompt: prompts/implement.md
    verification:
      - { name: feature done, argv: [grep, -q, done, feature.txt] }
";

/// A committed repository with one execute stage; the fake plays `scenario` and
/// writes `write` (`path=content`) when the scenario writes.
fn execute_ctx(scenario: &str, write: Option<&str>) -> TestContext {
    let mut ctx = TestContext::with_fake_claude(scenario);
    if let Some(w) = write {
        ctx.set_env("FAKE_CLAUDE_WRITE", w);
    }
    ctx.write("prompts/implement.md", "Implement the feature.\n");
    ctx.write_agent_pipeline(QUICK_RUNNER, EXECUTE_STAGE);
    ctx
}

fn attempt(ctx: &TestContext, stage: &str) -> PathBuf {
    ctx.only_run_dir()
        .join(format!("stages/{stage}/attempt-001"))
}

/// Runs, checks the exit code, the stage status and the evidence status, and
/// returns `evidence.json`.
fn run_expect(ctx: &TestContext, args: &[&str], exit: i32, status: &str, evidence: &str) -> Value {
    let out = ctx.run(args);
    assert_eq!(out.code, exit, "{}", out.snapshot());
    let stage = read_json(&ctx.only_run_dir().join("stages/implement/stage.json"));
    assert_eq!(stage["status"], status, "{stage:#}\n{}", out.snapshot());
    assert_eq!(stage["evidenceStatus"], evidence, "{stage:#}");
    let dir = attempt(ctx, "implement");
    for name in [
        "git-before.json",
        "git-after.json",
        "changed-files.json",
        "diff.patch",
        "evidence.json",
    ] {
        assert!(dir.join(name).is_file(), "{name} is missing");
    }
    assert_matches_schema(&dir.join("git-before.json"), "git-snapshot.schema.json");
    assert_matches_schema(&dir.join("git-after.json"), "git-snapshot.schema.json");
    assert_matches_schema(&dir.join("changed-files.json"), "changed-files.schema.json");
    assert_matches_schema(&dir.join("evidence.json"), "evidence.schema.json");
    let ev = read_json(&dir.join("evidence.json"));
    assert_eq!(ev["kind"], "execute");
    assert_eq!(ev["status"], evidence, "{ev:#}");
    ev
}

fn violation_kinds(ev: &Value) -> Vec<String> {
    ev["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["kind"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_change_that_passes_verification_is_verified() {
    let ctx = execute_ctx("write-file", Some("feature.txt=done"));
    let ev = run_expect(&ctx, &["run"], 0, "succeeded", "verified");
    let dir = attempt(&ctx, "implement");
    let changed = read_json(&dir.join("changed-files.json"));
    assert_eq!(changed["added"], serde_json::json!(["feature.txt"]));
    let patch = std::fs::read_to_string(dir.join("diff.patch")).unwrap();
    assert!(
        patch.contains("b/feature.txt") && patch.contains("+done"),
        "{patch}"
    );
    assert_matches_schema(&dir.join("verification.json"), "verification.schema.json");
    let verification = read_json(&dir.join("verification.json"));
    assert_eq!(verification["commands"][0]["passed"], true);
    assert!(dir.join("verification-feature-done.stdout.log").is_file());
    // The model's report is kept apart, and never counts.
    assert_eq!(ev["claims"]["countsTowardStatus"], false);
    assert!(ev["claims"]["report"]["status"].is_string(), "{ev:#}");
    assert_matches_schema(
        &ctx.only_run_dir().join("stages/implement/output.json"),
        "task-result.schema.json",
    );
    let request = read_json(&dir.join("request.json"));
    assert_eq!(request["operation"], "execute", "{request:#}");
    let audit = ctx.run(&["runs", "audit", "latest"]);
    assert_eq!(audit.code, 0, "{}", audit.snapshot());
}

#[test]
fn an_attempt_that_changes_nothing_is_no_change() {
    let ctx = execute_ctx("success", None);
    let ev = run_expect(&ctx, &["run"], 1, "no-change", "no-change");
    assert!(
        !attempt(&ctx, "implement")
            .join("verification.json")
            .exists(),
        "nothing to verify"
    );
    let reasons = ev["reasons"].to_string();
    assert!(reasons.contains("changed no file"), "{reasons}");
}

#[test]
fn a_failing_verification_command_leaves_it_implemented_unverified() {
    let ctx = execute_ctx("write-file", Some("feature.txt=half-way"));
    let out_ev = run_expect(&ctx, &["run"], 1, "unverified", "implemented-unverified");
    let verification = read_json(&attempt(&ctx, "implement").join("verification.json"));
    assert_eq!(verification["commands"][0]["passed"], false);
    assert_eq!(verification["commands"][0]["exitCode"], 1);
    assert!(
        out_ev["reasons"]
            .to_string()
            .contains("required verification feature done failed"),
        "{out_ev:#}"
    );
    let summary = ctx.run(&["runs", "show", "latest"]);
    assert!(
        summary.stdout.contains("implemented-unverified"),
        "{}",
        summary.stdout
    );
}

#[test]
fn an_agent_commit_moves_head_and_is_a_safety_violation() {
    let ctx = execute_ctx("git-commit", Some("feature.txt=done"));
    let head = ctx.git(&["rev-parse", "HEAD"]);
    // The commit leaves the tree clean: what counts is the moved HEAD, and the
    // unlisted Bash command in the stream, which fails the attempt.
    let ev = run_expect(&ctx, &["run"], 6, "safety-violation", "failed");
    assert_ne!(ev["headBefore"], ev["headAfter"]);
    assert_eq!(ev["headBefore"], head.trim());
    assert!(
        violation_kinds(&ev).contains(&"head-moved".to_string()),
        "{ev:#}"
    );
    assert!(!attempt(&ctx, "implement")
        .join("verification.json")
        .exists());
}

#[test]
fn touching_a_protected_path_is_a_safety_violation() {
    // The pipeline file, a configured protected path, and the run store.
    for (target, rule) in [
        ("specbridge.yaml", "specbridge.yaml"),
        ("db/migrations/001.sql", "db/migrations"),
        (".specbridge/notes.txt", ".specbridge"),
    ] {
        let mut ctx = TestContext::with_fake_claude("touch-protected");
        ctx.set_env("FAKE_CLAUDE_PROTECTED", target);
        ctx.write("prompts/implement.md", "Implement the feature.\n");
        ctx.write("db/migrations/001.sql", "create table t (id int);\n");
        ctx.write_agent_pipeline(
            &format!("{QUICK_RUNNER}protectedPaths: [db/migrations]\n"),
            EXECUTE_STAGE,
        );
        let out = ctx.run(&["run"]);
        assert_eq!(out.code, 6, "{target}: {}", out.snapshot());
        // Refused up front too: the CLI was told to deny edits of the path, the
        // pipeline file included, though it is the run's first stage (nothing of
        // the run is on disk when its argv is assembled).
        let request = read_json(&attempt(&ctx, "implement").join("request.json"));
        let denied = request["toolPolicy"]["disallowedTools"].to_string();
        assert!(
            denied.contains(&format!("\"Edit(./{rule})\"")),
            "{rule}: {denied}"
        );
        let ev = read_json(&attempt(&ctx, "implement").join("evidence.json"));
        let hit = ev["violations"].as_array().unwrap().iter().any(|v| {
            v["kind"] == "protected-path-changed" && v["path"] == target && v["rule"] == rule
        });
        assert!(hit, "{target}: {ev:#}");
    }
}

#[test]
fn a_dirty_tree_is_refused_before_anything_is_spawned() {
    let ctx = execute_ctx("write-file", Some("feature.txt=done"));
    ctx.write("scratch.txt", "uncommitted\n");
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 2, "{}", out.snapshot());
    insta::assert_snapshot!("dirty_tree", out.snapshot());
    assert!(
        ctx.fake_log().is_empty(),
        "the runner was probed or spawned"
    );
    assert!(
        !ctx.path(".specbridge/runs").exists(),
        "a run folder was created"
    );
}

/// A change the run did not make, made while it goes on (here by a check
/// stage before it), is refused at the execute stage: the agent is never
/// given its prompt, even with the snapshot slow to come, and nothing of the
/// tree is taken for its change.
#[test]
fn a_tree_made_dirty_during_the_run_is_refused_before_the_agent_has_its_prompt() {
    let mut ctx = TestContext::with_fake_claude("write-file");
    ctx.set_env("FAKE_CLAUDE_WRITE", "feature.txt=done");
    ctx.write("prompts/implement.md", "Implement the feature.\n");
    ctx.write_agent_pipeline(
        QUICK_RUNNER,
        &format!(
            "  - {{ id: stray, kind: check, argv: [sh, -c, 'echo stray > stray.txt'], sandbox: off }}\n{EXECUTE_STAGE}    needs: [stray]\n"
        ),
    );
    ctx.slow_git_status("0.4", None);
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 4, "a stage failed: {}", out.snapshot());
    let stage = read_json(&ctx.only_run_dir().join("stages/implement/stage.json"));
    assert_eq!(stage["status"], "failed", "{stage:#}");
    let reason = stage["outcome"].as_str().unwrap_or_default();
    assert!(
        reason.contains("uncommitted change(s) (stray.txt)") && reason.contains("--allow-dirty"),
        "{stage:#}"
    );
    for run in ctx.fake_agent_runs() {
        assert!(
            run.stdin.is_empty() && run.scenario.is_none(),
            "the agent was given its prompt: {run:?}"
        );
    }
    assert!(!ctx.path("feature.txt").exists(), "the agent acted");
    let dir = attempt(&ctx, "implement");
    assert!(
        !dir.join("changed-files.json").exists(),
        "a change attributed"
    );
    let audit = ctx.run(&["runs", "audit", "latest"]);
    assert_eq!(audit.code, 0, "{}", audit.snapshot());
}

/// An execute attempt's before-snapshot is complete before its agent has its
/// prompt, however slow: a file the agent writes the moment it has it is its
/// change (`added`), never part of `git-before.json`.
#[test]
fn the_before_snapshot_is_complete_before_the_agent_has_its_prompt() {
    let mut ctx = execute_ctx("write-file", Some("feature.txt=done"));
    ctx.slow_git_status("0.4", None);
    run_expect(&ctx, &["run"], 0, "succeeded", "verified");
    let dir = attempt(&ctx, "implement");
    let before = read_json(&dir.join("git-before.json"));
    assert!(before["entries"].get("feature.txt").is_none(), "{before:#}");
    let changed = read_json(&dir.join("changed-files.json"));
    assert_eq!(
        changed["added"],
        serde_json::json!(["feature.txt"]),
        "{changed:#}"
    );
}

#[test]
fn with_allow_dirty_a_path_dirty_before_and_changed_again_is_ambiguous() {
    let ctx = execute_ctx("write-file", Some("notes.txt=agent edit"));
    ctx.write("notes.txt", "committed\n");
    ctx.commit_all("notes");
    ctx.write("notes.txt", "user edit\n");
    ctx.write("other.txt", "untouched user file\n");
    let ev = run_expect(
        &ctx,
        &["run", "--allow-dirty"],
        1,
        "unverified",
        "implemented-unverified",
    );
    let changed = read_json(&attempt(&ctx, "implement").join("changed-files.json"));
    assert_eq!(changed["ambiguous"], serde_json::json!(["notes.txt"]));
    assert_eq!(changed["preExisting"], serde_json::json!(["other.txt"]));
    assert_eq!(changed["added"], serde_json::json!([]));
    assert!(ev["reasons"].to_string().contains("notes.txt"), "{ev:#}");
    let run = read_json(&ctx.only_run_dir().join("run.json"));
    assert_eq!(run["options"]["allowDirty"], true);
}

const LIB_T1: &str = r#"//! Statistics about a text.

/// The number of lines of `text`; a final line without a newline counts.
pub fn count_lines(text: &str) -> usize {
    text.lines().count()
}

/// The number of whitespace-separated words of `text`.
pub fn count_words(text: &str) -> usize {
    text.split_whitespace().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_lines() {
        assert_eq!(count_lines("one\ntwo"), 2);
    }

    #[test]
    fn counts_words() {
        assert_eq!(count_words(" a b\tc\n"), 3);
    }
}"#;

const LIB_T2: &str = r#"//! Statistics about a text.

/// The number of lines of `text`; a final line without a newline counts.
pub fn count_lines(text: &str) -> usize {
    text.lines().count()
}

/// The number of whitespace-separated words of `text`.
pub fn count_words(text: &str) -> usize {
    text.split_whitespace().count()
}

/// How often each lowercased word occurs, most frequent first.
pub fn word_frequencies(text: &str) -> Vec<(String, usize)> {
    let mut counts = std::collections::BTreeMap::new();
    for w in text.split_whitespace() {
        *counts.entry(w.to_lowercase()).or_insert(0) += 1;
    }
    let mut v: Vec<_> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_lines() {
        assert_eq!(count_lines("one\ntwo"), 2);
    }

    #[test]
    fn counts_words() {
        assert_eq!(count_words(" a b\tc\n"), 3);
    }

    #[test]
    fn ranks_words() {
        assert_eq!(word_frequencies("b a B")[0], ("b".to_string(), 2));
    }
}"#;

/// The example pipeline, every stage against the fake CLI: documents, a plan of two
/// tasks (the second after the first), and two implementations that really edit
/// `src/lib.rs` and keep `cargo test` passing. Every record of docs/run-directory.md exists and
/// the run audits clean.
#[test]
fn the_spec_to_task_example_runs_to_the_end_with_every_record() {
    let mut ctx = TestContext::with_fake_claude("success");
    copy_tree(
        &crate::common::workspace_root().join("examples/spec-to-task"),
        ctx.root(),
    );
    let pipeline = ctx.read("specbridge.yaml").replace(
        "command: claude",
        &format!("command: {}", crate::common::fake_claude_bin().display()),
    );
    ctx.write("specbridge.yaml", &pipeline);
    ctx.commit_all("the example");
    let task = |id: &str, title: &str, deps: &[&str]| serde_json::json!({"id": id, "title": title, "details": format!("Do {id}."), "dependsOn": deps, "requirements": ["R1"]});
    let script = serde_json::json!([
        {"match": "writing the requirements", "output": {"summary": "R", "markdown": "# Requirements\n\nR1 count words.\n"}},
        {"match": "designing a change", "output": {"summary": "D", "markdown": "# Design\n\nAdd count_words, then word_frequencies.\n"}},
        {"match": "splitting a design", "output": {"summary": "T", "markdown": "# Tasks\n",
            "tasks": [task("t1", "count words", &[]), task("t2", "rank words", &["t1"])]}},
        {"match": "Task `t1`", "scenario": "write-file", "write": format!("src/lib.rs={LIB_T1}"),
            "output": {"status": "completed", "summary": "added count_words", "changedFiles": ["src/lib.rs"], "commandsRun": ["cargo test"], "blockingQuestions": []}},
        {"match": "Task `t2`", "scenario": "write-file", "write": format!("src/lib.rs={LIB_T2}"),
            "output": {"status": "completed", "summary": "added word_frequencies", "changedFiles": ["src/lib.rs"], "commandsRun": ["cargo test"], "blockingQuestions": []}},
    ]);
    let script_path = ctx.aux_path("script.json");
    std::fs::write(&script_path, script.to_string()).unwrap();
    ctx.set_env("FAKE_CLAUDE_SCRIPT", &script_path.display().to_string());

    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert!(ctx.read("src/lib.rs").contains("word_frequencies"));
    assert!(ctx
        .read("specs/word-frequencies/design.md")
        .starts_with("# Design"));

    let run = ctx.only_run_dir();
    for name in ["run.json", "pipeline.yaml", "plan.json", "events.jsonl"] {
        assert!(run.join(name).is_file(), "{name} is missing");
    }
    let agent_records = [
        "prompt.md",
        "request.json",
        "process.json",
        "output-schema.json",
        "raw-stdout.log",
        "raw-stderr.log",
        "result.json",
        "git-before.json",
        "git-after.json",
        "changed-files.json",
        "diff.patch",
        "evidence.json",
    ];
    let stages = [
        "requirements",
        "design",
        "tasks",
        "implement.t1",
        "implement.t2",
    ];
    for stage in stages {
        let dir = run.join(format!("stages/{stage}"));
        let record = read_json(&dir.join("stage.json"));
        assert_eq!(record["status"], "succeeded", "{stage}: {record:#}");
        assert!(dir.join("output.json").is_file(), "{stage}: output.json");
        for name in agent_records {
            assert!(
                dir.join("attempt-001").join(name).is_file(),
                "{stage}: {name} is missing"
            );
        }
    }
    for id in ["t1", "t2"] {
        let dir = run.join(format!("stages/implement.{id}"));
        let record = read_json(&dir.join("stage.json"));
        assert_eq!(record["evidenceStatus"], "verified", "{record:#}");
        let attempt = dir.join("attempt-001");
        for name in [
            "verification.json",
            "verification-test.stdout.log",
            "verification-test.stderr.log",
        ] {
            assert!(attempt.join(name).is_file(), "{id}: {name} is missing");
        }
        let changed = read_json(&attempt.join("changed-files.json"));
        assert_eq!(
            changed["modified"],
            serde_json::json!(["src/lib.rs"]),
            "{changed:#}"
        );
        assert_eq!(changed["ambiguous"], serde_json::json!([]), "{changed:#}");
    }
    // t2's patch is t2's change alone, not t1's again.
    let t2_patch =
        std::fs::read_to_string(run.join("stages/implement.t2/attempt-001/diff.patch")).unwrap();
    assert!(t2_patch.contains("+pub fn word_frequencies"), "{t2_patch}");
    assert!(!t2_patch.contains("+pub fn count_words"), "{t2_patch}");
    let check = run.join("stages/test");
    assert_eq!(read_json(&check.join("stage.json"))["status"], "succeeded");
    for name in ["process.json", "raw-stdout.log", "raw-stderr.log"] {
        assert!(
            check.join("attempt-001").join(name).is_file(),
            "test: {name}"
        );
    }
    let audit = ctx.run(&["runs", "audit", "latest"]);
    assert_eq!(audit.code, 0, "{}", audit.snapshot());
    assert!(audit.stdout.contains(": clean ("), "{}", audit.stdout);
}

#[test]
fn dry_run_shows_the_execute_argv_and_verification_and_spawns_nothing() {
    let ctx = execute_ctx("write-file", Some("feature.txt=done"));
    // A dry run changes nothing, so a dirty tree is no reason to refuse it.
    ctx.write("scratch.txt", "uncommitted\n");
    let out = ctx.run(&["run", "--dry-run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert!(out.stdout.contains("implement [execute]"), "{}", out.stdout);
    assert!(
        out.stdout.contains("--allowedTools") && out.stdout.contains("< rendered-prompt"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("grep -q done feature.txt   # verification `feature done`"),
        "{}",
        out.stdout
    );
    assert!(ctx.fake_agent_runs().is_empty());
    assert!(!ctx.path(".specbridge/runs").exists());
}
