//! Runner settings after defaults and overrides: what an invocation actually uses.
//!
//! Precedence, lowest first: built-in defaults, the pipeline's `runner:`, the
//! stage's `runner:`, then the command-line overrides of this run.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::pipeline::model::{PipelineFile, RunnerKind, RunnerSettings, SandboxSetting, StageDef};
use crate::pipeline::units::{ByteSize, DurationSpec};
use crate::supervisor::OutputStream;

/// Command-line overrides for one run (`--max-turns`, `--max-budget-usd`,
/// `--timeout`, `--model`). Recorded in `run.json` as this struct.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunOverrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_budget_usd: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<DurationSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// Runner settings with every default applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedRunner {
    pub kind: RunnerKind,
    pub command: String,
    pub command_args: Vec<String>,
    pub model: Option<String>,
    pub effort: Option<String>,
    pub max_turns: u32,
    /// Attempts after a transient failure, on top of the first.
    #[serde(default = "default_retries")]
    pub retries: u32,
    pub max_budget_usd: f64,
    pub timeout: DurationSpec,
    pub kill_grace: DurationSpec,
    pub permission_mode: String,
    pub tools: Vec<String>,
    pub allowed_bash_rules: Vec<String>,
    pub disallowed_tools: Vec<String>,
    pub plugin_dirs: Vec<String>,
    pub setting_sources: Option<Vec<String>>,
    pub mcp_config: Vec<String>,
    /// `None`: the sandbox with no extra paths or domains.
    pub sandbox: Option<SandboxSetting>,
    /// Values are never recorded: [`ResolvedRunner::env_names`] is what records see.
    #[serde(skip)]
    pub env: BTreeMap<String, String>,
    pub max_stdout_bytes: ByteSize,
    pub max_stderr_bytes: ByteSize,
    pub from: Option<String>,
}

pub(crate) const DEFAULT_COMMAND: &str = "claude";
pub(crate) const DEFAULT_MAX_TURNS: u32 = 30;
pub(crate) const DEFAULT_RETRIES: u32 = 2;
/// More would only hide an outage behind hours of backoff.
pub(crate) const MAX_RETRIES: u32 = 10;

fn default_retries() -> u32 {
    DEFAULT_RETRIES
}
pub(crate) const DEFAULT_MAX_BUDGET_USD: f64 = 5.0;
pub(crate) const DEFAULT_TIMEOUT_MS: u64 = 30 * 60 * 1000;
pub(crate) const DEFAULT_KILL_GRACE_MS: u64 = 2_000;
pub const DEFAULT_CHECK_TIMEOUT_MS: u64 = 10 * 60 * 1000;
pub(crate) const DEFAULT_CONCURRENCY: u32 = 2;
pub(crate) const DEFAULT_MAX_STDOUT: u64 = 10 << 20;
pub(crate) const DEFAULT_MAX_STDERR: u64 = 1 << 20;

impl Default for ResolvedRunner {
    fn default() -> Self {
        ResolvedRunner {
            kind: RunnerKind::ClaudeCode,
            command: DEFAULT_COMMAND.into(),
            command_args: Vec::new(),
            model: None,
            effort: None,
            max_turns: DEFAULT_MAX_TURNS,
            retries: DEFAULT_RETRIES,
            max_budget_usd: DEFAULT_MAX_BUDGET_USD,
            timeout: DurationSpec::from_millis(DEFAULT_TIMEOUT_MS),
            kill_grace: DurationSpec::from_millis(DEFAULT_KILL_GRACE_MS),
            permission_mode: "default".into(),
            tools: ["Read", "Glob", "Grep", "Edit", "Write"]
                .map(String::from)
                .to_vec(),
            allowed_bash_rules: Vec::new(),
            disallowed_tools: Vec::new(),
            plugin_dirs: Vec::new(),
            setting_sources: None,
            mcp_config: Vec::new(),
            sandbox: None,
            env: BTreeMap::new(),
            max_stdout_bytes: ByteSize(DEFAULT_MAX_STDOUT),
            max_stderr_bytes: ByteSize(DEFAULT_MAX_STDERR),
            from: None,
        }
    }
}

impl ResolvedRunner {
    /// Why a process was stopped at an output limit: the stream, and the key
    /// that sets its limit with the value, which is what a user raises.
    pub fn output_limit_reason(&self, stream: OutputStream) -> String {
        let (key, limit) = match stream {
            OutputStream::Stdout => ("maxStdoutBytes", self.max_stdout_bytes),
            OutputStream::Stderr => ("maxStderrBytes", self.max_stderr_bytes),
        };
        format!("{} passed its limit ({key}: {limit})", stream.as_str())
    }

    /// Defaults, then each layer of settings in order, then the run's overrides.
    pub fn resolve(layers: &[&RunnerSettings], overrides: &RunOverrides) -> Self {
        let mut r = ResolvedRunner::default();
        for s in layers {
            r.apply(s);
        }
        if let Some(v) = overrides.max_turns {
            r.max_turns = v;
        }
        if let Some(v) = overrides.max_budget_usd {
            r.max_budget_usd = v;
        }
        if let Some(v) = overrides.timeout {
            r.timeout = v;
        }
        if let Some(v) = &overrides.model {
            r.model = Some(v.clone());
        }
        r
    }

    /// The runner of `stage` in `file` (the pipeline's own without a stage): the
    /// one place that knows which layers apply to a stage. Callers resolve a node's
    /// runner once and pass it down.
    pub fn for_stage(
        file: &PipelineFile,
        stage: Option<&StageDef>,
        overrides: &RunOverrides,
    ) -> Self {
        let mut layers = vec![&file.runner];
        if let Some(r) = stage.and_then(|s| s.runner.as_ref()) {
            layers.push(r);
        }
        Self::resolve(&layers, overrides)
    }

    fn apply(&mut self, s: &RunnerSettings) {
        macro_rules! take {
            ($($field:ident),*) => {$(
                if let Some(v) = &s.$field { self.$field = v.clone(); }
            )*};
        }
        take!(
            kind,
            command,
            command_args,
            max_turns,
            retries,
            max_budget_usd,
            timeout,
            kill_grace,
            permission_mode,
            tools,
            allowed_bash_rules,
            disallowed_tools,
            plugin_dirs,
            mcp_config,
            max_stdout_bytes,
            max_stderr_bytes
        );
        if s.model.is_some() {
            self.model = s.model.clone();
        }
        if s.effort.is_some() {
            self.effort = s.effort.clone();
        }
        if s.setting_sources.is_some() {
            self.setting_sources = s.setting_sources.clone();
        }
        if s.sandbox.is_some() {
            self.sandbox = s.sandbox.clone();
        }
        if s.from.is_some() {
            self.from = s.from.clone();
        }
        if let Some(env) = &s.env {
            self.env
                .extend(env.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }

    /// The names of the extra environment variables (values are never recorded).
    pub fn env_names(&self) -> Vec<String> {
        self.env.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_layers_and_overrides_win() {
        let pipeline = RunnerSettings {
            model: Some("sonnet".into()),
            max_turns: Some(10),
            ..Default::default()
        };
        let stage = RunnerSettings {
            max_turns: Some(3),
            ..Default::default()
        };
        let r = ResolvedRunner::resolve(&[&pipeline, &stage], &RunOverrides::default());
        assert_eq!(r.max_turns, 3);
        assert_eq!(r.model.as_deref(), Some("sonnet"));
        assert_eq!(r.command, "claude");

        let o = RunOverrides {
            model: Some("opus".into()),
            max_turns: Some(7),
            ..Default::default()
        };
        let r = ResolvedRunner::resolve(&[&pipeline, &stage], &o);
        assert_eq!(r.max_turns, 7);
        assert_eq!(r.model.as_deref(), Some("opus"));
    }
}
