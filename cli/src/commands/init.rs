//! `specbridge init`: write a starter pipeline fitted to the project.

use specbridge_stages::init::{init, InitOptions, TestCommand, SPEC_FILE};

use crate::args::InitArgs;
use crate::commands::Workspace;
use crate::error::{CliError, CliResult};
use crate::printer::Printer;

pub(super) fn run(ws: &Workspace, args: InitArgs, printer: Printer) -> CliResult {
    let test = match args.test.as_deref() {
        None => None,
        Some(words) => Some(given_test(words)?),
    };
    let report = match init(
        &ws.root,
        InitOptions {
            template: args.template.name(),
            force: args.force,
            test,
        },
    ) {
        Ok(report) => report,
        Err(e) => return Err(CliError::Init(e)),
    };
    for f in &report.written {
        printer.out(format!("wrote {f}"));
    }
    if report.kept_spec {
        printer.out(format!("kept {SPEC_FILE} (yours)"));
    }
    if report.gitignore_updated {
        printer.out("added .specbridge/ to .gitignore");
    }
    match &report.test {
        Some(t) => printer.out(format!(
            "tests: `{}` ({}), required after every execute stage, and allowed to the agent as {}",
            t.display(),
            t.found,
            t.bash_rule
        )),
        None => printer.err(format!(
            "{}: no test command detected; the starter's only check (`git diff --check`) cannot fail a broken build. Rerun with --force --test \"<command>\" or edit `verification:`",
            printer.warning_label()
        )),
    }
    printer.out(format!("next: describe the change in {SPEC_FILE}"));
    printer.out("next: git add -A && git commit -m \"specbridge starter\"   (a run starts from a clean tree)");
    printer.out("next: specbridge validate && specbridge run --dry-run");
    Ok(0)
}

/// `--test "cargo test --workspace"`: split on whitespace (no shell).
fn given_test(words: &str) -> CliResult<TestCommand> {
    let argv: Vec<String> = words.split_whitespace().map(str::to_owned).collect();
    if argv.is_empty() {
        return Err(CliError::Config("--test: the command is empty".into()));
    }
    Ok(TestCommand::from_argv("--test", argv))
}
