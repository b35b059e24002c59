//! Environment names that would move Claude Code's settings or loosen its checks
//! (docs/claude-code-runner.md, "Confinement"): when specbridge inherits one, the agent never sees
//! it, the run warns, and `request.json` names it.

use crate::common::{read_json, TestContext};

#[test]
fn inherited_config_redirecting_names_are_scrubbed_and_recorded() {
    let mut ctx = TestContext::with_fake_claude("success");
    ctx.set_env("CLAUDE_CONFIG_DIR", "/tmp/evil-claude-config");
    ctx.set_env("CLAUDE_CODE_SHELL_PREFIX", "/tmp/evil-wrapper");
    ctx.set_env("CLAUDE_CODE_MAX_RETRIES", "1");
    ctx.write("prompts/requirements.md", "Write the requirements.\n");
    ctx.write_agent_pipeline(
        "",
        "  - id: requirements\n    kind: generate\n    prompt: prompts/requirements.md\n    output: { schema: builtin:document }\n",
    );
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert!(
        out.stderr
            .contains("CLAUDE_CODE_SHELL_PREFIX, CLAUDE_CONFIG_DIR"),
        "the run warns: {}",
        out.snapshot()
    );
    let runs = ctx.fake_agent_runs();
    assert_eq!(runs.len(), 1);
    let seen = &runs[0].env;
    assert!(!seen.iter().any(|n| n == "CLAUDE_CONFIG_DIR"), "{seen:?}");
    assert!(
        !seen.iter().any(|n| n == "CLAUDE_CODE_SHELL_PREFIX"),
        "{seen:?}"
    );
    // A harmless CLAUDE_ name is passed on.
    assert!(
        seen.iter().any(|n| n == "CLAUDE_CODE_MAX_RETRIES"),
        "{seen:?}"
    );
    let request = read_json(
        &ctx.only_run_dir()
            .join("stages/requirements/attempt-001/request.json"),
    );
    assert_eq!(
        request["scrubbedEnvNames"],
        serde_json::json!(["CLAUDE_CODE_SHELL_PREFIX", "CLAUDE_CONFIG_DIR"])
    );
    assert!(request["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w.as_str().unwrap().contains("CLAUDE_CONFIG_DIR")));
    let run = read_json(&ctx.only_run_dir().join("run.json"));
    assert!(
        run["warnings"].to_string().contains("CLAUDE_CONFIG_DIR"),
        "{run:#}"
    );
}
