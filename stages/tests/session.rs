//! `RunSession` as a library: a run and its resume go through the one lifecycle,
//! told to an observer in order, and every refusal comes before anything exists.

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use specbridge_engine::orchestrate::GivenOptions;
use specbridge_engine::resume::Action;
use specbridge_engine::{exit, RunStatus};
use specbridge_stages::session::{
    ReplaySettings, RunSession, SessionEnd, SessionError, SessionKind, SessionObserver,
    SessionSettings,
};

/// What the session told, one line each, in order.
#[derive(Default)]
struct Told(Mutex<Vec<String>>);

impl Told {
    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
    fn push(&self, line: String) {
        self.0.lock().unwrap().push(line);
    }
}

impl SessionObserver for Told {
    fn resume_opened(
        &self,
        findings: &[specbridge_engine::audit::Finding],
        torn: Option<usize>,
        dry: bool,
    ) {
        self.push(format!("opened {} {torn:?} {dry}", findings.len()));
    }
    fn run_started(&self, run_id: &str, resumed: bool) {
        self.push(format!("started {run_id} {resumed}"));
    }
    fn observed(&self, seen: &specbridge_engine::events::Observed<'_>) {
        use specbridge_engine::events::{Observed, RunEvent};
        if let Observed::Recorded(line) = seen {
            match &line.event {
                RunEvent::StageStarted(s) => self.push(format!("{} running", s.stage)),
                RunEvent::StageFinished(f) => {
                    self.push(format!("{} {}", f.stage, f.status.as_str()));
                }
                _ => {}
            }
        }
    }
}

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .status()
        .expect("git runs")
        .success();
    assert!(ok, "git {args:?}");
}

/// A repository whose second check passes only once `fixed` exists.
fn repository() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("specbridge.yaml"),
        "version: 1\nname: s\nstages:\n  - { id: first, kind: check, sandbox: off, argv: [\"true\"] }\n  - { id: second, kind: check, sandbox: off, needs: [first], argv: [test, -f, fixed] }\n",
    )
    .unwrap();
    git(dir.path(), &["init", "-q"]);
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "pipeline"]);
    dir
}

fn run_settings(root: &Path) -> SessionSettings {
    SessionSettings {
        root: root.to_path_buf(),
        file: None,
        given: GivenOptions::default(),
        refresh_runner: false,
        dry_run: false,
        kind: SessionKind::Run {
            replay: ReplaySettings::default(),
            scaffold: None,
        },
    }
}

fn resume_settings(root: &Path, run: &str, dry_run: bool, rerun: &[&str]) -> SessionSettings {
    SessionSettings {
        dry_run,
        kind: SessionKind::Resume {
            run: run.to_string(),
            rerun: rerun.iter().map(std::string::ToString::to_string).collect(),
            reverify: false,
        },
        ..run_settings(root)
    }
}

fn events(root: &Path, run: &str) -> Vec<u8> {
    std::fs::read(root.join(".specbridge/runs").join(run).join("events.jsonl")).unwrap()
}

#[test]
fn a_run_and_its_resume_go_through_one_lifecycle() {
    let repo = repository();
    let root = repo.path();
    let told = Arc::new(Told::default());
    let end = RunSession::new(run_settings(root), told.clone())
        .run()
        .expect("the run settles");
    let SessionEnd::Finished { result, .. } = &end else {
        panic!("not run: {end:?}");
    };
    assert_eq!(result.status, RunStatus::Failed);
    assert_eq!(end.exit_code(), exit::GATE);
    assert!(result.resume.is_none());
    let id = result.run_id.clone();
    assert_eq!(told.lines()[0], format!("started {id} false"));

    // A resume dry run and a resume naming no stage decide and refuse without
    // writing a byte.
    let before = events(root, &id);
    let dry = RunSession::new(
        resume_settings(root, &id, true, &[]),
        Arc::new(Told::default()),
    )
    .run()
    .expect("dry run");
    let SessionEnd::ResumePlanned { decisions, .. } = &dry else {
        panic!("not a dry run: {dry:?}");
    };
    let action = |stage: &str| {
        decisions
            .iter()
            .find(|d| d.stage == stage)
            .map(|d| d.action)
    };
    assert_eq!(action("first"), Some(Action::Reuse), "{decisions:?}");
    assert_eq!(action("second"), Some(Action::Rerun), "{decisions:?}");
    let unknown = RunSession::new(
        resume_settings(root, &id, false, &["nope"]),
        Arc::new(Told::default()),
    )
    .run()
    .expect_err("an unknown --rerun is refused");
    assert!(
        matches!(&unknown, SessionError::UnknownRerun { pattern, .. } if pattern == "nope"),
        "{unknown:?}"
    );
    assert_eq!(unknown.exit_code(), exit::CONFIG);
    assert_eq!(events(root, &id), before, "nothing was written");

    std::fs::write(root.join("fixed"), "").unwrap();
    let told = Arc::new(Told::default());
    let end = RunSession::new(resume_settings(root, &id, false, &[]), told.clone())
        .run()
        .expect("the resume settles");
    let SessionEnd::Finished { result, .. } = &end else {
        panic!("not resumed: {end:?}");
    };
    assert_eq!(result.run_id, id, "the same run folder");
    assert_eq!(result.status, RunStatus::Succeeded);
    assert_eq!(end.exit_code(), exit::OK);
    let lines = told.lines();
    assert_eq!(
        lines[..2],
        [
            "opened 0 None false".to_string(),
            format!("started {id} true")
        ]
    );
    assert!(lines.contains(&"second succeeded".to_string()), "{lines:?}");
    let report = result
        .resume
        .as_ref()
        .expect("a resume reports its decisions");
    assert!(
        report
            .decisions
            .iter()
            .any(|d| d.stage == "first" && d.action == Action::Reuse),
        "{report:?}"
    );
    // One settle for both: run.json holds the resume entry and the run's status.
    let run_json: serde_json::Value = serde_json::from_slice(
        &std::fs::read(root.join(".specbridge/runs").join(&id).join("run.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(run_json["status"], "succeeded");
    assert_eq!(run_json["exitCode"], 0);
    assert_eq!(run_json["resumes"].as_array().map(Vec::len), Some(1));
    assert_eq!(run_json["resumes"][0]["status"], "succeeded");
    assert_eq!(run_json["options"]["overrides"], serde_json::json!({}));
}

#[test]
fn refusals_come_before_anything_exists() {
    let repo = repository();
    let root = repo.path();
    let bad_flag = SessionSettings {
        given: GivenOptions {
            concurrency: Some(0),
            ..GivenOptions::default()
        },
        ..run_settings(root)
    };
    let e = RunSession::new(bad_flag, Arc::new(Told::default()))
        .run()
        .expect_err("--concurrency 0 is refused");
    assert!(matches!(e, SessionError::Options(_)), "{e:?}");
    assert_eq!(e.to_string(), "--concurrency: expected at least 1");

    let only = SessionSettings {
        given: GivenOptions {
            only: vec!["secnod".into()],
            ..GivenOptions::default()
        },
        ..run_settings(root)
    };
    let e = RunSession::new(only, Arc::new(Told::default()))
        .run()
        .expect_err("an unknown --only is refused");
    assert!(matches!(e, SessionError::Plan(_)), "{e:?}");
    assert!(e.to_string().contains("did you mean `second`"), "{e}");

    std::fs::write(
        root.join("specbridge.yaml"),
        "version: 1\nname: s\nstages: 7\n",
    )
    .unwrap();
    let e = RunSession::new(run_settings(root), Arc::new(Told::default()))
        .run()
        .expect_err("an invalid pipeline is refused");
    let SessionError::Invalid { diagnostics, .. } = &e else {
        panic!("{e:?}");
    };
    assert!(!diagnostics.is_empty());
    assert_eq!(e.exit_code(), exit::CONFIG);
    assert!(!root.join(".specbridge/runs").exists(), "no run folder");
}
