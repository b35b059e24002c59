//! The page itself.

use specbridge_engine::store::RunReader;
use std::fmt::Write;

use super::svg::{self, GraphNode};
use super::{esc, status_class, ReportData, DIFF_BYTES};
use crate::inspect::{AttemptStory, StageStory};
use crate::table::{cost, duration, thousands, tokens};

const STYLE: &str = include_str!("report.css");
const SCRIPT: &str = include_str!("report.js");

pub(crate) fn render(data: &ReportData, reader: &RunReader) -> String {
    let run = &data.run;
    let mut h = String::with_capacity(64 * 1024);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\
         <title>specbridge run {id}</title><style>{STYLE}</style></head><body>",
        id = esc(&run.run_id)
    );
    let status = run.status.as_str();
    let _ = write!(
        h,
        "<header><h1>{name} <span class=\"pill s-{class}\" id=\"run-status\">{status}</span></h1>\
         <dl class=\"facts\"><dt>run</dt><dd><code>{id}</code></dd>\
         <dt>pipeline</dt><dd>{path}</dd><dt>started</dt><dd>{started}</dd>\
         <dt>duration</dt><dd>{dur}</dd><dt>exit code</dt><dd>{exit}</dd>\
         <dt>cost</dt><dd>{cost} over {inv} invocations, {turns} turns</dd>\
         <dt>tokens</dt><dd>{tok}</dd>{replayed}</dl></header>",
        name = esc(&run.pipeline.name),
        class = status_class(status),
        id = esc(&run.run_id),
        path = esc(&run.pipeline.path),
        started = esc(&run.started_at),
        dur = esc(&duration(run.duration_ms)),
        exit = run.exit_code.map_or("-".into(), |c| c.to_string()),
        cost = esc(&cost(run.totals.cost_usd)),
        inv = run.totals.invocations,
        turns = run.totals.turns,
        tok = esc(&tokens(&run.totals.tokens)),
        replayed = replayed_fact(&data.stories),
    );
    audit_section(&mut h, data);
    h.push_str("<section><h2>Stage graph</h2><div class=\"scroll\">");
    let nodes: Vec<GraphNode<'_>> = data
        .stories
        .iter()
        .map(|s| GraphNode {
            id: &s.stage.stage_id,
            status: s.stage.status.as_str(),
            needs: &s.stage.needs,
        })
        .collect();
    h.push_str(&svg::graph(&nodes));
    h.push_str("</div></section><section><h2>Timeline</h2><div class=\"scroll\">");
    h.push_str(&svg::timeline(&data.timeline));
    h.push_str("</div></section>");
    stage_table(&mut h, &data.stories);
    decisions_section(&mut h, data);
    h.push_str("<section><h2>Stages</h2><p class=\"hint\">Open a stage for its tool calls, verification, evidence and diff.</p>");
    for (i, story) in data.stories.iter().enumerate() {
        stage_details(&mut h, i, story, reader);
    }
    let _ = writeln!(
        h,
        "</section><footer>Written by specbridge {} from the records in the run folder; nothing here was fetched from the network.</footer><script>{SCRIPT}</script></body></html>",
        esc(&run.specbridge_version)
    );
    h
}

fn replayed_fact(stories: &[StageStory]) -> String {
    let (mut n, mut usd) = (0, 0.0);
    for s in stories {
        n += s.recorded_not_spent.invocations;
        usd += s.recorded_not_spent.cost_usd;
    }
    if n == 0 {
        return String::new();
    }
    format!(
        "<dt>replayed</dt><dd>{n} invocations answered from a recording: {} recorded, not spent</dd>",
        esc(&cost(usd))
    )
}

fn audit_section(h: &mut String, data: &ReportData) {
    h.push_str("<section><h2>Audit</h2>");
    match &data.audit {
        Err(e) => {
            let _ = write!(
                h,
                "<p class=\"bad\">The audit could not run: {}</p>",
                esc(e)
            );
        }
        Ok(a) if a.findings.is_empty() => {
            let _ = write!(
                h,
                "<p class=\"good\" id=\"audit\">Clean: {} files and {} events checked, no finding.</p>",
                a.checked_files, a.events
            );
        }
        Ok(a) => {
            let _ = write!(
                h,
                "<p class=\"{}\" id=\"audit\">{} finding(s) over {} files and {} events.</p><ul>",
                if a.has_errors() { "bad" } else { "warn" },
                a.findings.len(),
                a.checked_files,
                a.events
            );
            for f in &a.findings {
                let _ = write!(
                    h,
                    "<li><code>{}</code> {}{}</li>",
                    esc(f.code.as_str()),
                    f.stage
                        .as_deref()
                        .map(|s| format!("<b>{}</b>: ", esc(s)))
                        .unwrap_or_default(),
                    esc(&f.message)
                );
            }
            h.push_str("</ul>");
        }
    }
    h.push_str("</section>");
}

fn stage_table(h: &mut String, stories: &[StageStory]) {
    h.push_str("<section><h2>Cost and tokens</h2><table class=\"stages\"><thead><tr><th>stage</th><th>kind</th><th>status</th><th>evidence</th><th>attempts</th><th>duration</th><th>cost</th><th>input</th><th>output</th><th>cache read</th><th>cache write</th></tr></thead><tbody>");
    for (i, s) in stories.iter().enumerate() {
        let r = &s.stage;
        let replayed_only = s.spent.invocations == 0 && s.recorded_not_spent.invocations > 0;
        let spend = if replayed_only {
            &s.recorded_not_spent
        } else {
            &s.spent
        };
        let _ = write!(
            h,
            "<tr data-stage=\"{id}\"><td><a href=\"#stage-{i}\">{id}</a></td><td>{kind}</td><td><span class=\"pill s-{class}\">{status}</span></td><td>{ev}</td><td>{att}</td><td>{dur}</td><td>{cost}{rec}</td><td>{ti}</td><td>{to}</td><td>{tr}</td><td>{tc}</td></tr>",
            id = esc(&r.stage_id),
            kind = r.kind.as_str(),
            class = status_class(r.status.as_str()),
            status = r.status.as_str(),
            ev = r.evidence_status.map_or("-", |e| e.as_str()),
            att = r.attempts,
            dur = esc(&duration(r.duration_ms)),
            cost = esc(&cost(spend.cost_usd)),
            rec = if replayed_only { " <small>recorded, not spent</small>" } else { "" },
            ti = thousands(spend.tokens.input),
            to = thousands(spend.tokens.output),
            tr = thousands(spend.tokens.cache_read),
            tc = thousands(spend.tokens.cache_creation),
        );
    }
    h.push_str("</tbody></table></section>");
}

fn decisions_section(h: &mut String, data: &ReportData) {
    h.push_str("<section><h2>Resumes, approvals and human edits</h2>");
    if data.run.resumes.is_empty() && data.decisions.is_empty() {
        h.push_str("<p>The run was never resumed. specbridge has no approval step; a human edit between runs (a prompt, a document, the pipeline) shows here as the resume decision it caused.</p></section>");
        return;
    }
    let _ = write!(h, "<p>Resumed {} time(s).</p><table><thead><tr><th>stage</th><th>action</th><th>reason</th><th>detail</th></tr></thead><tbody>", data.run.resumes.len());
    for d in &data.decisions {
        // The stable kebab-case code, as the event records it.
        let reason = d
            .reason
            .and_then(|r| serde_json::to_value(r).ok())
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&d.stage),
            esc(d.action.as_str()),
            esc(&reason),
            esc(d.detail.as_deref().unwrap_or_default())
        );
    }
    h.push_str("</tbody></table></section>");
}

fn stage_details(h: &mut String, i: usize, story: &StageStory, run: &RunReader) {
    let r = &story.stage;
    let _ = write!(
        h,
        "<details class=\"stage\" id=\"stage-{i}\" data-stage=\"{id}\" data-status=\"{status}\"><summary><span class=\"pill s-{class}\">{status}</span> <b>{id}</b> <small>{kind}{ev} · {att} attempt(s) · {cost}</small>{outcome}</summary><template>",
        id = esc(&r.stage_id),
        status = r.status.as_str(),
        class = status_class(r.status.as_str()),
        kind = r.kind.as_str(),
        ev = r
            .evidence_status
            .map(|e| format!(" · evidence {}", e.as_str()))
            .unwrap_or_default(),
        att = r.attempts,
        cost = esc(&cost(story.spent.cost_usd)),
        outcome = r
            .reason
            .as_deref()
            .map(|o| format!(" <span class=\"outcome\">{}</span>", esc(o)))
            .unwrap_or_default(),
    );
    for a in &story.attempts {
        attempt(h, a, run);
    }
    if story.attempts.is_empty() {
        h.push_str("<p>No attempt was recorded.</p>");
    }
    h.push_str("</template></details>");
}

fn attempt(h: &mut String, a: &AttemptStory, run: &RunReader) {
    let _ = write!(
        h,
        "<div class=\"attempt\"><h3>Attempt {} <small>{} · {}</small></h3>",
        a.attempt,
        esc(a.status.as_deref().unwrap_or("")),
        esc(&duration(a.duration_ms))
    );
    if let Some(reason) = &a.failure_reason {
        let _ = write!(h, "<p class=\"bad\">{}</p>", esc(reason));
    }
    if a.invoked {
        let _ = write!(
            h,
            "<p>{}{} · {}{}</p>",
            esc(&cost(a.cost_usd.unwrap_or(0.0))),
            if a.replayed {
                " (recorded, not spent)"
            } else {
                ""
            },
            esc(&a
                .tokens
                .map_or("tokens not reported".into(), |t| tokens(&t))),
            a.turns.map(|t| format!(" · {t} turns")).unwrap_or_default()
        );
    }
    if let Some(p) = &a.prompt_head {
        let _ = write!(h, "<h4>Prompt (first lines)</h4><pre>{}</pre>", esc(p));
    }
    if !a.tool_calls.is_empty() {
        h.push_str("<h4>Tool calls</h4><ol class=\"calls\">");
        for c in &a.tool_calls {
            let _ = write!(
                h,
                "<li class=\"{cls}\">{mark}<b>{tool}</b> <code>{input}</code>{err}</li>",
                cls = if c.refused {
                    "refused"
                } else if c.error.is_some() {
                    "error"
                } else {
                    "ok"
                },
                mark = if c.refused {
                    "<span class=\"pill s-failed\">refused</span> "
                } else {
                    ""
                },
                tool = esc(&c.tool),
                input = esc(&c.input),
                err = c
                    .error
                    .as_deref()
                    .map(|e| format!("<div class=\"msg\">{}</div>", esc(e)))
                    .unwrap_or_default(),
            );
        }
        h.push_str("</ol>");
    }
    if !a.verification.is_empty() {
        h.push_str("<h4>Verification</h4><ul class=\"verify\">");
        for v in &a.verification {
            let _ = write!(
                h,
                "<li class=\"{cls}\"><b>{mark}</b> {name} <small>({req}, {exit})</small> <code>{argv}</code>{tail}</li>",
                cls = if v.passed { "good" } else { "bad" },
                mark = if v.passed { "pass" } else { "FAIL" },
                name = esc(&v.name),
                req = if v.required { "required" } else { "optional" },
                exit = if v.timed_out {
                    "timed out".to_string()
                } else {
                    v.exit_code.map_or("no exit code".into(), |c| format!("exit {c}"))
                },
                argv = esc(&specbridge_stages::shell_words(&v.argv)),
                tail = v
                    .failure_tail
                    .as_deref()
                    .map(|t| format!("<pre>{}</pre>", esc(t)))
                    .unwrap_or_default(),
            );
        }
        h.push_str("</ul>");
    }
    if let Some(e) = &a.evidence_status {
        let _ = write!(h, "<h4>Evidence: {}</h4><ul>", esc(e));
        for r in &a.evidence_reasons {
            let _ = write!(h, "<li>{}</li>", esc(r));
        }
        for v in &a.violations {
            let _ = write!(h, "<li class=\"bad\">violation: {}</li>", esc(v));
        }
        h.push_str("</ul>");
    }
    if !a.changed.is_empty() {
        h.push_str("<h4>Changed files</h4><ul>");
        for (label, paths) in [
            ("added", &a.changed.added),
            ("modified", &a.changed.modified),
            ("deleted", &a.changed.deleted),
            ("ambiguous", &a.changed.ambiguous),
        ] {
            for p in paths {
                let _ = write!(h, "<li>{label} <code>{}</code></li>", esc(p));
            }
        }
        h.push_str("</ul>");
    }
    if let Some(rel) = &a.diff {
        if let Ok(bytes) = std::fs::read(run.path(rel)) {
            let cut = bytes.len() > DIFF_BYTES;
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(DIFF_BYTES)]);
            let _ = write!(
                h,
                "<details><summary>Diff ({} bytes{})</summary><pre class=\"diff\">{}</pre></details>",
                bytes.len(),
                if cut { ", cut here: the whole file is in the run folder" } else { "" },
                esc(&text)
            );
        }
    }
    h.push_str("</div>");
}
