use super::*;
use crate::pipeline::{SandboxSetting, SandboxSettings, SandboxSwitch};

fn runner() -> ResolvedRunner {
    ResolvedRunner::default()
}

fn codes(r: &ResolvedRunner) -> Vec<&'static str> {
    match check(r) {
        Ok(_) => Vec::new(),
        Err(list) => list.iter().map(|r| r.code).collect(),
    }
}

#[test]
fn the_default_runner_passes_with_scoped_rules() {
    let c = check(&runner()).unwrap();
    assert_eq!(
        c.execute_allow_rules(),
        ["Read(./**)", "Glob(./**)", "Grep(./**)", "Edit(./**)"]
    );
    assert!(!c.allows_bash());
    assert!(c.setting_sources().is_empty());
    assert!(c.opt_ins().is_empty());
}

#[test]
fn no_bare_file_tool_or_shell_rule_is_ever_allowed() {
    let mut r = runner();
    r.tools = [
        "Read",
        "Write",
        "Bash",
        "NotebookEdit",
        "MultiEdit",
        "TodoWrite",
    ]
    .map(String::from)
    .to_vec();
    r.allowed_bash_rules = vec!["Bash(git status *)".into()];
    let rules = check(&r).unwrap().execute_allow_rules();
    for rule in &rules {
        assert!(
            rule.ends_with("(./**)") || rule.starts_with("Bash(git status"),
            "{rule}"
        );
    }
}

type Edit = Box<dyn Fn(&mut ResolvedRunner)>;

#[test]
fn each_refusal_has_its_class() {
    let cases: Vec<(Edit, &str, RefusalClass)> = vec![
        (
            Box::new(|r| r.allowed_bash_rules = vec!["Bash(*)".into()]),
            "bash-allows-everything",
            RefusalClass::Safety,
        ),
        (
            Box::new(|r| r.allowed_bash_rules = vec!["Bash".into()]),
            "bash-allows-everything",
            RefusalClass::Safety,
        ),
        (
            Box::new(|r| r.allowed_bash_rules = vec!["Bash(x) Edit(/**)".into()]),
            "rule-smuggling",
            RefusalClass::Safety,
        ),
        (
            Box::new(|r| r.tools = vec!["Bash(*)".into()]),
            "rule-in-tools",
            RefusalClass::Safety,
        ),
        (
            Box::new(|r| r.tools = vec!["Read(/**)".into()]),
            "rule-in-tools",
            RefusalClass::Safety,
        ),
        (
            Box::new(|r| r.tools = vec!["WebFetch".into()]),
            "refused-tool",
            RefusalClass::Safety,
        ),
        (
            Box::new(|r| r.tools = vec!["Task".into()]),
            "refused-tool",
            RefusalClass::Safety,
        ),
        (
            Box::new(|r| r.tools = vec!["Raed".into()]),
            "unknown-tool",
            RefusalClass::Config,
        ),
        (
            Box::new(|r| r.command_args = vec!["--settings".into(), "{}".into()]),
            "widening-flag",
            RefusalClass::Safety,
        ),
        (
            Box::new(|r| r.command_args = vec!["--add-dir=/".into()]),
            "widening-flag",
            RefusalClass::Safety,
        ),
        (
            Box::new(|r| r.command_args = vec!["--dangerously-anything".into()]),
            "widening-flag",
            RefusalClass::Safety,
        ),
        (
            Box::new(|r| r.command_args = vec!["-p".into()]),
            "managed-flag",
            RefusalClass::Config,
        ),
        (
            Box::new(|r| r.command_args = vec!["--frobnicate".into()]),
            "unknown-flag",
            RefusalClass::Config,
        ),
        (
            Box::new(|r| r.command_args = vec!["hello".into()]),
            "stray-argument",
            RefusalClass::Config,
        ),
        (
            Box::new(|r| {
                r.env.insert("CLAUDE_CONFIG_DIR".into(), "/x".into());
            }),
            "widening-env",
            RefusalClass::Safety,
        ),
        (
            Box::new(|r| r.setting_sources = Some(vec!["usr".into()])),
            "unknown-setting-source",
            RefusalClass::Config,
        ),
        (
            Box::new(|r| r.mcp_config = vec!["/etc/mcp.json".into()]),
            "path-outside-repo",
            RefusalClass::Safety,
        ),
        (
            Box::new(|r| r.tools = vec!["mcp__x__y".into()]),
            "mcp-tool-without-config",
            RefusalClass::Config,
        ),
        (
            Box::new(|r| {
                r.sandbox = Some(SandboxSetting::Settings(SandboxSettings {
                    writable_paths: vec!["/".into()],
                    allowed_domains: vec![],
                }));
            }),
            "sandbox-path",
            RefusalClass::Safety,
        ),
        (
            Box::new(|r| {
                r.sandbox = Some(SandboxSetting::Settings(SandboxSettings {
                    writable_paths: vec![],
                    allowed_domains: vec!["*".into()],
                }));
            }),
            "sandbox-domain",
            RefusalClass::Safety,
        ),
    ];
    for (edit, code, class) in cases {
        let mut r = runner();
        edit(&mut r);
        let refusals = check(&r).expect_err(code);
        assert_eq!(refusals[0].code, code, "{refusals:?}");
        assert_eq!(refusals[0].class, class, "{code}");
    }
}

#[test]
fn harmless_flags_pass_with_their_values() {
    let mut r = runner();
    r.command_args = [
        "--append-system-prompt",
        "--be brief",
        "--fallback-model=haiku",
    ]
    .map(String::from)
    .to_vec();
    // The value of --append-system-prompt looks like a flag: refused all the same.
    assert_eq!(codes(&r), ["unknown-flag"]);
    r.command_args = [
        "--append-system-prompt",
        "be brief",
        "--fallback-model=haiku",
        "--bare",
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(codes(&r), Vec::<&str>::new());
}

#[test]
fn opt_ins_are_recorded() {
    let mut r = runner();
    r.setting_sources = Some(vec!["user".into()]);
    r.sandbox = Some(SandboxSetting::Switch(SandboxSwitch::Off));
    let c = check(&r).unwrap();
    let fields: Vec<&str> = c.opt_ins().iter().map(|o| o.field).collect();
    assert_eq!(fields, ["settingSources", "sandbox"]);
}
