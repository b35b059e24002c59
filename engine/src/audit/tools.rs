//! Which tools a recorded argv offered or pre-approved, for the read-only rule of
//! generate stages (docs/stage-kinds.md).

/// Flags whose values name tools the agent may use.
const TOOL_FLAGS: &[&str] = &["--tools", "--allowedTools", "--allowed-tools"];

/// Tools that change files whatever their arguments.
const MUTATING_TOOLS: &[&str] = &["Edit", "Write", "NotebookEdit", "MultiEdit"];

/// Permission modes under which edits go through without asking.
const EDITING_MODES: &[&str] = &["acceptEdits"];

/// Flags whose values name tools the agent may not use.
const DENY_FLAGS: &[&str] = &["--disallowedTools", "--disallowed-tools"];

/// Each mutating tool `argv` offers through a tool flag: `(flag, tool entry)`.
pub(crate) fn mutating_tools_in(argv: &[String]) -> Vec<(String, String)> {
    entries_of(argv, TOOL_FLAGS)
        .into_iter()
        .filter(|(_, entry)| is_mutating(entry))
        .collect()
}

/// The tool names `argv` denies (rules such as `Bash(rm:*)` are left out: they
/// deny some uses of a tool, not the tool).
pub(crate) fn denied_tools_in(argv: &[String]) -> Vec<String> {
    entries_of(argv, DENY_FLAGS)
        .into_iter()
        .map(|(_, entry)| entry)
        .filter(|entry| !entry.contains('('))
        .collect()
}

/// Every entry given to any of `flags`, as `(flag, entry)`.
fn entries_of(argv: &[String], flags: &[&str]) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut i = 0;
    while i < argv.len() {
        let arg = &argv[i];
        i += 1;
        let (flag, values): (&str, Vec<&str>) = match arg.split_once('=') {
            Some((f, v)) if flags.contains(&f) => (f, vec![v]),
            _ if flags.contains(&arg.as_str()) => {
                // The CLI's tool flags are variadic: values run to the next flag.
                let start = i;
                while i < argv.len() && !argv[i].starts_with('-') {
                    i += 1;
                }
                (
                    arg.as_str(),
                    argv[start..i].iter().map(String::as_str).collect(),
                )
            }
            _ => continue,
        };
        for value in values {
            for entry in split_entries(value) {
                found.push((flag.to_string(), entry));
            }
        }
    }
    found
}

/// Whether a tool name (from `offeredTools` or an argv entry) changes files.
pub(crate) fn is_mutating(entry: &str) -> bool {
    let (name, rule) = match entry.split_once('(') {
        Some((n, r)) => (n.trim(), Some(r.trim_end_matches(')').trim())),
        None => (entry.trim(), None),
    };
    if MUTATING_TOOLS.contains(&name) {
        return true;
    }
    // Bash is only allowed as explicit command rules; bare or wildcard is a shell.
    name == "Bash" && matches!(rule, None | Some("") | Some("*") | Some(":*"))
}

/// Whether a permission mode lets edits through unasked.
pub(crate) fn is_editing_mode(mode: &str) -> bool {
    EDITING_MODES.contains(&mode)
}

/// Split `Read,Glob "Bash(git log:*)"` into entries at commas and blanks outside
/// parentheses, since a Bash rule may itself hold both.
fn split_entries(value: &str) -> Vec<String> {
    let mut entries = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for c in value.chars() {
        match c {
            '(' => {
                depth += 1;
                current.push(c);
            }
            ')' => {
                depth = depth.saturating_sub(1);
                current.push(c);
            }
            ',' | ' ' | '\t' | '\n' if depth == 0 => {
                if !current.trim().is_empty() {
                    entries.push(current.trim().to_string());
                }
                current.clear();
            }
            _ => current.push(c),
        }
    }
    if !current.trim().is_empty() {
        entries.push(current.trim().to_string());
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &[&str]) -> Vec<String> {
        s.iter().map(std::string::ToString::to_string).collect()
    }

    #[test]
    fn read_only_tool_sets_pass() {
        let a = argv(&[
            "claude",
            "--tools",
            "Read,Glob,Grep",
            "--allowedTools",
            "Read",
            "Glob",
            "Bash(git log:*)",
            "--disallowedTools",
            "Edit,Write,Bash",
        ]);
        assert!(mutating_tools_in(&a).is_empty());
        assert_eq!(denied_tools_in(&a), ["Edit", "Write", "Bash"]);
    }

    #[test]
    fn mutating_entries_are_found_in_every_form() {
        let a = argv(&[
            "claude",
            "--allowedTools",
            "Read,Write",
            "--allowed-tools=Edit(src/**)",
            "--tools",
            "Read Bash",
            "Bash(git status, git diff:*)",
            "-p",
        ]);
        let found: Vec<String> = mutating_tools_in(&a).into_iter().map(|(_, e)| e).collect();
        assert_eq!(found, ["Write", "Edit(src/**)", "Bash"]);
    }

    #[test]
    fn bash_rules_are_not_a_shell_but_wildcards_are() {
        assert!(!is_mutating("Bash(git diff:*)"));
        assert!(is_mutating("Bash(*)"));
        assert!(is_mutating("Bash"));
        assert!(is_mutating("NotebookEdit"));
        assert!(!is_mutating("Grep"));
    }
}
