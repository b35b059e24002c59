//! Replay: answer agent stages from a recorded run instead of a live model.
//!
//! A recorded attempt's stdout (the stream-json transcript with its result
//! envelope) is played back into the new attempt's capture, and for execute stages
//! its `diff.patch` is applied to the working tree, at the point where the agent
//! would have run. Everything around it — parsing, classification, validation,
//! snapshots, attribution, verification, evidence, records — is the normal path,
//! so a replayed run is checked exactly like a live one.
//!
//! A recording is audited before use (a tampered one is refused), and a stage is
//! replayed only when its input hash equals the recorded one.

use std::path::{Path, PathBuf};

use chrono::Utc;
use serde_json::Value;

use crate::audit::{audit_run, Severity};
use crate::store::layout::attempt as file;
use crate::store::{RunReader, StageRecord};
use crate::supervisor::{OutputSink, ProcessRecord};

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("failed to open recording {dir}: {message}")]
    Open { dir: PathBuf, message: String },
    #[error("refusing recording {dir}: it fails its audit: {finding}")]
    Tampered { dir: PathBuf, finding: String },
    #[error("stage `{stage}` has no recording in {dir}")]
    NoRecording { stage: String, dir: PathBuf },
    #[error(
        "stage `{stage}` changed since it was recorded: its input hash is {now}, the recording's is {recorded} (the prompt, schema, runner settings or an upstream output differ)"
    )]
    HashMismatch {
        stage: String,
        now: String,
        recorded: String,
    },
    #[error(
        "the recorded changes of stage `{stage}` are incomplete ({note}); they cannot be replayed"
    )]
    DiffIncomplete { stage: String, note: String },
    #[error("failed to apply the recorded changes of stage `{stage}`: {message}")]
    Apply { stage: String, message: String },
    #[error("failed to play back stage `{stage}`: {message}")]
    Play { stage: String, message: String },
}

impl ReplayError {
    /// The stage has no usable recording (as opposed to a recording that is
    /// broken): `--replay-missing=live` runs such a stage live.
    pub fn is_missing(&self) -> bool {
        matches!(
            self,
            ReplayError::NoRecording { .. } | ReplayError::HashMismatch { .. }
        )
    }
}

/// An audited recorded run.
#[derive(Debug, Clone)]
pub struct Recording {
    dir: PathBuf,
    run_id: String,
}

/// One recorded attempt, ready to play back.
#[derive(Debug, Clone)]
pub struct RecordedAttempt {
    pub stage: String,
    pub attempt: u32,
    /// The attempt folder in the recording.
    pub dir: PathBuf,
    pub record: StageRecord,
}

impl Recording {
    /// Open and audit a recorded run folder: any error finding refuses it.
    pub fn open(dir: &Path) -> Result<Recording, ReplayError> {
        let open_err = |message: String| ReplayError::Open {
            dir: dir.to_path_buf(),
            message,
        };
        if !RunReader::at(dir).has_run_record() {
            return Err(open_err("no run.json: not a run folder".into()));
        }
        let report = audit_run(dir).map_err(|e| open_err(crate::error_chain(&e)))?;
        if let Some(f) = report
            .findings
            .iter()
            .find(|f| f.severity == Severity::Error)
        {
            let place = f
                .file
                .as_deref()
                .map(|p| format!(" ({p})"))
                .unwrap_or_default();
            return Err(ReplayError::Tampered {
                dir: dir.to_path_buf(),
                finding: format!("{}{place}: {}", f.code.as_str(), f.message),
            });
        }
        Ok(Recording {
            dir: dir.to_path_buf(),
            run_id: report.run_id,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The recorded final attempt of `stage`, if its input hash matches `input_hash`.
    pub fn attempt(
        &self,
        stage: &str,
        input_hash: Option<&str>,
    ) -> Result<RecordedAttempt, ReplayError> {
        let no_recording = || ReplayError::NoRecording {
            stage: stage.to_string(),
            dir: self.dir.clone(),
        };
        if !crate::store::is_safe_component(stage) {
            return Err(no_recording());
        }
        let reader = RunReader::at(&self.dir);
        let record: StageRecord = reader
            .stage(stage)
            .ok()
            .flatten()
            .ok_or_else(no_recording)?;
        if let (Some(now), Some(recorded)) = (input_hash, record.input_hash.as_deref()) {
            if now != recorded {
                return Err(ReplayError::HashMismatch {
                    stage: stage.to_string(),
                    now: now.to_string(),
                    recorded: recorded.to_string(),
                });
            }
        }
        let attempt = record.attempts.max(1);
        let recorded = reader.attempt(stage, attempt);
        if !recorded.has(file::RAW_STDOUT) {
            return Err(no_recording());
        }
        let dir = recorded.dir().to_path_buf();
        Ok(RecordedAttempt {
            stage: stage.to_string(),
            attempt,
            dir,
            record,
        })
    }
}

impl RecordedAttempt {
    /// Play the attempt back: its stdout and stderr into the given sinks (the new
    /// attempt's logs), and its recorded changes (if any) onto the working tree at
    /// `root`. Returns the process record of the playback.
    pub fn play(
        &self,
        stdout: &mut dyn OutputSink,
        stderr: &mut dyn OutputSink,
        root: &Path,
    ) -> Result<ProcessRecord, ReplayError> {
        let started = Utc::now();
        let play_err = |message: String| ReplayError::Play {
            stage: self.stage.clone(),
            message,
        };
        let copy = |name: &str, to: &mut dyn OutputSink| -> Result<u64, ReplayError> {
            use std::io::Read;
            let from = self.dir.join(name);
            if !from.is_file() {
                return Ok(0);
            }
            let mut file =
                std::fs::File::open(&from).map_err(|e| play_err(format!("{name}: {e}")))?;
            let mut buf = vec![0u8; 64 * 1024];
            let mut total = 0u64;
            loop {
                let n = file
                    .read(&mut buf)
                    .map_err(|e| play_err(format!("{name}: {e}")))?;
                if n == 0 {
                    return Ok(total);
                }
                to.write_chunk(&buf[..n])
                    .map_err(|e| play_err(format!("{name}: {e}")))?;
                total += n as u64;
            }
        };
        let stdout_bytes = copy(file::RAW_STDOUT, stdout)?;
        let stderr_bytes = copy(file::RAW_STDERR, stderr)?;
        self.apply_changes(root)?;
        let recorded: Option<Value> = std::fs::read(self.dir.join(file::PROCESS))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let exit_code = recorded
            .as_ref()
            .and_then(|p| p.get("exitCode"))
            .and_then(Value::as_i64)
            .map(|c| c as i32)
            .or(Some(0));
        let ended = Utc::now();
        Ok(ProcessRecord {
            schema_version: crate::supervisor::PROCESS_SCHEMA_VERSION,
            executable: "specbridge-replay".into(),
            redacted_argv: vec!["specbridge-replay".into(), self.dir.display().to_string()],
            cwd: root.display().to_string(),
            started_at: started,
            ended_at: ended,
            duration_ms: (ended - started).num_milliseconds().max(0) as u64,
            exit_code,
            signal: None,
            pid: 0,
            pgid: 0,
            timed_out: false,
            cancelled: false,
            hung_after_result: false,
            stdout_bytes,
            stderr_bytes,
            stdout_truncated: false,
            stderr_truncated: false,
            limit_exceeded: None,
            orphans_killed: false,
            stopped_by_observer: false,
            sandbox: None,
        })
    }

    /// Apply the recorded `diff.patch` to the working tree (never the index).
    fn apply_changes(&self, root: &Path) -> Result<(), ReplayError> {
        let patch = self.dir.join(file::DIFF);
        if !patch.is_file() {
            return Ok(());
        }
        if let Ok(b) = std::fs::read(self.dir.join(file::EVIDENCE)) {
            if let Ok(ev) = serde_json::from_slice::<Value>(&b) {
                let diff = &ev["diff"];
                if diff["truncated"].as_bool() == Some(true)
                    || diff["omittedPaths"]
                        .as_array()
                        .is_some_and(|a| !a.is_empty())
                {
                    return Err(ReplayError::DiffIncomplete {
                        stage: self.stage.clone(),
                        note: diff["note"].as_str().unwrap_or("truncated").to_string(),
                    });
                }
            }
        }
        if std::fs::metadata(&patch).map_or(0, |m| m.len()) == 0 {
            return Ok(());
        }
        let apply_err = |message: String| ReplayError::Apply {
            stage: self.stage.clone(),
            message,
        };
        for check in [true, false] {
            let mut cmd = crate::evidence::git_command(
                root,
                None,
                &["apply", "--binary", "--whitespace=nowarn"],
            );
            if check {
                cmd.arg("--check");
            }
            let out = cmd
                .arg(&patch)
                .output()
                .map_err(|e| apply_err(format!("failed to run git apply: {e}")))?;
            if !out.status.success() {
                return Err(apply_err(
                    String::from_utf8_lossy(&out.stderr).trim().to_string(),
                ));
            }
        }
        Ok(())
    }
}
