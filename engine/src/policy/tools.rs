//! The tool table: every tool name a pipeline may write in `tools`, and why the
//! others are refused.
//!
//! Names come from the `system/init` events of the captured CLI versions. A name
//! is allowed only when specbridge can say where the tool acts: file tools get an
//! allow rule scoped to the repository, Bash gets rules one command at a time (and
//! the sandbox), TodoWrite touches nothing. Everything else either reaches past the
//! repository (the network, subagents, other folders, scheduled work) or has no one
//! to answer it in print mode.

/// What a tool does, for the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolClass {
    /// Reads files: pre-approved as `Name(./**)`.
    FileRead,
    /// Changes files: pre-approved as `Edit(./**)` (an Edit rule covers every
    /// file-editing tool), denied on protected paths.
    FileWrite,
    /// Runs commands: approved only by `allowedBashRules`, inside the sandbox.
    Shell,
    /// Acts on nothing outside the conversation; needs no rule.
    Inert,
}

/// A tool a pipeline may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolSpec {
    pub name: &'static str,
    pub class: ToolClass,
}

/// The tools a pipeline may name in `tools`.
pub(crate) const ALLOWED_TOOLS: &[ToolSpec] = &[
    ToolSpec {
        name: "Read",
        class: ToolClass::FileRead,
    },
    ToolSpec {
        name: "Glob",
        class: ToolClass::FileRead,
    },
    ToolSpec {
        name: "Grep",
        class: ToolClass::FileRead,
    },
    ToolSpec {
        name: "Edit",
        class: ToolClass::FileWrite,
    },
    ToolSpec {
        name: "Write",
        class: ToolClass::FileWrite,
    },
    ToolSpec {
        name: "MultiEdit",
        class: ToolClass::FileWrite,
    },
    ToolSpec {
        name: "NotebookEdit",
        class: ToolClass::FileWrite,
    },
    ToolSpec {
        name: "Bash",
        class: ToolClass::Shell,
    },
    ToolSpec {
        name: "TodoWrite",
        class: ToolClass::Inert,
    },
];

/// Tools that exist but are never offered, each with the reason. A pipeline naming
/// one is refused as a safety problem (exit 6): each widens what the agent can
/// reach beyond the repository and the rules specbridge records.
pub(crate) const REFUSED_TOOLS: &[(&str, &str)] = &[
    (
        "WebFetch",
        "it reaches the network, so repository content can leave the machine",
    ),
    (
        "WebSearch",
        "it reaches the network, so repository content can leave the machine",
    ),
    (
        "Task",
        "it starts subagents, whose tool calls specbridge cannot check against the policy",
    ),
    (
        "Agent",
        "it starts subagents, whose tool calls specbridge cannot check against the policy",
    ),
    ("Skill", "it runs skills installed outside the repository"),
    (
        "SlashCommand",
        "it runs commands defined outside the repository",
    ),
    (
        "EnterWorktree",
        "it moves the session out of the repository's working tree",
    ),
    (
        "ExitWorktree",
        "it moves the session out of the repository's working tree",
    ),
    (
        "CronCreate",
        "it schedules work that outlives the invocation",
    ),
    (
        "CronDelete",
        "it changes work scheduled outside the invocation",
    ),
    ("CronList", "it reads work scheduled outside the invocation"),
    (
        "BashOutput",
        "it manages background shells, which outlive the call that the rules approved",
    ),
    (
        "KillShell",
        "it manages background shells, which outlive the call that the rules approved",
    ),
    (
        "KillBash",
        "it manages background shells, which outlive the call that the rules approved",
    ),
    (
        "TaskOutput",
        "it manages background tasks, which outlive the call that the rules approved",
    ),
    (
        "TaskStop",
        "it manages background tasks, which outlive the call that the rules approved",
    ),
    ("PowerShell", "it runs commands that no Bash rule covers"),
];

/// Tools that only make sense with a person at the terminal: refused as
/// configuration errors (exit 2), since nobody answers them in print mode.
pub(crate) const INTERACTIVE_TOOLS: &[&str] = &["AskUserQuestion", "EnterPlanMode", "ExitPlanMode"];

/// The read-only set of generate stages.
pub const READ_ONLY_TOOLS: &[&str] = &["Read", "Glob", "Grep"];

/// Built-in tools that change files or run commands: denied by name where the CLI
/// cannot restrict the offered set with `--tools`.
pub const MUTATING_TOOLS: &[&str] = &["Bash", "Edit", "MultiEdit", "Write", "NotebookEdit"];

/// The prefix of tools that MCP servers provide (`mcp__server__tool`).
pub(crate) const MCP_PREFIX: &str = "mcp__";

pub fn allowed(name: &str) -> Option<&'static ToolSpec> {
    ALLOWED_TOOLS.iter().find(|t| t.name == name)
}

pub fn refused(name: &str) -> Option<&'static str> {
    REFUSED_TOOLS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, why)| *why)
}

/// The scoped allow rule of a file tool: the working directory (the repository
/// root) and everything under it, nothing else.
pub(crate) fn scoped_allow_rule(spec: &ToolSpec) -> Option<String> {
    match spec.class {
        ToolClass::FileRead => Some(format!("{}(./**)", spec.name)),
        ToolClass::FileWrite => Some("Edit(./**)".to_string()),
        ToolClass::Shell | ToolClass::Inert => None,
    }
}
