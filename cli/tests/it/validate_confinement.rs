//! `specbridge validate` on files the pipeline names outside the repository and on
//! ids too long for a folder name (docs/claude-code-runner.md "Paths"): each refused with its
//! location, exit 2.

use crate::common::{Output, TestContext};

fn validate(yaml: &str, setup: impl FnOnce(&TestContext)) -> Output {
    let ctx = TestContext::new();
    ctx.write("specbridge.yaml", yaml);
    ctx.write("prompts/requirements.md", "Write requirements.\n");
    setup(&ctx);
    ctx.run(&["validate"])
}

fn generate_stage(prompt: &str, schema: &str) -> String {
    format!(
        "version: 1\nname: demo\nstages:\n  - id: requirements\n    kind: generate\n    prompt: {prompt}\n    output: {{ schema: {schema} }}\n"
    )
}

#[test]
fn a_prompt_climbing_out_of_the_repository_is_refused() {
    let out = validate(
        &generate_stage("../../../../etc/passwd", "builtin:document"),
        |_| {},
    );
    assert_eq!(out.code, 2, "{}", out.snapshot());
    insta::assert_snapshot!("prompt_dotdot_outside", out.snapshot());
}

#[test]
fn a_symlinked_prompt_pointing_outside_is_refused() {
    let out = validate(
        &generate_stage("prompts/linked.md", "builtin:document"),
        |ctx| std::os::unix::fs::symlink("/etc/passwd", ctx.path("prompts/linked.md")).unwrap(),
    );
    assert_eq!(out.code, 2, "{}", out.snapshot());
    insta::assert_snapshot!("prompt_symlink_outside", out.snapshot());
}

#[test]
fn a_schema_outside_the_repository_is_refused() {
    let out = validate(
        &generate_stage("prompts/requirements.md", "../../../../etc/passwd"),
        |_| {},
    );
    assert_eq!(out.code, 2, "{}", out.snapshot());
    insta::assert_snapshot!("schema_outside", out.snapshot());
}

#[test]
fn a_stage_id_too_long_for_a_folder_name_is_refused() {
    let id = "a".repeat(201);
    let yaml = format!(
        "version: 1\nname: demo\nstages:\n  - id: {id}\n    kind: check\n    argv: [\"true\"]\n"
    );
    let out = validate(&yaml, |_| {});
    assert_eq!(out.code, 2, "{}", out.snapshot());
    insta::assert_snapshot!("id_too_long", out.snapshot());
    // 200 bytes is the limit, not a refusal.
    let yaml = yaml.replace(&id, &"a".repeat(200));
    let out = validate(&yaml, |_| {});
    assert_eq!(out.code, 0, "{}", out.snapshot());
}
