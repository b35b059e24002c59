//! The argument vector of one Claude Code invocation (docs/stage-kinds.md, docs/claude-code-runner.md).
//!
//! Built as an array from the flags the installed CLI supports; a setting whose
//! flag is missing is listed as skipped (recorded in `request.json`) and warned
//! about, never guessed. The prompt is not here: it goes on stdin.

use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::capabilities::{optional_meaning, Capabilities};
use crate::evidence::ProtectedPaths;
use crate::pipeline::ResolvedRunner;
use crate::policy::{self, CheckedRunner, Refusal, RefusalClass, SandboxPlan};
use crate::safety::{assert_argv_safe, SafetyError};
use crate::sandbox::SandboxProbe;

/// What an invocation is for; decides the tool policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Operation {
    /// A generate stage: read-only, whatever the runner section says.
    Generate,
    /// An execute stage: the configured tools, Bash only through rules.
    Execute,
    /// An execute attempt continuing an earlier session with `--resume`.
    #[serde(rename_all = "camelCase")]
    Continue { session_id: Uuid },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum OutputFormat {
    StreamJson,
    Json,
}

/// The tools and permissions an invocation runs with, as passed: what
/// `request.json` records as the policy the agent really had.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolPolicy {
    /// The tool set offered (passed with `--tools` when the CLI has it).
    pub tools: Vec<String>,
    pub allowed_tools: Vec<String>,
    pub disallowed_tools: Vec<String>,
    /// The mode as passed (`manual` where the CLI lists it instead of `default`).
    pub permission_mode: String,
    /// The settings files the CLI loads (`--setting-sources`); empty means none.
    /// `null` when the CLI lacks the flag and loads its usual files.
    pub setting_sources: Option<Vec<String>>,
    /// `--strict-mcp-config` was passed: MCP servers only from `mcpConfig`.
    pub strict_mcp_config: bool,
    /// MCP configuration files passed with `--mcp-config`.
    pub mcp_config: Vec<String>,
    /// `--restricted` was passed.
    pub restricted: bool,
    pub sandbox: SandboxRecord,
}

/// The sandbox around Bash commands, as passed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxRecord {
    pub status: SandboxStatus,
    /// Folders besides the repository that sandboxed commands may write.
    pub writable_paths: Vec<String>,
    /// Hosts sandboxed commands may reach.
    pub allowed_domains: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxStatus {
    /// Bash is offered, inside the CLI's sandbox (`--settings`).
    On,
    /// Bash is offered without the sandbox: `runner.sandbox: off`.
    Off,
    /// Bash is not offered.
    #[default]
    NotNeeded,
}

/// A setting that was not passed because the CLI lacks its flag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkippedFlag {
    pub flag: String,
    pub reason: String,
}

/// Everything needed to spawn one invocation, except the prompt and environment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InvocationRequest {
    pub operation: Operation,
    /// The executable as configured (`runner.command`).
    pub program: String,
    /// The arguments after the executable: `commandArgs`, then specbridge's own.
    pub argv: Vec<String>,
    pub skipped_flags: Vec<SkippedFlag>,
    pub warnings: Vec<String>,
    pub output_format: OutputFormat,
    /// The session id passed (`--session-id`) or resumed (`--resume`); `None` when
    /// the CLI picks its own.
    pub session_id: Option<Uuid>,
    pub tool_policy: ToolPolicy,
    /// The output schema was passed with `--json-schema`; otherwise the JSON is read
    /// from the result text.
    pub json_schema_inline: bool,
    /// Some setting could not be passed (see `skipped_flags`).
    pub degraded: bool,
}

/// The inputs of [`assemble`].
#[derive(Debug, Clone, Copy)]
pub struct InvocationInput<'a> {
    pub runner: &'a ResolvedRunner,
    pub capabilities: &'a Capabilities,
    pub operation: Operation,
    /// The stage's output schema, passed inline.
    pub schema: Option<&'a serde_json::Value>,
    /// Relative `pluginDirs` are resolved against it.
    pub repo_root: &'a Path,
    /// A fresh UUID v4 for `--session-id`; generated when `None`.
    pub session_id: Option<Uuid>,
    /// Execute stages: the run's protected paths, passed as deny rules.
    pub protected: Option<&'a ProtectedPaths>,
    /// Whether this machine can run the CLI's sandbox; `None` when not checked
    /// (a dry run, a replay), where a stage that allows Bash is not refused.
    pub sandbox_support: Option<&'a SandboxProbe>,
}

pub use crate::policy::tools::{MUTATING_TOOLS, READ_ONLY_TOOLS};

/// Deny rules added under `acceptEdits`. The captures show that mode letting
/// in-repository `rm -rf`, `mv`, `touch`, `mkdir` and redirections through; these
/// rules stop the commands that delete, move, create or overwrite files (the
/// captures also show `Bash(rm:*)` stopping `git status && rm -rf x` and
/// `find x -delete`). Redirections such as `echo > file` cannot be matched by a
/// command-prefix rule, which is why `default` stays the default mode.
pub(crate) const ACCEPT_EDITS_DENY_RULES: &[&str] = &[
    "Bash(rm:*)",
    "Bash(rmdir:*)",
    "Bash(unlink:*)",
    "Bash(mv:*)",
    "Bash(cp:*)",
    "Bash(dd:*)",
    "Bash(truncate:*)",
    "Bash(shred:*)",
    "Bash(touch:*)",
    "Bash(mkdir:*)",
    "Bash(ln:*)",
    "Bash(install:*)",
    "Bash(tee:*)",
    "Bash(chmod:*)",
    "Bash(chown:*)",
];

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AssemblyError {
    #[error("failed to assemble the agent command: the CLI lacks required flags: {}", .0.join(", "))]
    Incompatible(Vec<String>),
    #[error("failed to assemble the agent command: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Refused(Vec<Refusal>),
    #[error("failed to assemble the agent command: permission mode `{mode}` is not accepted by this CLI (it lists: {})", .listed.join(", "))]
    ModeNotAccepted { mode: String, listed: Vec<String> },
    #[error("failed to assemble the agent command: the stage allows Bash, which runs inside the CLI's sandbox, and the sandbox cannot run here: {0}; or opt out with `runner.sandbox: off`")]
    SandboxUnavailable(String),
    #[error("failed to assemble the agent command: this CLI has no --resume, so session {0} cannot be continued")]
    ResumeUnsupported(Uuid),
    #[error("failed to assemble the agent command")]
    Unsafe(#[from] SafetyError),
}

impl AssemblyError {
    /// A safety refusal (exit 6), as opposed to a configuration or machine problem.
    pub fn is_safety(&self) -> bool {
        match self {
            AssemblyError::Refused(list) => list.iter().any(|r| r.class == RefusalClass::Safety),
            AssemblyError::Unsafe(_) => true,
            _ => false,
        }
    }
}

/// Builds the argv of one invocation.
pub fn assemble(input: &InvocationInput<'_>) -> Result<InvocationRequest, AssemblyError> {
    let caps = input.capabilities;
    let runner = input.runner;
    let missing = caps.required_missing();
    if !missing.is_empty() {
        return Err(AssemblyError::Incompatible(
            missing.into_iter().map(|g| g.flag).collect(),
        ));
    }
    let checked = policy::check(runner).map_err(AssemblyError::Refused)?;

    let mut b = Builder::default();
    b.argv.extend(runner.command_args.iter().cloned());
    b.push(&["--print"]);

    let output_format = if caps.stream_json {
        b.push(&["--output-format", "stream-json", "--verbose"]);
        OutputFormat::StreamJson
    } else {
        b.push(&["--output-format", "json"]);
        b.skip(
            "--output-format stream-json",
            "no live progress, and the tools actually offered are not recorded; the final JSON envelope is read instead",
        );
        OutputFormat::Json
    };

    if let Some(model) = &runner.model {
        if caps.model {
            b.push(&["--model", model]);
        } else {
            b.skip(
                "--model",
                "the runner's `model` is ignored; the CLI's default model is used",
            );
        }
    }
    b.push(&["--max-turns", &runner.max_turns.to_string()]);
    if caps.max_budget_usd {
        b.push(&["--max-budget-usd", &runner.max_budget_usd.to_string()]);
    } else {
        b.skip_optional("--max-budget-usd");
    }
    if let Some(effort) = &runner.effort {
        if caps.effort {
            b.push(&["--effort", effort]);
        } else {
            b.skip_optional("--effort");
        }
    }

    let mut policy = tool_policy(&checked, runner, caps, input)?;
    b.push(&["--permission-mode", &policy.permission_mode]);
    if caps.tools {
        b.push(&["--tools", &policy.tools.join(",")]);
    } else {
        b.skip_optional("--tools");
    }
    let allowed_flag = caps.allowed_tools_flag.clone().expect("required flag");
    let disallowed_flag = caps.disallowed_tools_flag.clone().expect("required flag");
    if !policy.allowed_tools.is_empty() {
        b.push(&[&allowed_flag, &policy.allowed_tools.join(",")]);
    }
    if !policy.disallowed_tools.is_empty() {
        b.push(&[&disallowed_flag, &policy.disallowed_tools.join(",")]);
    }

    let session_id = match input.operation {
        Operation::Continue { session_id } => {
            if !caps.resume {
                return Err(AssemblyError::ResumeUnsupported(session_id));
            }
            b.push(&["--resume", &session_id.to_string()]);
            Some(session_id)
        }
        Operation::Generate | Operation::Execute if caps.session_id => {
            let id = input.session_id.unwrap_or_else(Uuid::new_v4);
            b.push(&["--session-id", &id.to_string()]);
            Some(id)
        }
        Operation::Generate | Operation::Execute => {
            b.skip_optional("--session-id");
            None
        }
    };

    let mut json_schema_inline = false;
    if let Some(schema) = input.schema {
        if caps.json_schema {
            // Inline as one compact string: the CLI rejects a file path.
            let compact = serde_json::to_string(schema).expect("a JSON value serializes");
            b.push(&["--json-schema", &compact]);
            json_schema_inline = true;
        } else {
            b.skip_optional("--json-schema");
        }
    }

    isolate(&mut b, &mut policy, &checked, caps, input)?;
    if !runner.plugin_dirs.is_empty() {
        if caps.plugin_dir {
            for dir in &runner.plugin_dirs {
                let path = input.repo_root.join(dir);
                b.push(&["--plugin-dir", &path.to_string_lossy()]);
            }
        } else {
            b.skip_optional("--plugin-dir");
        }
    }

    assert_argv_safe(&b.argv)?;

    let mut warnings: Vec<String> = b
        .skipped
        .iter()
        .map(|s| {
            format!(
                "{} is not supported by this Claude Code version: {}",
                s.flag, s.reason
            )
        })
        .collect();
    if runner.permission_mode == "acceptEdits" && !matches!(input.operation, Operation::Generate) {
        warnings.push(
            "permission mode acceptEdits lets shell commands change files in the repository; \
             deny rules for rm, mv, cp, touch, mkdir and similar commands were added, but shell \
             redirections (`echo > file`) still get through"
                .into(),
        );
    }
    let sandbox_used = policy.sandbox.status != SandboxStatus::NotNeeded;
    warnings.extend(
        checked
            .opt_ins()
            .iter()
            .filter(|o| o.field != "sandbox" || sandbox_used)
            .map(|o| o.message.clone()),
    );
    let degraded = !b.skipped.is_empty();
    Ok(InvocationRequest {
        operation: input.operation,
        program: runner.command.clone(),
        argv: b.argv,
        skipped_flags: b.skipped,
        warnings,
        output_format,
        session_id,
        tool_policy: policy,
        json_schema_inline,
        degraded,
    })
}

#[derive(Default)]
struct Builder {
    argv: Vec<String>,
    skipped: Vec<SkippedFlag>,
}

impl Builder {
    fn push(&mut self, args: &[&str]) {
        self.argv
            .extend(args.iter().map(std::string::ToString::to_string));
    }

    fn skip(&mut self, flag: &str, reason: &str) {
        self.skipped.push(SkippedFlag {
            flag: flag.into(),
            reason: reason.into(),
        });
    }

    fn skip_optional(&mut self, flag: &str) {
        self.skip(flag, optional_meaning(flag));
    }
}

/// Settings isolation and the sandbox (docs/claude-code-runner.md, "Confinement"): no settings
/// files unless the pipeline opted in, MCP servers only from the pipeline,
/// `--restricted` where the CLI has it, and the sandbox around Bash.
fn isolate(
    b: &mut Builder,
    policy: &mut ToolPolicy,
    checked: &CheckedRunner,
    caps: &Capabilities,
    input: &InvocationInput<'_>,
) -> Result<(), AssemblyError> {
    let sources = checked.setting_sources();
    if caps.setting_sources {
        b.push(&["--setting-sources", &sources.join(",")]);
        policy.setting_sources = Some(sources.to_vec());
    } else {
        b.skip_optional("--setting-sources");
    }
    if caps.strict_mcp_config {
        b.push(&["--strict-mcp-config"]);
        policy.strict_mcp_config = true;
    } else {
        b.skip_optional("--strict-mcp-config");
    }
    if !checked.mcp_config().is_empty() {
        if !caps.mcp_config {
            return Err(AssemblyError::Incompatible(vec!["--mcp-config".into()]));
        }
        b.push(&["--mcp-config"]);
        for file in checked.mcp_config() {
            b.push(&[&input.repo_root.join(file).to_string_lossy()]);
        }
        policy.mcp_config = checked.mcp_config().to_vec();
    }
    // `--restricted` ignores every settings file, so an opt-in to setting sources
    // would be void under it.
    if caps.restricted && sources.is_empty() {
        b.push(&["--restricted"]);
        policy.restricted = true;
    }
    if policy.sandbox.status == SandboxStatus::On {
        if !caps.sandbox_settings {
            return Err(AssemblyError::SandboxUnavailable(format!(
                "this Claude Code version ({}) is not known to honour the sandbox settings (verified from {})",
                caps.version.as_deref().unwrap_or("unknown"),
                super::capabilities::SANDBOX_VERIFIED_SINCE
            )));
        }
        if let Some(problem) = input.sandbox_support.and_then(|s| s.get().problem(true)) {
            return Err(AssemblyError::SandboxUnavailable(problem));
        }
        let settings = checked
            .sandbox()
            .settings_json()
            .expect("the sandbox is on");
        b.push(&["--settings", &settings.to_string()]);
    }
    Ok(())
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(std::string::ToString::to_string).collect()
}

fn tool_policy(
    checked: &CheckedRunner,
    runner: &ResolvedRunner,
    caps: &Capabilities,
    input: &InvocationInput<'_>,
) -> Result<ToolPolicy, AssemblyError> {
    let mut policy = ToolPolicy::default();
    match input.operation {
        Operation::Generate => {
            policy.permission_mode = permission_mode(caps, "default")?;
            if !caps.tools {
                policy.disallowed_tools = strings(MUTATING_TOOLS);
            }
            extend_unique(&mut policy.disallowed_tools, checked.deny_rules());
            policy.tools = strings(READ_ONLY_TOOLS);
            policy.allowed_tools = CheckedRunner::generate_allow_rules();
        }
        Operation::Execute | Operation::Continue { .. } => {
            policy.permission_mode = permission_mode(caps, &runner.permission_mode)?;
            policy.tools = checked.offered();
            // File tools pre-approved inside the repository only; Bash is offered
            // (so its rules can apply) but only ever approved rule by rule.
            policy.allowed_tools = checked.execute_allow_rules();
            if !caps.tools {
                // The offered set cannot be restricted: deny what was not configured.
                policy.disallowed_tools = MUTATING_TOOLS
                    .iter()
                    .filter(|m| !checked.names_tool(m))
                    .map(std::string::ToString::to_string)
                    .collect();
            }
            if let Some(protected) = input.protected {
                extend_unique(
                    &mut policy.disallowed_tools,
                    &policy::deny::protected_deny_rules(protected),
                );
            }
            if runner.permission_mode == "acceptEdits" {
                extend_unique(
                    &mut policy.disallowed_tools,
                    &strings(ACCEPT_EDITS_DENY_RULES),
                );
            }
            extend_unique(&mut policy.disallowed_tools, checked.deny_rules());
            if checked.allows_bash() {
                policy.sandbox = match checked.sandbox() {
                    SandboxPlan::On(s) => SandboxRecord {
                        status: SandboxStatus::On,
                        writable_paths: s.writable_paths.clone(),
                        allowed_domains: s.allowed_domains.clone(),
                    },
                    SandboxPlan::Off => SandboxRecord {
                        status: SandboxStatus::Off,
                        writable_paths: Vec::new(),
                        allowed_domains: Vec::new(),
                    },
                };
            }
        }
    }
    Ok(policy)
}

fn permission_mode(caps: &Capabilities, mode: &str) -> Result<String, AssemblyError> {
    caps.permission_mode_value(mode)
        .ok_or_else(|| AssemblyError::ModeNotAccepted {
            mode: mode.to_string(),
            listed: caps.permission_modes.clone().unwrap_or_default(),
        })
}

fn extend_unique(list: &mut Vec<String>, more: &[String]) {
    for item in more {
        if !list.contains(item) {
            list.push(item.clone());
        }
    }
}

#[cfg(test)]
#[path = "argv_tests.rs"]
mod tests;
