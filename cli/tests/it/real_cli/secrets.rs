//! A canary secret in specbridge's environment, echoed by the model through the
//! real CLI in its text, in a tool input and in its structured output: no byte of
//! it may be found under `.specbridge/` (docs/claude-code-runner.md).

use serde_json::json;
use specbridge_testkit::model_server::{Reply, Script, ToolCall};

use super::harness::Sandbox;

const CANARY: &str = "canary-realcli-4b7d19e2";
const CANARY_SHAPED: &str = "ghp_RealCliCanary0123456789abcdefABCDEF";

#[test]
fn a_canary_the_model_echoes_everywhere_never_reaches_the_run_folder() {
    let Some(sandbox) = Sandbox::new(|root| {
        Script::new([
            Reply::tool_uses(
                Some(format!("I will look for {CANARY} and {CANARY_SHAPED}.")),
                vec![ToolCall::new(
                    "Read",
                    json!({"file_path": root.join(format!("{CANARY}-{CANARY_SHAPED}.txt"))}),
                )
                .with_id("toolu_read")],
            ),
            Reply::structured_output(json!({
                "summary": format!("the secret is {CANARY}"),
                "markdown": format!("# Notes\n\n{CANARY_SHAPED}\n"),
            })),
        ])
    }) else {
        return;
    };
    sandbox.ctx.write(
        "prompts/notes.md",
        "Write notes about {{ pipeline.name }}.\n",
    );
    sandbox.write_pipeline(
        "  maxTurns: 4\n",
        "stages:
  - id: notes
    kind: generate
    prompt: prompts/notes.md
    output: { schema: builtin:document }
",
    );
    let mut cmd = sandbox.command();
    cmd.env("MY_SERVICE_TOKEN", CANARY).arg("run");
    let out = sandbox.run_command(cmd);
    assert_eq!(out.code, 0, "{}", out.snapshot());

    // One tool round, then the structured output: the canary went through the CLI.
    let requests = sandbox.model_requests();
    assert!(requests.len() >= 2);
    let mut found = 0;
    for file in sandbox.ctx.specbridge_files() {
        let bytes = std::fs::read(&file).unwrap();
        for canary in [CANARY, CANARY_SHAPED] {
            let at = bytes
                .windows(canary.len())
                .position(|w| w == canary.as_bytes());
            assert!(
                at.is_none(),
                "{} holds {canary}: …{}…",
                file.display(),
                at.map(|i| String::from_utf8_lossy(
                    &bytes[i.saturating_sub(120)..(i + canary.len() + 40).min(bytes.len())]
                )
                .into_owned())
                    .unwrap_or_default()
            );
        }
        found += 1;
    }
    assert!(found > 5);
    let stdout =
        std::fs::read_to_string(sandbox.attempt_dir("notes", 1).join("raw-stdout.log")).unwrap();
    assert!(
        stdout.contains("I will look for <redacted> and <redacted>."),
        "{stdout}"
    );
    // stream-json encodes the structured output's newlines as `\n`: the token right
    // after one is still found (a plain word boundary would miss it).
    assert!(stdout.contains(r"# Notes\n\n<redacted>\n"), "{stdout}");
    let output = super::harness::read_json(&sandbox.run_dir().join("stages/notes/output.json"));
    assert_eq!(output["summary"], "the secret is <redacted>");
    assert!(!out.stdout.contains(CANARY) && !out.stderr.contains(CANARY));
}
