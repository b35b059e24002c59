//! Detecting the agent runner once before a run (docs/claude-code-runner.md): every runner command
//! the planned agent stages use is detected without spawning it when its version
//! is a known one, else probed with `runner doctor`'s detection, less `auth status`
//! (a run that is not logged in ends `runner-unavailable`, exit 3), and remembered
//! for a while in the user's cache folder (`--refresh-runner` probes again).

use std::path::Path;

use specbridge_engine::pipeline::RunnerKind;
use specbridge_engine::runner::claude_code::detection_cache::detect_cached;
use specbridge_engine::runner::claude_code::{DoctorOptions, DoctorReport, DoctorStatus};
use specbridge_engine::scheduler::Node;
use specbridge_engine::store::RunnerInfo;
use specbridge_engine::CacheUse;

use super::SessionError;
use crate::agent::assumed_capabilities;
use crate::{AgentSetup, DetectedRunner, RunContext};

/// What detection found, for the executor and `run.json`.
#[derive(Debug, Default)]
pub(crate) struct Detection {
    pub agent: AgentSetup,
    pub runner: Option<RunnerInfo>,
    pub warnings: Vec<String>,
    /// `--dry-run` only: why capabilities were assumed.
    pub assumption: Option<String>,
}

/// The runner commands of the planned agent stages, in plan order, each once.
pub(crate) fn runner_commands(ctx: &RunContext, nodes: &[Node]) -> Vec<String> {
    let mut commands: Vec<String> = Vec::new();
    for node in nodes.iter().filter(|n| n.kind.is_agent()) {
        let def_id = node.instance_of.as_deref().unwrap_or(&node.id);
        let Some(stage) = ctx.stage(def_id) else {
            continue;
        };
        let runner = ctx.runner_for(stage);
        if runner.kind == RunnerKind::ClaudeCode && !commands.contains(&runner.command) {
            commands.push(runner.command);
        }
    }
    commands
}

/// Probes each runner command. A runner that cannot be used stops the run with
/// exit 3 before anything is created; under `--dry-run` capabilities are assumed
/// instead, and the assumption is stated.
pub(crate) async fn detect(
    root: &Path,
    commands: &[String],
    dry_run: bool,
    cache: CacheUse,
    probe: &std::sync::Arc<specbridge_engine::sandbox::SandboxProbe>,
) -> Result<Detection, SessionError> {
    let mut detection = Detection::default();
    if commands.is_empty() {
        return Ok(detection);
    }
    let options = DoctorOptions::from_env();
    if !dry_run {
        detection.agent.sandbox = Some(std::sync::Arc::clone(probe));
    }
    let scrubbed = specbridge_engine::policy::env::inherited_widening(
        std::env::vars_os().map(|(k, _)| k.to_string_lossy().into_owned()),
    );
    if !scrubbed.is_empty() {
        detection
            .warnings
            .push(specbridge_engine::runner::claude_code::request::scrubbed_warning(&scrubbed));
    }
    for command in commands {
        let probed = probe_path(root, command);
        let (report, source) = detect_cached(&probed, &options, cache).await;
        match (&report.capabilities, report.status) {
            (Some(caps), DoctorStatus::Available) => {
                for gap in &report.degraded {
                    detection.warnings.push(format!(
                        "Claude Code {} lacks {}: {}",
                        report.version.as_deref().unwrap_or("(unknown version)"),
                        gap.flag,
                        gap.meaning
                    ));
                }
                detection.warnings.extend(report.warnings.iter().cloned());
                if detection.runner.is_none() {
                    detection.runner = Some(RunnerInfo {
                        kind: "claude-code".into(),
                        command: command.clone(),
                        version: report.version.clone(),
                        capabilities: serde_json::to_value(caps).expect("capabilities serialise"),
                        detected_by: Some(source),
                    });
                }
                detection.agent.runners.insert(
                    command.clone(),
                    DetectedRunner {
                        version: report.version.clone(),
                        capabilities: caps.clone(),
                        assumed: false,
                    },
                );
            }
            _ if dry_run => {
                detection.assumption = Some(format!(
                    "the runner `{command}` cannot be used ({}); argv assembled assuming a Claude Code that has every flag specbridge uses",
                    refusal(&report)
                ));
                detection.agent.runners.insert(
                    command.clone(),
                    DetectedRunner {
                        version: None,
                        capabilities: assumed_capabilities(),
                        assumed: true,
                    },
                );
            }
            _ => {
                return Err(SessionError::RunnerUnavailable {
                    command: command.clone(),
                    refusal: refusal(&report),
                    status: report.status,
                })
            }
        }
    }
    if detection.agent.runners.len() > 1 {
        detection.warnings.push(format!(
            "stages use {} runner commands; run.json records the first, each attempt's request.json records its own",
            detection.agent.runners.len()
        ));
    }
    Ok(detection)
}

/// Why a runner cannot be used, in a few words (never the text of `auth status`).
fn refusal(report: &DoctorReport) -> String {
    let version = report
        .version
        .as_deref()
        .map(|v| format!(" (Claude Code {v})"))
        .unwrap_or_default();
    match report.status {
        DoctorStatus::Available => format!("is available{version}"),
        DoctorStatus::Unauthenticated => format!("is not logged in{version}"),
        DoctorStatus::Incompatible => format!(
            "is incompatible{version}: it lacks {}",
            report
                .missing
                .iter()
                .map(|g| g.flag.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        DoctorStatus::Unavailable | DoctorStatus::Error => format!(
            "is unavailable: {}",
            report.error.as_deref().unwrap_or("the probe failed")
        ),
    }
}

/// The executable a runner command names: a relative path names a file in the
/// repository, as it does for the agent; a bare name is looked up on PATH.
pub fn probe_path(root: &Path, command: &str) -> String {
    if command.contains('/') && Path::new(command).is_relative() {
        root.join(command).display().to_string()
    } else {
        command.to_string()
    }
}
