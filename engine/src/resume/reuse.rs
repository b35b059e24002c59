//! The pure part of resume: given what a stage's record says and the input hash it
//! would run with now, reuse it or say why it runs again.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::status::StageStatus;
use crate::store::{InputParts, StageRecord};

/// Why a stage runs again (or is retired). The kebab-case codes are stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// It ended failed, malformed-output, max-turns, budget-exceeded,
    /// runner-unavailable or safety-violation.
    Failed,
    /// It ran to the end but did not pass its gate (unverified, no-change,
    /// check-failed).
    GateFailed,
    /// Named with `resume --rerun` (or it depends on such a stage).
    Forced,
    /// `resume --reverify`: an unverified execute stage's verification runs again
    /// on the working tree, with no agent.
    Reverify,
    TimedOut,
    Cancelled,
    /// It was running when specbridge stopped.
    Interrupted,
    /// It never started (skipped behind a failure, or the run stopped first).
    NotRun,
    /// No record of it: the stage (or fan-out item) is new.
    NewStage,
    /// An upstream output it sees differs from the one it ran with.
    UpstreamOutputChanged,
    PromptChanged,
    SchemaChanged,
    /// The stage definition or the settings that change its result differ.
    DefinitionChanged,
    /// The hash differs and the record does not say which part.
    InputsChanged,
    /// Its recorded output or document no longer has its recorded sha256.
    OutputFileAltered,
    /// Its inputs cannot be computed now (a prompt that no longer renders, …).
    InputsUnavailable,
    /// Dry run only: an upstream stage runs again; this one is reused if that
    /// output comes out byte-identical.
    UpstreamMayChange,
    /// Retired: the fan-out item is no longer in the upstream output.
    ItemGone,
    /// Retired: the stage is no longer in the pipeline.
    StageRemoved,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Failed => "failed",
            Reason::GateFailed => "did not pass its gate",
            Reason::Forced => "rerun requested",
            Reason::Reverify => "re-verify",
            Reason::TimedOut => "timed out",
            Reason::Cancelled => "cancelled",
            Reason::Interrupted => "interrupted",
            Reason::NotRun => "not run",
            Reason::NewStage => "new stage",
            Reason::UpstreamOutputChanged => "upstream output changed",
            Reason::PromptChanged => "prompt changed",
            Reason::SchemaChanged => "schema changed",
            Reason::DefinitionChanged => "definition changed",
            Reason::InputsChanged => "inputs changed",
            Reason::OutputFileAltered => "output file altered",
            Reason::InputsUnavailable => "inputs unavailable",
            Reason::UpstreamMayChange => "upstream may change",
            Reason::ItemGone => "item no longer exists",
            Reason::StageRemoved => "stage no longer in the pipeline",
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What resume does with one stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    Reuse,
    Rerun,
    Retire,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Reuse => "reuse",
            Action::Rerun => "rerun",
            Action::Retire => "retire",
        }
    }
}

/// One stage's decision, as recorded in events and `run.json`'s `resumes[]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReuseDecision {
    pub stage: String,
    pub action: Action,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
    /// What exactly: the upstream stages whose output changed, the status it
    /// ended with, the altered file, the error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl ReuseDecision {
    pub fn reuse(stage: &str) -> Self {
        ReuseDecision {
            stage: stage.to_string(),
            action: Action::Reuse,
            reason: None,
            detail: None,
        }
    }

    pub fn rerun(stage: &str, why: Why) -> Self {
        ReuseDecision {
            stage: stage.to_string(),
            action: Action::Rerun,
            reason: Some(why.reason),
            detail: why.detail,
        }
    }

    pub(crate) fn retire(stage: &str, reason: Reason) -> Self {
        ReuseDecision {
            stage: stage.to_string(),
            action: Action::Retire,
            reason: Some(reason),
            detail: None,
        }
    }

    /// `prompt changed`, `failed (malformed-output)`, …
    pub fn reason_text(&self) -> String {
        match (&self.reason, &self.detail) {
            (Some(r), Some(d)) => format!("{r} ({d})"),
            (Some(r), None) => r.to_string(),
            (None, _) => String::new(),
        }
    }
}

/// A reason with its detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Why {
    pub reason: Reason,
    pub detail: Option<String>,
}

impl Why {
    pub fn new(reason: Reason) -> Self {
        Why {
            reason,
            detail: None,
        }
    }

    pub fn with(reason: Reason, detail: impl Into<String>) -> Self {
        Why {
            reason,
            detail: Some(detail.into()),
        }
    }
}

/// What a stage's record says, as far as the decision needs it.
#[derive(Debug, Clone, Copy)]
pub struct Recorded<'a> {
    pub status: StageStatus,
    pub input_hash: Option<&'a str>,
    pub input_parts: Option<&'a InputParts>,
}

impl<'a> From<&'a StageRecord> for Recorded<'a> {
    fn from(r: &'a StageRecord) -> Self {
        Recorded {
            status: r.status,
            input_hash: r.input_hash.as_deref(),
            input_parts: r.input_parts.as_ref(),
        }
    }
}

/// The inputs a stage would run with now.
#[derive(Debug, Clone, Copy)]
pub struct Current<'a> {
    pub input_hash: &'a str,
    pub input_parts: &'a InputParts,
}

/// Reuse (`None`) only if the stage succeeded, its input hash is unchanged and its
/// recorded output files are intact (`altered` names one that is not); otherwise
/// the first reason in this order: how it ended, then which input changed —
/// upstream before prompt, since an upstream change usually changes the rendered
/// prompt too — then an altered output.
pub fn reuse_or_rerun(
    recorded: Option<Recorded<'_>>,
    current: Result<Current<'_>, &str>,
    altered: Option<&str>,
) -> Option<Why> {
    let Some(rec) = recorded else {
        return Some(Why::new(Reason::NewStage));
    };
    if let Some(why) = status_reason(rec.status) {
        return Some(why);
    }
    let current = match current {
        Ok(c) => c,
        Err(e) => return Some(Why::with(Reason::InputsUnavailable, e)),
    };
    if rec.input_hash != Some(current.input_hash) {
        return Some(explain(rec.input_parts, current.input_parts));
    }
    altered.map(|path| Why::with(Reason::OutputFileAltered, path))
}

fn status_reason(status: StageStatus) -> Option<Why> {
    let why = match status {
        StageStatus::Succeeded => return None,
        StageStatus::Failed => Why::new(Reason::Failed),
        StageStatus::MalformedOutput
        | StageStatus::MaxTurns
        | StageStatus::BudgetExceeded
        | StageStatus::RunnerUnavailable
        | StageStatus::SafetyViolation => Why::with(Reason::Failed, status.as_str()),
        StageStatus::Unverified | StageStatus::NoChange | StageStatus::CheckFailed => {
            Why::with(Reason::GateFailed, status.as_str())
        }
        StageStatus::TimedOut => Why::new(Reason::TimedOut),
        StageStatus::Cancelled => Why::new(Reason::Cancelled),
        StageStatus::Running | StageStatus::Interrupted => Why::new(Reason::Interrupted),
        StageStatus::Pending
        | StageStatus::Skipped
        | StageStatus::Blocked
        | StageStatus::Retired => Why::with(Reason::NotRun, status.as_str()),
    };
    Some(why)
}

/// Which part of a changed hash changed.
fn explain(recorded: Option<&InputParts>, current: &InputParts) -> Why {
    let Some(rec) = recorded else {
        return Why::new(Reason::InputsChanged);
    };
    let changed = changed_upstream(rec, current);
    if !changed.is_empty() {
        return Why::with(Reason::UpstreamOutputChanged, changed.join(", "));
    }
    if rec.prompt != current.prompt {
        Why::new(Reason::PromptChanged)
    } else if rec.schema != current.schema {
        Why::new(Reason::SchemaChanged)
    } else if rec.definition != current.definition {
        Why::new(Reason::DefinitionChanged)
    } else {
        Why::new(Reason::InputsChanged)
    }
}

/// Upstream stages whose output hash differs, appeared or disappeared.
pub(crate) fn changed_upstream(rec: &InputParts, current: &InputParts) -> Vec<String> {
    let keys: BTreeSet<&String> = rec.upstream.keys().chain(current.upstream.keys()).collect();
    keys.into_iter()
        .filter(|k| rec.upstream.get(*k) != current.upstream.get(*k))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(prompt: &str, up: &[(&str, &str)]) -> InputParts {
        InputParts {
            definition: "d".into(),
            prompt: Some(prompt.into()),
            schema: Some("s".into()),
            upstream: up
                .iter()
                .map(|(k, v)| (k.to_string(), Some(v.to_string())))
                .collect(),
        }
    }

    fn rec<'a>(status: StageStatus, hash: &'a str, p: &'a InputParts) -> Option<Recorded<'a>> {
        Some(Recorded {
            status,
            input_hash: Some(hash),
            input_parts: Some(p),
        })
    }

    fn cur<'a>(hash: &'a str, p: &'a InputParts) -> Result<Current<'a>, &'a str> {
        Ok(Current {
            input_hash: hash,
            input_parts: p,
        })
    }

    #[test]
    fn a_succeeded_stage_with_the_same_hash_and_intact_output_is_reused() {
        let p = parts("p", &[("a", "1")]);
        assert_eq!(
            reuse_or_rerun(rec(StageStatus::Succeeded, "h", &p), cur("h", &p), None),
            None
        );
    }

    #[test]
    fn each_reason_is_found() {
        let p = parts("p", &[("a", "1")]);
        let reason = |r: Option<Recorded<'_>>, c, altered| reuse_or_rerun(r, c, altered).unwrap();
        assert_eq!(reason(None, cur("h", &p), None).reason, Reason::NewStage);
        let failed = reason(
            rec(StageStatus::MalformedOutput, "h", &p),
            cur("h", &p),
            None,
        );
        assert_eq!(failed.reason, Reason::Failed);
        assert_eq!(failed.detail.as_deref(), Some("malformed-output"));
        for (status, want) in [
            (StageStatus::Cancelled, Reason::Cancelled),
            (StageStatus::Interrupted, Reason::Interrupted),
            (StageStatus::Running, Reason::Interrupted),
            (StageStatus::TimedOut, Reason::TimedOut),
            (StageStatus::Skipped, Reason::NotRun),
        ] {
            assert_eq!(
                reason(rec(status, "h", &p), cur("h", &p), None).reason,
                want
            );
        }
        let prompt = parts("q", &[("a", "1")]);
        let why = reason(
            rec(StageStatus::Succeeded, "h", &p),
            cur("h2", &prompt),
            None,
        );
        assert_eq!(why.reason, Reason::PromptChanged);
        let up = parts("q", &[("a", "2")]);
        let why = reason(rec(StageStatus::Succeeded, "h", &p), cur("h2", &up), None);
        assert_eq!(why, Why::with(Reason::UpstreamOutputChanged, "a"));
        let mut schema = p.clone();
        schema.schema = None;
        let why = reason(
            rec(StageStatus::Succeeded, "h", &p),
            cur("h2", &schema),
            None,
        );
        assert_eq!(why.reason, Reason::SchemaChanged);
        let mut def = p.clone();
        def.definition = "e".into();
        let why = reason(rec(StageStatus::Succeeded, "h", &p), cur("h2", &def), None);
        assert_eq!(why.reason, Reason::DefinitionChanged);
        let why = reason(
            rec(StageStatus::Succeeded, "h", &p),
            cur("h", &p),
            Some("x.md"),
        );
        assert_eq!(why, Why::with(Reason::OutputFileAltered, "x.md"));
        let why = reason(rec(StageStatus::Succeeded, "h", &p), Err("no prompt"), None);
        assert_eq!(why.reason, Reason::InputsUnavailable);
        let old = Some(Recorded {
            status: StageStatus::Succeeded,
            input_hash: Some("h"),
            input_parts: None,
        });
        assert_eq!(
            reason(old, cur("h2", &p), None).reason,
            Reason::InputsChanged
        );
    }
}
