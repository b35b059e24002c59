//! `specbridge runs list`, `runs show` (a run, or one stage with `stage.rs`) and
//! `runs report` (`report.rs`).

pub mod report;
pub mod stage;

use std::path::Path;

use serde_json::{json, Value};
use specbridge_engine::redact::Redactor;
use specbridge_engine::store::{PlanRecord, RunStore, StageRecord};

use crate::commands::Workspace;
use crate::error::{CliError, CliResult};
use crate::inspect::{self, StageStory};
use crate::printer::Printer;
use crate::table::{cost, duration, tokens, tokens_short, Table};

pub fn list(ws: &Workspace, printer: Printer, json_out: bool) -> CliResult {
    let store = RunStore::new(&ws.root);
    let ids = store
        .run_ids()
        .map_err(|e| CliError::Config(specbridge_engine::error_chain(&e)))?;
    let mut rows = Vec::new();
    for id in &ids {
        // A run folder without a readable run.json (a crash before the first
        // record) is still listed, so the user can find and audit it.
        match store.read_run(id) {
            Ok(r) => rows.push(json!({
                "runId": id,
                "shortId": short_id(id, &ids),
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
                "shortId": short_id(id, &ids),
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

pub fn show(
    ws: &Workspace,
    printer: Printer,
    selector: &str,
    json_out: bool,
    verbose: bool,
) -> CliResult {
    let store = RunStore::new(&ws.root);
    let (id, dir) = store
        .select(selector)
        .map_err(|e| CliError::Config(specbridge_engine::error_chain(&e)))?;
    let run = store
        .read_run(&id)
        .map_err(|e| CliError::Config(specbridge_engine::error_chain(&e)))?;
    let stages = read_stages(&dir);
    // Per stage, every attempt's result.json: stage.json holds only the attempt
    // that settled the stage, and replayed attempts spent nothing.
    let stories: Vec<StageStory> = stages
        .iter()
        .map(|s| StageStory::read(&dir, s.clone(), 0))
        .collect();
    let mut recorded = inspect::Spend::default();
    for st in &stories {
        recorded.cost_usd += st.recorded_not_spent.cost_usd;
        recorded.tokens += st.recorded_not_spent.tokens;
        recorded.invocations += st.recorded_not_spent.invocations;
    }
    if json_out {
        let spend: serde_json::Map<String, Value> = stories
            .iter()
            .map(|st| {
                (
                    st.stage.stage_id.clone(),
                    json!({ "spent": st.spent, "recordedNotSpent": st.recorded_not_spent }),
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
                .map(|s| (s.stage_id.clone(), json!(attempt_files(&dir, &s.stage_id))))
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
    for (s, st) in stages.iter().zip(&stories) {
        let replayed_only = st.spent.invocations == 0 && st.recorded_not_spent.invocations > 0;
        t.row(vec![
            s.stage_id.clone(),
            s.status.as_str().to_string(),
            s.attempts.to_string(),
            duration(s.duration_ms),
            s.turns.to_string(),
            if replayed_only {
                format!("{} recorded", cost(st.recorded_not_spent.cost_usd))
            } else {
                cost(st.spent.cost_usd)
            },
            tokens_short(if replayed_only {
                &st.recorded_not_spent.tokens
            } else {
                &st.spent.tokens
            }),
            s.evidence_status.map_or("-", |e| e.as_str()).to_string(),
            s.reason.clone().unwrap_or_default(),
        ]);
    }
    printer.out(t.render().trim_end());
    if verbose {
        for s in &stages {
            for a in attempt_files(&dir, &s.stage_id) {
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
            short(&id),
            first.stage_id
        ));
        printer.out(format!(
            "next: specbridge runs report {}   (the whole run as one HTML page)",
            short(&id)
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

fn attempt_files(dir: &Path, stage: &str) -> Vec<AttemptFiles> {
    let redactor = Redactor::from_process_env();
    let mut attempts: Vec<(u32, String)> = std::fs::read_dir(dir.join("stages").join(stage))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let n = name.strip_prefix("attempt-")?.parse().ok()?;
            Some((n, name))
        })
        .collect();
    attempts.sort();
    attempts
        .into_iter()
        .map(|(attempt, name)| AttemptFiles {
            attempt,
            files: ["prompt.md", "raw-stdout.log", "raw-stderr.log"]
                .iter()
                .filter_map(|f| {
                    let rel = format!("stages/{stage}/{name}/{f}");
                    head_of(&dir.join(&rel), &redactor).map(|(bytes, head, truncated)| FileHead {
                        path: rel,
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

/// Stage records in plan order (then any others by id).
pub fn read_stages(dir: &Path) -> Vec<StageRecord> {
    let mut stages: Vec<StageRecord> = std::fs::read_dir(dir.join("stages"))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let bytes = std::fs::read(e.path().join("stage.json")).ok()?;
            serde_json::from_slice(&bytes).ok()
        })
        .collect();
    // Plan position by id: a search per comparison is quadratic in the stages.
    let order: std::collections::HashMap<String, usize> = std::fs::read(dir.join("plan.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<PlanRecord>(&b).ok())
        .map(|p| {
            p.nodes
                .into_iter()
                .enumerate()
                .map(|(i, n)| (n.id, i))
                .collect()
        })
        .unwrap_or_default();
    stages.sort_by_cached_key(|s| {
        (
            order.get(&s.stage_id).copied().unwrap_or(usize::MAX),
            s.stage_id.clone(),
        )
    });
    stages
}

fn short(id: &str) -> &str {
    &id[..id.len().min(8)]
}

/// The shortest prefix of `id` (at least 8 characters) that no other run shares.
fn short_id(id: &str, all: &[String]) -> String {
    let mut n = 8.min(id.len());
    while n < id.len() && all.iter().any(|o| o != id && o.starts_with(&id[..n])) {
        n += 1;
    }
    id[..n].to_string()
}

pub fn show_stage(
    ws: &Workspace,
    printer: Printer,
    selector: &str,
    args: stage::StageArgs<'_>,
) -> CliResult {
    let store = RunStore::new(&ws.root);
    let (id, dir) = store
        .select(selector)
        .map_err(|e| CliError::Config(specbridge_engine::error_chain(&e)))?;
    stage::show(printer, &dir, &id, args)
}
