use std::path::Path;

use uuid::Uuid;

use super::*;
use crate::runner::claude_code::fixtures::captured;

const SESSION: &str = "3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b";

fn runner() -> ResolvedRunner {
    ResolvedRunner {
        model: Some("sonnet".into()),
        effort: Some("high".into()),
        tools: ["Read", "Glob", "Grep", "Edit", "Write", "Bash"]
            .map(String::from)
            .to_vec(),
        allowed_bash_rules: vec!["Bash(git status *)".into(), "Bash(cargo test *)".into()],
        disallowed_tools: vec!["WebFetch".into()],
        plugin_dirs: vec!["plugins/review".into()],
        setting_sources: Some(vec!["user".into()]),
        ..ResolvedRunner::default()
    }
}

/// The runner of [`runner`], with the sandbox opted out where the CLI predates the
/// verified sandbox settings (a stage that allows Bash is refused there otherwise).
fn runner_for(version: &str) -> ResolvedRunner {
    let mut r = runner();
    if !captured(version).sandbox_settings {
        r.sandbox = Some(crate::pipeline::SandboxSetting::Switch(
            crate::pipeline::SandboxSwitch::Off,
        ));
    }
    r
}

fn protected() -> crate::evidence::ProtectedPaths {
    crate::evidence::ProtectedPaths::new(
        "specbridge.yaml",
        ["prompts/implement.md"],
        ["docs/spec.md"],
        ["db/migrations"],
    )
}

fn schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "required": ["summary", "markdown"],
        "properties": {"summary": {"type": "string"}, "markdown": {"type": "string"}}
    })
}

fn build(
    runner: &ResolvedRunner,
    version: &str,
    operation: Operation,
) -> Result<InvocationRequest, AssemblyError> {
    let caps = captured(version);
    let schema = schema();
    assemble(&InvocationInput {
        runner,
        capabilities: &caps,
        operation,
        schema: Some(&schema),
        repo_root: Path::new("/repo"),
        session_id: Some(SESSION.parse().unwrap()),
        protected: Some(&protected()),
        sandbox_support: None,
    })
}

fn value_of<'a>(req: &'a InvocationRequest, flag: &str) -> Option<&'a str> {
    let i = req.argv.iter().position(|a| a == flag)?;
    req.argv.get(i + 1).map(String::as_str)
}

fn list_of(req: &InvocationRequest, flag: &str) -> Vec<String> {
    value_of(req, flag)
        .map(|v| v.split(',').map(String::from).collect())
        .unwrap_or_default()
}

#[test]
fn snapshots_for_each_operation_and_version() {
    for version in ["2.0.50", "2.1.100", "2.1.332"] {
        for (name, op) in [
            ("generate", Operation::Generate),
            ("execute", Operation::Execute),
        ] {
            let req = build(&runner_for(version), version, op).unwrap();
            insta::assert_json_snapshot!(format!("{name}-{version}"), req);
        }
    }
}

#[test]
fn continue_resumes_the_session_instead_of_starting_one() {
    let id: Uuid = "0b6f5c1a-2d3e-4f50-8a9b-c0d1e2f3a4b5".parse().unwrap();
    let req = build(&runner(), "2.1.332", Operation::Continue { session_id: id }).unwrap();
    assert_eq!(value_of(&req, "--resume"), Some(id.to_string().as_str()));
    assert!(!req.argv.contains(&"--session-id".to_string()));
    assert_eq!(req.session_id, Some(id));
    insta::assert_json_snapshot!("continue-2.1.332", req);
}

#[test]
fn the_prompt_is_never_in_argv() {
    // Nothing in the inputs carries a prompt; prove no positional argument exists:
    // every argument is a flag or the value right after one.
    for version in ["1.0.0", "2.0.50", "2.1.100", "2.1.332"] {
        let mut caps = captured(version);
        caps.permission_mode = true; // let 1.0.0 through to check its shape too
        for op in [Operation::Generate, Operation::Execute] {
            let r = runner_for(version);
            let req = assemble(&InvocationInput {
                runner: &r,
                capabilities: &caps,
                operation: op,
                schema: None,
                repo_root: Path::new("/repo"),
                session_id: None,
                protected: None,
                sandbox_support: None,
            })
            .unwrap();
            let mut expect_value = false;
            for arg in &req.argv {
                if expect_value {
                    expect_value = false;
                    continue;
                }
                assert!(
                    arg.starts_with("--"),
                    "{version}: positional argument {arg:?}"
                );
                expect_value = !matches!(
                    arg.as_str(),
                    "--print" | "--verbose" | "--strict-mcp-config" | "--restricted"
                );
            }
        }
    }
}

#[test]
fn each_invocation_gets_a_fresh_v4_session_id() {
    let caps = captured("2.1.332");
    let r = runner();
    let input = InvocationInput {
        runner: &r,
        capabilities: &caps,
        operation: Operation::Execute,
        schema: None,
        repo_root: Path::new("/repo"),
        session_id: None,
        protected: None,
        sandbox_support: None,
    };
    let a = assemble(&input).unwrap().session_id.unwrap();
    let b = assemble(&input).unwrap().session_id.unwrap();
    assert_ne!(a, b);
    assert_eq!(a.get_version_num(), 4);
}

#[test]
fn generate_is_read_only_whatever_the_runner_says() {
    let mut r = runner();
    r.permission_mode = "acceptEdits".into();
    for version in ["2.0.50", "2.1.332"] {
        let req = build(&r, version, Operation::Generate).unwrap();
        assert_eq!(list_of(&req, "--tools"), ["Read", "Glob", "Grep"]);
        assert_eq!(
            list_of(&req, "--allowedTools"),
            ["Read(./**)", "Glob(./**)", "Grep(./**)"]
        );
        let mode = value_of(&req, "--permission-mode").unwrap();
        assert!(mode == "default" || mode == "manual", "{mode}");
        assert!(!req.argv.iter().any(|a| a.contains("Bash(git")));
    }
}

#[test]
fn generate_denies_mutating_tools_where_tools_is_missing() {
    let mut caps = captured("2.1.100");
    caps.tools = false;
    let r = runner();
    let req = assemble(&InvocationInput {
        runner: &r,
        capabilities: &caps,
        operation: Operation::Generate,
        schema: None,
        repo_root: Path::new("/repo"),
        session_id: None,
        protected: None,
        sandbox_support: None,
    })
    .unwrap();
    assert!(!req.argv.contains(&"--tools".to_string()));
    let denied = list_of(&req, "--disallowedTools");
    for tool in [
        "Edit",
        "Write",
        "NotebookEdit",
        "Bash",
        "MultiEdit",
        "WebFetch",
    ] {
        assert!(
            denied.iter().any(|d| d == tool),
            "{tool} not denied: {denied:?}"
        );
    }
    assert!(req.skipped_flags.iter().any(|s| s.flag == "--tools"));
}

#[test]
fn execute_never_allows_bare_bash_but_offers_it_for_rules() {
    let req = build(&runner(), "2.1.332", Operation::Execute).unwrap();
    let allowed = list_of(&req, "--allowedTools");
    assert!(!allowed.iter().any(|t| t == "Bash"), "{allowed:?}");
    assert!(allowed.iter().any(|t| t == "Bash(git status *)"));
    assert!(list_of(&req, "--tools").iter().any(|t| t == "Bash"));
    assert_eq!(value_of(&req, "--permission-mode"), Some("manual"));
}

#[test]
fn a_rule_that_allows_every_command_is_refused() {
    for rule in ["Bash", "Bash(*)", "bash(:*)", "Bash( * )"] {
        let mut r = runner();
        r.allowed_bash_rules = vec![rule.into()];
        assert_eq!(
            build(&r, "2.1.332", Operation::Execute).map_err(|e| e.is_safety()),
            Err(true),
            "{rule}"
        );
    }
}

#[test]
fn accept_edits_adds_deny_rules_for_destructive_commands() {
    let mut r = runner();
    r.permission_mode = "acceptEdits".into();
    let req = build(&r, "2.1.332", Operation::Execute).unwrap();
    assert_eq!(value_of(&req, "--permission-mode"), Some("acceptEdits"));
    let denied = list_of(&req, "--disallowedTools");
    for rule in [
        "Bash(rm:*)",
        "Bash(mv:*)",
        "Bash(touch:*)",
        "Bash(mkdir:*)",
        "WebFetch",
    ] {
        assert!(
            denied.iter().any(|d| d == rule),
            "{rule} missing: {denied:?}"
        );
    }
    assert!(req.warnings.iter().any(|w| w.contains("acceptEdits")));
    // Not under the default mode.
    let plain = build(&runner(), "2.1.332", Operation::Execute).unwrap();
    let denied = list_of(&plain, "--disallowedTools");
    assert!(!denied.iter().any(|d| d.starts_with("Bash(")), "{denied:?}");
    assert!(denied.iter().any(|d| d == "WebFetch"), "{denied:?}");
}

#[test]
fn unsupported_settings_are_skipped_and_warned() {
    let req = build(&runner_for("2.0.50"), "2.0.50", Operation::Execute).unwrap();
    let skipped: Vec<&str> = req.skipped_flags.iter().map(|s| s.flag.as_str()).collect();
    assert_eq!(skipped, ["--max-budget-usd", "--effort"]);
    assert!(req.degraded);
    // The two skipped flags, the setting sources and the sandbox opt-out.
    assert_eq!(req.warnings.len(), 4, "{:?}", req.warnings);
    assert!(!req
        .argv
        .iter()
        .any(|a| a == "--effort" || a == "--max-budget-usd"));
    // --max-turns is passed although no version lists it.
    assert_eq!(value_of(&req, "--max-turns"), Some("30"));
}

#[test]
fn the_schema_goes_inline_as_one_compact_argument() {
    let req = build(&runner(), "2.1.100", Operation::Generate).unwrap();
    let inline = value_of(&req, "--json-schema").unwrap();
    assert!(!inline.contains('\n') && !inline.contains(": "));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(inline).unwrap(),
        schema()
    );
    assert!(req.json_schema_inline);

    let mut caps = captured("2.1.100");
    caps.json_schema = false;
    let r = runner_for("2.1.100");
    let s = schema();
    let req = assemble(&InvocationInput {
        runner: &r,
        capabilities: &caps,
        operation: Operation::Generate,
        schema: Some(&s),
        repo_root: Path::new("/repo"),
        session_id: None,
        protected: None,
        sandbox_support: None,
    })
    .unwrap();
    assert!(!req.json_schema_inline && req.degraded);
    assert!(!req.argv.contains(&"--json-schema".to_string()));
}

#[test]
fn stream_json_falls_back_to_json_without_verbose() {
    let mut caps = captured("2.1.332");
    caps.stream_json = false;
    let r = runner();
    let req = assemble(&InvocationInput {
        runner: &r,
        capabilities: &caps,
        operation: Operation::Execute,
        schema: None,
        repo_root: Path::new("/repo"),
        session_id: None,
        protected: None,
        sandbox_support: None,
    })
    .unwrap();
    assert_eq!(req.output_format, OutputFormat::Json);
    assert_eq!(value_of(&req, "--output-format"), Some("json"));
    assert!(!req.argv.contains(&"--verbose".to_string()));
}

#[test]
fn command_args_come_first_and_plugin_dirs_resolve_against_the_root() {
    let mut r = runner();
    r.command_args = vec!["--append-system-prompt".into(), "Be brief.".into()];
    let req = build(&r, "2.1.332", Operation::Execute).unwrap();
    assert_eq!(
        &req.argv[..3],
        ["--append-system-prompt", "Be brief.", "--print"]
    );
    assert_eq!(value_of(&req, "--plugin-dir"), Some("/repo/plugins/review"));
    assert_eq!(value_of(&req, "--setting-sources"), Some("user"));
    assert!(!req.argv.contains(&"--no-session-persistence".to_string()));
}

#[test]
fn incompatible_capabilities_are_refused() {
    assert_eq!(
        build(&runner(), "1.0.0", Operation::Generate),
        Err(AssemblyError::Incompatible(
            vec!["--permission-mode".into()]
        ))
    );
}

#[test]
fn a_mode_the_cli_does_not_list_is_refused() {
    let mut r = runner();
    r.permission_mode = "delegate".into();
    // Not a mode a pipeline may name: refused by the policy table, as validation does.
    assert!(matches!(
        build(&r, "2.1.332", Operation::Execute),
        Err(AssemblyError::Refused(_))
    ));
    // A mode the table allows but this CLI does not list.
    let mut caps = captured("2.1.332");
    caps.permission_modes = Some(vec!["manual".into()]);
    let r = runner_for("2.1.332");
    let s = schema();
    assert!(matches!(
        assemble(&InvocationInput {
            runner: &ResolvedRunner {
                permission_mode: "plan".into(),
                ..r
            },
            capabilities: &caps,
            operation: Operation::Execute,
            schema: Some(&s),
            repo_root: Path::new("/repo"),
            session_id: None,
            protected: None,
            sandbox_support: None,
        }),
        Err(AssemblyError::ModeNotAccepted { .. })
    ));
}

#[test]
fn continue_needs_resume_support() {
    let mut caps = captured("2.1.332");
    caps.resume = false;
    let r = runner();
    let id = Uuid::new_v4();
    let err = assemble(&InvocationInput {
        runner: &r,
        capabilities: &caps,
        operation: Operation::Continue { session_id: id },
        schema: None,
        repo_root: Path::new("/repo"),
        session_id: None,
        protected: None,
        sandbox_support: None,
    });
    assert_eq!(err, Err(AssemblyError::ResumeUnsupported(id)));
}

// Layer 2 of 3: assembly refuses forbidden flags and modes even when validation
// (layer 1) was bypassed, as here, by building the runner directly.
#[test]
fn assembly_refuses_forbidden_flags_in_command_args() {
    for flag in crate::safety::FORBIDDEN_FLAGS {
        let mut r = runner();
        r.command_args = vec![flag.to_string()];
        let err = build(&r, "2.1.332", Operation::Execute).unwrap_err();
        assert!(err.is_safety(), "{flag}: {err}");
    }
    let mut r = runner();
    r.command_args = vec![
        "--settings".into(),
        r#"{"permissions":{"defaultMode":"auto"}}"#.into(),
    ];
    let err = build(&r, "2.1.332", Operation::Execute).unwrap_err();
    assert!(err.is_safety(), "{err}");
}

#[test]
fn assembly_refuses_forbidden_modes() {
    for mode in crate::safety::FORBIDDEN_MODES {
        let mut r = runner();
        r.permission_mode = mode.to_string();
        let err = build(&r, "2.1.332", Operation::Execute).unwrap_err();
        assert!(err.is_safety(), "{mode}: {err}");
    }
}

#[test]
fn command_args_cannot_reset_the_tool_policy() {
    for args in [
        vec!["--allowedTools", "Bash"],
        vec!["--permission-mode", "plan"],
        vec!["--tools=Bash"],
        vec!["-r", "x"],
    ] {
        let mut r = runner();
        r.command_args = args.iter().map(std::string::ToString::to_string).collect();
        assert!(
            matches!(
                build(&r, "2.1.332", Operation::Execute),
                Err(AssemblyError::Refused(_))
            ),
            "{args:?}"
        );
    }
}

#[test]
fn a_model_named_auto_is_not_a_permission_mode() {
    let mut r = runner();
    r.command_args = vec!["--fallback-model".into(), "auto".into()];
    assert!(build(&r, "2.1.332", Operation::Execute).is_ok());
}

#[test]
fn file_tools_are_scoped_and_protected_paths_denied() {
    let req = build(&runner(), "2.1.332", Operation::Execute).unwrap();
    let allowed = list_of(&req, "--allowedTools");
    assert_eq!(
        allowed,
        [
            "Read(./**)",
            "Glob(./**)",
            "Grep(./**)",
            "Edit(./**)",
            "Bash(git status *)",
            "Bash(cargo test *)"
        ]
    );
    let denied = list_of(&req, "--disallowedTools");
    for rule in [
        "Edit(./.git/**)",
        "Edit(./.specbridge/**)",
        "Edit(./.claude/**)",
        "Edit(./specbridge.yaml)",
        "Edit(./prompts/implement.md)",
        "Edit(./docs/spec.md)",
        "Edit(./db/migrations/**)",
    ] {
        assert!(denied.iter().any(|d| d == rule), "{rule}: {denied:?}");
    }
    let generate = build(&runner(), "2.1.332", Operation::Generate).unwrap();
    assert_eq!(
        list_of(&generate, "--allowedTools"),
        ["Read(./**)", "Glob(./**)", "Grep(./**)"]
    );
}

#[test]
fn settings_are_isolated_and_bash_is_sandboxed() {
    let mut r = runner();
    r.setting_sources = None;
    let req = build(&r, "2.1.332", Operation::Execute).unwrap();
    assert_eq!(value_of(&req, "--setting-sources"), Some(""));
    assert!(req.argv.iter().any(|a| a == "--strict-mcp-config"));
    assert!(req.argv.iter().any(|a| a == "--restricted"));
    let settings: serde_json::Value =
        serde_json::from_str(value_of(&req, "--settings").unwrap()).unwrap();
    assert_eq!(settings["sandbox"]["enabled"], true);
    assert_eq!(settings["sandbox"]["failIfUnavailable"], true);
    assert_eq!(req.tool_policy.sandbox.status, SandboxStatus::On);
    assert_eq!(req.tool_policy.setting_sources, Some(vec![]));
    // Without Bash there is nothing to sandbox.
    r.tools = vec!["Read".into(), "Edit".into()];
    let req = build(&r, "2.1.332", Operation::Execute).unwrap();
    assert_eq!(value_of(&req, "--settings"), None);
    assert_eq!(req.tool_policy.sandbox.status, SandboxStatus::NotNeeded);
}

#[test]
fn an_opt_in_to_setting_sources_drops_restricted_and_is_warned() {
    let req = build(&runner(), "2.1.332", Operation::Execute).unwrap();
    assert_eq!(value_of(&req, "--setting-sources"), Some("user"));
    assert!(!req.argv.iter().any(|a| a == "--restricted"));
    assert!(req.warnings.iter().any(|w| w.contains("settingSources")));
}

#[test]
fn bash_without_a_usable_sandbox_is_refused_unless_opted_out() {
    // A CLI whose sandbox settings were never verified.
    let err = build(&runner(), "2.1.100", Operation::Execute).unwrap_err();
    assert!(matches!(err, AssemblyError::SandboxUnavailable(_)), "{err}");
    assert!(!err.is_safety());
    // A machine without bubblewrap.
    let caps = captured("2.1.332");
    let r = runner();
    let missing = crate::sandbox::SandboxSupport {
        bubblewrap: None,
        socat: None,
        failure: None,
    };
    let err = assemble(&InvocationInput {
        runner: &r,
        capabilities: &caps,
        operation: Operation::Execute,
        schema: None,
        repo_root: Path::new("/repo"),
        session_id: None,
        protected: None,
        sandbox_support: Some(&crate::sandbox::SandboxProbe::known(missing)),
    })
    .unwrap_err();
    assert!(
        err.to_string().contains("apt-get install bubblewrap"),
        "{err}"
    );
    // Opted out: assembled, without the sandbox, and warned about.
    let req = build(&runner_for("2.1.100"), "2.1.100", Operation::Execute).unwrap();
    assert_eq!(req.tool_policy.sandbox.status, SandboxStatus::Off);
    assert!(req.warnings.iter().any(|w| w.contains("sandbox is off")));
}
