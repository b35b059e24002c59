//! `specbridge init`.

use crate::common::TestContext;

#[test]
fn init_writes_a_starter_that_validates() {
    let ctx = TestContext::new();
    let out = ctx.run(&["init", "--template", "spec-to-task"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    insta::assert_snapshot!(out.stdout, @r"
    wrote specbridge.yaml
    wrote prompts/requirements.md
    wrote prompts/design.md
    wrote prompts/tasks.md
    wrote prompts/implement.md
    wrote .gitignore
    next: describe the change in SPEC.md, set your test command under `verification:`, then `specbridge validate` and `specbridge run --dry-run`
    ");
    let v = ctx.run(&["validate"]);
    assert_eq!(v.code, 0, "the starter must validate: {}", v.snapshot());
    assert!(ctx.read(".gitignore").lines().any(|l| l == ".specbridge/"));
}

#[test]
fn init_adds_the_run_store_to_an_existing_gitignore_once() {
    let ctx = TestContext::new();
    ctx.write(".gitignore", "target/");
    let out = ctx.run(&["init"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let text = ctx.read(".gitignore");
    assert!(text.starts_with("target/\n"), "{text}");
    assert_eq!(text.lines().filter(|l| *l == ".specbridge/").count(), 1);

    let again = TestContext::new();
    again.write(".gitignore", "/.specbridge\n");
    assert_eq!(again.run(&["init"]).code, 0);
    assert_eq!(again.read(".gitignore"), "/.specbridge\n");
}

#[test]
fn init_refuses_to_overwrite_and_writes_nothing() {
    let ctx = TestContext::new();
    ctx.write("prompts/design.md", "mine\n");
    let out = ctx.run(&["init"]);
    assert_eq!(out.code, 2);
    insta::assert_snapshot!(out.stderr, @"error: refusing to overwrite existing files: prompts/design.md");
    assert_eq!(ctx.read("prompts/design.md"), "mine\n");
    assert!(
        !ctx.path("specbridge.yaml").exists(),
        "nothing is written when anything exists"
    );
}

#[test]
fn init_names_the_templates_it_has() {
    let ctx = TestContext::new();
    let out = ctx.run(&["init", "--template", "nope"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("unknown template `nope`; available: spec-to-task"),
        "{}",
        out.stderr
    );
}
