//! How a run, a resume or a dry run ended: the table and the next commands on a
//! terminal, one JSON object with `--json`.

use std::path::Path;

use serde_json::json;
use specbridge_engine::orchestrate::{plan_order, RunResult};
use specbridge_engine::resume::{Action, ReuseDecision};
use specbridge_engine::StageStatus;
use specbridge_stages::session::{PlannedStage, SessionEnd};

use crate::printer::Printer;
use crate::table::{cost, duration, Table};

/// How a session ended, printed.
pub(crate) fn ended(printer: Printer, end: &SessionEnd, json_out: bool) {
    match end {
        SessionEnd::Planned { stages, assumption } => {
            planned(printer, stages, assumption.as_deref(), json_out);
        }
        SessionEnd::ResumePlanned {
            run_id,
            decisions: d,
        } => decisions(printer, run_id, d, json_out, true),
        SessionEnd::Finished {
            result,
            records_deleted,
        } => finished(printer, result, json_out, *records_deleted),
    }
}

/// `run --dry-run`: the plan and every argv that would run.
fn planned(printer: Printer, stages: &[PlannedStage], assumption: Option<&str>, json_out: bool) {
    if json_out {
        let plan: Vec<_> = stages
            .iter()
            .map(|s| {
                let n = &s.node;
                json!({ "id": n.id, "kind": n.kind, "needs": n.needs, "forEach": n.placeholder, "argv": s.argv })
            })
            .collect();
        printer.json(&json!({ "dryRun": true, "assumption": assumption, "stages": plan }));
        return;
    }
    use std::fmt::Write as _;
    // One text for the whole listing, not a string a line: 10,000 stages print
    // 20,000 lines.
    let mut text = String::from("dry run: nothing will be spawned");
    if let Some(a) = assumption {
        let _ = write!(text, "\nnote: {a}");
    }
    for s in stages {
        let n = &s.node;
        let fan = if n.placeholder { ", one per item" } else { "" };
        let _ = write!(text, "\n{} [{}{fan}]", n.id, n.kind.as_str());
        for (i, need) in n.needs.iter().enumerate() {
            text.push_str(if i == 0 { " (needs " } else { ", " });
            text.push_str(need);
        }
        if !n.needs.is_empty() {
            text.push(')');
        }
        for line in &s.argv {
            text.push_str("\n    $ ");
            text.push_str(line);
        }
    }
    printer.out(text);
}

/// The `--json` summary of a run.
fn summary_json(r: &RunResult) -> serde_json::Value {
    let stages: Vec<_> = plan_order(&r.outcome.nodes)
        .iter()
        .map(|n| {
            let rep = r.outcome.reports.get(&n.id);
            json!({
                "id": n.id,
                "status": r.outcome.statuses.get(&n.id).copied().unwrap_or(StageStatus::Pending),
                "reused": rep.is_some_and(|x| x.reused),
                "evidenceStatus": rep.and_then(|x| x.evidence_status),
                "outcome": rep.and_then(|x| x.reason.clone()),
                "durationMs": rep.and_then(|x| x.duration_ms),
                "costUsd": rep.map_or(0.0, |x| x.cost_usd),
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

/// A finished run or resume; `deleted`: its records went with the scaffold.
fn finished(printer: Printer, r: &RunResult, json_out: bool, deleted: bool) {
    if let Some(resume) = &r.resume {
        return resumed(printer, r, resume, json_out);
    }
    table(printer, r, json_out, deleted);
}

fn table(printer: Printer, r: &RunResult, json_out: bool, deleted: bool) {
    if json_out {
        let mut v = summary_json(r);
        if deleted {
            v["runDir"] = serde_json::Value::Null;
        }
        printer.json(&v);
        return;
    }
    let nodes = plan_order(&r.outcome.nodes);
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
            cost(rep.map_or(0.0, |x| x.cost_usd)),
            rep.and_then(|x| x.reason.clone()).unwrap_or_default(),
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

/// `resume --dry-run`: per stage, reuse or rerun and why.
fn decisions(
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

fn resumed(
    printer: Printer,
    run: &RunResult,
    r: &specbridge_engine::orchestrate::ResumeReport,
    json_out: bool,
) {
    if json_out {
        let mut v = summary_json(run);
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
    table(printer, run, false, false);
}
