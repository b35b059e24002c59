//! Per-stage checks: the argv of every attempt, the read-only rule of generate
//! stages, evidence against verification, and outputs against their schemas.

use serde_json::Value;

use crate::audit::files::RunFiles;
use crate::audit::forbidden::{forbidden_in, permission_mode};
use crate::audit::records::{self, read_record, str_field};
use crate::audit::report::{attempt_number, Finding, FindingCode};
use crate::audit::tools::{denied_tools_in, is_editing_mode, is_mutating, mutating_tools_in};
use crate::audit::AuditError;
use crate::store::layout::{self, attempt};

/// Validation errors quoted per output before the rest are counted.
const MAX_SCHEMA_ERRORS: usize = 3;

/// What a stage's `stage.json` says, for the consistency checks.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StageState {
    pub id: String,
    pub status: Option<String>,
}

/// Check every stage folder; return each stage's recorded status. A large run's
/// stages are checked in two halves at once ([`crate::beside::in_two_halves`]:
/// parsing every record is most of an audit after its first pass), each half's
/// findings kept apart and then appended in order, so the report reads as one
/// pass would have written it.
pub(crate) fn check_stages(
    run: &RunFiles,
    findings: &mut Vec<Finding>,
) -> Result<Vec<StageState>, AuditError> {
    let ((mut states, first_found), (second, second_found)) =
        crate::beside::in_two_halves(&run.subdirs(layout::STAGES), |ids| {
            let mut found = Vec::new();
            (check_each(run, ids, &mut found), found)
        });
    states.extend(second);
    findings.extend(first_found);
    findings.extend(second_found);
    Ok(states)
}

/// [`check_stages`] for the stage folders `ids`, in order.
fn check_each(run: &RunFiles, ids: &[String], findings: &mut Vec<Finding>) -> Vec<StageState> {
    let mut states = Vec::new();
    for id in ids {
        let stage_rel = layout::stage_rel(id);
        let record = read_record(run, &layout::stage_record_rel(id), findings);
        let kind = record.as_ref().and_then(|r| str_field(r, "kind"));
        let generate = kind == Some("generate");
        let mut attempts: Vec<(u32, String)> = run
            .subdirs(&stage_rel)
            .into_iter()
            .filter_map(|d| attempt_number(&d).map(|n| (n, format!("{stage_rel}/{d}"))))
            .collect();
        attempts.sort();
        for (_, attempt_rel) in &attempts {
            check_attempt(run, attempt_rel, generate, findings);
        }
        let final_attempt = record
            .as_ref()
            .and_then(|r| r.get("attempts"))
            .and_then(Value::as_u64);
        check_output(run, &stage_rel, kind, final_attempt, &attempts, findings);
        states.push(StageState {
            id: id.clone(),
            status: record
                .as_ref()
                .and_then(|r| str_field(r, "status"))
                .map(str::to_string),
        });
    }
    states
}

fn check_attempt(run: &RunFiles, attempt_rel: &str, generate: bool, findings: &mut Vec<Finding>) {
    let process_rel = layout::in_attempt(attempt_rel, attempt::PROCESS);
    let argv = read_record(run, &process_rel, findings).and_then(|p| {
        let argv = records::redacted_argv(&p);
        if argv.is_none() {
            findings.push(
                Finding::new(
                    FindingCode::RecordUnparseable,
                    "has no `redactedArgv` list of strings",
                )
                .file(&process_rel),
            );
        }
        argv
    });
    if let Some(argv) = &argv {
        for what in forbidden_in(argv) {
            findings.push(
                Finding::new(
                    FindingCode::ForbiddenFlag,
                    format!("the recorded argv holds {what}, a permission bypass"),
                )
                .file(&process_rel),
            );
        }
        if generate {
            for (flag, tool) in mutating_tools_in(argv) {
                findings.push(
                    Finding::new(
                        FindingCode::GenerateMutatingTool,
                        format!("generate stage's argv gives `{tool}` in `{flag}`; generate stages are read-only"),
                    )
                    .file(&process_rel),
                );
            }
            if let Some(mode) = permission_mode(argv).filter(|m| is_editing_mode(m)) {
                findings.push(
                    Finding::new(
                        FindingCode::GenerateMutatingTool,
                        format!("generate stage ran with `--permission-mode {mode}`, which approves edits unasked"),
                    )
                    .file(&process_rel),
                );
            }
        }
    }

    if generate {
        check_offered_tools(run, attempt_rel, argv.as_deref(), findings);
    }

    let evidence_rel = layout::in_attempt(attempt_rel, attempt::EVIDENCE);
    let Some(raw) = read_record(run, &evidence_rel, findings) else {
        return;
    };
    let evidence = records::evidence(&raw);
    // `resume --reverify` spawns no agent: its change may be nobody's (a flaky
    // test that passes now), and the agent's is in earlier attempts.
    let reverify = str_field(&raw, "kind") == Some("reverify");
    if generate && evidence.changed > 0 {
        findings.push(
            Finding::new(
                FindingCode::GenerateChangedTree,
                format!(
                    "evidence attributes {} changed file(s) to a read-only generate stage{}",
                    evidence.changed,
                    examples(&evidence.examples)
                ),
            )
            .file(&evidence_rel),
        );
    }
    if evidence.status.as_deref() == Some("verified") {
        if evidence.changed == 0 && !reverify {
            findings.push(
                Finding::new(
                    FindingCode::VerifiedWithoutChange,
                    "evidence says verified but attributes no change to the agent",
                )
                .file(&evidence_rel),
            );
        }
        check_verification(run, attempt_rel, &evidence_rel, findings);
    }
}

/// The tools the CLI reported offering (`result.json` `offeredTools`): a mutating
/// one is only acceptable where the argv denied it, as on CLIs without `--tools`.
fn check_offered_tools(
    run: &RunFiles,
    attempt_rel: &str,
    argv: Option<&[String]>,
    findings: &mut Vec<Finding>,
) {
    let result_rel = layout::in_attempt(attempt_rel, attempt::RESULT);
    let Some(result) = read_record(run, &result_rel, findings) else {
        return;
    };
    let Some(offered) = result.get("offeredTools").and_then(Value::as_array) else {
        return;
    };
    let denied = argv.map(denied_tools_in).unwrap_or_default();
    for tool in offered.iter().filter_map(Value::as_str) {
        if is_mutating(tool) && !denied.iter().any(|d| d == tool) {
            findings.push(
                Finding::new(
                    FindingCode::GenerateMutatingTool,
                    format!(
                        "the CLI offered `{tool}` to a generate stage and the argv did not deny it"
                    ),
                )
                .file(&result_rel),
            );
        }
    }
}

fn check_verification(
    run: &RunFiles,
    attempt_rel: &str,
    evidence_rel: &str,
    findings: &mut Vec<Finding>,
) {
    let verification_rel = layout::in_attempt(attempt_rel, attempt::VERIFICATION);
    let Some(v) = read_record(run, &verification_rel, findings) else {
        if !run.exists(&verification_rel) {
            findings.push(
                Finding::new(
                    FindingCode::VerifiedWithoutVerification,
                    "evidence says verified but the attempt has no verification.json",
                )
                .file(evidence_rel),
            );
        }
        return;
    };
    let Some(commands) = records::verification(&v) else {
        findings.push(
            Finding::new(FindingCode::RecordUnparseable, "has no `commands` list")
                .file(&verification_rel),
        );
        return;
    };
    let required: Vec<_> = commands.iter().filter(|c| c.required).collect();
    if required.is_empty() {
        findings.push(
            Finding::new(
                FindingCode::VerifiedWithoutVerification,
                "evidence says verified but no required verification command ran",
            )
            .file(evidence_rel),
        );
    }
    for c in required.iter().filter(|c| !c.passed) {
        let exit = c
            .exit_code
            .map_or("no exit code".to_string(), |e| format!("exit code {e}"));
        findings.push(
            Finding::new(
                FindingCode::VerifiedWithoutVerification,
                format!(
                    "evidence says verified but required command `{}` did not pass ({exit})",
                    c.name
                ),
            )
            .file(evidence_rel),
        );
    }
}

/// `stages/<id>/output.json` against the schema recorded by the attempt that
/// produced it: the stage's final attempt, else the latest attempt with a schema.
fn check_output(
    run: &RunFiles,
    stage_rel: &str,
    kind: Option<&str>,
    final_attempt: Option<u64>,
    attempts: &[(u32, String)],
    findings: &mut Vec<Finding>,
) {
    let output_rel = format!("{stage_rel}/{}", layout::OUTPUT);
    let Some(output) = read_record(run, &output_rel, findings) else {
        return;
    };
    let has_schema = |rel: &String| run.is_file(&layout::in_attempt(rel, attempt::OUTPUT_SCHEMA));
    let chosen = attempts
        .iter()
        .find(|(n, rel)| Some(u64::from(*n)) == final_attempt && has_schema(rel))
        .or_else(|| attempts.iter().rev().find(|(_, rel)| has_schema(rel)));
    let Some((attempt, attempt_rel)) = chosen else {
        if kind != Some("check") {
            findings.push(
                Finding::new(
                    FindingCode::OutputSchemaMissing,
                    "no attempt recorded an output-schema.json to validate this output against",
                )
                .file(&output_rel),
            );
        }
        return;
    };
    let schema_rel = layout::in_attempt(attempt_rel, attempt::OUTPUT_SCHEMA);
    let Some(schema) = read_record(run, &schema_rel, findings) else {
        return;
    };
    let invalid = |message: String| {
        Finding::new(FindingCode::OutputInvalid, message)
            .file(&output_rel)
            .attempt(Some(*attempt))
    };
    let validator = match crate::compiled_schema::validator(&schema) {
        Ok(v) => v,
        Err(e) => {
            findings.push(invalid(format!(
                "cannot be checked: {schema_rel} is not a valid JSON Schema ({e})"
            )));
            return;
        }
    };
    let errors: Vec<String> = validator
        .iter_errors(&output)
        .map(|e| {
            let at = e.instance_path().to_string();
            let at = if at.is_empty() { "/".to_string() } else { at };
            format!("at {at}: {e}")
        })
        .collect();
    if errors.is_empty() {
        return;
    }
    let mut message = format!(
        "does not validate against {schema_rel}: {}",
        errors
            .iter()
            .take(MAX_SCHEMA_ERRORS)
            .cloned()
            .collect::<Vec<_>>()
            .join("; ")
    );
    if errors.len() > MAX_SCHEMA_ERRORS {
        message.push_str(&format!("; and {} more", errors.len() - MAX_SCHEMA_ERRORS));
    }
    findings.push(invalid(message));
}

fn examples(paths: &[String]) -> String {
    if paths.is_empty() {
        String::new()
    } else {
        format!(" ({})", paths.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::events::EventFacts;
    use crate::audit::files::{compare, scan_files};

    /// Checked in two halves at once, a large run gives the states and the
    /// findings, in order, that one pass over every stage gives.
    #[test]
    fn two_halves_find_what_one_pass_finds_in_the_same_order() {
        let dir = tempfile::tempdir().unwrap();
        let stages = 3 * crate::beside::HALVES_FROM;
        for i in 0..stages {
            let stage = dir.path().join(format!("stages/s{i:03}"));
            let attempt = stage.join("attempt-001");
            std::fs::create_dir_all(&attempt).unwrap();
            let record = match i % 7 {
                0 => "{".to_string(),
                _ => format!(
                    r#"{{"stageId": "s{i:03}", "kind": "generate", "status": "succeeded", "attempts": 1}}"#
                ),
            };
            std::fs::write(stage.join("stage.json"), record).unwrap();
            let argv = if i % 5 == 0 {
                r#"["claude", "--dangerously-skip-permissions"]"#
            } else {
                r#"["claude", "--print"]"#
            };
            std::fs::write(
                attempt.join("process.json"),
                format!(r#"{{"redactedArgv": {argv}}}"#),
            )
            .unwrap();
        }
        let mut ignored = Vec::new();
        let scanned = scan_files(dir.path()).unwrap();
        let (_, run) = compare(scanned, dir.path(), &EventFacts::default(), &mut ignored);

        let mut halves = Vec::new();
        let states = check_stages(&run, &mut halves).unwrap();
        let mut one_pass = Vec::new();
        let expected = check_each(&run, &run.subdirs(layout::STAGES), &mut one_pass);

        assert_eq!(states.len(), stages);
        assert_eq!(states, expected);
        assert_eq!(halves, one_pass);
        for code in [FindingCode::RecordUnparseable, FindingCode::ForbiddenFlag] {
            let files: Vec<_> = halves
                .iter()
                .filter(|f| f.code == code)
                .filter_map(|f| f.file.clone())
                .collect();
            assert!(
                files.first().is_some_and(|f| f.starts_with("stages/s000"))
                    && files.last().is_some_and(|f| f.as_str() > "stages/s100"),
                "{code:?} found in both halves: {files:?}"
            );
        }
    }
}
