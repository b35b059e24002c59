//! Continuing an execute attempt that was cut off (docs/resume.md).
//!
//! When the previous attempt of an execute stage ended by timeout, cancel or a
//! crash of specbridge, and it recorded a session id, the next attempt continues
//! that session with `--resume` — if the CLI has the flag and the working tree is
//! still what was last recorded (the previous attempt's `git-after.json`, or its
//! `git-before.json` when it never got that far). Otherwise the attempt starts
//! fresh. Either way `continuation.json` in the new attempt says which and why.
//!
//! A continued attempt is judged from the chain's first `git-before.json`: the
//! work it finishes began there.

use std::path::Path;

use serde::Serialize;
use serde_json::Value;
use specbridge_engine::evidence::verification::VerificationRecord;
use specbridge_engine::evidence::GitSnapshot;
use specbridge_engine::store::layout::attempt as file;
use specbridge_engine::store::{AttemptReader, RunHandle, RunReader};

/// What the new attempt does about the previous one.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Continuation {
    pub previous_attempt: u32,
    /// How the previous attempt ended: `timed-out`, `cancelled`, `interrupted`.
    pub previous_outcome: String,
    /// The session continued with `--resume`; none for a fresh attempt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Why the session was not continued.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fresh_reason: Option<String>,
    /// The attempt whose `git-before.json` evidence is judged from.
    pub baseline_attempt: u32,
    /// Required verification commands that failed in the previous attempt.
    #[serde(default)]
    pub failed_verification: Vec<String>,
}

impl Continuation {
    pub fn continues(&self) -> bool {
        self.session_id.is_some()
    }
}

/// How the previous attempt ended, if it was cut off: its `result.json` outcome,
/// or `interrupted` when it has none (specbridge died while it ran).
fn cut_off(
    run_dir: &Path,
    node_id: &str,
    attempt: u32,
    attempt_dir: &AttemptReader,
) -> Option<String> {
    match attempt_dir.json::<Value>(file::RESULT) {
        Ok(result) => {
            let outcome = result.get("outcome").and_then(Value::as_str)?;
            if matches!(outcome, "timed-out" | "cancelled") {
                return Some(outcome.to_string());
            }
            // The agent ended, but specbridge died before the attempt was settled
            // (its evidence, its stage record): the change it made is the
            // attempt's, to be judged from its baseline.
            let status =
                crate::previous::finished(run_dir, node_id, attempt).map(|(status, _)| status);
            (status.as_deref() == Some("interrupted")).then(|| "interrupted".to_string())
        }
        Err(_) => attempt_dir
            .has(file::REQUEST)
            .then(|| "interrupted".to_string()),
    }
}

/// Decide about attempt `attempt` of `node_id` (> 1). `None` when the previous
/// attempt was not cut off: the attempt is simply a new one.
pub fn plan(
    run: &RunHandle,
    node_id: &str,
    attempt: u32,
    cli_can_resume: bool,
    now: &GitSnapshot,
) -> Option<Continuation> {
    let previous = attempt.checked_sub(1).filter(|p| *p >= 1)?;
    let dir = RunReader::at(run.dir()).attempt(node_id, previous);
    let previous_outcome = cut_off(run.dir(), node_id, previous, &dir)?;
    let baseline_attempt = dir
        .json_opt::<Value>(file::CONTINUATION)
        .and_then(|c| c.get("baselineAttempt").and_then(Value::as_u64))
        .map_or(previous, |b| b as u32);
    let failed_verification = dir
        .json_opt::<VerificationRecord>(file::VERIFICATION)
        .map(|v| {
            v.commands
                .into_iter()
                .filter(|c| c.required && !c.passed)
                .map(|c| c.name)
                .collect()
        })
        .unwrap_or_default();
    let session = dir
        .json_opt::<Value>(file::REQUEST)
        .and_then(|r| r.get("sessionId").and_then(Value::as_str).map(String::from));
    let last = dir
        .json::<GitSnapshot>(file::GIT_AFTER)
        .or_else(|_| dir.json::<GitSnapshot>(file::GIT_BEFORE));
    let fresh_reason = match (&session, &last) {
        (None, _) => Some("the previous attempt recorded no session id".to_string()),
        _ if !cli_can_resume => Some("the agent CLI has no --resume".to_string()),
        (_, Err(_)) => Some("the previous attempt recorded no working-tree state".to_string()),
        (_, Ok(last)) if !same_tree(last, now) => {
            Some("the working tree changed since the previous attempt last recorded it".to_string())
        }
        _ => None,
    };
    Some(Continuation {
        previous_attempt: previous,
        previous_outcome,
        session_id: if fresh_reason.is_none() {
            session
        } else {
            None
        },
        fresh_reason,
        baseline_attempt,
        failed_verification,
    })
}

fn same_tree(a: &GitSnapshot, b: &GitSnapshot) -> bool {
    a.head == b.head
        && a.entries.len() == b.entries.len()
        && a.entries
            .iter()
            .all(|(p, s)| b.entries.get(p).is_some_and(|t| t.same_content(s)))
}

/// The snapshot evidence is judged from: the baseline attempt's `git-before.json`.
pub(crate) fn baseline(run: &RunHandle, node_id: &str, c: &Continuation) -> Option<GitSnapshot> {
    RunReader::at(run.dir())
        .attempt(node_id, c.baseline_attempt)
        .json_opt(file::GIT_BEFORE)
}

/// The prompt of a continued session: what happened, then the task again.
pub fn prompt(c: &Continuation, now: &GitSnapshot, task_prompt: &str) -> String {
    let mut text = format!(
        "Your previous attempt at this task (attempt {}) did not finish: it {}.\n",
        c.previous_attempt,
        match c.previous_outcome.as_str() {
            "timed-out" => "ran out of time",
            "cancelled" => "was cancelled",
            _ => "was interrupted when the tool running it stopped",
        }
    );
    if !c.failed_verification.is_empty() {
        text.push_str(&format!(
            "These verification commands failed: {}.\n",
            c.failed_verification.join(", ")
        ));
    }
    if now.entries.is_empty() {
        text.push_str("The working tree has no changes.\n");
    } else {
        text.push_str("The working tree now has changes in:\n");
        for path in now.entries.keys() {
            text.push_str(&format!("- {path}\n"));
        }
    }
    text.push_str("Continue from where you stopped. The task, as first given:\n\n");
    text.push_str(task_prompt);
    text
}
