//! The tool policy of an agent stage, from the runner section to the rules passed
//! to the CLI (docs/stage-kinds.md, docs/claude-code-runner.md).
//!
//! One owner for every rule: `specbridge validate` (and so `run` before anything
//! starts, and `--dry-run`) and argv assembly both call [`check`], and assembly can
//! only build its allow and deny lists from the [`CheckedRunner`] that `check`
//! returns, whose constructor is private to this module. A runner section that
//! `validate` accepts therefore assembles, and no rule reaches the argv that the
//! table did not approve.

pub mod args;
mod check;
pub mod deny;
pub mod env;
pub mod rules;
pub mod sandbox;
pub mod tools;

use crate::pipeline::ResolvedRunner;

pub use sandbox::SandboxPlan;

/// The runner key (and item) a refusal is about, so that validation can point at
/// the line and assembly can name it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Field {
    Tools(usize),
    AllowedBashRules(usize),
    DisallowedTools(usize),
    CommandArgs(usize),
    Env(String),
    PermissionMode,
    SettingSources(usize),
    McpConfig(usize),
    SandboxWritablePaths(usize),
    SandboxAllowedDomains(usize),
}

impl Field {
    /// The runner key holding the value.
    pub fn key(&self) -> &'static str {
        match self {
            Field::Tools(_) => "tools",
            Field::AllowedBashRules(_) => "allowedBashRules",
            Field::DisallowedTools(_) => "disallowedTools",
            Field::CommandArgs(_) => "commandArgs",
            Field::Env(_) => "env",
            Field::PermissionMode => "permissionMode",
            Field::SettingSources(_) => "settingSources",
            Field::McpConfig(_) => "mcpConfig",
            Field::SandboxWritablePaths(_) | Field::SandboxAllowedDomains(_) => "sandbox",
        }
    }

    /// The path below the runner section: `tools[2]`, `env.CLAUDE_CONFIG_DIR`,
    /// `sandbox.writablePaths[0]`.
    pub(crate) fn path_in_runner(&self) -> String {
        match self {
            Field::Tools(i)
            | Field::AllowedBashRules(i)
            | Field::DisallowedTools(i)
            | Field::CommandArgs(i)
            | Field::SettingSources(i)
            | Field::McpConfig(i) => format!("{}[{i}]", self.key()),
            Field::Env(name) => format!("env.{name}"),
            Field::PermissionMode => "permissionMode".into(),
            Field::SandboxWritablePaths(i) => format!("sandbox.writablePaths[{i}]"),
            Field::SandboxAllowedDomains(i) => format!("sandbox.allowedDomains[{i}]"),
        }
    }
}

/// Whether a refusal is about safety (exit 6) or configuration (exit 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalClass {
    Config,
    Safety,
}

/// One reason the runner section cannot be run as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub field: Field,
    pub class: RefusalClass,
    /// A stable short name, as in validation's diagnostics.
    pub code: &'static str,
    pub message: String,
    pub help: Option<String>,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "runner.{}: {}",
            self.field.path_in_runner(),
            self.message
        )
    }
}

/// Something the user opted into that loosens the default policy: recorded and
/// warned about on every run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptIn {
    pub field: &'static str,
    pub message: String,
}

/// A runner section that passed [`check`]. Only this module makes one, so the
/// argv's rules always come from the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedRunner {
    tools: Vec<&'static tools::ToolSpec>,
    bash_rules: Vec<String>,
    mcp_tools: Vec<String>,
    deny_rules: Vec<String>,
    setting_sources: Vec<String>,
    mcp_config: Vec<String>,
    sandbox: SandboxPlan,
    opt_ins: Vec<OptIn>,
}

impl CheckedRunner {
    /// The tool names to offer (`--tools`) for an execute stage.
    pub fn offered(&self) -> Vec<String> {
        let mut out: Vec<String> = self.tools.iter().map(|t| t.name.to_string()).collect();
        out.extend(self.mcp_tools.iter().cloned());
        out
    }

    /// The allow rules of an execute stage: file tools scoped to the repository,
    /// Bash rule by rule, MCP tools the pipeline opted into.
    pub(crate) fn execute_allow_rules(&self) -> Vec<String> {
        let mut out = Vec::new();
        for t in &self.tools {
            if let Some(rule) = tools::scoped_allow_rule(t) {
                push_unique(&mut out, rule);
            }
        }
        for r in &self.bash_rules {
            push_unique(&mut out, r.trim().to_string());
        }
        for m in &self.mcp_tools {
            push_unique(&mut out, m.clone());
        }
        out
    }

    /// The allow rules of a generate stage: the read-only tools, scoped.
    pub(crate) fn generate_allow_rules() -> Vec<String> {
        tools::READ_ONLY_TOOLS
            .iter()
            .map(|t| format!("{t}(./**)"))
            .collect()
    }

    /// The pipeline's own extra deny rules.
    pub(crate) fn deny_rules(&self) -> &[String] {
        &self.deny_rules
    }

    /// An execute stage offers Bash.
    pub(crate) fn allows_bash(&self) -> bool {
        self.tools
            .iter()
            .any(|t| t.class == tools::ToolClass::Shell)
    }

    pub(crate) fn names_tool(&self, name: &str) -> bool {
        self.tools.iter().any(|t| t.name == name)
    }

    /// The settings files to load: empty unless the pipeline opted in.
    pub fn setting_sources(&self) -> &[String] {
        &self.setting_sources
    }

    pub fn mcp_config(&self) -> &[String] {
        &self.mcp_config
    }

    pub fn sandbox(&self) -> &SandboxPlan {
        &self.sandbox
    }

    /// What the pipeline opted into, for warnings and `request.json`.
    pub(crate) fn opt_ins(&self) -> &[OptIn] {
        &self.opt_ins
    }
}

fn push_unique(list: &mut Vec<String>, item: String) {
    if !list.contains(&item) {
        list.push(item);
    }
}

/// The setting sources a pipeline may opt into.
pub(crate) const SETTING_SOURCES: &[&str] = &["user", "project", "local"];

/// Every refusal of a resolved runner section, or the checked section. The same
/// for every stage kind: a generate stage ignores `tools`, but a refused value is
/// refused wherever it is written.
pub fn check(runner: &ResolvedRunner) -> Result<CheckedRunner, Vec<Refusal>> {
    let mut c = check::Check::default();
    let offered = c.tools(&runner.tools, !runner.mcp_config.is_empty());
    c.bash_rules(&runner.allowed_bash_rules);
    c.deny_rules(&runner.disallowed_tools);
    c.command_args(&runner.command_args);
    c.env(runner.env.keys());
    c.mode(&runner.permission_mode);
    c.setting_sources(runner.setting_sources.as_deref().unwrap_or_default());
    c.mcp_config(&runner.mcp_config);
    let sandbox = c.sandbox(runner.sandbox.as_ref());
    if !c.refusals.is_empty() {
        return Err(c.refusals);
    }
    let (tools, mcp_tools) = offered;
    Ok(CheckedRunner {
        tools,
        bash_rules: runner.allowed_bash_rules.clone(),
        mcp_tools,
        deny_rules: runner
            .disallowed_tools
            .iter()
            .map(|r| r.trim().to_string())
            .collect(),
        setting_sources: runner.setting_sources.clone().unwrap_or_default(),
        mcp_config: runner.mcp_config.clone(),
        sandbox,
        opt_ins: c.opt_ins,
    })
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
