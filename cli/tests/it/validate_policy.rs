//! `specbridge validate` on runner sections that the tool policy refuses
//! (docs/claude-code-runner.md, "Confinement"): each refusal with its message and location
//! (snapshot) and its exit code, and `run --dry-run` refusing the same file with
//! the same code, since both ask the same rule table.

use crate::common::{Output, TestContext};

fn repo(yaml: &str) -> TestContext {
    let ctx = TestContext::new();
    ctx.write("specbridge.yaml", yaml);
    ctx.write("prompts/implement.md", "Implement it.\n");
    ctx.write("mcp.json", "{}\n");
    ctx
}

/// An execute stage with `runner_keys` (YAML lines indented two spaces) in the
/// pipeline's runner section.
fn pipeline(runner_keys: &str) -> String {
    format!(
        "version: 1\nname: demo\nrunner:\n{runner_keys}stages:\n  - id: implement\n    kind: execute\n    prompt: prompts/implement.md\n"
    )
}

macro_rules! refused {
    ($name:literal, $runner_keys:expr, $code:expr) => {{
        let ctx = repo(&pipeline($runner_keys));
        let out: Output = ctx.run(&["validate"]);
        assert_eq!(out.code, $code, "{}", out.snapshot());
        insta::assert_snapshot!($name, out.snapshot());
        let dry = ctx.run(&["run", "--dry-run"]);
        assert_eq!(
            dry.code,
            $code,
            "run disagrees with validate: {}",
            dry.snapshot()
        );
    }};
}

#[test]
fn bash_star_in_rules() {
    refused!(
        "policy_bash_star",
        "  tools: [Read, Bash]\n  allowedBashRules: [\"Bash(*)\", \"Bash\", \"bash(:*)\"]\n",
        6
    );
}

#[test]
fn a_rule_smuggled_into_a_bash_rule() {
    refused!(
        "policy_rule_smuggling",
        "  tools: [Read, Bash]\n  allowedBashRules: [\"Bash(git status) Edit(/**)\"]\n",
        6
    );
}

#[test]
fn rules_in_tools() {
    refused!(
        "policy_rules_in_tools",
        "  tools: [Read, \"Bash(*)\", \"Edit(/**)\"]\n",
        6
    );
}

#[test]
fn network_and_subagent_tools() {
    refused!(
        "policy_refused_tools",
        "  tools: [Read, WebFetch, WebSearch, Task]\n",
        6
    );
}

#[test]
fn unknown_tool_with_did_you_mean() {
    refused!(
        "policy_unknown_tool",
        "  tools: [Raed, Edit, AskUserQuestion]\n",
        2
    );
}

#[test]
fn widening_flags_in_command_args() {
    refused!(
        "policy_widening_flags",
        "  commandArgs: [--settings, \"{}\", \"--add-dir=/\", --mcp-config, x.json, --agents, \"{}\", --permission-prompt-tool, mcp__x, --plugin-dir, p, --allowedTools, Bash, --tools=Bash]\n",
        6
    );
}

#[test]
fn managed_and_unknown_flags_in_command_args() {
    refused!(
        "policy_managed_flags",
        "  commandArgs: [-p, --output-format, json, --session-id, x, --max-turns=3, --frobnicate, stray]\n",
        2
    );
}

#[test]
fn config_redirecting_environment() {
    refused!(
        "policy_widening_env",
        "  env:\n    CLAUDE_CONFIG_DIR: /tmp/evil\n    CLAUDE_CODE_SHELL_PREFIX: /tmp/wrap\n    CLAUDE_CODE_SOMETHING_PERMISSIONS: x\n    RUST_LOG: debug\n",
        6
    );
}

#[test]
fn unknown_setting_source_and_outside_mcp_config() {
    refused!(
        "policy_sources_and_mcp",
        "  settingSources: [usr]\n  mcpConfig: [/etc/mcp.json]\n  tools: [Read, mcp__db__query]\n",
        6
    );
}

#[test]
fn sandbox_paths_and_domains_that_confine_nothing() {
    refused!(
        "policy_sandbox",
        "  tools: [Read, Bash]\n  allowedBashRules: [\"Bash(cargo test *)\"]\n  sandbox:\n    writablePaths: [/, target, ~/.claude/x]\n    allowedDomains: [\"*\", crates.io]\n",
        6
    );
}

#[test]
fn a_stage_runner_is_reported_at_its_own_line() {
    let yaml = "version: 1\nname: demo\nrunner:\n  tools: [Read, Edit]\nstages:\n  - id: implement\n    kind: execute\n    prompt: prompts/implement.md\n    runner:\n      tools: [Read, Bash]\n      allowedBashRules: [\"Bash(*)\"]\n  - id: spec\n    kind: generate\n    prompt: prompts/implement.md\n    output: { schema: builtin:document }\n    runner:\n      env: { CLAUDE_CONFIG_DIR: /x }\n";
    let ctx = repo(yaml);
    let out = ctx.run(&["validate"]);
    assert_eq!(out.code, 6, "{}", out.snapshot());
    insta::assert_snapshot!("policy_stage_runner", out.snapshot());
}

#[test]
fn opt_ins_are_valid_and_warned() {
    let ctx = repo(&pipeline(
        "  tools: [Read, Edit, Bash, mcp__db__query]\n  allowedBashRules: [\"Bash(cargo test *)\"]\n  settingSources: [user]\n  mcpConfig: [mcp.json]\n  sandbox: off\n",
    ));
    let out = ctx.run(&["validate"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    insta::assert_snapshot!("policy_opt_ins", out.snapshot());
}
