//! What the agent was observed to have, against what it was asked for (docs/claude-code-runner.md,
//! "Observed, not assumed").
//!
//! - The `system/init` event names the tools offered and the permission mode; a
//!   difference from the request stops the agent at once ([`check_init`]).
//! - After the attempt every tool call in the stream is checked against the policy
//!   ([`check_calls`]): a file tool that succeeded outside the repository, a
//!   mutating file tool that succeeded on a protected path, a Bash command that ran
//!   without a matching allowed rule, or any other tool that was not asked for.
//!   Each call becomes a line of `tool-calls.jsonl`.
//!
//! Allowed rules are read from the request's [`ToolPolicy`] as passed; deny rules of
//! the form `Tool(./path/**)` add protected paths to the ones the caller names.

use std::path::{Component, Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::argv::ToolPolicy;
use super::stream::{InitInfo, ObservedCall};
use crate::bash_rule;

pub(crate) const TOOL_CALL_SCHEMA_VERSION: u32 = 1;

/// Tools the CLI offers beside the requested ones: `StructuredOutput` under
/// `--json-schema` (FACTS.md, "Structured output").
pub(crate) const CLI_ADDED_TOOLS: &[&str] = &["StructuredOutput"];

/// Tools that read files, and the input fields naming their paths.
const READ_TOOLS: &[&str] = &["Read", "Glob", "Grep", "LS", "NotebookRead"];
/// Tools that change files.
const WRITE_TOOLS: &[&str] = &["Write", "Edit", "MultiEdit", "NotebookEdit"];
const PATH_FIELDS: &[&str] = &["file_path", "notebook_path", "path"];

/// Protected whatever the caller names: git's folder, the run store, and the CLI's
/// own project settings (which can widen the next invocation's policy).
const ALWAYS_PROTECTED: &[&str] = &[".git", ".specbridge", ".claude"];

/// How the `init` event differed from the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitMismatch {
    pub extra_tools: Vec<String>,
    pub mode: Option<(String, String)>,
}

impl std::fmt::Display for InitMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if !self.extra_tools.is_empty() {
            parts.push(format!(
                "offered tools that were not asked for: {}",
                self.extra_tools.join(", ")
            ));
        }
        if let Some((asked, reported)) = &self.mode {
            parts.push(format!(
                "permission mode `{reported}` where `{asked}` was asked"
            ));
        }
        write!(
            f,
            "the agent's init event differs from the request: {}; the agent was stopped",
            parts.join("; ")
        )
    }
}

/// What `init` should report for a request.
#[derive(Debug, Clone)]
pub struct InitExpectation<'a> {
    pub policy: &'a ToolPolicy,
    /// `--tools` was passed: the offered set must be the requested one. Without it
    /// every default tool is offered, and only the denied ones must be missing.
    pub tools_restricted: bool,
    pub schema: bool,
}

/// `manual` (2.1.200+) is reported as `default`.
fn canonical_mode(mode: &str) -> &str {
    match mode {
        "manual" => "default",
        other => other,
    }
}

/// `None` when `init` reports what was asked. Tools asked for but not offered (an
/// unknown name the CLI ignores) confine the agent further and are no mismatch.
pub(crate) fn check_init(init: &InitInfo, expected: &InitExpectation<'_>) -> Option<InitMismatch> {
    let policy = expected.policy;
    let extra_tools: Vec<String> = init
        .tools
        .iter()
        .filter(|tool| {
            if expected.schema && CLI_ADDED_TOOLS.contains(&tool.as_str()) {
                return false;
            }
            if expected.tools_restricted {
                !policy.tools.iter().any(|t| t == *tool)
            } else {
                policy.disallowed_tools.iter().any(|d| d == *tool)
            }
        })
        .cloned()
        .collect();
    let mode = match &init.permission_mode {
        Some(reported) if canonical_mode(reported) != canonical_mode(&policy.permission_mode) => {
            Some((policy.permission_mode.clone(), reported.clone()))
        }
        // Versions before 1.0.128 report no mode; nothing to compare.
        _ => None,
    };
    (!extra_tools.is_empty() || mode.is_some()).then_some(InitMismatch { extra_tools, mode })
}

/// One line of `tool-calls.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "specbridge tool-calls.jsonl line")]
pub struct ToolCallRecord {
    pub schema_version: u32,
    /// 1-based position in the stream.
    pub seq: u32,
    pub tool_use_id: Option<String>,
    pub tool: String,
    /// The input with long texts cut; redacted before it is written.
    pub input: Value,
    /// What the stage's policy says of this call.
    pub policy: CallVerdict,
    /// Why the policy refuses it.
    pub reason: Option<String>,
    /// What happened: `succeeded`, `failed` (the CLI or the tool refused or
    /// failed), or `no-result` (the stream ended first; counted as having run).
    pub outcome: CallOutcome,
    pub result_error: Option<String>,
    /// A call the policy refuses that ran anyway.
    pub violation: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CallVerdict {
    Allowed,
    Refused,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CallOutcome {
    Succeeded,
    Failed,
    NoResult,
}

/// Where the calls ran and what is protected.
#[derive(Debug, Clone)]
pub struct CallContext<'a> {
    pub policy: &'a ToolPolicy,
    /// The repository root (the working directory of the agent).
    pub root: &'a Path,
    /// Paths relative to the root that no file tool may change.
    pub protected: &'a [String],
    /// A played-back recording ran in another folder: absolute paths under it are
    /// read as paths under `root`. `None` for a live agent.
    pub recorded_root: Option<&'a str>,
}

/// Checks every call; the records, in stream order.
pub(crate) fn check_calls(calls: &[ObservedCall], ctx: &CallContext<'_>) -> Vec<ToolCallRecord> {
    let root = std::fs::canonicalize(ctx.root).unwrap_or_else(|_| ctx.root.to_path_buf());
    let protected = protected_paths(ctx);
    calls
        .iter()
        .enumerate()
        .map(|(i, call)| {
            let judged = rebased(call, ctx.recorded_root);
            let reason = refusal(&judged, ctx.policy, &root, &protected);
            let outcome = match &call.result {
                Some(r) if r.is_error => CallOutcome::Failed,
                Some(_) => CallOutcome::Succeeded,
                None => CallOutcome::NoResult,
            };
            ToolCallRecord {
                schema_version: TOOL_CALL_SCHEMA_VERSION,
                seq: u32::try_from(i + 1).unwrap_or(u32::MAX),
                tool_use_id: call.id.clone(),
                tool: call.tool.clone(),
                input: call.input.clone(),
                policy: if reason.is_some() {
                    CallVerdict::Refused
                } else {
                    CallVerdict::Allowed
                },
                violation: reason.is_some() && outcome != CallOutcome::Failed,
                reason,
                outcome,
                result_error: call.result.as_ref().and_then(|r| r.error_text.clone()),
            }
        })
        .collect()
}

/// The call with absolute paths under the recording's folder made relative.
fn rebased(call: &ObservedCall, recorded_root: Option<&str>) -> ObservedCall {
    let mut call = call.clone();
    let Some(recorded) = recorded_root.map(|r| r.trim_end_matches('/')) else {
        return call;
    };
    if let Value::Object(fields) = &mut call.input {
        for field in PATH_FIELDS.iter().chain(["pattern"].iter()) {
            if let Some(Value::String(path)) = fields.get_mut(*field) {
                if let Some(rest) = path.strip_prefix(recorded) {
                    if rest.is_empty() || rest.starts_with('/') {
                        *path = format!(".{rest}");
                    }
                }
            }
        }
    }
    call
}

/// The message naming a violating call.
pub(crate) fn describe_violation(record: &ToolCallRecord) -> String {
    let what = match (record.input.get("command"), first_path(&record.input)) {
        (Some(Value::String(command)), _) => format!("`{command}`"),
        (_, Some(path)) => format!("on `{path}`"),
        _ => String::new(),
    };
    format!(
        "tool call #{} {} {what} ran although the policy refuses it: {}",
        record.seq,
        record.tool,
        record.reason.as_deref().unwrap_or("not allowed")
    )
}

fn first_path(input: &Value) -> Option<&str> {
    PATH_FIELDS
        .iter()
        .chain(["pattern"].iter())
        .find_map(|f| input.get(*f).and_then(Value::as_str))
}

/// A path protected against a set of tools.
struct Protected {
    rel: String,
    writes_only: bool,
}

fn protected_paths(ctx: &CallContext<'_>) -> Vec<Protected> {
    let mut out: Vec<Protected> = ALWAYS_PROTECTED
        .iter()
        .map(std::string::ToString::to_string)
        .chain(ctx.protected.iter().cloned())
        .map(|rel| Protected {
            rel: normalize(&rel),
            writes_only: true,
        })
        .collect();
    for rule in &ctx.policy.disallowed_tools {
        let Some((tool, spec)) = rule.strip_suffix(')').and_then(|r| r.split_once('(')) else {
            continue;
        };
        let Some(path) = spec.strip_prefix("./") else {
            continue;
        };
        let path = path.trim_end_matches("**").trim_end_matches('/');
        let writes_only = !READ_TOOLS.contains(&tool);
        if !path.is_empty() {
            out.push(Protected {
                rel: normalize(path),
                writes_only,
            });
        }
    }
    out
}

fn normalize(rel: &str) -> String {
    rel.trim_start_matches("./")
        .trim_end_matches('/')
        .to_string()
}

/// Why the policy refuses a call; `None` when it allows it.
fn refusal(
    call: &ObservedCall,
    policy: &ToolPolicy,
    root: &Path,
    protected: &[Protected],
) -> Option<String> {
    let tool = call.tool.as_str();
    if CLI_ADDED_TOOLS.contains(&tool) {
        return None;
    }
    if tool == "Bash" {
        let command = call
            .input
            .get("command")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if bash_rule::any_part_matches(command, &policy.disallowed_tools) {
            return Some("the command matches a deny rule".into());
        }
        if !bash_rule::command_matches(command, &policy.allowed_tools) {
            return Some("no allowed Bash rule matches every part of the command".into());
        }
        return None;
    }
    let is_write = WRITE_TOOLS.contains(&tool);
    if is_write || READ_TOOLS.contains(&tool) {
        if !policy.tools.iter().any(|t| t == tool) {
            return Some(format!("{tool} is not among the stage's tools"));
        }
        for raw in call_paths(tool, &call.input) {
            let Some(rel) = inside(root, &raw) else {
                return Some(format!("`{raw}` is outside the repository"));
            };
            if let Some(p) = protected
                .iter()
                .find(|p| (is_write || !p.writes_only) && is_under(&rel, &p.rel))
            {
                return Some(format!("`{raw}` is under the protected path `{}`", p.rel));
            }
        }
        return None;
    }
    if policy.tools.iter().any(|t| t == tool) {
        None
    } else {
        Some(format!("{tool} is not among the stage's tools"))
    }
}

/// The paths a file tool names: its path fields, and for Glob the fixed part of an
/// absolute or climbing pattern.
fn call_paths(tool: &str, input: &Value) -> Vec<String> {
    let mut paths: Vec<String> = PATH_FIELDS
        .iter()
        .filter_map(|f| input.get(*f).and_then(Value::as_str))
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect();
    if tool == "Glob" {
        if let Some(pattern) = input.get("pattern").and_then(Value::as_str) {
            let base = input.get("path").and_then(Value::as_str).unwrap_or(".");
            let fixed: String = pattern
                .split('/')
                .take_while(|c| !c.contains(['*', '?', '[', '{']))
                .collect::<Vec<_>>()
                .join("/");
            let joined = if pattern.starts_with('/') || pattern.starts_with('~') {
                if fixed.is_empty() {
                    "/".to_owned()
                } else {
                    fixed
                }
            } else if fixed.is_empty() {
                base.to_owned()
            } else {
                format!("{base}/{fixed}")
            };
            paths.push(joined);
        }
    }
    paths
}

fn is_under(rel: &str, prefix: &str) -> bool {
    rel == prefix
        || rel
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The path relative to the (canonical) root, with `..` and symlinks resolved as
/// the kernel would; `None` when it lies outside.
pub fn inside(root: &Path, raw: &str) -> Option<String> {
    if raw.starts_with('~') {
        return None;
    }
    let resolved = resolve(root, Path::new(raw))?;
    let rel = resolved.strip_prefix(root).ok()?;
    Some(
        rel.components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/"),
    )
}

/// Resolves `path` against `base` component by component, following symlinks
/// that exist (at most 40, as the kernel does); `None` past that.
fn resolve(base: &Path, path: &Path) -> Option<PathBuf> {
    let mut pending: Vec<PathBuf> = path
        .components()
        .rev()
        .map(|c| PathBuf::from(c.as_os_str()))
        .collect();
    let mut current = if path.is_absolute() {
        PathBuf::from("/")
    } else {
        base.to_path_buf()
    };
    let mut hops = 0;
    while let Some(part) = pending.pop() {
        match part.components().next() {
            Some(Component::RootDir) => current = PathBuf::from("/"),
            Some(Component::CurDir) | None => {}
            Some(Component::ParentDir) => {
                current.pop();
            }
            Some(Component::Normal(name)) => {
                let next = current.join(name);
                match std::fs::read_link(&next) {
                    Ok(target) => {
                        hops += 1;
                        if hops > 40 {
                            return None;
                        }
                        if target.is_absolute() {
                            current = PathBuf::from("/");
                        }
                        pending.extend(
                            target
                                .components()
                                .rev()
                                .map(|c| PathBuf::from(c.as_os_str())),
                        );
                    }
                    Err(_) => current = next,
                }
            }
            Some(Component::Prefix(_)) => return None,
        }
    }
    Some(current)
}

#[cfg(test)]
#[path = "observe_tests.rs"]
mod tests;
