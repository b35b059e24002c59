//! Every variant of [`CliError`] against the exit code and JSON error object it
//! must produce.

use std::io;
use std::path::PathBuf;

use specbridge_engine::audit::{AuditError, Finding, FindingCode};
use specbridge_engine::orchestrate::{OptionsError, OrchestrateError};
use specbridge_engine::replay::ReplayError;
use specbridge_engine::resume::ResumeError;
use specbridge_engine::runner::claude_code::DoctorStatus;
use specbridge_engine::store::{LockError, StoreError, WriteError};
use specbridge_engine::{exit, Diagnostic};
use specbridge_stages::init::InitError;
use specbridge_stages::SessionError;

use super::*;

fn disk_full() -> WriteError {
    WriteError {
        path: ".specbridge/runs/x/run.json".into(),
        source: io::Error::from_raw_os_error(libc::ENOSPC),
    }
}

fn session(e: SessionError) -> CliError {
    CliError::Session(e)
}

#[test]
fn each_variant_maps_to_its_documented_exit_code() {
    let cases: Vec<(CliError, i32)> = vec![
        (
            CliError::Config("-C x: not a directory".into()),
            exit::CONFIG,
        ),
        (
            session(SessionError::Options(OptionsError {
                flag: "--max-turns",
                problem: "expected at least 1".into(),
            })),
            exit::CONFIG,
        ),
        (
            session(SessionError::Invalid {
                path: "specbridge.yaml".into(),
                diagnostics: vec![Diagnostic::error("unknown-key", "specbridge.yaml", "x")],
            }),
            exit::CONFIG,
        ),
        (
            session(SessionError::Invalid {
                path: "specbridge.yaml".into(),
                diagnostics: vec![
                    Diagnostic::error("unknown-key", "specbridge.yaml", "x"),
                    Diagnostic::error("forbidden-flag", "specbridge.yaml", "y").safety(),
                ],
            }),
            exit::SAFETY,
        ),
        (
            session(SessionError::UnknownRerun {
                pattern: "nope".into(),
                run: "0190".into(),
            }),
            exit::CONFIG,
        ),
        (
            session(SessionError::Resume(ResumeError::Tampered {
                run: "0190".into(),
                findings: vec![Finding::new(FindingCode::ChainBroken, "seq 3")],
            })),
            exit::SAFETY,
        ),
        (
            session(SessionError::Resume(ResumeError::Store(StoreError::Lock(
                LockError::InUse {
                    run: "0190".into(),
                    path: "lock".into(),
                },
            )))),
            exit::CONFIG,
        ),
        (
            session(SessionError::Preflight("not clean".into())),
            exit::CONFIG,
        ),
        (
            session(SessionError::Sandbox("no bwrap".into())),
            exit::CONFIG,
        ),
        (
            session(SessionError::Replay(ReplayError::Tampered {
                dir: "rec".into(),
                finding: "chain-broken".into(),
            })),
            exit::SAFETY,
        ),
        (
            session(SessionError::Replay(ReplayError::Open {
                dir: "rec".into(),
                message: "missing".into(),
            })),
            exit::CONFIG,
        ),
        (
            session(SessionError::ReplayWithoutFrom {
                stage: "spec".into(),
            }),
            exit::CONFIG,
        ),
        (
            session(SessionError::RunnerUnavailable {
                command: "claude".into(),
                refusal: "is not logged in".into(),
                status: DoctorStatus::Unauthenticated,
            }),
            exit::RUNNER_UNAVAILABLE,
        ),
        (
            session(SessionError::Runtime(io::Error::other("no threads"))),
            exit::CONFIG,
        ),
        // A run-store write failing mid-run (a full disk, a vanished folder) is
        // exit 2 on purpose, not by falling through.
        (
            session(SessionError::Run(OrchestrateError::Store(
                StoreError::Write(disk_full()),
            ))),
            exit::CONFIG,
        ),
        (
            CliError::Store(StoreError::UnsafePath("../x".into())),
            exit::CONFIG,
        ),
        (
            CliError::Audit(AuditError::NotARun(PathBuf::from("x"))),
            exit::CONFIG,
        ),
        (
            CliError::Init(InitError::WouldOverwrite(vec!["specbridge.yaml".into()])),
            exit::CONFIG,
        ),
        (
            CliError::WriteReport {
                path: "report.html".into(),
                source: disk_full(),
            },
            exit::CONFIG,
        ),
        (
            CliError::Runtime(io::Error::other("no threads")),
            exit::CONFIG,
        ),
    ];
    for (e, code) in cases {
        assert_eq!(e.exit_code(), code, "{e:?}");
        let json = error_json(&e);
        assert_eq!(json["error"]["exitCode"], code, "{json}");
        assert_eq!(json["error"]["code"], code_name(code), "{json}");
        let message = json["error"]["message"].as_str().unwrap_or_default();
        assert!(!message.is_empty(), "{e:?}: {json}");
        assert_eq!(
            json.as_object().map(serde_json::Map::len),
            Some(1),
            "{json}"
        );
        assert_eq!(
            json["error"].as_object().map(serde_json::Map::len),
            Some(3),
            "{json}"
        );
    }
}

#[test]
fn a_cause_is_printed_once() {
    // WriteError embeds its cause in its own text: not repeated.
    let embedded = CliError::WriteReport {
        path: "report.html".into(),
        source: disk_full(),
    };
    let m = embedded.message();
    assert!(
        m.starts_with("failed to write report.html: failed to write "),
        "{m}"
    );
    assert_eq!(m.matches("No space left on device").count(), 1, "{m}");
    // A message that does not embed its cause gets it appended.
    let runtime = CliError::Runtime(io::Error::other("no threads"));
    assert_eq!(
        runtime.message(),
        "failed to start the async runtime: no threads"
    );
}

#[test]
fn an_invalid_pipeline_reports_its_count_not_a_generic_message() {
    let e = session(SessionError::Invalid {
        path: PathBuf::from("/nowhere/specbridge.yaml"),
        diagnostics: vec![
            Diagnostic::error("unknown-key", "/nowhere/specbridge.yaml", "x"),
            Diagnostic::warning("gate", "/nowhere/specbridge.yaml", "y"),
        ],
    });
    assert_eq!(e.message(), "/nowhere/specbridge.yaml: 1 error, 1 warning");
}

#[test]
fn help_lines_follow_the_refusals_that_have_them() {
    let unavailable = session(SessionError::RunnerUnavailable {
        command: "claude".into(),
        refusal: "is not logged in".into(),
        status: DoctorStatus::Unauthenticated,
    });
    assert_eq!(
        unavailable.help(),
        [
            "  help: log in with `claude auth login`, or set ANTHROPIC_API_KEY for the runner",
            "nothing was run; `specbridge runner doctor --command PATH` shows the details"
        ]
    );
    let mut finding = Finding::new(FindingCode::ChainBroken, "seq 3 does not follow seq 2");
    finding.file = Some("events.jsonl".into());
    let tampered = session(SessionError::Resume(ResumeError::Tampered {
        run: "0190".into(),
        findings: vec![finding],
    }));
    assert_eq!(
        tampered.help(),
        ["  [chain-broken] events.jsonl: seq 3 does not follow seq 2"]
    );
    assert!(CliError::Config("x".into()).help().is_empty());
}
