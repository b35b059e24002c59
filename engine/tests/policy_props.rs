//! "validate accepts ⇒ assembly accepts", as a property: for generated runner
//! sections (in the pipeline and in a stage, with hostile strings among the
//! ordinary ones), a pipeline file that `validate` accepts assembles the agent's
//! argv for every stage without a refusal, and the argv's allow rules are all
//! scoped to the repository or name Bash commands.

use std::path::Path;

use proptest::prelude::*;
use serde_json::{json, Value};
use specbridge_engine::evidence::ProtectedPaths;
use specbridge_engine::pipeline::{load_and_validate, ResolvedRunner, RunOverrides};
use specbridge_engine::runner::claude_code::argv::{assemble, InvocationInput, Operation};
use specbridge_engine::runner::claude_code::capabilities::{parse_version, Capabilities};
use specbridge_engine::runner::claude_code::help::HelpText;

fn captured_2_1_332() -> Capabilities {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../testkit/fixtures/claude-code/versions/2.1.332");
    let version = std::fs::read_to_string(dir.join("version.txt")).unwrap();
    let help = std::fs::read_to_string(dir.join("help.txt")).unwrap();
    Capabilities::detect(parse_version(&version), &HelpText::parse(&help))
}

/// Ordinary and hostile strings for every list a runner section holds.
fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("Read".to_string()),
        Just("Edit".to_string()),
        Just("Write".to_string()),
        Just("Bash".to_string()),
        Just("NotebookEdit".to_string()),
        Just("TodoWrite".to_string()),
        Just("WebFetch".to_string()),
        Just("Task".to_string()),
        Just("mcp__db__query".to_string()),
        Just("Bash(git status *)".to_string()),
        Just("Bash(cargo test:*)".to_string()),
        Just("Bash(*)".to_string()),
        Just("Bash( : * )".to_string()),
        Just("bash(**)".to_string()),
        Just("Bash(x) Edit(/**)".to_string()),
        Just("Bash(x),Read(/**)".to_string()),
        Just("Read(/**)".to_string()),
        Just("Edit(~/.ssh/**)".to_string()),
        Just("Edit(./.git/**)".to_string()),
        Just("--settings".to_string()),
        Just("{\"permissions\":{\"allow\":[\"Bash\"]}}".to_string()),
        Just("--add-dir=/".to_string()),
        Just("--append-system-prompt".to_string()),
        Just("--fallback-model".to_string()),
        Just("--bare".to_string()),
        Just("-p".to_string()),
        Just("--dangerously-skip-permissions".to_string()),
        Just("--permission-mode=auto".to_string()),
        Just("--tools=Bash".to_string()),
        Just("--mcp-config".to_string()),
        Just("haiku".to_string()),
        Just("user".to_string()),
        Just("project".to_string()),
        "[ -~]{0,12}",
        "\\PC{0,6}",
    ]
}

fn env_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("CLAUDE_CONFIG_DIR".to_string()),
        Just("claude_config_dir".to_string()),
        Just("CLAUDE_CODE_SHELL_PREFIX".to_string()),
        Just("CLAUDE_CODE_NEW_SANDBOX_KNOB".to_string()),
        Just("RUST_LOG".to_string()),
        "[A-Z_]{1,12}",
    ]
}

fn list() -> impl Strategy<Value = Option<Vec<String>>> {
    proptest::option::of(proptest::collection::vec(word(), 0..5))
}

fn sandbox() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        Just(Some(json!("off"))),
        (
            proptest::collection::vec(
                prop_oneof![
                    Just("/tmp/build-cache".to_string()),
                    Just("~/.cargo/registry".to_string()),
                    Just("/".to_string()),
                    Just("~/.claude".to_string()),
                    Just("target".to_string()),
                    "[ -~]{0,10}",
                ],
                0..3
            ),
            proptest::collection::vec(
                prop_oneof![
                    Just("crates.io".to_string()),
                    Just("*.npmjs.org".to_string()),
                    Just("*".to_string()),
                    "[ -~]{0,10}",
                ],
                0..3
            )
        )
            .prop_map(|(w, d)| Some(json!({"writablePaths": w, "allowedDomains": d}))),
    ]
}

fn runner_section() -> impl Strategy<Value = Value> {
    (
        (list(), list(), list(), list()),
        (
            list(),
            proptest::option::of(proptest::collection::btree_map(
                env_name(),
                "[a-z]{0,4}",
                0..3,
            )),
            proptest::option::of(prop_oneof![
                Just("default".to_string()),
                Just("acceptEdits".to_string()),
                Just("plan".to_string()),
                Just("auto".to_string()),
                Just("delegate".to_string()),
            ]),
            sandbox(),
        ),
    )
        .prop_map(
            |((tools, rules, deny, args), (sources, env, mode, sandbox))| {
                let mut r = serde_json::Map::new();
                let mut put = |k: &str, v: Option<Value>| {
                    if let Some(v) = v {
                        r.insert(k.into(), v);
                    }
                };
                put("tools", tools.map(|v| json!(v)));
                put("allowedBashRules", rules.map(|v| json!(v)));
                put("disallowedTools", deny.map(|v| json!(v)));
                put("commandArgs", args.map(|v| json!(v)));
                put("settingSources", sources.map(|v| json!(v)));
                put("env", env.map(|v| json!(v)));
                put("permissionMode", mode.map(|v| json!(v)));
                put("sandbox", sandbox);
                Value::Object(r)
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn validate_accepts_implies_assembly_accepts(
        top in runner_section(),
        stage in runner_section(),
        kind in prop_oneof![Just("execute"), Just("generate")],
    ) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("prompts")).unwrap();
        std::fs::write(dir.path().join("prompts/p.md"), "Do it.\n").unwrap();
        let mut stage_def = json!({"id": "s", "kind": kind, "prompt": "prompts/p.md", "runner": stage});
        if kind == "generate" {
            stage_def["output"] = json!({"schema": "builtin:document"});
        }
        let file = json!({"version": 1, "name": "p", "runner": top, "stages": [stage_def]});
        let path = dir.path().join("specbridge.yaml");
        std::fs::write(&path, serde_yaml::to_string(&file).unwrap()).unwrap();
        let Ok(valid) = load_and_validate(&path, dir.path()) else {
            return Ok(());
        };
        let p = &valid.pipeline.file;
        let mut layers = vec![&p.runner];
        layers.extend(p.stages[0].runner.as_deref());
        let runner = ResolvedRunner::resolve(&layers, &RunOverrides::default());
        let caps = captured_2_1_332();
        let protected = ProtectedPaths::new("specbridge.yaml", ["prompts/p.md"], Vec::<String>::new(), Vec::<String>::new());
        let operation = if kind == "execute" { Operation::Execute } else { Operation::Generate };
        let request = assemble(&InvocationInput {
            runner: &runner,
            capabilities: &caps,
            operation,
            schema: None,
            repo_root: dir.path(),
            session_id: None,
            protected: Some(&protected),
            sandbox_support: None,
        });
        let request = match request {
            Ok(r) => r,
            Err(e) => return Err(TestCaseError::fail(format!("validate accepted, assembly refused: {e}\n{file:#}"))),
        };
        for rule in &request.tool_policy.allowed_tools {
            prop_assert!(
                rule.ends_with("(./**)") || rule.starts_with("Bash(") || rule.starts_with("mcp__"),
                "unscoped allow rule {rule}"
            );
            prop_assert!(!matches!(rule.as_str(), "Bash(*)" | "Bash"), "{rule}");
        }
    }
}
