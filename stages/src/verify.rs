//! Verification commands of execute stages: specbridge runs them itself after the
//! agent, and only their results (never the model's claims) decide `verified`.

use std::time::Duration;

use specbridge_engine::events::{ProcessSpawned, RunEvent, VerificationProcess};
use specbridge_engine::evidence::verification::{CommandResult, VerificationRecord};
use specbridge_engine::pipeline::resolve::DEFAULT_CHECK_TIMEOUT_MS;
use specbridge_engine::pipeline::VerificationCommand;
use specbridge_engine::store::layout::{self, attempt};
use specbridge_engine::store::RunHandle;
use specbridge_engine::supervisor;

use crate::context::RunContext;
use crate::error::StageError;

/// A verification name as a file-name part: anything outside `[A-Za-z0-9._-]`
/// becomes `-`.
fn file_part(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let s = s.trim_start_matches('.').to_string();
    if s.is_empty() {
        "command".into()
    } else {
        s
    }
}

/// Run every command in order (all of them, even after a failure, so the record
/// is complete), logs into the attempt folder, `verification.json` announced.
pub(crate) async fn run_verification(
    ctx: &RunContext,
    commands: &[VerificationCommand],
    run: &RunHandle,
    attempt_rel: &str,
    kill_grace: Duration,
) -> Result<VerificationRecord, StageError> {
    let mut record = VerificationRecord {
        schema_version: 1,
        commands: Vec::new(),
    };
    for (i, cmd) in commands.iter().enumerate() {
        let required = cmd.required.unwrap_or(true);
        let argv = cmd
            .argv
            .as_list()
            .map(<[String]>::to_vec)
            .unwrap_or_default();
        let part = file_part(&cmd.name);
        // Two commands with the same name keep separate logs.
        let stem = if commands[..i].iter().any(|c| file_part(&c.name) == part) {
            format!("verification-{part}-{}", i + 1)
        } else {
            format!("verification-{part}")
        };
        let (stdout_log, stderr_log) = attempt::verification_logs(&stem);
        // A command that never ran: failed, with the reason.
        let not_run = |argv: Vec<String>, stdout_log: String, stderr_log: String, why: String| {
            CommandResult {
                name: cmd.name.clone(),
                argv,
                required,
                passed: false,
                exit_code: None,
                signal: None,
                timed_out: false,
                duration_ms: 0,
                failure: Some(why),
                stdout_log,
                stderr_log,
                sandbox: None,
            }
        };
        let wrapped = match crate::confine::wrap(ctx, cmd.sandbox.as_ref(), &argv) {
            Ok(w) => w,
            Err(e) => {
                let why = crate::error_chain(&e);
                record
                    .commands
                    .push(not_run(argv, stdout_log, stderr_log, why));
                continue;
            }
        };
        let logs = crate::confine::CommandLogs {
            run,
            stdout: &layout::in_attempt(attempt_rel, &stdout_log),
            stderr: &layout::in_attempt(attempt_rel, &stderr_log),
            max_stdout_bytes: 1 << 20,
            max_stderr_bytes: 1 << 20,
        };
        let timeout = cmd.timeout.map_or(
            Duration::from_millis(DEFAULT_CHECK_TIMEOUT_MS),
            specbridge_engine::pipeline::DurationSpec::as_duration,
        );
        let (spec, applied) =
            crate::confine::spawn_spec(ctx, wrapped, argv.clone(), logs, timeout, kill_grace)?;
        let name = cmd.name.clone();
        let result = supervisor::run(spec, ctx.cancel.clone(), None, |pid, pgid| {
            let spawned =
                RunEvent::ProcessSpawned(ProcessSpawned::Verification(VerificationProcess {
                    verification: name.clone(),
                    attempt: attempt_rel.to_string(),
                    pid,
                    pgid,
                }));
            if let Err(e) = run.event(spawned) {
                // Recorded by the store as the run's failure: the scheduler ends the run.
                tracing::debug!("failed to record the spawn of pid {pid}: {e}");
            }
        })
        .await;
        let entry = match result {
            Ok(p) => {
                let passed = p.exit_code == Some(0) && !p.timed_out && !p.cancelled;
                let failure = (!passed).then(|| {
                    if p.timed_out {
                        format!("timed out after {}ms", p.duration_ms)
                    } else if p.cancelled {
                        "cancelled".to_string()
                    } else if let Some(c) = p.exit_code {
                        format!("exit code {c}")
                    } else {
                        format!("killed by {}", p.signal.as_deref().unwrap_or("a signal"))
                    }
                });
                CommandResult {
                    name: cmd.name.clone(),
                    argv,
                    required,
                    passed,
                    exit_code: p.exit_code,
                    signal: p.signal.clone(),
                    timed_out: p.timed_out,
                    duration_ms: p.duration_ms,
                    failure,
                    stdout_log,
                    stderr_log,
                    sandbox: Some(applied),
                }
            }
            Err(e) => not_run(argv, stdout_log, stderr_log, crate::error_chain(&e)),
        };
        record.commands.push(entry);
    }
    run.write_json(
        &layout::in_attempt(attempt_rel, attempt::VERIFICATION),
        &record,
    )?;
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_safe_file_parts() {
        assert_eq!(file_part("cargo test"), "cargo-test");
        assert_eq!(file_part("../x"), "-x");
        assert_eq!(file_part(".hidden"), "hidden");
        assert_eq!(file_part(""), "command");
    }
}
