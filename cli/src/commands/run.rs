//! `specbridge run`: validate, plan, run, summarise.

use std::path::Path;

use serde_json::json;
use specbridge_engine::orchestrate::{self, GivenOptions, RunSpec};
use specbridge_engine::pipeline::{DurationSpec, PipelineFile, RunOverrides, StageKind};
use specbridge_engine::sandbox::SandboxSupport;
use specbridge_engine::scheduler::{Node, StageExecutor};
use specbridge_engine::store::RunnerInfo;
use specbridge_engine::supervisor::{install_cancel_signals, CancelToken};
use specbridge_engine::{exit, StageStatus};
use specbridge_stages::{confine, PipelineExecutor, RunContext};

use crate::args::{OverrideArgs, RunArgs};
use crate::commands::detect::{self, Detection};
use crate::commands::load::load_valid;
use crate::commands::{replay, Workspace};
use crate::error::{CliError, CliResult};
use crate::printer::Printer;
use crate::table::{cost, duration, Table};

/// `--timeout` and friends, checked.
pub fn overrides(o: &OverrideArgs) -> CliResult<RunOverrides> {
    let timeout = match &o.timeout {
        Some(t) => {
            Some(DurationSpec::parse(t).map_err(|e| CliError::Config(format!("--timeout: {e}")))?)
        }
        None => None,
    };
    if let Some(x) = o.max_budget_usd {
        if !(x.is_finite() && x > 0.0) {
            return Err(CliError::Config(format!(
                "--max-budget-usd: expected a positive amount, got {x}"
            )));
        }
    }
    if o.max_turns == Some(0) {
        return Err(CliError::Config("--max-turns: expected at least 1".into()));
    }
    if let Some(x) = o.run_budget_usd {
        if !(x.is_finite() && x > 0.0) {
            return Err(CliError::Config(format!(
                "--run-budget-usd: expected a positive amount, got {x}"
            )));
        }
    }
    if o.concurrency == Some(0) {
        return Err(CliError::Config(
            "--concurrency: expected at least 1".into(),
        ));
    }
    Ok(RunOverrides {
        max_turns: o.max_turns,
        max_budget_usd: o.max_budget_usd,
        timeout,
        model: o.model.clone(),
    })
}

/// The flags `run` and `resume` share, checked.
pub fn given_options(o: &OverrideArgs, only: &[String]) -> CliResult<GivenOptions> {
    Ok(GivenOptions {
        concurrency: o.concurrency,
        only: only.to_vec(),
        fail_fast: o.fail_fast,
        allow_dirty: o.allow_dirty,
        overrides: overrides(o)?,
        run_budget_usd: o.run_budget_usd,
    })
}

/// What `run` and `resume` refuse before anything is spawned or created
/// (detection included), each with exit 2: agent stages outside a repository's
/// root, execute stages on a tree with changes that are not the run's own
/// (`run_dir`, resume) unless `--allow-dirty`.
pub fn preflight(
    ws: &Workspace,
    nodes: &[Node],
    allow_dirty: bool,
    run_dir: Option<&Path>,
) -> CliResult<()> {
    if nodes.iter().any(|n| n.kind.is_agent()) {
        specbridge_stages::working_tree::require_repository_root(&ws.root)
            .map_err(CliError::Config)?;
    }
    if nodes.iter().any(|n| n.kind == StageKind::Execute) {
        specbridge_stages::working_tree::require_clean_start(&ws.root, allow_dirty, run_dir)
            .map_err(CliError::Config)?;
    }
    Ok(())
}

pub fn run(ws: &Workspace, printer: Printer, args: RunArgs) -> CliResult {
    // Paths on the command line are the user's, relative to where they stand, even
    // when the run happens in a scaffold.
    let replay_dir = args.replay.replay.as_deref().map(replay::from_cwd);
    let Some(scaffold_dir) = args.scaffold.clone() else {
        return run_in(ws, printer, args, replay_dir.as_deref());
    };
    let scaffold = replay::scaffold_workspace(&scaffold_dir, printer, !args.no_keep)?;
    let mut args = args;
    // `-f` names a file inside the scaffold.
    if let Some(f) = args.file.file.take() {
        args.file.file = Some(if f.is_absolute() {
            f
        } else {
            scaffold.root.join(f)
        });
    }
    let discard = args.no_keep;
    let result = run_in(&scaffold, printer, args, replay_dir.as_deref());
    if discard {
        let _ = std::fs::remove_dir_all(&scaffold.root);
    } else {
        printer.err(format!("scaffold kept at {}", scaffold.root.display()));
    }
    result
}

fn run_in(ws: &Workspace, printer: Printer, args: RunArgs, replay_dir: Option<&Path>) -> CliResult {
    let source = load_valid(ws, args.file.file.clone(), printer)?;
    let given = given_options(&args.overrides, &args.only)?;
    let (options, ov) = orchestrate::resolve_options(&given, None, &source.file);
    let nodes = orchestrate::plan_nodes(&source.file, &args.only)
        .map_err(|e| CliError::Config(e.to_string()))?;
    if !args.dry_run {
        preflight(ws, &nodes, options.allow_dirty, None)?;
    }
    let sandbox = command_sandbox(&ws.root, &source.file, &nodes, args.dry_run)?;
    let cancel = CancelToken::new();
    let mut ctx = RunContext::new(
        &ws.root,
        &source,
        ov.clone(),
        cancel.clone(),
        options.allow_dirty,
    );
    ctx.bubblewrap = sandbox.bubblewrap;
    // Recordings are audited before anything else happens.
    let replay = replay::setup(&ctx, &args.replay, replay_dir)?;
    // Agent stages need the runner: detected once, before anything is created —
    // unless every one of them is replayed.
    let commands = if replay.forced.is_some() && !replay.live_when_missing {
        Vec::new()
    } else {
        detect::runner_commands(&ctx, &nodes)
    };
    let Detection {
        mut agent,
        mut runner,
        mut warnings,
        assumption,
    } = detect::detect(
        &ws.root,
        &commands,
        args.dry_run,
        args.overrides.refresh_runner,
        printer,
    )?;
    if let Some(recording) = &replay.forced {
        let from = recording.dir().display().to_string();
        warnings.push(format!("agent stages are replayed from {from}"));
        if runner.is_none() {
            runner = Some(RunnerInfo {
                kind: "replay".into(),
                command: from,
                version: None,
                capabilities: serde_json::Value::Null,
            });
        }
    }
    agent.replay = replay;
    warnings.extend(sandbox.warnings);
    let json_out = args.overrides.json;
    for w in &warnings {
        printer.err(format!("{}: {w}", printer.warning_label()));
    }

    if args.dry_run {
        let executor = PipelineExecutor::with_agent(ctx, agent);
        return dry_run(printer, &nodes, executor.as_ref(), json_out, assumption);
    }

    let (progress, subscriber) = crate::progress::subscribe(printer, json_out);
    let executor = PipelineExecutor::with_agent(ctx, agent);

    let spec = RunSpec {
        root: ws.root.clone(),
        source,
        options,
        runner,
        warnings,
        executor,
        subscriber: Some(subscriber),
    };
    let rt = runtime()?;
    let result = rt.block_on(async move {
        let _signals = install_cancel_signals(cancel.clone());
        let r = orchestrate::execute_run(spec, |run| {
            if !json_out {
                printer.err(format!("run {} started", run.id()));
            }
        })
        .await;
        if let Ok(mut progress) = progress.lock() {
            progress.finish();
        }
        r
    });
    let result = result.map_err(|e| CliError::Config(e.to_string()))?;
    // `--no-keep` deletes the scaffold after this: its paths are not worth printing.
    print_summary_of(printer, &result, json_out, args.no_keep);
    Ok(result.exit_code)
}

/// The sandbox of the commands specbridge runs itself, settled before anything is
/// created: a confined command without a working bubblewrap refuses the run
/// (exit 2). A dry run only warns; it spawns nothing, not even the probe.
pub(crate) fn command_sandbox(
    root: &Path,
    file: &PipelineFile,
    nodes: &[Node],
    dry_run: bool,
) -> CliResult<confine::SandboxPreflight> {
    let commands = confine::planned_commands(file, nodes);
    let mut found = if dry_run {
        confine::preflight(&commands, || Ok("bwrap".into()))
            .map(|p| confine::SandboxPreflight {
                bubblewrap: None,
                ..p
            })
            .unwrap_or_default()
    } else {
        confine::preflight(&commands, || {
            SandboxSupport::detect().bubblewrap_for_commands()
        })
        .map_err(CliError::Config)?
    };
    let target = std::env::var_os("CARGO_TARGET_DIR").map(std::path::PathBuf::from);
    found.warnings.extend(confine::cargo_target_warnings(
        &commands,
        root,
        target.as_deref(),
    ));
    Ok(found)
}

/// A runtime for one run.
pub(crate) fn runtime() -> CliResult<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Other(format!("failed to start the async runtime: {e}")))
}

fn dry_run(
    printer: Printer,
    nodes: &[Node],
    executor: &dyn StageExecutor,
    json_out: bool,
    assumption: Option<String>,
) -> CliResult {
    let order = topo(nodes);
    if json_out {
        let plan: Vec<_> = order
            .iter()
            .map(|n| json!({ "id": n.id, "kind": n.kind, "needs": n.needs, "forEach": n.placeholder, "argv": executor.describe(n) }))
            .collect();
        printer.json(&json!({ "dryRun": true, "assumption": assumption, "stages": plan }));
        return Ok(exit::OK);
    }
    printer.out("dry run: nothing will be spawned");
    if let Some(a) = assumption {
        printer.out(format!("note: {a}"));
    }
    for n in order {
        let needs = if n.needs.is_empty() {
            String::new()
        } else {
            format!(" (needs {})", n.needs.join(", "))
        };
        let fan = if n.placeholder { ", one per item" } else { "" };
        printer.out(format!("{} [{}{fan}]{needs}", n.id, n.kind.as_str()));
        for line in executor.describe(n) {
            printer.out(format!("    $ {line}"));
        }
    }
    Ok(exit::OK)
}

/// Nodes in dependency order, ties broken by id.
pub(crate) fn topo(nodes: &[Node]) -> Vec<&Node> {
    orchestrate::plan_order(nodes)
}

/// The `--json` summary of a run.
pub(crate) fn summary_json(r: &orchestrate::RunResult) -> serde_json::Value {
    let stages: Vec<_> = topo(&r.outcome.nodes)
        .iter()
        .map(|n| {
            let rep = r.outcome.reports.get(&n.id);
            json!({
                "id": n.id,
                "status": r.outcome.statuses.get(&n.id).copied().unwrap_or(StageStatus::Pending),
                "reused": rep.is_some_and(|x| x.reused),
                "evidenceStatus": rep.and_then(|x| x.evidence_status),
                "outcome": rep.and_then(|x| x.outcome.clone()),
                "durationMs": rep.and_then(|x| x.duration_ms),
                "costUsd": rep.map(|x| x.cost_usd).unwrap_or(0.0),
                "tokens": rep.map(|x| x.tokens).unwrap_or_default(),
            })
        })
        .collect();
    json!({
        "runId": r.run_id,
        "runDir": r.run_dir,
        "status": r.status,
        "exitCode": r.exit_code,
        "totals": r.outcome.totals,
        "stages": stages,
    })
}

pub(crate) fn print_summary(printer: Printer, r: &orchestrate::RunResult, json_out: bool) {
    print_summary_of(printer, r, json_out, false);
}

fn print_summary_of(printer: Printer, r: &orchestrate::RunResult, json_out: bool, deleted: bool) {
    if json_out {
        let mut v = summary_json(r);
        if deleted {
            v["runDir"] = serde_json::Value::Null;
        }
        printer.json(&v);
        return;
    }
    let nodes = topo(&r.outcome.nodes);
    let mut t = Table::new(&["STAGE", "STATUS", "EVIDENCE", "DURATION", "COST", "OUTCOME"]);
    for n in &nodes {
        let rep = r.outcome.reports.get(&n.id);
        t.row(vec![
            n.id.clone(),
            if rep.is_some_and(|x| x.reused) {
                "reused".to_string()
            } else {
                r.outcome
                    .statuses
                    .get(&n.id)
                    .map_or("pending", |s| s.as_str())
                    .to_string()
            },
            rep.and_then(|x| x.evidence_status)
                .map_or("-", |e| e.as_str())
                .to_string(),
            duration(rep.and_then(|x| x.duration_ms)),
            cost(rep.map(|x| x.cost_usd).unwrap_or(0.0)),
            rep.and_then(|x| x.outcome.clone()).unwrap_or_default(),
        ]);
    }
    printer.out(t.render().trim_end());
    printer.out(format!(
        "\nrun {} {} (exit {}), {}, {} tokens",
        r.run_id,
        r.status.as_str(),
        r.exit_code,
        cost(r.outcome.totals.cost_usd),
        crate::table::thousands(r.outcome.totals.tokens.total())
    ));
    if deleted {
        printer.out("records: deleted with the scaffold (--no-keep)");
        return;
    }
    printer.out(format!("records: {}", r.run_dir.display()));
    // From where the user stands: a run in another folder (a scaffold, `-C`) needs
    // `-C` to be found again.
    let root = r.run_dir.ancestors().nth(3).map(Path::to_path_buf);
    let here = std::env::current_dir().ok();
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let at = match (&root, &here) {
        (Some(root), Some(here)) if canon(root) != canon(here) => {
            format!("-C {} ", root.display())
        }
        _ => String::new(),
    };
    let short = &r.run_id[..8];
    printer.out(format!("next: specbridge {at}runs show {short}"));
    printer.out(format!("next: specbridge {at}runs audit {short}"));
    printer.out(format!("next: specbridge {at}runs report {short}"));
}
