//! The run-directory layout (docs/run-directory.md): the one place that names the
//! folders and files of a run. The writer ([`RunHandle`](super::RunHandle)) and
//! the reader ([`RunReader`](super::RunReader)) both build their paths here, so
//! what is written is where it is read; a test fails when another source file
//! spells a record name itself.
//!
//! Relative paths (`stages/<id>/attempt-001/result.json`) are what records and
//! events carry; they always use `/`.

use std::path::{Path, PathBuf};

/// The store folder in a repository.
pub const STORE_DIR: &str = ".specbridge";
/// The folder of the runs inside [`STORE_DIR`].
pub const RUNS_DIR: &str = "runs";

/// The OS lock of a run (held by the process working on it).
pub const LOCK: &str = ".lock";
/// The run record.
pub const RUN: &str = "run.json";
/// The pipeline file as loaded.
pub const PIPELINE: &str = "pipeline.yaml";
/// The nodes as scheduled.
pub const PLAN: &str = "plan.json";
/// The hash-chained event log.
pub const EVENTS: &str = "events.jsonl";
/// What a torn last event line set aside is called, before its number.
pub(crate) const TORN_TAIL_PREFIX: &str = "events.jsonl.torn-";
/// The folder of the stages.
pub const STAGES: &str = "stages";

/// A stage's record, in its folder.
pub const STAGE: &str = "stage.json";
/// A stage's accepted output, in its folder.
pub const OUTPUT: &str = "output.json";

/// What an attempt folder name starts with (`attempt-007`).
pub const ATTEMPT_PREFIX: &str = "attempt-";

/// The files of an attempt folder.
pub mod attempt {
    pub const PROMPT: &str = "prompt.md";
    pub const REQUEST: &str = "request.json";
    pub const OUTPUT_SCHEMA: &str = "output-schema.json";
    pub const PROCESS: &str = "process.json";
    pub const RAW_STDOUT: &str = "raw-stdout.log";
    pub const RAW_STDERR: &str = "raw-stderr.log";
    pub const RESULT: &str = "result.json";
    pub const TOOL_CALLS: &str = "tool-calls.jsonl";
    pub const GIT_BEFORE: &str = "git-before.json";
    pub const GIT_AFTER: &str = "git-after.json";
    pub const CHANGED_FILES: &str = "changed-files.json";
    pub const DIFF: &str = "diff.patch";
    pub const VERIFICATION: &str = "verification.json";
    pub const EVIDENCE: &str = "evidence.json";
    pub const CONTINUATION: &str = "continuation.json";
    pub const REPLAY: &str = "replay.json";

    /// The stdout and stderr log names of verification command `stem`
    /// (`verification-<name>`).
    pub fn verification_logs(stem: &str) -> (String, String) {
        (format!("{stem}.stdout.log"), format!("{stem}.stderr.log"))
    }
}

/// `.specbridge/runs/` of the repository at `repo_root`.
pub fn runs_dir(repo_root: &Path) -> PathBuf {
    repo_root.join(STORE_DIR).join(RUNS_DIR)
}

/// `stages/<stage-id>`.
pub(crate) fn stage_rel(stage_id: &str) -> String {
    format!("{STAGES}/{stage_id}")
}

/// `stages/<stage-id>/stage.json`.
pub(crate) fn stage_record_rel(stage_id: &str) -> String {
    format!("{STAGES}/{stage_id}/{STAGE}")
}

/// `stages/<stage-id>/output.json`.
pub fn output_rel(stage_id: &str) -> String {
    format!("{STAGES}/{stage_id}/{OUTPUT}")
}

/// `attempt-NNN`, three digits at least so that folders sort by number.
pub(crate) fn attempt_dir_name(attempt: u32) -> String {
    format!("{ATTEMPT_PREFIX}{attempt:03}")
}

/// `stages/<stage-id>/attempt-NNN`.
pub fn attempt_rel(stage_id: &str, attempt: u32) -> String {
    format!("{STAGES}/{stage_id}/{}", attempt_dir_name(attempt))
}

/// `<attempt_rel>/<file>`: a file of the attempt at `attempt_rel` (from
/// [`attempt_rel`]).
pub fn in_attempt(attempt_rel: &str, file: &str) -> String {
    format!("{attempt_rel}/{file}")
}

/// `attempt-007` → 7; `None` for any other name.
pub(crate) fn attempt_number(dir_name: &str) -> Option<u32> {
    dir_name.strip_prefix(ATTEMPT_PREFIX)?.parse().ok()
}

/// The stage and attempt a run-relative path belongs to:
/// `stages/<stage>/attempt-NNN/…`.
pub(crate) fn locate(rel: &str) -> (Option<String>, Option<u32>) {
    let mut parts = rel.split('/');
    if parts.next() != Some(STAGES) {
        return (None, None);
    }
    let stage = parts.next().filter(|s| !s.is_empty()).map(str::to_string);
    let rest: Vec<&str> = parts.collect();
    // The stage folder itself holds stage.json and output.json: no attempt.
    let attempt = if rest.len() > 1 {
        rest.first().and_then(|d| attempt_number(d))
    } else {
        None
    };
    (stage, attempt)
}

/// Whether `path` may lie in a run store: it passes through both a `.specbridge`
/// and a `runs` folder (in any order: a refusal errs on the safe side).
pub(crate) fn may_be_in_run_store(path: &Path) -> bool {
    use std::path::Component;
    let has = |name: &str| {
        path.components()
            .any(|c| c == Component::Normal(name.as_ref()))
    };
    has(STORE_DIR) && has(RUNS_DIR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_their_inverse() {
        assert_eq!(attempt_rel("impl.t-1", 12), "stages/impl.t-1/attempt-012");
        assert_eq!(attempt_rel("s", 1234), "stages/s/attempt-1234");
        assert_eq!(attempt_number("attempt-1234"), Some(1234));
        assert_eq!(attempt_number("attempt-x"), None);
        assert_eq!(attempt_number("stage.json"), None);
        assert_eq!(stage_record_rel("a"), "stages/a/stage.json");
        assert_eq!(
            in_attempt(&attempt_rel("a", 2), attempt::RESULT),
            "stages/a/attempt-002/result.json"
        );
        assert_eq!(locate("run.json"), (None, None));
        assert_eq!(
            locate("stages/spec/stage.json"),
            (Some("spec".into()), None)
        );
        assert_eq!(
            locate("stages/impl.t-1/attempt-012/process.json"),
            (Some("impl.t-1".into()), Some(12))
        );
        assert_eq!(
            locate("stages/spec/attempt-x/process.json"),
            (Some("spec".into()), None)
        );
    }

    #[test]
    fn run_store_paths_are_recognised() {
        assert!(may_be_in_run_store(Path::new(
            "/r/.specbridge/runs/x/report.html"
        )));
        assert!(!may_be_in_run_store(Path::new(
            "/r/.specbridge/report.html"
        )));
        assert!(!may_be_in_run_store(Path::new("/r/runs/report.html")));
    }
}
