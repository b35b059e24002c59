//! The argument vector of one Claude Code invocation (DESIGN §3, §5).
//!
//! Built as an array from the flags the installed CLI supports; a setting whose
//! flag is missing is listed as skipped (recorded in `request.json`) and warned
//! about, never guessed. The prompt is not here: it goes on stdin.

use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::capabilities::{optional_meaning, Capabilities};
use crate::pipeline::ResolvedRunner;
use crate::safety::{assert_argv_safe, forbidden_in, forbidden_mode, SafetyError};

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

/// The tools and permissions an invocation runs with, as passed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolPolicy {
    /// The tool set offered (passed with `--tools` when the CLI has it).
    pub tools: Vec<String>,
    pub allowed_tools: Vec<String>,
    pub disallowed_tools: Vec<String>,
    /// The mode as passed (`manual` where the CLI lists it instead of `default`).
    pub permission_mode: String,
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
}

pub const READ_ONLY_TOOLS: &[&str] = &["Read", "Glob", "Grep"];

/// Built-in tools that change files or run commands: denied by name where the CLI
/// cannot restrict the offered set with `--tools`.
pub const MUTATING_TOOLS: &[&str] = &["Bash", "Edit", "MultiEdit", "Write", "NotebookEdit"];

/// Deny rules added under `acceptEdits`. The captures show that mode letting
/// in-repository `rm -rf`, `mv`, `touch`, `mkdir` and redirections through; these
/// rules stop the commands that delete, move, create or overwrite files (the
/// captures also show `Bash(rm:*)` stopping `git status && rm -rf x` and
/// `find x -delete`). Redirections such as `echo > file` cannot be matched by a
/// command-prefix rule, which is why `default` stays the default mode.
pub const ACCEPT_EDITS_DENY_RULES: &[&str] = &[
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

/// Flags specbridge sets itself. Given again in `commandArgs` they would merge with
/// or override the tool policy (variadic tool lists accumulate), so they are refused.
pub const MANAGED_FLAGS: &[&str] = &[
    "-p",
    "--print",
    "--output-format",
    "--input-format",
    "--permission-mode",
    "--allowedTools",
    "--allowed-tools",
    "--disallowedTools",
    "--disallowed-tools",
    "--tools",
    "--json-schema",
    "--session-id",
    "-r",
    "--resume",
    "-c",
    "--continue",
    "--fork-session",
    "--max-turns",
    "--max-budget-usd",
];

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AssemblyError {
    #[error("failed to assemble the agent command: the CLI lacks required flags: {}", .0.join(", "))]
    Incompatible(Vec<String>),
    #[error("failed to assemble the agent command: {field} holds `{value}`, which turns off permission checks ({forbidden})")]
    Forbidden {
        field: &'static str,
        value: String,
        forbidden: &'static str,
    },
    #[error("failed to assemble the agent command: commandArgs sets `{0}`, which specbridge sets itself")]
    ManagedFlag(String),
    #[error("failed to assemble the agent command: permission mode `{mode}` is not accepted by this CLI (it lists: {})", .listed.join(", "))]
    ModeNotAccepted { mode: String, listed: Vec<String> },
    #[error("failed to assemble the agent command: allowedBashRules holds `{0}`, which allows every command; name the commands, as in `Bash(git status *)`")]
    BareBash(String),
    #[error("failed to assemble the agent command: this CLI has no --resume, so session {0} cannot be continued")]
    ResumeUnsupported(Uuid),
    #[error("failed to assemble the agent command: {0}")]
    Unsafe(#[from] SafetyError),
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
    check_command_args(&runner.command_args)?;

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

    let policy = tool_policy(runner, caps, input.operation)?;
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

    if let Some(sources) = &runner.setting_sources {
        if caps.setting_sources {
            b.push(&["--setting-sources", &sources.join(",")]);
        } else {
            b.skip_optional("--setting-sources");
        }
    }
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
        self.argv.extend(args.iter().map(|a| a.to_string()));
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

fn check_command_args(args: &[String]) -> Result<(), AssemblyError> {
    let mut mode_next = false;
    for arg in args {
        let is_mode_value = std::mem::take(&mut mode_next);
        let forbidden = forbidden_in(arg)
            .filter(|f| f.starts_with('-') || *f == "bypassPermissions" || is_mode_value);
        if let Some(forbidden) = forbidden {
            return Err(AssemblyError::Forbidden {
                field: "commandArgs",
                value: arg.clone(),
                forbidden,
            });
        }
        let name = arg.split('=').next().unwrap_or(arg);
        mode_next = name == "--permission-mode";
        if MANAGED_FLAGS.contains(&name) {
            return Err(AssemblyError::ManagedFlag(name.to_string()));
        }
    }
    Ok(())
}

fn is_bash(tool: &str) -> bool {
    tool.eq_ignore_ascii_case("Bash")
}

/// A rule that allows every command is the bare `Bash` token in disguise.
fn is_bare_bash_rule(rule: &str) -> bool {
    let compact: String = rule.chars().filter(|c| !c.is_whitespace()).collect();
    let lower = compact.to_ascii_lowercase();
    matches!(
        lower.as_str(),
        "bash" | "bash()" | "bash(*)" | "bash(:*)" | "bash(**)"
    )
}

fn tool_policy(
    runner: &ResolvedRunner,
    caps: &Capabilities,
    operation: Operation,
) -> Result<ToolPolicy, AssemblyError> {
    let strings = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    match operation {
        Operation::Generate => {
            let mode = permission_mode(caps, "default")?;
            let mut disallowed = Vec::new();
            if !caps.tools {
                disallowed = strings(MUTATING_TOOLS);
            }
            extend_unique(&mut disallowed, &runner.disallowed_tools);
            Ok(ToolPolicy {
                tools: strings(READ_ONLY_TOOLS),
                allowed_tools: strings(READ_ONLY_TOOLS),
                disallowed_tools: disallowed,
                permission_mode: mode,
            })
        }
        Operation::Execute | Operation::Continue { .. } => {
            if let Some(forbidden) = forbidden_mode(&runner.permission_mode)
                .or_else(|| forbidden_in(&runner.permission_mode))
            {
                return Err(AssemblyError::Forbidden {
                    field: "permissionMode",
                    value: runner.permission_mode.clone(),
                    forbidden,
                });
            }
            if let Some(rule) = runner
                .allowed_bash_rules
                .iter()
                .find(|r| is_bare_bash_rule(r))
            {
                return Err(AssemblyError::BareBash(rule.clone()));
            }
            let mode = permission_mode(caps, &runner.permission_mode)?;
            // The file tools are pre-approved; Bash is offered (so its rules can
            // apply) but only ever approved rule by rule.
            let mut allowed: Vec<String> = runner
                .tools
                .iter()
                .filter(|t| !is_bash(t))
                .cloned()
                .collect();
            extend_unique(&mut allowed, &runner.allowed_bash_rules);
            let mut disallowed = Vec::new();
            if !caps.tools {
                // The offered set cannot be restricted: deny what was not configured.
                disallowed = MUTATING_TOOLS
                    .iter()
                    .filter(|m| !runner.tools.iter().any(|t| t == *m))
                    .map(|m| m.to_string())
                    .collect();
            }
            if runner.permission_mode == "acceptEdits" {
                extend_unique(&mut disallowed, &strings(ACCEPT_EDITS_DENY_RULES));
            }
            extend_unique(&mut disallowed, &runner.disallowed_tools);
            Ok(ToolPolicy {
                tools: runner.tools.clone(),
                allowed_tools: allowed,
                disallowed_tools: disallowed,
                permission_mode: mode,
            })
        }
    }
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
