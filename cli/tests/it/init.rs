//! `specbridge init`.

use crate::common::TestContext;

#[test]
fn init_writes_a_starter_that_validates() {
    let ctx = TestContext::new();
    let out = ctx.run(&["init", "--template", "spec-to-task"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    insta::assert_snapshot!(out.stdout, @r#"
    wrote specbridge.yaml
    wrote prompts/requirements.md
    wrote prompts/design.md
    wrote prompts/tasks.md
    wrote prompts/implement.md
    wrote SPEC.md
    added .specbridge/ to .gitignore
    next: describe the change in SPEC.md
    next: git add -A && git commit -m "specbridge starter"   (a run starts from a clean tree)
    next: specbridge validate && specbridge run --dry-run
    "#);
    insta::assert_snapshot!(out.stderr, @r#"warning: no test command detected; the starter's only check (`git diff --check`) cannot fail a broken build. Rerun with --force --test "<command>" or edit `verification:`"#);
    let v = ctx.run(&["validate"]);
    assert_eq!(v.code, 0, "the starter must validate: {}", v.snapshot());
    assert!(ctx.read("SPEC.md").starts_with("# Spec"));
    assert_eq!(ctx.read(".gitignore").lines().last(), Some(".specbridge/"));
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
    insta::assert_snapshot!(out.stderr, @"error: refusing to overwrite existing files: prompts/design.md (--force replaces them)");
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
        out.stderr.contains("[possible values: spec-to-task]"),
        "{}",
        out.stderr
    );
    let help = ctx.run(&["init", "--help"]);
    assert!(help.stdout.contains("spec-to-task"), "{}", help.stdout);
}

#[test]
fn force_replaces_the_starter_but_never_the_spec() {
    let ctx = TestContext::new();
    ctx.write("SPEC.md", "my spec\n");
    ctx.write("prompts/design.md", "mine\n");
    let out = ctx.run(&["init", "--force", "--test", "make check"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    assert_ne!(ctx.read("prompts/design.md"), "mine\n");
    assert_eq!(ctx.read("SPEC.md"), "my spec\n");
    assert!(out.stdout.contains("kept SPEC.md"), "{}", out.stdout);
    let yaml = ctx.read("specbridge.yaml");
    assert!(yaml.contains(r#"argv: ["make", "check"]"#), "{yaml}");
    assert!(yaml.contains(r#"- "Bash(make check:*)""#), "{yaml}");
}
