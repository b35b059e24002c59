//! `attempt.previous` (docs/prompt-templating.md): what went wrong in the attempt
//! before this one, read back from its records, so that a re-run is told why the
//! last one did not pass — the failing verification's command, exit code and
//! output tail, the safety violation, the malformed-output error.
//!
//! It changes what is sent, never the input hash: the hash is taken over the
//! prompt rendered with `attempt.previous` null, so a re-run of an unchanged stage
//! is recognised as such and recordings keep matching.

use std::path::Path;

use serde::Serialize;
use serde_json::Value;
use specbridge_engine::events::{line, RunEvent};
use specbridge_engine::redact::Redactor;
use specbridge_engine::store::layout::attempt;
use specbridge_engine::store::{AttemptReader, RunReader};

use crate::prompt::{render, AttemptView, PromptContext, PromptError, PromptSource};

/// At most this many bytes of a failing command's output are kept (its end).
const TAIL_BYTES: usize = 3000;
/// At most this many lines of it.
const TAIL_LINES: usize = 40;

/// The attempt before this one, as the template sees it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PreviousAttempt {
    /// Its attempt number.
    pub number: u32,
    /// The stage status it ended with (`unverified`, `malformed-output`, …).
    pub status: String,
    /// One line on why it did not pass.
    pub outcome: Option<String>,
    /// The verification commands that did not pass.
    pub verification: Vec<FailedCommand>,
    /// The safety rules it broke.
    pub violations: Vec<String>,
    /// All of the above as a markdown section: what is appended to a prompt that
    /// does not use `attempt.previous` itself.
    pub summary: String,
}

/// A verification command that did not pass.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailedCommand {
    pub name: String,
    /// The argv as one shell-quoted line.
    pub command: String,
    pub exit_code: Option<i32>,
    /// `exit code 1`, `timed out after …`, …
    pub failure: Option<String>,
    /// The last lines of its stdout then stderr.
    pub output_tail: String,
}

/// The previous attempt (`attempt - 1`) of `stage` in `run_dir`, or `None` on a
/// first attempt or when nothing of it was recorded.
pub fn read(
    run_dir: &Path,
    stage: &str,
    attempt: u32,
    redactor: &Redactor,
) -> Option<PreviousAttempt> {
    let number = attempt.checked_sub(1).filter(|n| *n >= 1)?;
    let dir = RunReader::at(run_dir).attempt(stage, number);
    if !dir.exists() {
        return None;
    }
    // An attempt cut off by a cancel or a crash did nothing wrong: it is
    // continued (docs/resume.md), not corrected.
    let (status, outcome) = finished(run_dir, stage, number)?;
    if status == "cancelled" || status == "interrupted" {
        return None;
    }
    let verification = failed_commands(&dir, redactor);
    let violations = dir
        .json_opt::<Value>(attempt::EVIDENCE)
        .and_then(|e| e.get("violations").cloned())
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|v| v.get("message").and_then(Value::as_str).map(String::from))
        .collect();
    let mut previous = PreviousAttempt {
        number,
        status,
        outcome: outcome.map(|o| redactor.redact_str(&o)),
        verification,
        violations,
        summary: String::new(),
    };
    previous.summary = summary(&previous);
    Some(previous)
}

/// The prompt to send: rendered with `attempt.previous` set; when the template
/// does not use it (the text comes out the same as without it), the default
/// section is appended instead. `plain` is the prompt rendered without it.
pub(crate) fn prompt_with(
    source: &PromptSource,
    name: &str,
    context: &PromptContext,
    plain: String,
    previous: PreviousAttempt,
) -> Result<String, PromptError> {
    let mut with = context.clone();
    let summary = previous.summary.clone();
    with.attempt = AttemptView {
        previous: Some(previous),
    };
    let rendered = render(source, name, &with)?;
    if rendered != plain {
        return Ok(rendered);
    }
    let mut out = plain;
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push('\n');
    out.push_str(&summary);
    Ok(out)
}

/// Status and outcome from the `stage-finished` event of that attempt.
pub(crate) fn finished(
    run_dir: &Path,
    stage: &str,
    number: u32,
) -> Option<(String, Option<String>)> {
    line::read_all(&RunReader::at(run_dir).events_path())
        .into_iter()
        .rev()
        .find_map(|l| match l.event {
            RunEvent::StageFinished(f) if f.stage == stage && f.attempt == Some(number) => {
                Some((f.status.as_str().to_string(), f.outcome))
            }
            _ => None,
        })
}

fn failed_commands(dir: &AttemptReader, redactor: &Redactor) -> Vec<FailedCommand> {
    let Some(record) = dir.json_opt::<Value>(attempt::VERIFICATION) else {
        return Vec::new();
    };
    let commands = record
        .get("commands")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    commands
        .iter()
        .filter(|c| c["passed"] != true)
        .map(|c| {
            let argv: Vec<String> = c["argv"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            let mut output = String::new();
            for key in ["stdoutLog", "stderrLog"] {
                if let Some(name) = c[key].as_str() {
                    if let Some(bytes) = dir.named_log(name) {
                        output.push_str(&String::from_utf8_lossy(&bytes));
                    }
                }
            }
            FailedCommand {
                name: c["name"].as_str().unwrap_or("").to_string(),
                command: redactor.redact_str(&crate::shell_words(&argv)),
                exit_code: c["exitCode"].as_i64().map(|x| x as i32),
                failure: c["failure"].as_str().map(String::from),
                output_tail: redactor.redact_str(&tail(&output)),
            }
        })
        .collect()
}

/// The last [`TAIL_LINES`] lines of `text`, at most [`TAIL_BYTES`] bytes.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n");
    if out.len() > TAIL_BYTES {
        let mut cut = out.len() - TAIL_BYTES;
        while !out.is_char_boundary(cut) {
            cut += 1;
        }
        out = out[cut..].to_string();
    }
    out
}

fn summary(p: &PreviousAttempt) -> String {
    let mut s = format!(
        "## Previous attempt\n\nAttempt {} of this stage ended `{}`",
        p.number, p.status
    );
    match &p.outcome {
        Some(o) => s.push_str(&format!(": {o}\n")),
        None => s.push_str(".\n"),
    }
    for c in &p.verification {
        let how = match (c.exit_code, &c.failure) {
            (Some(code), _) => format!("exited {code}"),
            (None, Some(f)) => f.clone(),
            (None, None) => "did not pass".to_string(),
        };
        s.push_str(&format!(
            "\nVerification `{}` (`{}`) {how}.",
            c.name, c.command
        ));
        if c.output_tail.trim().is_empty() {
            s.push('\n');
        } else {
            s.push_str(&format!(
                " The end of its output:\n\n```\n{}\n```\n",
                c.output_tail.trim_end()
            ));
        }
    }
    for v in &p.violations {
        s.push_str(&format!("\nSafety violation: {v}\n"));
    }
    s.push_str("\nFix what went wrong; the same checks run again after this attempt.\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_end() {
        let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        let t = tail(&text);
        assert!(t.starts_with("line 61\n"), "{t}");
        assert!(t.ends_with("line 100"), "{t}");
        let long = "é".repeat(4000);
        assert!(tail(&long).len() <= TAIL_BYTES);
    }

    #[test]
    fn the_summary_names_command_exit_code_and_output() {
        let p = PreviousAttempt {
            number: 1,
            status: "unverified".into(),
            outcome: Some("required verification tests failed".into()),
            verification: vec![FailedCommand {
                name: "tests".into(),
                command: "cargo test".into(),
                exit_code: Some(101),
                failure: Some("exit code 101".into()),
                output_tail: "assertion failed: left == right".into(),
            }],
            violations: vec![],
            summary: String::new(),
        };
        let s = summary(&p);
        assert!(
            s.contains("Attempt 1 of this stage ended `unverified`"),
            "{s}"
        );
        assert!(s.contains("`tests` (`cargo test`) exited 101"), "{s}");
        assert!(s.contains("assertion failed: left == right"), "{s}");
    }
}
