//! `specbridge validate` and `specbridge graph` on good and bad pipeline files:
//! each bad input gets its exact message (snapshot) and exit code.

use crate::common::{Output, TestContext};

/// A repository holding `yaml` as specbridge.yaml, with the prompt files the
/// fixtures name.
fn repo(yaml: &str) -> TestContext {
    let ctx = TestContext::new();
    ctx.write("specbridge.yaml", yaml);
    ctx.write("prompts/requirements.md", "Write requirements.\n");
    ctx.write("prompts/design.md", "Write a design.\n");
    ctx.write("prompts/implement.md", "Implement {{ item.id }}.\n");
    ctx
}

fn validate(yaml: &str) -> Output {
    repo(yaml).run(&["validate"])
}

/// Asserts the exit code, then snapshots everything printed.
macro_rules! check {
    ($name:literal, $yaml:expr, $code:expr) => {{
        let out = validate($yaml);
        assert_eq!(out.code, $code, "{}", out.snapshot());
        insta::assert_snapshot!($name, out.snapshot());
        out
    }};
}

const HEADER: &str = "version: 1\nname: demo\n";

fn with_stages(stages: &str) -> String {
    format!("{HEADER}stages:\n{stages}")
}

const GOOD: &str = "\
version: 1
name: digest-queue
runner:
  model: sonnet
  timeout: 15m
  maxStdoutBytes: 10MiB
verification:
  - { name: test, argv: [cargo, test], timeout: 10m }
stages:
  - id: requirements
    kind: generate
    prompt: prompts/requirements.md
    output: { schema: builtin:document, document: docs/requirements.md }
  - id: tasks
    kind: generate
    needs: [requirements]
    prompt: prompts/design.md
    output: { schema: builtin:tasks, document: docs/tasks.md }
  - id: implement
    kind: execute
    needs: [tasks]
    forEach: { stage: tasks, items: /tasks }
    prompt: prompts/implement.md
  - id: lint
    kind: check
    needs: [implement]
    argv: [cargo, clippy]
  - id: audit
    kind: check
    needs: [requirements]
    argv: [git, status]
";

#[test]
fn a_good_pipeline_is_valid() {
    check!("valid", GOOD, 0);
}

#[test]
fn valid_json_report() {
    let out = repo(GOOD).run(&["validate", "--json"]);
    assert_eq!(out.code, 0);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["valid"], true);
    assert_eq!(v["diagnostics"], serde_json::json!([]));
}

#[test]
fn empty_file() {
    check!("empty_file", "# nothing here yet\n", 2);
}

#[test]
fn not_yaml() {
    check!("not_yaml", "version: 1\nstages: [a, b\nname: x\n", 2);
}

/// Nesting past serde_yaml's 128 levels is its error at its place; a hostile
/// depth of 200,000 unclosed lists (which libyaml takes minutes over) is the
/// same error at the 128th (the top-level mapping is the first level).
#[test]
fn nesting_too_deep() {
    let deep = format!("version: 1\nname: x\nstages: {}", "[".repeat(200_000));
    let out = validate(&deep);
    assert_eq!(out.code, 2, "{}", out.snapshot());
    assert_eq!(
        out.stderr,
        "specbridge.yaml:3:136: error: the pipeline file is not valid YAML: recursion limit exceeded\nspecbridge.yaml: 1 error\n"
    );
}

#[test]
fn top_level_not_a_mapping() {
    check!("not_a_mapping", "- just\n- a list\n", 2);
}

#[test]
fn unsupported_version() {
    check!(
        "unsupported_version",
        "version: 2\nname: x\nsomething: new\nstages: []\n",
        2
    );
}

#[test]
fn unknown_key_with_did_you_mean() {
    check!(
        "unknown_key",
        &with_stages("  - id: lint\n    kind: check\n    argv: [cargo, clippy]\n    nedds: [x]\n"),
        2
    );
}

#[test]
fn missing_stage_id() {
    check!(
        "missing_id",
        &with_stages("  - kind: check\n    argv: [echo]\n"),
        2
    );
}

#[test]
fn duplicate_ids() {
    check!(
        "duplicate_ids",
        &with_stages(
            "  - id: lint\n    kind: check\n    argv: [a]\n  - id: lint\n    kind: check\n    argv: [b]\n"
        ),
        2
    );
}

#[test]
fn id_with_bad_characters() {
    check!(
        "bad_id",
        &with_stages("  - id: Lint Stage\n    kind: check\n    argv: [a]\n"),
        2
    );
}

#[test]
fn needs_a_missing_stage_with_did_you_mean() {
    check!(
        "unknown_need",
        &with_stages(
            "  - id: design\n    kind: check\n    argv: [a]\n  - id: tasks\n    kind: check\n    needs: [desgin]\n    argv: [b]\n"
        ),
        2
    );
}

#[test]
fn self_dependency() {
    check!(
        "self_dependency",
        &with_stages("  - id: lint\n    kind: check\n    needs: [lint]\n    argv: [a]\n"),
        2
    );
}

#[test]
fn three_stage_cycle_printed_as_its_path() {
    check!(
        "cycle",
        &with_stages(
            "  - id: a\n    kind: check\n    needs: [b]\n    argv: [x]\n  - id: b\n    kind: check\n    needs: [c]\n    argv: [x]\n  - id: c\n    kind: check\n    needs: [a]\n    argv: [x]\n"
        ),
        2
    );
}

#[test]
fn missing_prompt_file() {
    check!(
        "missing_prompt",
        &with_stages(
            "  - id: req\n    kind: generate\n    prompt: prompts/nope.md\n    output: { schema: builtin:document }\n"
        ),
        2
    );
}

#[test]
fn inline_prompt_needs_no_file() {
    let out = validate(&with_stages(
        "  - id: req\n    kind: generate\n    prompt: |\n      Write the requirements.\n    output: { schema: builtin:document }\n",
    ));
    assert_eq!(out.code, 0, "{}", out.snapshot());
}

#[test]
fn missing_schema_file() {
    check!(
        "missing_schema",
        &with_stages(
            "  - id: req\n    kind: generate\n    prompt: prompts/requirements.md\n    output: { schema: schemas/req.json }\n"
        ),
        2
    );
}

#[test]
fn unknown_builtin_schema() {
    check!(
        "unknown_builtin",
        &with_stages(
            "  - id: req\n    kind: generate\n    prompt: prompts/requirements.md\n    output: { schema: builtin:documents }\n"
        ),
        2
    );
}

#[test]
fn verification_argv_as_shell_string() {
    check!(
        "verification_shell_string",
        &format!(
            "{HEADER}verification:\n  - name: test\n    argv: cargo test --all\nstages:\n  - id: lint\n    kind: check\n    argv: [a]\n"
        ),
        2
    );
}

#[test]
fn check_argv_as_shell_string() {
    check!(
        "check_shell_string",
        &with_stages("  - id: lint\n    kind: check\n    argv: \"cargo clippy -- -D warnings\"\n"),
        2
    );
}

#[test]
fn check_argv_as_one_element_command_line() {
    check!(
        "check_one_element_line",
        &with_stages("  - id: lint\n    kind: check\n    argv: [\"cargo clippy --all\"]\n"),
        2
    );
}

#[test]
fn dangerously_skip_permissions_in_command_args() {
    check!(
        "skip_permissions_in_command_args",
        &format!(
            "{HEADER}runner:\n  commandArgs: [--verbose, --dangerously-skip-permissions]\nstages:\n  - id: lint\n    kind: check\n    argv: [a]\n"
        ),
        6
    );
}

#[test]
fn permission_mode_bypass() {
    check!(
        "mode_bypass",
        &format!(
            "{HEADER}runner:\n  permissionMode: bypassPermissions\nstages:\n  - id: lint\n    kind: check\n    argv: [a]\n"
        ),
        6
    );
}

#[test]
fn permission_mode_auto_in_a_stage_runner() {
    check!(
        "mode_auto",
        &with_stages(
            "  - id: impl\n    kind: execute\n    prompt: prompts/implement.md\n    runner:\n      permissionMode: auto\n"
        ),
        6
    );
}

#[test]
fn forbidden_values_in_rules_tools_and_env() {
    check!(
        "forbidden_in_rules_tools_env",
        &format!(
            "{HEADER}runner:\n  allowedBashRules: [\"Bash(claude --allow-dangerously-skip-permissions *)\"]\n  disallowedTools: [bypassPermissions]\n  commandArgs: [--permission-mode, auto]\n  env:\n    CLAUDE_FLAGS: --permission-mode=auto\nstages:\n  - id: lint\n    kind: check\n    argv: [a]\n"
        ),
        6
    );
}

#[test]
fn safety_is_reported_even_with_structural_errors() {
    check!(
        "safety_with_structural_errors",
        &format!(
            "{HEADER}runner:\n  permissionMode: bypassPermissions\n  tiemout: 5m\nstages:\n  - id: lint\n    kind: check\n    argv: [a]\n"
        ),
        6
    );
}

#[test]
fn document_path_with_parent_dir() {
    check!(
        "document_dotdot",
        &with_stages(
            "  - id: req\n    kind: generate\n    prompt: prompts/requirements.md\n    output: { schema: builtin:document, document: docs/../../outside.md }\n"
        ),
        2
    );
}

#[test]
fn absolute_document_path() {
    check!(
        "document_absolute",
        &with_stages(
            "  - id: req\n    kind: generate\n    prompt: prompts/requirements.md\n    output: { schema: builtin:document, document: /tmp/requirements.md }\n"
        ),
        2
    );
}

#[test]
fn document_in_a_protected_path() {
    check!(
        "document_protected",
        &format!(
            "{HEADER}protectedPaths: [db/migrations]\nstages:\n  - id: req\n    kind: generate\n    prompt: prompts/requirements.md\n    output: {{ schema: builtin:document, document: .git/notes.md }}\n  - id: mig\n    kind: generate\n    prompt: prompts/requirements.md\n    output: {{ schema: builtin:document, document: db/migrations/x.md }}\n"
        ),
        2
    );
}

#[test]
fn two_stages_writing_one_document() {
    check!(
        "duplicate_document",
        &with_stages(
            "  - id: req\n    kind: generate\n    prompt: prompts/requirements.md\n    output: { schema: builtin:document, document: docs/spec.md }\n  - id: design\n    kind: generate\n    prompt: prompts/design.md\n    output: { schema: builtin:document, document: ./docs//spec.md }\n"
        ),
        2
    );
}

#[test]
fn for_each_must_name_an_upstream_generate_stage() {
    check!(
        "for_each",
        &with_stages(
            "  - id: tasks\n    kind: generate\n    prompt: prompts/design.md\n    output: { schema: builtin:tasks }\n  - id: lint\n    kind: check\n    argv: [a]\n  - id: impl\n    kind: execute\n    needs: [lint]\n    prompt: prompts/implement.md\n    forEach: { stage: tasks, items: tasks }\n  - id: impl2\n    kind: execute\n    needs: [lint]\n    prompt: prompts/implement.md\n    forEach: { stage: lint, items: /tasks }\n"
        ),
        2
    );
}

#[test]
fn wrong_types_and_units() {
    check!(
        "types_and_units",
        &format!(
            "{HEADER}concurrency: two\nrunner:\n  timeout: 10 minutes\n  maxStdoutBytes: 10TB\n  maxTurns: -1\nstages:\n  - id: lint\n    kind: chek\n    needs: lint\n    argv: [sleep, 1]\n"
        ),
        2
    );
}

#[test]
fn fields_of_other_kinds() {
    check!(
        "kind_fields",
        &with_stages(
            "  - id: lint\n    kind: check\n    prompt: prompts/design.md\n    argv: [a]\n  - id: req\n    kind: generate\n    argv: [a]\n  - id: impl\n    kind: execute\n    prompt: prompts/implement.md\n    output: { schema: builtin:task-result, document: docs/x.md }\n"
        ),
        2
    );
}

#[test]
fn accept_edits_is_a_warning() {
    check!(
        "accept_edits_warning",
        &format!(
            "{HEADER}runner:\n  permissionMode: acceptEdits\nstages:\n  - id: impl\n    kind: execute\n    prompt: prompts/implement.md\n"
        ),
        0
    );
}

#[test]
fn every_problem_at_once_as_json() {
    let ctx = repo(&with_stages(
        "  - id: a\n    kind: check\n    needs: [ghost]\n    argv: [x]\n  - id: a\n    kind: check\n    argv: [y]\n",
    ));
    let out = ctx.run(&["validate", "--json"]);
    assert_eq!(out.code, 2);
    assert_eq!(out.stderr, "");
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["valid"], false);
    insta::assert_json_snapshot!("json_report", v);
}

#[test]
fn pipeline_file_not_found() {
    let ctx = TestContext::new();
    let out = ctx.run(&["validate", "-f", "pipelines/nope.yaml"]);
    assert_eq!(out.code, 2);
    insta::assert_snapshot!("file_not_found", out.snapshot());
}

#[test]
fn file_flag_is_relative_to_the_current_folder() {
    let ctx = repo("");
    ctx.write(
        "pipelines/p.yaml",
        &with_stages("  - id: x\n    kind: chek\n    argv: [a]\n"),
    );
    let out = ctx.run(&["validate", "-f", "pipelines/p.yaml"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.starts_with("pipelines/p.yaml:5:11: error: "),
        "{}",
        out.stderr
    );
}

#[test]
fn graph_formats() {
    let ctx = repo(GOOD);
    for format in ["mermaid", "dot", "json"] {
        let out = ctx.run(&["graph", "--format", format]);
        assert_eq!(out.code, 0, "{}", out.snapshot());
        insta::assert_snapshot!(format!("graph_{format}"), out.snapshot());
    }
}

#[test]
fn graph_of_an_invalid_pipeline_reports_its_problems() {
    let ctx = repo(&with_stages(
        "  - id: a\n    kind: check\n    needs: [b]\n    argv: [x]\n  - id: b\n    kind: check\n    needs: [a]\n    argv: [x]\n",
    ));
    let out = ctx.run(&["graph"]);
    assert_eq!(out.code, 2);
    assert_eq!(out.stdout, "");
    insta::assert_snapshot!("graph_cycle", out.snapshot());
}

#[test]
fn examples_validate() {
    let root = crate::common::workspace_root().join("examples");
    let mut seen = 0;
    for entry in std::fs::read_dir(&root).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.join("specbridge.yaml").is_file() {
            continue;
        }
        seen += 1;
        let out = TestContext::new()
            .command()
            .args(["-C"])
            .arg(&dir)
            .arg("validate")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(seen > 0);
}

/// The user's list of pipeline files whose structure passed
/// (`pipeline/checked_cache.rs`).
fn checked_list(ctx: &TestContext) -> String {
    std::fs::read_to_string(ctx.cache.path().join("specbridge/checked-pipelines"))
        .unwrap_or_default()
}

/// [`GOOD`] with a key the format does not have.
fn with_unknown_key() -> String {
    GOOD.replace("timeout: 15m", "timeout: 15m\n  colour: blue")
}

/// Validates `yaml` in `ctx`: it exits `code` and says each of `wanted`.
fn refused(ctx: &TestContext, yaml: &str, code: i32, wanted: &[&str]) {
    ctx.write("specbridge.yaml", yaml);
    let out = ctx.run(&["validate"]);
    assert_eq!(out.code, code, "{}", out.snapshot());
    for w in wanted {
        assert!(out.stderr.contains(w), "{}", out.stderr);
    }
}

/// A pass is remembered by the file's sha256; a refusal never is, so the same
/// broken bytes get their located messages every time.
#[test]
fn a_passed_structure_is_remembered_and_a_refused_one_never() {
    let ctx = repo(GOOD);
    assert_eq!(ctx.run(&["validate"]).code, 0);
    let sha = |text: &str| specbridge_engine::store::sha256_hex(text.as_bytes());
    assert!(checked_list(&ctx).lines().any(|l| l == sha(GOOD)));
    let broken = with_unknown_key();
    for _ in 0..2 {
        refused(&ctx, &broken, 2, &["unknown key `colour`"]);
    }
    assert!(!checked_list(&ctx).contains(&sha(&broken)));
}

/// The list vouches for bytes, not for a run: a list that names a broken file
/// (forged, say) leaves out the structural check alone. The typed reading, which
/// admits no unknown key either, still refuses the file with its place, and the
/// safety scan still finds a bypass flag.
#[test]
fn a_list_vouching_for_a_broken_file_does_not_let_it_through() {
    let ctx = repo(GOOD);
    assert_eq!(ctx.run(&["validate"]).code, 0);
    let header = checked_list(&ctx).lines().next().unwrap().to_string();
    let vouch = |text: &str| {
        std::fs::write(
            ctx.cache.path().join("specbridge/checked-pipelines"),
            format!(
                "{header}\n{}\n",
                specbridge_engine::store::sha256_hex(text.as_bytes())
            ),
        )
        .unwrap();
    };
    let broken = with_unknown_key();
    vouch(&broken);
    refused(&ctx, &broken, 2, &["specbridge.yaml:", "colour"]);
    let bypass = GOOD.replace(
        "  model: sonnet",
        "  model: sonnet\n  commandArgs: [--verbose, --dangerously-skip-permissions]",
    );
    vouch(&bypass);
    refused(&ctx, &bypass, 6, &["--dangerously-skip-permissions"]);
}
