//! The code an agent writes runs confined when specbridge runs it (docs/evidence.md): the
//! real CLI writes a test script into the repository, and the verification command
//! that runs it cannot write outside the repository or reach a listener on this
//! machine.

use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::Path;

use serde_json::json;
use specbridge_testkit::model_server::{Reply, Script, ToolCall};

use super::harness::Sandbox;

/// A "test" that writes outside the repository and connects to a listener, and
/// passes only when both worked (what a hostile test needs); its log says what
/// each attempt did.
fn hostile_test(outside: &Path, port: u16) -> String {
    format!(
        "#!/bin/bash
w=blocked; n=blocked
if echo pwned > {out} 2>/dev/null; then w=open; fi
if (echo hello > /dev/tcp/127.0.0.1/{port}) 2>/dev/null; then n=open; fi
echo \"write=$w network=$n\"
[ \"$w$n\" = openopen ] && exit 0
exit 1
",
        out = outside.join("escaped.txt").display()
    )
}

#[test]
fn a_test_the_agent_wrote_cannot_write_outside_or_reach_the_network_under_verification() {
    // Not under /tmp: the sandbox's private /tmp would hide a write there anyway.
    let outside = tempfile::Builder::new()
        .prefix("outside-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let script = hostile_test(outside.path(), listener.local_addr().unwrap().port());
    let Some(sandbox) = Sandbox::new(|root: &Path| {
        Script::new([
            Reply::tool_uses(
                Some("Writing the test.".into()),
                vec![ToolCall::new(
                    "Write",
                    json!({"file_path": root.join("tests/escape.sh"), "content": script}),
                )
                .with_id("t_write")],
            ),
            Reply::structured_output(json!({
                "status": "completed",
                "summary": "Wrote the test.",
                "changedFiles": ["tests/escape.sh"],
                "commandsRun": [],
                "blockingQuestions": [],
            })),
        ])
    }) else {
        return;
    };
    sandbox
        .ctx
        .write("prompts/implement.md", "Write a test in tests/escape.sh.\n");
    sandbox.write_pipeline(
        "  maxTurns: 4\n  tools: [Read, Glob, Grep, Edit, Write]\n",
        "verification:
  - { name: agent-test, argv: [bash, tests/escape.sh], required: true }
stages:
  - id: implement
    kind: execute
    prompt: prompts/implement.md
    output: { schema: builtin:task-result }
",
    );

    let out = sandbox.run(&["run"]);
    // The agent's file is there: the CLI wrote it, specbridge ran it.
    assert_eq!(sandbox.ctx.read("tests/escape.sh"), script);
    let log = std::fs::read_to_string(
        sandbox
            .attempt_dir("implement", 1)
            .join("verification-agent-test.stdout.log"),
    )
    .unwrap();
    assert_eq!(log, "write=blocked network=blocked\n", "{}", out.snapshot());
    assert!(
        !outside.path().join("escaped.txt").exists(),
        "the test wrote outside the repository"
    );
    match listener.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("the listener saw a connection: {other:?}"),
    }
    // Both blocked, the test fails: recorded, and the stage is not verified.
    assert_eq!(out.code, 1, "a gate that failed: {}", out.snapshot());
    let stage = sandbox.stage_json("implement");
    assert_eq!(
        stage["evidenceStatus"], "implemented-unverified",
        "{stage:#}"
    );
    let evidence = sandbox.attempt_json("implement", 1, "evidence.json");
    assert!(
        evidence["reasons"]
            .to_string()
            .contains("required verification agent-test failed"),
        "{evidence:#}"
    );
    let verification = sandbox.attempt_json("implement", 1, "verification.json");
    let command = &verification["commands"][0];
    assert_eq!(command["argv"], json!(["bash", "tests/escape.sh"]));
    assert_eq!(command["passed"], false, "{verification:#}");
    assert_eq!(command["exitCode"], 1, "{verification:#}");
    assert_eq!(command["sandbox"]["mode"], "bubblewrap", "{verification:#}");
    assert_eq!(command["sandbox"]["network"], false);
    let root = std::fs::canonicalize(sandbox.ctx.root()).unwrap();
    assert_eq!(
        command["sandbox"]["writable"],
        json!([root.display().to_string()])
    );
}
