//! `specbridge resume RUN`: continue a run in its own folder (docs/resume.md).

use serde_json::json;
use specbridge_engine::exit;
use specbridge_engine::orchestrate;
use specbridge_engine::pipeline::ResolvedRunner;
use specbridge_engine::resume::{
    open_for_resume, plan_dry_run, Action, Forced, ResumeError, ResumeResult, ResumeSpec,
    ReuseDecision,
};
use specbridge_engine::store::StoreError;
use specbridge_engine::supervisor::{install_cancel_signals, CancelToken};
use specbridge_stages::{PipelineExecutor, RunContext};

use crate::args::ResumeArgs;
use crate::commands::detect::{self, Detection};
use crate::commands::load::load_valid;
use crate::commands::run::{self as run_cmd, given_options, preflight};
use crate::commands::Workspace;
use crate::error::{CliError, CliResult};
use crate::printer::Printer;
use crate::table::Table;

pub fn run(ws: &Workspace, printer: Printer, args: ResumeArgs) -> CliResult {
    let given = given_options(&args.overrides, &[])?;
    let json_out = args.overrides.json;
    let opened = open_for_resume(&ws.root, &args.run).map_err(|e| refused(printer, e))?;
    for f in &opened.findings {
        printer.err(format!(
            "{}: {}{}: {}",
            printer.warning_label(),
            f.code,
            f.file
                .as_deref()
                .map(|p| format!(" {p}"))
                .unwrap_or_default(),
            f.message
        ));
    }
    if let Some(bytes) = opened.torn_tail {
        let what = if args.dry_run {
            "would be set aside"
        } else {
            "is set aside"
        };
        printer.err(format!(
            "{}: events.jsonl ends in an incomplete line ({bytes} bytes, left by a crash); it {what} as events.jsonl.torn-N",
            printer.warning_label()
        ));
    }

    // The pipeline file as it is now: `-f`, else the path the run recorded.
    let file = args
        .file
        .file
        .clone()
        .or_else(|| Some(ws.root.join(&opened.record.pipeline.path)));
    let source = load_valid(ws, file, printer)?;
    let (options, ov) =
        orchestrate::resolve_options(&given, Some(&opened.record.options), &source.file);
    let cancel = CancelToken::new();
    let ctx = RunContext::new(
        &ws.root,
        &source,
        ov.clone(),
        cancel.clone(),
        options.allow_dirty,
    );
    let nodes = opened
        .nodes(&source)
        .map_err(|e| CliError::Config(e.to_string()))?;
    if let Some(p) = opened.unknown_reruns(&args.rerun, &nodes).first() {
        return Err(CliError::Config(format!(
            "--rerun {p}: no stage or fan-out instance of run {} has this id",
            opened.id
        )));
    }
    if !args.dry_run {
        preflight(ws, &nodes, options.allow_dirty, Some(&opened.dir))?;
    }

    if args.dry_run {
        let executor = PipelineExecutor::new(ctx);
        let decisions = plan_dry_run(
            &nodes,
            &opened.stages,
            executor.as_ref(),
            &opened.dir,
            &ws.root,
            &Forced::new(args.rerun.clone()),
        );
        print_decisions(printer, &opened.id, &decisions, json_out, true);
        return Ok(exit::OK);
    }

    let sandbox = run_cmd::command_sandbox(&ws.root, &source.file, &nodes, false)?;
    let mut ctx = ctx;
    ctx.bubblewrap = sandbox.bubblewrap;
    let commands = detect::runner_commands(&ctx, &nodes);
    let Detection {
        agent,
        runner,
        mut warnings,
        ..
    } = detect::detect(
        &ws.root,
        &commands,
        false,
        args.overrides.refresh_runner,
        printer,
    )?;
    warnings.extend(sandbox.warnings);
    for w in &warnings {
        printer.err(format!("{}: {w}", printer.warning_label()));
    }
    let (progress, subscriber) = crate::progress::subscribe(printer, json_out);
    let executor = PipelineExecutor::with_agent(ctx, agent);
    executor.resume_from(&opened.dir);
    let kill_grace = ResolvedRunner::resolve(&[&source.file.runner], &ov)
        .kill_grace
        .as_duration();
    let spec = ResumeSpec {
        root: ws.root.clone(),
        source,
        options,
        runner,
        warnings,
        executor,
        kill_grace,
        rerun: args.rerun.clone(),
        reverify: args.reverify,
        subscriber: Some(subscriber),
    };
    if !json_out {
        printer.err(format!("run {} resumed", opened.id));
    }
    let rt = run_cmd::runtime()?;
    let result = rt.block_on(async move {
        let _signals = install_cancel_signals(cancel.clone());
        let r = opened.resume(spec).await;
        if let Ok(mut progress) = progress.lock() {
            progress.finish();
        }
        r
    });
    let result = result.map_err(|e| refused(printer, e))?;
    print_result(printer, &result, json_out);
    Ok(result.run.exit_code)
}

/// A resume that could not start: in use or unreadable (exit 2), or records that
/// fail the integrity checks (exit 6, each finding printed).
fn refused(printer: Printer, e: ResumeError) -> CliError {
    match e {
        ResumeError::Tampered { ref findings, .. } => {
            printer.err(format!("{}: {e}", printer.error_label()));
            for f in findings {
                printer.err(format!(
                    "  [{}]{}: {}",
                    f.code,
                    f.file
                        .as_deref()
                        .map(|p| format!(" {p}"))
                        .unwrap_or_default(),
                    f.message
                ));
            }
            CliError::Reported(exit::SAFETY)
        }
        ResumeError::Store(StoreError::Lock(l)) => CliError::Config(l.to_string()),
        other => CliError::Config(other.to_string()),
    }
}

fn print_decisions(
    printer: Printer,
    run_id: &str,
    decisions: &[ReuseDecision],
    json_out: bool,
    dry_run: bool,
) {
    if json_out {
        printer.json(&json!({ "dryRun": dry_run, "runId": run_id, "stages": decisions }));
        return;
    }
    if dry_run {
        printer.out(format!(
            "dry run of resuming run {run_id}: nothing will be spawned"
        ));
    }
    let mut t = Table::new(&["STAGE", "DECISION", "REASON"]);
    for d in decisions {
        t.row(vec![
            d.stage.clone(),
            d.action.as_str().to_string(),
            d.reason_text(),
        ]);
    }
    printer.out(t.render().trim_end());
}

fn print_result(printer: Printer, r: &ResumeResult, json_out: bool) {
    if json_out {
        let mut v = run_cmd::summary_json(&r.run);
        v["resume"] = json!({
            "decisions": r.decisions,
            "orphans": r.orphans,
            "interrupted": r.interrupted,
            "tornTail": r.torn_tail,
        });
        printer.json(&v);
        return;
    }
    for o in &r.orphans {
        let what = if o.ended { "ended" } else { "left alone" };
        printer.err(format!(
            "orphaned agent of {} attempt {} (process group {}) {what}",
            o.stage, o.attempt, o.pgid
        ));
    }
    for id in &r.interrupted {
        printer.err(format!("{id} was interrupted by a crash; it runs again"));
    }
    let reused = r
        .decisions
        .iter()
        .filter(|d| d.action == Action::Reuse)
        .count();
    let rerun = r
        .decisions
        .iter()
        .filter(|d| d.action == Action::Rerun)
        .count();
    let retired = r
        .decisions
        .iter()
        .filter(|d| d.action == Action::Retire)
        .count();
    printer.out(format!(
        "resume: {reused} reused, {rerun} run again, {retired} retired"
    ));
    for d in r.decisions.iter().filter(|d| d.action != Action::Reuse) {
        printer.out(format!(
            "  {} {}: {}",
            d.action.as_str(),
            d.stage,
            d.reason_text()
        ));
    }
    run_cmd::print_summary(printer, &r.run, false);
}
