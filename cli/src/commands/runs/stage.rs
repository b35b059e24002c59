//! `specbridge runs show RUN STAGE`: one stage's story, attempt by attempt.

use serde_json::json;
use specbridge_engine::store::layout::attempt as file;
use specbridge_engine::store::RunReader;

use crate::error::{CliError, CliResult};
use crate::inspect::{AttemptStory, Spend, StageStory};
use crate::printer::Printer;
use crate::table::{cost, duration, tokens};

/// Lines of the prompt shown.
const PROMPT_LINES: usize = 6;

pub(crate) struct StageArgs<'a> {
    pub stage: &'a str,
    pub attempt: Option<u32>,
    pub diff: bool,
    pub json: bool,
}

pub(crate) fn show(printer: Printer, run: &RunReader, args: StageArgs<'_>) -> CliResult {
    let run_id = run.id();
    let config = |e: specbridge_engine::store::StoreError| CliError::Config(e.to_string());
    let stages = run.stages_in_plan_order().map_err(config)?;
    let Some(record) = stages.iter().find(|s| s.stage_id == args.stage).cloned() else {
        let known: Vec<&str> = stages.iter().map(|s| s.stage_id.as_str()).collect();
        return Err(CliError::Config(format!(
            "run {run_id} has no stage `{}` (stages: {})",
            args.stage,
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        )));
    };
    let mut story = StageStory::read(run, record, PROMPT_LINES).map_err(config)?;
    if let Some(n) = args.attempt {
        if !story.attempts.iter().any(|a| a.attempt == n) {
            return Err(CliError::Config(format!(
                "--attempt {n}: stage `{}` has attempts {}",
                args.stage,
                story
                    .attempts
                    .iter()
                    .map(|a| a.attempt.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        story.attempts.retain(|a| a.attempt == n);
    }
    if args.diff {
        return print_diff(printer, run, &story, args.json);
    }
    if args.json {
        printer.json(&json!({ "runId": run_id, "stage": story }));
        return Ok(0);
    }
    printer.out(render(printer, &story));
    Ok(0)
}

/// The change of each attempt shown, in order: one `diff.patch` each.
fn print_diff(printer: Printer, run: &RunReader, story: &StageStory, json_out: bool) -> CliResult {
    let mut parts = Vec::new();
    for a in &story.attempts {
        if let Some(rel) = &a.diff {
            let text = std::fs::read_to_string(run.path(rel)).map_err(|e| {
                CliError::Config(format!("failed to read {}: {e}", run.path(rel).display()))
            })?;
            parts.push((a.attempt, rel.clone(), text));
        }
    }
    if json_out {
        let diffs: Vec<_> = parts
            .iter()
            .map(|(n, rel, text)| json!({"attempt": n, "path": rel, "diff": text}))
            .collect();
        printer.json(&json!({ "stage": story.stage.stage_id, "diffs": diffs }));
        return Ok(0);
    }
    if parts.is_empty() {
        printer.err(format!(
            "stage `{}` recorded no change",
            story.stage.stage_id
        ));
        return Ok(0);
    }
    let many = parts.len() > 1;
    for (n, rel, text) in parts {
        if many {
            printer.out(format!("# attempt {n} ({rel})"));
        }
        printer.out(text.trim_end());
    }
    Ok(0)
}

pub(crate) fn render(printer: Printer, story: &StageStory) -> String {
    let s = &story.stage;
    let mut out = Vec::new();
    out.push(format!("stage     {} ({})", s.stage_id, s.kind.as_str()));
    let mut status = s.status.as_str().to_string();
    if let Some(e) = s.evidence_status {
        status.push_str(&format!(" · evidence {}", e.as_str()));
    }
    out.push(format!("status    {status}"));
    if let Some(o) = &s.reason {
        out.push(format!("outcome   {o}"));
    }
    out.push(format!("attempts  {}", s.attempts));
    let reported = story.attempts.iter().any(|a| a.tokens.is_some());
    out.push(format!("spent     {}", spend(&story.spent, reported)));
    if story.recorded_not_spent.invocations > 0 {
        out.push(format!(
            "replayed  {} (recorded, not spent)",
            spend(&story.recorded_not_spent, reported)
        ));
    }
    out.push(format!("duration  {}", duration(s.duration_ms)));
    for a in &story.attempts {
        out.push(String::new());
        attempt(printer, a, &mut out);
    }
    out.join("\n")
}

fn spend(s: &Spend, tokens_reported: bool) -> String {
    format!(
        "{} · {} · {} invocation{}",
        cost(s.cost_usd),
        if tokens_reported {
            tokens(&s.tokens)
        } else {
            "tokens not reported".into()
        },
        s.invocations,
        if s.invocations == 1 { "" } else { "s" }
    )
}

fn attempt(printer: Printer, a: &AttemptStory, out: &mut Vec<String>) {
    let mut title = format!("attempt {} ({})", a.attempt, a.path);
    if let Some(o) = &a.status {
        title.push_str(&format!(" {o}"));
    }
    if let Some(r) = &a.failure_reason {
        title.push_str(&format!(": {r}"));
    }
    out.push(printer.paint(&title, "1"));
    if let Some(p) = &a.prompt_head {
        out.push(format!(
            "  prompt ({} bytes)",
            a.prompt_bytes.unwrap_or(p.len() as u64)
        ));
        for line in p.lines() {
            out.push(format!("    | {line}"));
        }
    }
    if a.invoked || !a.tool_calls.is_empty() {
        out.push(format!(
            "  tool calls ({}, from {})",
            a.tool_calls.len(),
            match a.transcript_source {
                crate::inspect::TranscriptSource::ToolCalls => file::TOOL_CALLS,
                crate::inspect::TranscriptSource::Stream => file::RAW_STDOUT,
                crate::inspect::TranscriptSource::None => "no transcript",
            }
        ));
    }
    for (i, c) in a.tool_calls.iter().enumerate() {
        let mark = if c.refused {
            printer.paint("REFUSED", "1;31")
        } else if c.error.is_some() {
            printer.paint("error  ", "33")
        } else {
            "ok     ".to_string()
        };
        let mut line = format!("    {:>2}. {mark} {} {}", i + 1, c.tool, c.input);
        if let Some(e) = &c.error {
            line.push_str(&format!("\n              → {e}"));
        }
        out.push(line);
    }
    if !a.verification.is_empty() {
        out.push("  verification".into());
    }
    for v in &a.verification {
        let mark = if v.passed {
            printer.paint("pass", "32")
        } else {
            printer.paint("FAIL", "1;31")
        };
        let exit = if v.timed_out {
            "timed out".to_string()
        } else {
            v.exit_code
                .map_or("no exit code".into(), |c| format!("exit {c}"))
        };
        out.push(format!(
            "    {mark} {} ({}, {exit}, {}): {}",
            v.name,
            if v.required { "required" } else { "optional" },
            duration(v.duration_ms),
            specbridge_stages::shell_words(&v.argv)
        ));
        if let Some(t) = &v.failure_tail {
            for line in t.lines() {
                out.push(format!("      | {line}"));
            }
        }
    }
    if let Some(e) = &a.evidence_status {
        out.push(format!("  evidence  {e}"));
    }
    for r in &a.evidence_reasons {
        out.push(format!("    - {r}"));
    }
    for v in &a.violations {
        out.push(format!("    {} {v}", printer.paint("violation:", "1;31")));
    }
    if !a.changed.is_empty() {
        let mut parts = Vec::new();
        for (label, paths) in [
            ("added", &a.changed.added),
            ("modified", &a.changed.modified),
            ("deleted", &a.changed.deleted),
            ("ambiguous", &a.changed.ambiguous),
        ] {
            if !paths.is_empty() {
                parts.push(format!("{label} {}", paths.join(", ")));
            }
        }
        out.push(format!("  changed   {}", parts.join(" · ")));
    }
    if a.invoked {
        let c = cost(a.cost_usd.unwrap_or(0.0));
        out.push(if a.replayed {
            format!("  cost      {c} (recorded, not spent)")
        } else {
            format!("  cost      {c}")
        });
        out.push(format!(
            "  tokens    {}",
            a.tokens.map_or("not reported".into(), |t| tokens(&t))
        ));
        if let Some(t) = a.turns {
            out.push(format!("  turns     {t}"));
        }
    }
    out.push(format!("  duration  {}", duration(a.duration_ms)));
    if let Some(d) = &a.diff {
        out.push(format!("  diff      {d} (--diff prints it)"));
    }
}
