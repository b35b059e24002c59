//! `specbridge runner doctor`: what the installed agent CLI is and whether it can be used.

use std::path::PathBuf;

use specbridge_engine::runner::claude_code::doctor::SandboxReport;
use specbridge_engine::runner::claude_code::{
    diagnose, AuthStatus, DoctorOptions, DoctorReport, DoctorStatus,
};
use specbridge_stages::session::probe_path;

use crate::commands::Workspace;
use crate::error::{CliError, CliResult};
use crate::printer::Printer;

pub(super) fn run(
    ws: &Workspace,
    kind: &str,
    command: Option<PathBuf>,
    file: Option<PathBuf>,
    json: bool,
    printer: Printer,
) -> CliResult {
    if kind != "claude-code" {
        return Err(CliError::Config(format!(
            "unknown runner kind `{kind}`; the only runner is `claude-code`"
        )));
    }
    let (command, source) = match command {
        Some(p) => (p.to_string_lossy().into_owned(), "--command".to_string()),
        None => pipeline_command(ws, file)?
            .unwrap_or_else(|| ("claude".to_string(), "default".to_string())),
    };

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CliError::Runtime)?;
    let mut report = runtime.block_on(diagnose(&command, &DoctorOptions::from_env()));
    if report.capabilities.is_some() {
        let support =
            specbridge_engine::sandbox::SandboxSupport::detect(specbridge_engine::CacheUse::Never);
        report.sandbox = Some(SandboxReport::check(report.capabilities.as_ref(), &support));
    }
    if json {
        printer.json(&report);
    } else {
        print_table(&report, printer, &source);
    }
    Ok(report.exit_code())
}

fn print_table(report: &DoctorReport, printer: Printer, source: &str) {
    let command = match &report.resolved_path {
        Some(p) if *p != report.command => format!("{} ({p})", report.command),
        _ => report.command.clone(),
    };
    let status = match report.status {
        DoctorStatus::Available if !report.degraded.is_empty() => {
            printer.paint("available, degraded", "33")
        }
        DoctorStatus::Available => printer.paint("available", "32"),
        other => printer.paint(other.as_str(), "1;31"),
    };
    let auth = match report.auth {
        AuthStatus::NotChecked => "not checked".to_string(),
        other => other.as_str().to_string(),
    };
    printer.out("Claude Code runner");
    printer.out(format!("  command  {command}"));
    printer.out(format!("  from     {source}"));
    if let Some(v) = &report.version {
        printer.out(format!("  version  {v}"));
    }
    printer.out(format!("  status   {status}"));
    if report.capabilities.is_some() {
        printer.out(format!("  auth     {auth}"));
    }
    if let Some(e) = &report.error {
        printer.out(format!("  error    {e}"));
    }
    if let Some(s) = &report.sandbox {
        match &s.problem {
            None => printer.out("  sandbox  works (stages that allow Bash run inside it)"),
            Some(p) => printer.out(format!("  sandbox  cannot run: {p}")),
        }
    }
    print_gaps(
        printer,
        "Missing required flags (nothing will be run):",
        &report.missing,
    );
    print_gaps(printer, "Degraded capabilities:", &report.degraded);
    if !report.warnings.is_empty() {
        printer.out("");
        printer.out("Notes:");
        for w in &report.warnings {
            printer.out(format!("  - {w}"));
        }
    }
    if let Some(hint) = hint(report) {
        printer.out("");
        printer.out(hint);
    }
}

fn print_gaps(
    printer: Printer,
    title: &str,
    gaps: &[specbridge_engine::runner::claude_code::CapabilityGap],
) {
    if gaps.is_empty() {
        return;
    }
    let width = gaps.iter().map(|g| g.flag.len()).max().unwrap_or(0);
    printer.out("");
    printer.out(title);
    for g in gaps {
        printer.out(format!("  {:width$}  {}", g.flag, g.meaning));
    }
}

fn hint(report: &DoctorReport) -> Option<&'static str> {
    match report.status {
        DoctorStatus::Available => None,
        DoctorStatus::Unauthenticated => {
            Some("Log in with `claude auth login`, or set ANTHROPIC_API_KEY for the runner.")
        }
        DoctorStatus::Incompatible => {
            Some("Install a newer Claude Code: `npm install -g @anthropic-ai/claude-code`.")
        }
        DoctorStatus::Unavailable => Some(
            "Install Claude Code (`npm install -g @anthropic-ai/claude-code`) or point --command at it.",
        ),
        DoctorStatus::Error => None,
    }
}

/// The pipeline's `runner.command` (as the run would probe it) and where it came
/// from; `None` without a pipeline file. An explicit `-f` must exist and parse; the
/// default file is optional.
fn pipeline_command(ws: &Workspace, file: Option<PathBuf>) -> CliResult<Option<(String, String)>> {
    let explicit = file.is_some();
    let path = ws.pipeline_path(file);
    if !explicit && !path.is_file() {
        return Ok(None);
    }
    let loaded = specbridge_engine::pipeline::load::load(&path).map_err(|diagnostics| {
        CliError::Config(format!(
            "{}: cannot read the runner from it ({} problem{}; `specbridge validate` lists them)",
            path.display(),
            diagnostics.len(),
            if diagnostics.len() == 1 { "" } else { "s" }
        ))
    })?;
    let shown = path
        .strip_prefix(&ws.root)
        .unwrap_or(&path)
        .display()
        .to_string();
    Ok(Some(match loaded.file.runner.command.as_deref() {
        Some(command) => (
            probe_path(&ws.root, command),
            format!("{shown} (runner.command)"),
        ),
        None => (
            "claude".to_string(),
            format!("{shown} (no runner.command: the default)"),
        ),
    }))
}
