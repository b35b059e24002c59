//! `specbridge runs list`, `runs show` (a run, or one stage with `stage.rs`) and
//! `runs report` (`report.rs`).

pub(crate) mod report;
pub(crate) mod stage;

use std::path::Path;

use serde_json::{json, Value};
use specbridge_engine::redact::Redactor;
use specbridge_engine::store::layout::attempt;
use specbridge_engine::store::{RunReader, RunStore, StoreError};

use crate::commands::Workspace;
use crate::error::CliResult;
use crate::inspect::{self, Spend};
use crate::printer::Printer;
use crate::table::{cost, duration, tokens, tokens_short, Table};

pub(crate) fn list(ws: &Workspace, printer: Printer, json_out: bool) -> CliResult {
    let store = RunStore::new(&ws.root);
    let runs = store.readers()?;
    let mut rows = Vec::new();
    for (run, short_id) in &runs {
        let id = run.id();
        // A run folder without a readable run.json (a crash before the first
        // record) is still listed, so the user can find and audit it.
        match run.run() {
            Ok(r) => rows.push(json!({
                "runId": id,
                "shortId": short_id,
                "pipeline": r.pipeline.name,
                "status": r.status,
                "startedAt": r.started_at,
                "durationMs": r.duration_ms,
                "stagesSucceeded": r.stage_counts.get("succeeded").copied().unwrap_or(0),
                "stagesTotal": r.stage_counts.values().sum::<u32>(),
                "costUsd": r.totals.cost_usd,
                "tokens": r.totals.tokens,
                "exitCode": r.exit_code,
            })),
            Err(e) => rows.push(json!({
                "runId": id,
                "shortId": short_id,
                "status": "unreadable",
                "error": specbridge_engine::error_chain(&e),
            })),
        }
    }
    if json_out {
        printer.json(&rows);
        return Ok(0);
    }
    if rows.is_empty() {
        printer.err(format!("no runs yet in {}", store.runs_dir().display()));
        return Ok(0);
    }
    let mut t = Table::new(&[
        "RUN", "PIPELINE", "STATUS", "STARTED", "DURATION", "STAGES", "COST",
    ]);
    for r in rows.iter().rev() {
        let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("-").to_string();
        t.row(vec![
            s("shortId"),
            s("pipeline"),
            s("status"),
            s("startedAt"),
            duration(r.get("durationMs").and_then(Value::as_u64)),
            format!(
                "{}/{}",
                r.get("stagesSucceeded")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                r.get("stagesTotal").and_then(Value::as_u64).unwrap_or(0)
            ),
            cost(r.get("costUsd").and_then(Value::as_f64).unwrap_or(0.0)),
        ]);
    }
    printer.out(t.render().trim_end());
    Ok(0)
}

pub(crate) fn show(
    ws: &Workspace,
    printer: Printer,
    selector: &str,
    json_out: bool,
    verbose: bool,
) -> CliResult {
    let reader = ws.run(selector)?;
    let (id, dir) = (reader.id(), reader.dir());
    let run = reader.run()?;
    let stages = reader.stages_in_plan_order()?;
    // Per stage, every attempt's result.json: stage.json holds only the attempt
    // that settled the stage, and replayed attempts spent nothing.
    let spends: Vec<(Spend, Spend)> = stages
        .iter()
        .map(|s| inspect::stage_spend(&reader, s))
        .collect::<Result<_, StoreError>>()?;
    let mut recorded = Spend::default();
    for (_, not_spent) in &spends {
        recorded.cost_usd += not_spent.cost_usd;
        recorded.tokens += not_spent.tokens;
        recorded.invocations += not_spent.invocations;
    }
    if json_out {
        let spend: serde_json::Map<String, Value> = stages
            .iter()
            .zip(&spends)
            .map(|(s, (spent, not_spent))| {
                (
                    s.stage_id.clone(),
                    json!({ "spent": spent, "recordedNotSpent": not_spent }),
                )
            })
            .collect();
        let mut v = json!({
            "run": run,
            "stages": stages,
            "spend": spend,
            "recordedNotSpent": recorded,
        });
        if verbose {
            v["attempts"] = stages
                .iter()
                .map(|s| {
                    (
                        s.stage_id.clone(),
                        json!(attempt_files(&reader, &s.stage_id)),
                    )
                })
                .collect::<serde_json::Map<_, _>>()
                .into();
        }
        printer.json(&v);
        return Ok(0);
    }
    let mut head = vec![
        format!("run       {id}"),
        format!("pipeline  {} ({})", run.pipeline.name, run.pipeline.path),
        format!("status    {}", run.status.as_str()),
        format!("started   {}", run.started_at),
        format!("duration  {}", duration(run.duration_ms)),
        format!(
            "totals    {} invocations, {} turns, {}",
            run.totals.invocations,
            run.totals.turns,
            cost(run.totals.cost_usd)
        ),
        format!("tokens    {}", tokens(&run.totals.tokens)),
    ];
    if recorded.invocations > 0 {
        head.push(format!(
            "replayed  {} invocations answered from a recording: {} and {} tokens recorded, not spent",
            recorded.invocations,
            cost(recorded.cost_usd),
            crate::table::thousands(recorded.tokens.total())
        ));
    }
    if let Some(code) = run.exit_code {
        head.push(format!("exit code {code}"));
    }
    if let Some(r) = &run.runner {
        head.push(format!(
            "runner    {} {}",
            r.command,
            r.version.as_deref().unwrap_or("(version unknown)")
        ));
    }
    printer.out(head.join("\n"));
    for w in &run.warnings {
        printer.out(format!("{}: {w}", printer.warning_label()));
    }
    printer.out("");
    let mut t = Table::new(&[
        "STAGE", "STATUS", "ATTEMPTS", "DURATION", "TURNS", "COST", "TOKENS", "EVIDENCE", "OUTCOME",
    ]);
    for (s, (spent, not_spent)) in stages.iter().zip(&spends) {
        let replayed_only = spent.invocations == 0 && not_spent.invocations > 0;
        t.row(vec![
            s.stage_id.clone(),
            s.status.as_str().to_string(),
            s.attempts.to_string(),
            duration(s.duration_ms),
            s.turns.to_string(),
            if replayed_only {
                format!("{} recorded", cost(not_spent.cost_usd))
            } else {
                cost(spent.cost_usd)
            },
            tokens_short(if replayed_only {
                &not_spent.tokens
            } else {
                &spent.tokens
            }),
            s.evidence_status.map_or("-", |e| e.as_str()).to_string(),
            s.reason.clone().unwrap_or_default(),
        ]);
    }
    printer.out(t.render().trim_end());
    if verbose {
        for s in &stages {
            for a in attempt_files(&reader, &s.stage_id) {
                printer.out(format!("\n{} attempt {}", s.stage_id, a.attempt));
                for f in &a.files {
                    printer.out(format!("  {} ({} bytes)", f.path, f.bytes));
                    for line in f.head.lines() {
                        printer.out(format!("    | {line}"));
                    }
                    if f.truncated {
                        printer.out("    | …");
                    }
                }
            }
        }
    }
    printer.out(format!("\nrecords: {}", dir.display()));
    if let Some(first) = stages.first() {
        printer.out(format!(
            "next: specbridge runs show {} {}   (one stage: tool calls, verification, evidence)",
            short(id),
            first.stage_id
        ));
        printer.out(format!(
            "next: specbridge runs report {}   (the whole run as one HTML page)",
            short(id)
        ));
    }
    Ok(0)
}

/// Lines and bytes of a file shown by `runs show --verbose`.
const HEAD_LINES: usize = 8;
const HEAD_BYTES: usize = 2000;

/// The prompt and raw output of one attempt, with the head of each.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct AttemptFiles {
    attempt: u32,
    files: Vec<FileHead>,
}

#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct FileHead {
    /// Relative to the run folder.
    path: String,
    bytes: u64,
    head: String,
    truncated: bool,
}

fn attempt_files(run: &RunReader, stage: &str) -> Vec<AttemptFiles> {
    let redactor = Redactor::from_process_env();
    run.attempts(stage)
        .unwrap_or_default()
        .into_iter()
        .map(|a| AttemptFiles {
            attempt: a.number(),
            files: [attempt::PROMPT, attempt::RAW_STDOUT, attempt::RAW_STDERR]
                .iter()
                .filter_map(|f| {
                    head_of(&a.path(f), &redactor).map(|(bytes, head, truncated)| FileHead {
                        path: a.rel_of(f),
                        bytes,
                        head,
                        truncated,
                    })
                })
                .collect(),
        })
        .collect()
}

/// Size, first lines (at most [`HEAD_BYTES`]) and whether more follows. Records
/// are redacted when written; what is shown is redacted again with this process's
/// environment, so a file written around the store (by hand, by an older version)
/// still prints no secret specbridge can recognise.
fn head_of(path: &Path, redactor: &Redactor) -> Option<(u64, String, bool)> {
    use std::io::Read;
    let bytes = std::fs::metadata(path).ok()?.len();
    let mut buf = vec![0u8; HEAD_BYTES];
    let mut f = std::fs::File::open(path).ok()?;
    let n = f.read(&mut buf).ok()?;
    buf.truncate(n);
    let text = String::from_utf8_lossy(&buf);
    let lines: Vec<&str> = text.lines().take(HEAD_LINES).collect();
    let head = lines.join("\n");
    let truncated = (head.len() as u64) < bytes.saturating_sub(1);
    Some((bytes, redactor.redact_str(&head), truncated))
}

fn short(id: &str) -> &str {
    &id[..id.len().min(8)]
}

pub(crate) fn show_stage(
    ws: &Workspace,
    printer: Printer,
    selector: &str,
    args: stage::StageArgs<'_>,
) -> CliResult {
    stage::show(printer, &ws.run(selector)?, args)
}
