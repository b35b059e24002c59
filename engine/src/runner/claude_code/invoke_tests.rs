use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Mutex;

use serde_json::json;

use super::*;
use crate::redact::Redactor;
use crate::runner::claude_code::argv::{
    assemble, InvocationInput, Operation, OutputFormat, ToolPolicy,
};
use crate::runner::claude_code::fixtures::captured;
use crate::store::RunStore;

const SECRET_ENV: &str = "canary-env-value-0123456789";
const SECRET_SHAPED: &str = "sk-ant-api03-canaryCANARY0123456789abcdef";

struct Fixture {
    repo: tempfile::TempDir,
    run: RunHandle,
}

fn fixture() -> Fixture {
    let repo = tempfile::tempdir().unwrap();
    // The run's redactor knows the runner's environment, as for a real run.
    let redactor = Redactor::from_pairs([("SPECBRIDGE_TEST_API_KEY", SECRET_ENV)]);
    let run = RunStore::new(repo.path()).create(redactor).unwrap();
    Fixture { repo, run }
}

/// An executable shell script in the repository.
fn script(fx: &Fixture, name: &str, body: &str) -> String {
    let path = fx.repo.path().join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

fn runner(command: &str) -> ResolvedRunner {
    let mut runner = ResolvedRunner {
        command: command.to_string(),
        ..ResolvedRunner::default()
    };
    runner
        .env
        .insert("SPECBRIDGE_TEST_API_KEY".into(), SECRET_ENV.into());
    runner
}

fn schema() -> Value {
    json!({"type": "object", "required": ["summary"], "properties": {"summary": {"type": "string"}}})
}

fn spec<'a>(
    fx: &'a Fixture,
    request: &'a InvocationRequest,
    runner: &'a ResolvedRunner,
    schema: Option<&'a Value>,
    prompt: &'a str,
) -> InvokeSpec<'a> {
    InvokeSpec {
        run: &fx.run,
        stage_id: "requirements",
        attempt: 1,
        request,
        runner,
        prompt,
        schema,
        cwd: fx.repo.path(),
        protected: &[],
        cancel: CancelToken::new(),
        cli_version: Some("2.1.332"),
        on_progress: None,
        replay: None,
        on_exit: None,
        before_prompt: None,
        on_spawn: None,
        on_result: None,
    }
}

fn read(fx: &Fixture, rel: &str) -> String {
    std::fs::read_to_string(fx.run.dir().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[tokio::test]
async fn a_forbidden_argument_is_refused_just_before_spawn() {
    let fx = fixture();
    let marker = fx.repo.path().join("spawned");
    let program = script(&fx, "agent", &format!("touch '{}'\n", marker.display()));
    let runner = runner(&program);
    // Hand-built, as if validation and assembly had both been bypassed.
    for argv in [
        vec!["--print", "--dangerously-skip-permissions"],
        vec!["--print", "--permission-mode", "bypassPermissions"],
        vec!["--print", "--permission-mode=auto"],
        vec![
            "--settings",
            r#"{"permissions":{"defaultMode":"bypassPermissions"}}"#,
        ],
    ] {
        let request = InvocationRequest {
            operation: Operation::Generate,
            program: program.clone(),
            argv: argv.iter().map(std::string::ToString::to_string).collect(),
            skipped_flags: Vec::new(),
            warnings: Vec::new(),
            output_format: OutputFormat::StreamJson,
            session_id: None,
            tool_policy: ToolPolicy {
                tools: vec![],
                allowed_tools: vec![],
                disallowed_tools: vec![],
                permission_mode: "default".into(),
                ..Default::default()
            },
            json_schema_inline: false,
            degraded: false,
        };
        let outcome = invoke(spec(&fx, &request, &runner, None, "hi")).await;
        assert_eq!(outcome.status, StageStatus::SafetyViolation, "{argv:?}");
        assert!(!outcome.spawned());
        assert!(outcome.failure_reason.unwrap().contains("refusing to run"));
        assert!(!marker.exists(), "{argv:?}: the agent was started");
        let result: Value =
            serde_json::from_str(&read(&fx, "stages/requirements/attempt-001/result.json"))
                .unwrap();
        assert_eq!(result["outcome"], "safety-violation");
        assert!(!fx
            .run
            .dir()
            .join("stages/requirements/attempt-001/process.json")
            .exists());
    }
}

/// A stand-in that prints a stream-json session whose texts carry secrets.
fn chatty_agent(fx: &Fixture) -> String {
    let init = json!({"type": "system", "subtype": "init", "session_id": "s1", "tools": ["Read", "Glob", "Grep", "StructuredOutput"]});
    let tool = json!({"type": "assistant", "message": {"id": "m1", "content": [{"type": "tool_use", "name": "Read", "input": {"file_path": SECRET_SHAPED}}]}});
    let result = json!({
        "type": "result", "subtype": "success", "is_error": false,
        "result": format!("done with {SECRET_SHAPED}"),
        "structured_output": {"summary": format!("key {SECRET_SHAPED}")},
        "session_id": "s1", "num_turns": 2, "total_cost_usd": 0.25,
        "permission_denials": [], "terminal_reason": "completed"
    });
    let lines = [init, tool, result]
        .iter()
        .map(|l| serde_json::to_string(l).unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    script(
        fx,
        "agent",
        &format!(
            "cat > /dev/null\ncat <<'EOF'\n{lines}\nEOF\necho \"leaked $SPECBRIDGE_TEST_API_KEY\" >&2\n"
        ),
    )
}

fn assembled(runner: &ResolvedRunner, root: &Path, schema: &Value) -> InvocationRequest {
    assemble(&InvocationInput {
        runner,
        capabilities: &captured("2.1.332"),
        operation: Operation::Generate,
        schema: Some(schema),
        repo_root: root,
        session_id: None,
        protected: None,
        sandbox_support: None,
    })
    .unwrap()
}

#[tokio::test]
async fn records_are_written_redacted_and_nothing_raw_is_left() {
    let fx = fixture();
    let program = chatty_agent(&fx);
    let runner = runner(&program);
    let schema = schema();
    let request = assembled(&runner, fx.repo.path(), &schema);
    let seen: Arc<Mutex<Vec<Progress>>> = Arc::default();
    let sink = seen.clone();
    let prompt = format!("Write the requirements. Token: {SECRET_SHAPED}\n");
    let mut invocation = spec(&fx, &request, &runner, Some(&schema), &prompt);
    invocation.on_progress = Some(Arc::new(move |p: &Progress| {
        sink.lock().unwrap().push(p.clone());
    }));

    let outcome = invoke(invocation).await;
    // The records after the process are queued for the attempt's next batch.
    fx.run.flush().unwrap();

    assert_eq!(outcome.status, StageStatus::Succeeded, "{outcome:?}");
    assert_eq!(outcome.turns, 2);
    assert_eq!(outcome.cost_usd, 0.25);
    // The caller gets the output as produced, to validate before redacting it.
    assert_eq!(
        outcome.structured_output,
        Some(json!({"summary": format!("key {SECRET_SHAPED}")}))
    );
    let attempt = fx.run.dir().join("stages/requirements/attempt-001");
    let mut names: Vec<String> = std::fs::read_dir(&attempt)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "output-schema.json",
            "process.json",
            "prompt.md",
            "raw-stderr.log",
            "raw-stdout.log",
            "request.json",
            "result.json",
            "tool-calls.jsonl"
        ]
    );
    for file in files_under(fx.run.dir()) {
        let text = std::fs::read_to_string(&file).unwrap();
        for secret in [SECRET_ENV, SECRET_SHAPED] {
            assert!(!text.contains(secret), "{} holds {secret}", file.display());
        }
    }
    assert!(
        read(&fx, "stages/requirements/attempt-001/raw-stderr.log").contains("leaked <redacted>")
    );
    assert!(read(&fx, "stages/requirements/attempt-001/prompt.md").contains("Token: <redacted>"));
    let result: Value =
        serde_json::from_str(&read(&fx, "stages/requirements/attempt-001/result.json")).unwrap();
    assert_eq!(
        result["offeredTools"],
        json!(["Read", "Glob", "Grep", "StructuredOutput"])
    );
    assert_eq!(result["outcome"], "succeeded");
    let process: Value =
        serde_json::from_str(&read(&fx, "stages/requirements/attempt-001/process.json")).unwrap();
    assert_eq!(process["redactedArgv"][0], program.as_str());
    let request_json: Value =
        serde_json::from_str(&read(&fx, "stages/requirements/attempt-001/request.json")).unwrap();
    assert_eq!(request_json["envNames"], json!(["SPECBRIDGE_TEST_API_KEY"]));
    assert_eq!(request_json["schemaDelivery"], "json-schema-flag");

    let events = read(&fx, "events.jsonl");
    let spawned = events
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["type"] == "process-spawned")
        .expect("a process-spawned event");
    assert_eq!(spawned["stage"], "requirements");
    assert_eq!(spawned["pgid"], process["pgid"]);
    for name in [
        "raw-stdout.log",
        "raw-stderr.log",
        "process.json",
        "result.json",
        "request.json",
        "prompt.md",
        "tool-calls.jsonl",
    ] {
        assert!(
            events.contains(&format!("stages/requirements/attempt-001/{name}")),
            "{name} is not announced"
        );
    }

    let seen = seen.lock().unwrap();
    assert_eq!(seen.last().unwrap().last_tool.as_deref(), Some("Read"));
    assert_eq!(seen.last().unwrap().cost_usd_so_far, Some(0.25));
}

#[tokio::test]
async fn a_missing_executable_is_runner_unavailable() {
    let fx = fixture();
    let runner = runner(&fx.repo.path().join("no-such-claude").display().to_string());
    let schema = schema();
    let request = assembled(&runner, fx.repo.path(), &schema);
    let outcome = invoke(spec(&fx, &request, &runner, Some(&schema), "hi")).await;
    assert_eq!(
        outcome.status,
        StageStatus::RunnerUnavailable,
        "{outcome:?}"
    );
    assert!(!outcome.spawned());
    // The logs exist, empty, and are announced like any record.
    let attempt = fx.run.dir().join("stages/requirements/attempt-001");
    assert_eq!(std::fs::read(attempt.join("raw-stdout.log")).unwrap(), b"");
    assert!(read(&fx, "events.jsonl").contains("attempt-001/raw-stdout.log"));
}

/// The private folders (`specbridge-agent-*`) directly under `dir`.
fn private_folders(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("specbridge-agent-"))
        })
        .collect()
}

/// The caller's after-snapshot starts at `on_exit`: the agent has ended by then,
/// and a private temporary folder inside the working tree is already gone, so
/// the snapshot never takes it for the agent's change.
#[tokio::test]
async fn on_exit_comes_after_the_agent_and_after_a_temporary_folder_inside_the_tree() {
    let fx = fixture();
    // The agent leaves a file behind it that only it writes.
    let program = script(
        &fx,
        "agent",
        "cat > /dev/null\necho done > \"$CLAUDE_CODE_TMPDIR/left\"\ntouch agent-ended\n",
    );
    let mut runner = runner(&program);
    let tmp_base = fx.repo.path().join("tmp");
    std::fs::create_dir(&tmp_base).unwrap();
    runner
        .env
        .insert(private_tmp::VAR.into(), tmp_base.display().to_string());
    let schema = schema();
    let request = assembled(&runner, fx.repo.path(), &schema);
    let seen: Mutex<Vec<(bool, usize)>> = Mutex::default();
    let on_exit = || {
        seen.lock().unwrap().push((
            fx.repo.path().join("agent-ended").exists(),
            private_folders(&tmp_base).len(),
        ));
    };
    let mut invocation = spec(&fx, &request, &runner, Some(&schema), "hi");
    invocation.on_exit = Some(&on_exit);
    let outcome = invoke(invocation).await;
    assert!(outcome.spawned(), "{outcome:?}");
    assert_eq!(
        *seen.lock().unwrap(),
        [(true, 0)],
        "called once, after the agent, with the folder inside the tree removed"
    );
}

/// A folder outside the working tree is removed beside the outcome's reading,
/// and `on_exit` is still called once; an invocation that spawned nothing never
/// calls it. Nor `on_spawn`, which an agent's invocation calls once, after its
/// spawn is recorded and before it ends.
#[tokio::test]
async fn on_exit_is_called_once_for_an_agent_and_never_without_one() {
    let fx = fixture();
    let outside = tempfile::tempdir().unwrap();
    let program = script(&fx, "agent", "cat > /dev/null\n");
    let mut agent = runner(&program);
    agent.env.insert(
        private_tmp::VAR.into(),
        outside.path().display().to_string(),
    );
    let schema = schema();
    let request = assembled(&agent, fx.repo.path(), &schema);
    let calls = std::sync::atomic::AtomicUsize::new(0);
    let on_exit = || {
        calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    };
    let spawns = std::sync::Mutex::new(Vec::new());
    let on_spawn = || {
        let recorded = std::fs::read_to_string(fx.run.dir().join("events.jsonl")).unwrap();
        spawns.lock().unwrap().push((
            recorded.contains("\"process-spawned\""),
            calls.load(std::sync::atomic::Ordering::SeqCst),
        ));
    };
    let mut invocation = spec(&fx, &request, &agent, Some(&schema), "hi");
    invocation.on_exit = Some(&on_exit);
    invocation.on_spawn = Some(&on_spawn);
    assert!(invoke(invocation).await.spawned());
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(
        *spawns.lock().unwrap(),
        [(true, 0)],
        "once, the spawn recorded, before the end"
    );
    assert_eq!(private_folders(outside.path()), Vec::<PathBuf>::new());

    let missing = runner(&fx.repo.path().join("no-such-claude").display().to_string());
    let request = assembled(&missing, fx.repo.path(), &schema);
    let mut invocation = spec(&fx, &request, &missing, Some(&schema), "hi");
    invocation.attempt = 2;
    invocation.on_exit = Some(&on_exit);
    invocation.on_spawn = Some(&on_spawn);
    assert!(!invoke(invocation).await.spawned());
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(spawns.lock().unwrap().len(), 1, "no spawn, no call");
}

/// `before_prompt` runs once the agent exists and before it has its prompt
/// and its spawn is on record: a record it queues goes into the batch the
/// prompt waits for. The agent keeps its input only once it has it all.
#[tokio::test]
async fn before_prompt_runs_between_the_spawn_and_the_prompt() {
    let fx = fixture();
    let got = fx.repo.path().join("got");
    let queued = fx
        .run
        .dir()
        .join("stages/requirements/attempt-001/queued.json");
    let program = script(
        &fx,
        "agent",
        &format!(
            "p=$(cat)\n[ -f '{}' ] && printf %s \"$p\" > '{}'\n",
            queued.display(),
            got.display()
        ),
    );
    let agent = runner(&program);
    let schema = schema();
    let request = assembled(&agent, fx.repo.path(), &schema);
    let seen = Mutex::new(Vec::new());
    let before_prompt = || {
        // Long enough for an agent given its prompt to have kept it.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let recorded = std::fs::read_to_string(fx.run.dir().join("events.jsonl")).unwrap();
        seen.lock()
            .unwrap()
            .push((got.exists(), recorded.contains("\"process-spawned\"")));
        fx.run
            .defer_json(
                "stages/requirements/attempt-001/queued.json",
                &json!({"at": "prompt"}),
            )
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    let mut invocation = spec(&fx, &request, &agent, Some(&schema), "the prompt");
    invocation.before_prompt = Some(&before_prompt);
    assert!(invoke(invocation).await.spawned());
    assert_eq!(
        *seen.lock().unwrap(),
        [(false, false)],
        "once, before the prompt and the spawn's record"
    );
    assert_eq!(
        std::fs::read_to_string(&got).ok().as_deref(),
        Some("the prompt"),
        "the agent had its prompt, and the record queued before it"
    );
}

/// A `before_prompt` that fails withholds the prompt: the agent, ended, has
/// had nothing to act on, its spawn is not recorded, and the invocation fails
/// with the reason.
#[tokio::test]
async fn a_failed_before_prompt_withholds_the_prompt() {
    let fx = fixture();
    let got = fx.repo.path().join("got");
    let program = script(
        &fx,
        "agent",
        &format!("cat > /dev/null\ntouch '{}'\n", got.display()),
    );
    let agent = runner(&program);
    let schema = schema();
    let request = assembled(&agent, fx.repo.path(), &schema);
    let before_prompt = || Err("the snapshot could not be taken".to_string());
    let mut invocation = spec(&fx, &request, &agent, Some(&schema), "hi");
    invocation.before_prompt = Some(&before_prompt);
    let outcome = invoke(invocation).await;
    assert_eq!(outcome.status, StageStatus::Failed);
    assert!(!outcome.spawned());
    let reason = outcome.failure_reason.unwrap();
    assert!(
        reason.contains("the snapshot could not be taken"),
        "{reason}"
    );
    assert!(!got.exists(), "the agent got no prompt");
    let events = std::fs::read_to_string(fx.run.dir().join("events.jsonl")).unwrap_or_default();
    assert!(!events.contains("\"process-spawned\""), "{events}");
}

/// Where the CLI may write inside the working tree from its start (its home,
/// its configuration or its temporary folder lies there), `before_prompt`
/// runs before the spawn: a snapshot taken while the CLI starts would hold its
/// files half-written. One that fails there spawns nothing.
#[tokio::test]
async fn before_prompt_comes_before_the_spawn_where_the_cli_writes_in_the_tree() {
    for (name, folder) in [
        ("HOME", "home"),
        ("XDG_CONFIG_HOME", "config"),
        (private_tmp::VAR, "tmp"),
    ] {
        let fx = fixture();
        let started = fx.repo.path().join("started");
        let program = script(
            &fx,
            "agent",
            &format!("touch '{}'\ncat > /dev/null\n", started.display()),
        );
        let mut agent = runner(&program);
        let inside = fx.repo.path().join(folder);
        std::fs::create_dir(&inside).unwrap();
        agent.env.insert(name.into(), inside.display().to_string());
        let schema = schema();
        let request = assembled(&agent, fx.repo.path(), &schema);
        let seen = Mutex::new(Vec::new());
        let before_prompt = || {
            // Long enough for a spawned agent to have started.
            std::thread::sleep(std::time::Duration::from_millis(100));
            seen.lock().unwrap().push(started.exists());
            Ok(())
        };
        let mut invocation = spec(&fx, &request, &agent, Some(&schema), "hi");
        invocation.before_prompt = Some(&before_prompt);
        assert!(invoke(invocation).await.spawned(), "{name}");
        assert_eq!(
            *seen.lock().unwrap(),
            [false],
            "{name}: once, before the spawn"
        );
        assert!(started.exists(), "{name}");

        std::fs::remove_file(&started).unwrap();
        let refused = || Err("the snapshot could not be taken".to_string());
        let mut invocation = spec(&fx, &request, &agent, Some(&schema), "hi");
        invocation.attempt = 2;
        invocation.before_prompt = Some(&refused);
        let outcome = invoke(invocation).await;
        assert_eq!(outcome.status, StageStatus::Failed, "{name}");
        assert!(
            outcome
                .failure_reason
                .as_deref()
                .is_some_and(|r| r.contains("the snapshot could not be taken")),
            "{name}: {:?}",
            outcome.failure_reason
        );
        assert!(!started.exists(), "{name}: nothing was spawned");
    }
}

/// `on_result` gets the structured output the moment the stream shows it,
/// while the agent is still running (it writes a marker only after a pause),
/// once however many results follow, and never for an agent that prints none.
#[tokio::test]
async fn on_result_is_called_once_with_the_first_output_while_the_agent_runs() {
    let fx = fixture();
    let ended = fx.repo.path().join("ended");
    let result = |summary: &str| {
        serde_json::to_string(&json!({
            "type": "result", "subtype": "success", "is_error": false, "result": "done",
            "structured_output": {"summary": summary}, "session_id": "s1", "num_turns": 1,
            "total_cost_usd": 0.0, "permission_denials": [], "terminal_reason": "completed"
        }))
        .unwrap()
    };
    let program = script(
        &fx,
        "agent",
        &format!(
            "cat > /dev/null\necho '{}'\necho '{}'\nsleep 0.3\ntouch '{}'\n",
            result("first"),
            result("second"),
            ended.display()
        ),
    );
    let agent = runner(&program);
    let schema = schema();
    let request = assembled(&agent, fx.repo.path(), &schema);
    let calls = Mutex::new(Vec::new());
    let on_result = |output: &Value| {
        calls.lock().unwrap().push((output.clone(), ended.exists()));
    };
    let mut invocation = spec(&fx, &request, &agent, Some(&schema), "hi");
    invocation.on_result = Some(&on_result);
    assert!(invoke(invocation).await.spawned());
    assert!(ended.exists());
    assert_eq!(
        *calls.lock().unwrap(),
        [(json!({"summary": "first"}), false)],
        "once, with the first output, before the agent ended"
    );

    let silent = script(&fx, "silent", "cat > /dev/null\necho not a result\n");
    let agent = runner(&silent);
    let request = assembled(&agent, fx.repo.path(), &schema);
    let mut invocation = spec(&fx, &request, &agent, Some(&schema), "hi");
    invocation.attempt = 2;
    invocation.on_result = Some(&on_result);
    assert!(invoke(invocation).await.spawned());
    assert_eq!(calls.lock().unwrap().len(), 1, "no result, no call");
}

#[tokio::test]
async fn an_agent_whose_records_cannot_be_written_is_stopped_before_its_prompt() {
    let fx = fixture();
    let outside = tempfile::tempdir().unwrap();
    let got = outside.path().join("got");
    // Deaf to SIGTERM, so that only the supervisor's SIGKILL can stop it before
    // it copies whatever input it is given.
    let program = script(
        &fx,
        "agent",
        &format!("trap '' TERM\ncat > '{}'\n", got.display()),
    );
    let mut runner = runner(&program);
    runner.kill_grace = crate::pipeline::DurationSpec::from_millis(5_000);
    // A folder where the request goes: its rename into place fails, after the
    // spawn, in the batch that must be written before the prompt.
    std::fs::create_dir_all(
        fx.run
            .dir()
            .join("stages/requirements/attempt-001/request.json"),
    )
    .unwrap();
    let schema = schema();
    let request = assembled(&runner, fx.repo.path(), &schema);
    let outcome = invoke(spec(&fx, &request, &runner, Some(&schema), "the prompt")).await;
    assert_eq!(outcome.status, StageStatus::Failed, "{outcome:?}");
    assert!(!outcome.spawned());
    let reason = outcome.failure_reason.unwrap();
    assert!(
        reason.contains("failed to give `") && reason.contains("stopped before it was given any"),
        "{reason}"
    );
    assert!(reason.contains("request.json"), "{reason}");
    let input = std::fs::read_to_string(&got).unwrap_or_default();
    assert_eq!(input, "", "the agent got its prompt");
}
