//! The flag table of `commandArgs`: which Claude Code flags a pipeline may pass
//! through, and why the others are refused.
//!
//! An allowlist, not a denylist: a flag specbridge does not know may widen the
//! policy (new versions add flags), so only flags known to leave the tool policy,
//! the settings and the working directories alone pass. Every token that starts
//! with `-` is checked, wherever it stands (a value that looks like a flag is
//! refused too), and `--flag=value` is read as `--flag`.

/// How many values a passed-through flag takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    None,
    One,
}

/// Flags a pipeline may pass in `commandArgs`.
pub(crate) const PASS_THROUGH: &[(&str, Arity)] = &[
    ("--append-system-prompt", Arity::One),
    ("--system-prompt", Arity::One),
    ("--fallback-model", Arity::One),
    ("--betas", Arity::One),
    ("--exclude-dynamic-system-prompt-sections", Arity::None),
    ("--system-prompt-snapshot", Arity::One),
    ("--disable-slash-commands", Arity::None),
    ("--safe-mode", Arity::None),
    ("--bare", Arity::None),
    ("--autocompact", Arity::One),
];

/// Flags that widen what the agent may do, or switch permission checks off:
/// refused as safety problems (exit 6).
pub(crate) const WIDENING: &[(&str, &str)] = &[
    (
        "--dangerously-skip-permissions",
        "it switches every permission check off",
    ),
    (
        "--allow-dangerously-skip-permissions",
        "it lets the session switch permission checks off",
    ),
    ("--allowedTools", "it adds allow rules to the tool policy"),
    ("--allowed-tools", "it adds allow rules to the tool policy"),
    ("--disallowedTools", "it replaces specbridge's deny rules"),
    ("--disallowed-tools", "it replaces specbridge's deny rules"),
    ("--tools", "it changes the tools offered"),
    ("--permission-mode", "it changes the permission mode"),
    (
        "--permission-prompt-tool",
        "it hands permission decisions to another tool",
    ),
    (
        "--permission-prompts",
        "it hands permission decisions to someone else",
    ),
    (
        "--settings",
        "settings can add allow rules, hooks and a permission mode",
    ),
    (
        "--setting-sources",
        "settings files can add allow rules and hooks; use `runner.settingSources`",
    ),
    ("--add-dir", "it makes another folder readable and writable"),
    (
        "--mcp-config",
        "MCP servers run with the user's rights; use `runner.mcpConfig`",
    ),
    ("--strict-mcp-config", "specbridge sets it itself"),
    (
        "--agents",
        "custom agents bring their own tools and prompts",
    ),
    (
        "--agent",
        "an agent definition brings its own tools and prompts",
    ),
    (
        "--plugin-dir",
        "plugins bring hooks, commands and MCP servers; use `runner.pluginDirs`",
    ),
    (
        "--plugin-url",
        "plugins bring hooks, commands and MCP servers",
    ),
    (
        "--restricted",
        "specbridge sets it itself where the CLI has it",
    ),
    ("--debug-file", "it writes outside the repository"),
    ("--file", "it downloads files into the working directory"),
    (
        "--worktree",
        "it moves the session out of the repository's working tree",
    ),
    (
        "-w",
        "it moves the session out of the repository's working tree",
    ),
    ("--chrome", "it connects the session to a browser"),
    ("--ide", "it connects the session to an editor"),
    (
        "--remote-control",
        "it lets another program drive the session",
    ),
    ("--cloud", "it runs the session elsewhere"),
    ("--teleport", "it runs the session elsewhere"),
    (
        "--bg",
        "it runs the session in the background, out of specbridge's control",
    ),
    (
        "--background",
        "it runs the session in the background, out of specbridge's control",
    ),
];

/// Flags specbridge sets itself (or which have a runner key): refused as
/// configuration errors (exit 2), with the key to use instead.
pub(crate) const MANAGED: &[(&str, &str)] = &[
    ("-p", "specbridge always runs in print mode"),
    ("--print", "specbridge always runs in print mode"),
    ("--output-format", "specbridge reads stream-json itself"),
    ("--input-format", "the prompt goes on stdin as text"),
    ("--verbose", "specbridge sets it with stream-json"),
    (
        "--include-partial-messages",
        "specbridge reads whole stream events",
    ),
    (
        "--include-hook-events",
        "specbridge reads the stream itself",
    ),
    (
        "--replay-user-messages",
        "specbridge reads the stream itself",
    ),
    ("--json-schema", "the stage's `output.schema` sets it"),
    (
        "--session-id",
        "specbridge gives each invocation its own session",
    ),
    ("-r", "resume continues sessions itself"),
    ("--resume", "resume continues sessions itself"),
    ("-c", "resume continues sessions itself"),
    ("--continue", "resume continues sessions itself"),
    ("--fork-session", "resume continues sessions itself"),
    ("--from-pr", "resume continues sessions itself"),
    ("--no-session-persistence", "resume needs the session kept"),
    ("--max-turns", "use `runner.maxTurns`"),
    ("--max-budget-usd", "use `runner.maxBudgetUsd`"),
    ("--model", "use `runner.model`"),
    ("--effort", "use `runner.effort`"),
];

/// What a `commandArgs` token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgVerdict {
    /// A known harmless flag, with how many values follow.
    PassThrough(Arity),
    /// The value of the flag before it.
    Value,
    Widening(&'static str),
    Managed(&'static str),
    /// A flag not in any table.
    Unknown,
    /// A word that is neither a flag nor a flag's value: the CLI would read it as
    /// the prompt.
    Stray,
}

/// The flag name of a token: `--x=1` → `--x`; `None` for a token that is not a flag.
pub(crate) fn flag_name(token: &str) -> Option<&str> {
    let t = token.trim();
    if !t.starts_with('-') || t == "-" {
        return None;
    }
    Some(t.split('=').next().unwrap_or(t))
}

/// Each token of `args` with its verdict.
pub fn classify(args: &[String]) -> Vec<ArgVerdict> {
    let mut out = Vec::with_capacity(args.len());
    let mut values_due = 0usize;
    for arg in args {
        let verdict = match flag_name(arg) {
            Some(name) => {
                values_due = 0;
                let joined = arg.trim().contains('=');
                // A refused flag's value is not reported again as a stray word.
                let refused_value = usize::from(!joined);
                if let Some((_, why)) = WIDENING.iter().find(|(f, _)| *f == name) {
                    values_due = refused_value;
                    ArgVerdict::Widening(why)
                } else if name.starts_with("--dangerously") {
                    ArgVerdict::Widening("it switches permission checks off")
                } else if let Some((_, why)) = MANAGED.iter().find(|(f, _)| *f == name) {
                    values_due = refused_value;
                    ArgVerdict::Managed(why)
                } else if let Some((_, arity)) = PASS_THROUGH.iter().find(|(f, _)| *f == name) {
                    if *arity == Arity::One && !joined {
                        values_due = 1;
                    }
                    ArgVerdict::PassThrough(*arity)
                } else {
                    values_due = refused_value;
                    ArgVerdict::Unknown
                }
            }
            None if values_due > 0 => {
                values_due -= 1;
                ArgVerdict::Value
            }
            None => ArgVerdict::Stray,
        };
        out.push(verdict);
    }
    out
}

pub(crate) fn pass_through_names() -> impl Iterator<Item = &'static str> {
    PASS_THROUGH.iter().map(|(f, _)| *f)
}
