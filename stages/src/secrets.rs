//! Secrets in an agent's change: `diff.patch` is kept redacted (the store does
//! that), the evidence names each secret's kind, file and line, and the stage's
//! exit code says the gate failed unless the pipeline allows it.

use specbridge_engine::evidence::{secrets_in_change, AttemptDiff, DiffInfo, EvidenceFinding};
use specbridge_engine::scheduler::StageReport;
use specbridge_engine::store::layout::{self, attempt};
use specbridge_engine::store::RunHandle;

use crate::context::RunContext;
use crate::error::StageError;

/// Queues `diff.patch` with the store (redacted, and written with the attempt's
/// next write, `store/batch.rs`) and returns its note, now describing the file
/// as written, with the `secret-in-change` findings.
pub(crate) fn keep_diff(
    ctx: &RunContext,
    run: &RunHandle,
    attempt_rel: &str,
    diff: AttemptDiff,
) -> Result<(DiffInfo, Vec<EvidenceFinding>), StageError> {
    let findings = secrets_in_change(
        &diff.patch,
        run.redactor(),
        ctx.pipeline.allow_secret_in_change,
    );
    let mut info = diff.info;
    let sha = run
        .defer_bytes(&layout::in_attempt(attempt_rel, attempt::DIFF), &diff.patch)
        .map_err(StageError::record(attempt::DIFF))?;
    if sha != info.sha256 {
        // A secret was redacted (in an added, removed or context line).
        info.bytes = run.redactor().redact_bytes(&diff.patch).len() as u64;
        info.sha256 = sha;
    }
    Ok((info, findings))
}

/// A change that puts a secret into the repository fails the gate (exit 1) and
/// says so in the stage's outcome, unless the pipeline allows it.
pub(crate) fn gate_on_secrets(report: &mut StageReport, findings: &[EvidenceFinding]) {
    let Some(first) = findings.iter().find(|f| !f.allowed) else {
        return;
    };
    let more = findings.iter().filter(|f| !f.allowed).count() - 1;
    let mut outcome = first.message.clone();
    if more > 0 {
        outcome.push_str(&format!(" (and {more} more, see evidence.json)"));
    }
    report.reason = Some(match report.reason.take() {
        Some(before) => format!("{outcome}; {before}"),
        None => outcome,
    });
    report.exit_code = Some(report.exit_code.map_or(specbridge_engine::exit::GATE, |c| {
        specbridge_engine::exit::most_severe([c, specbridge_engine::exit::GATE])
    }));
}
