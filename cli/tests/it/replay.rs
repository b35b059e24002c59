//! Replay of `.specbridge-example` into scaffold workspaces: the README's main job.

use std::path::{Path, PathBuf};

use crate::common::{copy_tree, fake_claude_bin, read_json, workspace_root, TestContext};

/// The scaffold folder a `run --scaffold` printed.
fn scaffold_of(stderr: &str) -> PathBuf {
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("scaffold kept at "))
        .unwrap_or_else(|| panic!("no scaffold path in:\n{stderr}"));
    PathBuf::from(line.trim())
}

fn only_run(root: &Path) -> PathBuf {
    let runs: Vec<PathBuf> = std::fs::read_dir(root.join(".specbridge/runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs.into_iter().next().unwrap()
}

/// The README's first command, as a new user runs it from a checkout.
fn main_job(ctx: &TestContext, example: &Path, extra: &[&str]) -> (crate::common::Output, PathBuf) {
    let recording = workspace_root().join(".specbridge-example");
    let mut args = vec![
        "run".to_string(),
        "--scaffold".into(),
        example.display().to_string(),
        "--replay".into(),
        recording.display().to_string(),
    ];
    args.extend(extra.iter().map(std::string::ToString::to_string));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = ctx.run(&args);
    let raw_stderr = out
        .stderr
        .replace("[ROOT]", &ctx.root().display().to_string());
    let scaffold = scaffold_of(&raw_stderr);
    (out, scaffold)
}

struct Cleanup(PathBuf);
impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Output sha256 and evidence status of every stage of a run.
fn outcomes(run: &Path) -> Vec<(String, String, Option<String>, Option<String>)> {
    let mut v: Vec<_> = std::fs::read_dir(run.join("stages"))
        .unwrap()
        .map(|e| {
            let s = read_json(&e.unwrap().path().join("stage.json"));
            (
                s["stageId"].as_str().unwrap().to_string(),
                s["status"].as_str().unwrap().to_string(),
                s["output"]["sha256"].as_str().map(String::from),
                s["evidenceStatus"].as_str().map(String::from),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn the_readme_main_job_runs_the_whole_pipeline_and_audits_clean() {
    let ctx = TestContext::new();
    let example = workspace_root().join("examples/spec-to-task");
    let (out, scaffold) = main_job(&ctx, &example, &[]);
    let _cleanup = Cleanup(scaffold.clone());
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert!(
        out.stdout
            .contains("implement.top-words   succeeded  verified"),
        "{}",
        out.stdout
    );
    let raw_stdout = out
        .stdout
        .replace("[ROOT]", &ctx.root().display().to_string());
    let next = format!("specbridge -C {} runs show ", scaffold.display());
    // It ends with how to look at the run, one command a line.
    let hints: Vec<&str> = raw_stdout
        .lines()
        .rev()
        .take_while(|l| l.starts_with("next: "))
        .collect();
    assert!(
        hints.iter().any(|l| l.contains(&next)),
        "it ends with how to look at the run: {raw_stdout}"
    );
    assert!(
        hints.iter().all(|l| l.matches("specbridge ").count() == 1),
        "one command per line: {hints:?}"
    );

    let run = only_run(&scaffold);
    for (stage, status, _, evidence) in outcomes(&run) {
        assert_eq!(status, "succeeded", "{stage}");
        if stage.starts_with("implement.") {
            assert_eq!(evidence.as_deref(), Some("verified"), "{stage}");
        }
    }
    // The replayed changes are in the scaffold, made by specbridge's replay.
    let lib = std::fs::read_to_string(scaffold.join("src/lib.rs")).unwrap();
    assert!(lib.contains("pub fn top_words"));
    assert!(scaffold.join("specs/word-frequencies/tasks.md").is_file());
    // Replayed attempts say so, and spawn nothing.
    let replay = read_json(&run.join("stages/design/attempt-001/replay.json"));
    assert_eq!(replay["replayed"], true);
    let process = read_json(&run.join("stages/design/attempt-001/process.json"));
    assert_eq!(process["executable"], "specbridge-replay");
    assert_eq!(read_json(&run.join("run.json"))["totals"]["invocations"], 0);

    let audit = TestContext::command_in(&scaffold, &["runs", "audit", "latest"]);
    assert_eq!(
        audit.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&audit.stdout)
    );
}

#[test]
fn replaying_twice_gives_the_same_outputs_and_evidence() {
    let ctx = TestContext::new();
    let example = workspace_root().join("examples/spec-to-task");
    let (first, a) = main_job(&ctx, &example, &[]);
    let _ca = Cleanup(a.clone());
    let (second, b) = main_job(&ctx, &example, &[]);
    let _cb = Cleanup(b.clone());
    assert_eq!((first.code, second.code), (0, 0));
    assert_ne!(a, b, "each run gets its own scaffold");
    assert_eq!(outcomes(&only_run(&a)), outcomes(&only_run(&b)));
    assert_eq!(
        std::fs::read(a.join("src/lib.rs")).unwrap(),
        std::fs::read(b.join("src/lib.rs")).unwrap()
    );
}

#[test]
fn a_recording_with_a_tampered_diff_is_refused() {
    let ctx = TestContext::new();
    let copy = ctx.path("recording");
    copy_tree(&workspace_root().join(".specbridge-example"), &copy);
    let patch = copy.join("stages/implement.word-count/attempt-001/diff.patch");
    let text = std::fs::read_to_string(&patch).unwrap();
    std::fs::write(&patch, text.replacen("count_words", "count_wordz", 1)).unwrap();
    let example = workspace_root().join("examples/spec-to-task");
    let out = ctx.run(&[
        "run",
        "--scaffold",
        &example.display().to_string(),
        "--replay",
        &copy.display().to_string(),
        "--no-keep",
    ]);
    assert_eq!(out.code, 6, "{}", out.snapshot());
    assert!(
        out.stderr.contains("fails its audit: file-hash-mismatch"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("diff.patch"), "{}", out.stderr);
}

#[test]
fn a_prompt_edited_after_recording_is_refused_with_the_reason() {
    let ctx = TestContext::new();
    let example = ctx.path("example");
    copy_tree(&workspace_root().join("examples/spec-to-task"), &example);
    let prompt = example.join("prompts/design.md");
    let text = std::fs::read_to_string(&prompt).unwrap();
    std::fs::write(&prompt, format!("{text}\nAlso consider performance.\n")).unwrap();
    let (out, scaffold) = main_job(&ctx, &example, &[]);
    let _cleanup = Cleanup(scaffold.clone());
    assert_eq!(out.code, 4, "{}", out.snapshot());
    let run = only_run(&scaffold);
    let design = read_json(&run.join("stages/design/stage.json"));
    assert_eq!(design["status"], "failed");
    let reason = design["outcome"].as_str().unwrap();
    assert!(
        reason.contains("replay: stage `design` changed since it was recorded"),
        "{reason}"
    );
    assert_eq!(
        read_json(&run.join("stages/requirements/stage.json"))["status"],
        "succeeded"
    );
    assert_eq!(
        read_json(&run.join("stages/tasks/stage.json"))["status"],
        "blocked"
    );
}

#[test]
fn replay_missing_live_runs_changed_stages_with_the_live_runner() {
    let mut ctx = TestContext::with_fake_claude("success");
    let example = ctx.path("example");
    copy_tree(&workspace_root().join("examples/spec-to-task"), &example);
    let prompt = example.join("prompts/design.md");
    let text = std::fs::read_to_string(&prompt).unwrap();
    std::fs::write(&prompt, format!("{text}\nAlso consider performance.\n")).unwrap();
    fake_claude_on_path(&mut ctx);
    let (out, scaffold) = main_job(&ctx, &example, &["--replay-missing", "live"]);
    let _cleanup = Cleanup(scaffold.clone());
    let run = only_run(&scaffold);
    assert!(
        run.join("stages/requirements/attempt-001/replay.json")
            .is_file(),
        "{}",
        out.snapshot()
    );
    assert!(!run.join("stages/design/attempt-001/replay.json").exists());
    assert_eq!(
        read_json(&run.join("stages/design/stage.json"))["status"],
        "succeeded"
    );
    assert_eq!(
        read_json(&run.join("run.json"))["totals"]["invocations"],
        2,
        "design and tasks ran live"
    );
}

/// `claude` on PATH is the fake CLI, for examples whose runner command is `claude`.
fn fake_claude_on_path(ctx: &mut TestContext) {
    let bin = ctx.aux_path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(fake_claude_bin(), bin.join("claude")).unwrap();
    ctx.prepend_path(&bin);
}

#[test]
fn the_hello_example_runs_in_a_scaffold() {
    let mut ctx = TestContext::with_fake_claude("success");
    fake_claude_on_path(&mut ctx);
    let example = workspace_root().join("examples/hello");
    let out = ctx.run(&["run", "--scaffold", &example.display().to_string()]);
    let raw_stderr = out
        .stderr
        .replace("[ROOT]", &ctx.root().display().to_string());
    let scaffold = scaffold_of(&raw_stderr);
    let _cleanup = Cleanup(scaffold.clone());
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert!(std::fs::read_to_string(scaffold.join("out/hello.md")).is_ok_and(|t| !t.is_empty()));
    let run = only_run(&scaffold);
    assert_eq!(
        read_json(&run.join("stages/document-exists/stage.json"))["status"],
        "succeeded"
    );
}

#[test]
fn agent_stages_outside_a_repository_root_are_refused_before_anything_runs() {
    let mut ctx = TestContext::with_fake_claude("success");
    fake_claude_on_path(&mut ctx);
    copy_tree(&workspace_root().join("examples/hello"), &ctx.path("sub"));
    let out = ctx.run(&["-C", "sub", "run"]);
    assert_eq!(out.code, 2, "{}", out.snapshot());
    assert!(
        out.stderr.contains("agent stages need the repository root"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("--scaffold"), "{}", out.stderr);
    assert!(!ctx.path("sub/.specbridge").exists());
    assert!(ctx.fake_agent_runs().is_empty(), "nothing was spawned");
}

#[test]
fn a_replay_runner_in_the_pipeline_file_answers_from_its_recording() {
    let ctx = TestContext::new();
    copy_tree(&workspace_root().join("examples/spec-to-task"), ctx.root());
    copy_tree(
        &workspace_root().join(".specbridge-example"),
        &ctx.path("recordings/example"),
    );
    let pipeline = ctx.read("specbridge.yaml");
    ctx.write(
        "specbridge.yaml",
        &pipeline.replace(
            "  kind: claude-code\n  command: claude\n",
            "  kind: replay\n  from: recordings/example\n  command: claude\n",
        ),
    );
    ctx.commit_all("example with a recording");
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let run = ctx.only_run_dir();
    let replay = read_json(&run.join("stages/tasks/attempt-001/replay.json"));
    assert!(
        replay["from"]
            .as_str()
            .unwrap()
            .contains("recordings/example/stages/tasks/"),
        "{replay}"
    );
    assert_eq!(
        read_json(&run.join("stages/implement.top-words/stage.json"))["evidenceStatus"],
        "verified"
    );
}

/// A recorded execute stage that added a file in a new folder replays into a
/// fresh repository: the same file, the same attribution and diff.
#[test]
fn recorded_added_files_are_replayed_exactly() {
    const STAGE: &str = "  - id: implement
    kind: execute
    prompt: prompts/implement.md
    verification:
      - { name: added, argv: [grep, -q, done, new/dir/feature.txt] }
";
    let mut recorded = TestContext::with_fake_claude("write-file");
    recorded.set_env("FAKE_CLAUDE_WRITE", "new/dir/feature.txt=done\n");
    recorded.write("prompts/implement.md", "Implement the feature.\n");
    recorded.write_agent_pipeline("  timeout: 20s\n", STAGE);
    let out = recorded.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let recording = recorded.only_run_dir();

    // The same pipeline in a fresh repository, answered from the recording.
    let fresh = TestContext::new();
    fresh.write("prompts/implement.md", "Implement the feature.\n");
    fresh.write("specbridge.yaml", &recorded.read("specbridge.yaml"));
    fresh.write("README.md", &recorded.read("README.md"));
    fresh.commit_all("pipeline");
    let out = fresh.run(&["run", "--replay", &recording.display().to_string()]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_eq!(
        fresh.read("new/dir/feature.txt"),
        recorded.read("new/dir/feature.txt")
    );
    let run = fresh.only_run_dir();
    let stage = read_json(&run.join("stages/implement/stage.json"));
    assert_eq!(stage["evidenceStatus"], "verified");
    let changed = |dir: &Path| {
        read_json(&dir.join("stages/implement/attempt-001/changed-files.json"))["added"].clone()
    };
    assert_eq!(changed(&run), changed(&recording));
    assert_eq!(
        std::fs::read(run.join("stages/implement/attempt-001/diff.patch")).unwrap(),
        std::fs::read(recording.join("stages/implement/attempt-001/diff.patch")).unwrap()
    );
}

#[test]
fn no_keep_prints_no_path_it_deleted() {
    let ctx = TestContext::new();
    let example = workspace_root().join("examples/spec-to-task");
    let recording = workspace_root().join(".specbridge-example");
    let out = ctx.run(&[
        "run",
        "--scaffold",
        &example.display().to_string(),
        "--replay",
        &recording.display().to_string(),
        "--no-keep",
    ]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(
        !all.contains("specbridge-spec-to-task-"),
        "a deleted scaffold path is printed: {all}"
    );
    assert!(
        out.stdout.contains("deleted with the scaffold (--no-keep)"),
        "{all}"
    );
}
