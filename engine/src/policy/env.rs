//! Environment names that change where Claude Code reads its settings or how it
//! decides permissions.
//!
//! Found in the strings of the pinned CLI (2.1.332): names that move the
//! configuration folder or a settings file, add permission rules, plugins, MCP
//! servers or folders, switch permission checks or the sandbox off, or change the
//! shell that runs Bash commands. A pipeline may not set them in `runner.env`
//! (safety, exit 6), and when specbridge itself inherited one it is removed from
//! the agent's environment and the removal is recorded as a warning.
//!
//! Besides the listed names, any `CLAUDE_*` name that speaks of permissions,
//! settings, the sandbox, plugins, MCP, hooks or trust is treated the same way, so
//! that a name added by a later version is caught by its shape.

/// The names, each with what it changes.
pub(crate) const WIDENING_ENV: &[(&str, &str)] = &[
    ("CLAUDE_CONFIG_DIR", "moves the user settings folder"),
    (
        "CLAUDE_CODE_MANAGED_SETTINGS_PATH",
        "replaces the managed settings file",
    ),
    (
        "CLAUDE_CODE_REMOTE_SETTINGS_PATH",
        "replaces the remote settings file",
    ),
    (
        "CLAUDE_CODE_MOCK_REMOTE_SETTINGS",
        "replaces the remote settings",
    ),
    (
        "CLAUDE_CODE_HOST_OWNED_CONFIG_DIR",
        "moves the configuration folder",
    ),
    (
        "CLAUDE_SECURESTORAGE_CONFIG_DIR",
        "moves the configuration folder",
    ),
    (
        "CLAUDE_CODE_BRIDGE_CHILD_MACHINE_SETTINGS",
        "injects settings",
    ),
    ("CLAUDE_CODE_BRIDGE_SETTINGS_BINDING", "injects settings"),
    (
        "CLAUDE_BG_SESSION_PERMISSION_RULES",
        "adds permission rules",
    ),
    ("CLAUDE_BG_WORKSPACE_TRUSTED", "marks the folder trusted"),
    (
        "CLAUDE_CODE_EVEN_MORE_DANGEROUSLY_SKIP_PERMISSIONS",
        "switches permission checks off",
    ),
    (
        "CLAUDE_CODE_AUTO_MODE_EXTERNAL_PERMISSIONS",
        "hands permission decisions elsewhere",
    ),
    (
        "CLAUDE_CODE_RELAUNCH_BYPASS_SWITCH",
        "switches permission checks off",
    ),
    ("CLAUDE_CHROME_PERMISSION_MODE", "sets a permission mode"),
    (
        "CLAUDE_CODE_REMOTE_TOOLS_POLICY",
        "replaces the tool policy",
    ),
    ("CLAUDE_RELAUNCH_SESSION_ADD_DIRS", "adds working folders"),
    ("CLAUDE_CODE_PLUGIN_DIRS", "loads plugins"),
    ("CLAUDE_CODE_PLUGIN_SEED_DIR", "loads plugins"),
    ("CLAUDE_CODE_REMOTE_MCP_CONFIG", "loads MCP servers"),
    ("CLAUDE_CODE_SHELL_MCP_SERVERS", "loads MCP servers"),
    (
        "CLAUDE_CODE_SANDBOXED",
        "claims an outer sandbox, which skips trust checks",
    ),
    (
        "CLAUDE_CODE_SANDBOX_LEAVE_PARENT_FOLDERS_ALONE",
        "loosens the sandbox",
    ),
    (
        "CLAUDE_CODE_SANDBOX_LEAVE_DENIES_TO_SRT_WIN",
        "loosens the sandbox",
    ),
    (
        "CLAUDE_CODE_SHELL_PREFIX",
        "wraps every Bash command in another program",
    ),
    (
        "CLAUDE_CODE_SHELL",
        "replaces the shell that runs Bash commands",
    ),
    (
        "CLAUDE_CODE_DISABLE_REDIRECT_CHECK",
        "switches a Bash permission check off",
    ),
    (
        "CLAUDE_CODE_DISABLE_REDIRECT_DENY_RECHECK",
        "switches a Bash permission check off",
    ),
    (
        "CLAUDE_CODE_DISABLE_INLINE_SHELL_RM_PROMPT",
        "switches a Bash permission check off",
    ),
    (
        "CLAUDE_CODE_USE_POWERSHELL_TOOL",
        "offers a second shell tool",
    ),
    ("CLAUDE_CODE_COORDINATOR_EXTRA_TOOLS", "offers more tools"),
    ("CLAUDE_CODE_ENABLE_FUNCTION_HOOKS", "runs hooks"),
    (
        "CLAUDE_CODE_DEBUG_LOGS_DIR",
        "writes outside the repository",
    ),
];

/// Words that make an unlisted `CLAUDE_*` name policy-relevant.
const WIDENING_WORDS: &[&str] = &[
    "PERMISSION",
    "DANGEROUS",
    "BYPASS",
    "SANDBOX",
    "SETTINGS",
    "CONFIG_DIR",
    "PLUGIN",
    "MCP",
    "HOOK",
    "TRUST",
    "ADD_DIRS",
];

/// What a name changes, when it can widen the policy.
pub(crate) fn widening(name: &str) -> Option<&'static str> {
    let upper = name.trim().to_ascii_uppercase();
    if let Some((_, why)) = WIDENING_ENV.iter().find(|(n, _)| *n == upper) {
        return Some(why);
    }
    let claude = upper.starts_with("CLAUDE_") || upper.starts_with("CLAUDECODE");
    (claude && WIDENING_WORDS.iter().any(|w| upper.contains(w)))
        .then_some("changes Claude Code's settings or permissions")
}

/// The inherited names to remove from the agent's environment, sorted.
pub fn inherited_widening<I, K>(names: I) -> Vec<String>
where
    I: IntoIterator<Item = K>,
    K: AsRef<str>,
{
    let mut out: Vec<String> = names
        .into_iter()
        .filter(|n| widening(n.as_ref()).is_some())
        .map(|n| n.as_ref().to_string())
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_and_shaped_names_are_found() {
        assert!(widening("CLAUDE_CONFIG_DIR").is_some());
        assert!(widening("claude_config_dir").is_some());
        assert!(widening("CLAUDE_CODE_NEW_PERMISSION_THING").is_some());
        assert!(widening("CLAUDE_CODE_MAX_RETRIES").is_none());
        assert!(widening("ANTHROPIC_API_KEY").is_none());
        assert!(widening("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC").is_none());
    }
}
