//! Claude Code's `Bash(…)` permission rules, and whether a shell command matches one.
//!
//! Used after the fact on every Bash call in the stream (a command that ran must
//! match an allowed rule) and by anything else that needs to reason about a rule.
//! The CLI's syntax: `Bash(git status:*)` (a prefix, the bare prefix included),
//! `Bash(git status *)` (`*` matches anything, and a trailing ` *` also matches the
//! bare command), `Bash(git status)` (exactly that command).
//!
//! Matching is conservative: a command is split at `&&`, `||`, `;`, `|`, `&` and
//! newlines, and matches only when every part does. A command substitution
//! (`$(…)`, backticks, `<(…)`, `>(…)`) or a redirection to a file hides what
//! actually runs or is written, so such a command never matches.

/// A parsed `Bash(…)` rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BashRule {
    pattern: Pattern,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    /// `Bash` or `Bash(*)`: every command.
    Any,
    /// `prefix:*`.
    Prefix(String),
    /// Pieces between `*` wildcards; `bare` also accepts the text before a trailing ` *`.
    Glob {
        pieces: Vec<String>,
        bare: Option<String>,
    },
    Exact(String),
}

impl BashRule {
    /// `None` when `rule` is not a Bash rule (another tool's rule).
    pub fn parse(rule: &str) -> Option<BashRule> {
        let rule = rule.trim();
        if rule == "Bash" {
            return Some(BashRule {
                pattern: Pattern::Any,
            });
        }
        let inner = rule.strip_prefix("Bash(")?.strip_suffix(')')?;
        let inner = collapse_spaces(inner.trim());
        let pattern = if inner.is_empty() || inner.chars().all(|c| c == '*' || c == ':') {
            Pattern::Any
        } else if let Some(prefix) = inner.strip_suffix(":*") {
            Pattern::Prefix(prefix.trim_end().to_owned())
        } else if inner.contains('*') {
            Pattern::Glob {
                pieces: inner.split('*').map(str::to_owned).collect(),
                bare: inner.strip_suffix(" *").map(str::to_owned),
            }
        } else {
            Pattern::Exact(inner)
        };
        Some(BashRule { pattern })
    }

    /// Whether one simple command (no operators) matches.
    fn matches_simple(&self, command: &str) -> bool {
        match &self.pattern {
            Pattern::Any => true,
            Pattern::Prefix(prefix) => {
                command == prefix
                    || command
                        .strip_prefix(prefix.as_str())
                        .is_some_and(|rest| rest.starts_with(' '))
            }
            Pattern::Glob { pieces, bare } => {
                bare.as_deref() == Some(command) || glob_matches(pieces, command)
            }
            Pattern::Exact(exact) => exact == command,
        }
    }
}

/// Whether `command` matches any of `rules` (rule strings as passed to the CLI;
/// rules of other tools are ignored), every part of a compound command included.
pub(crate) fn command_matches<S: AsRef<str>>(command: &str, rules: &[S]) -> bool {
    let parsed: Vec<BashRule> = rules
        .iter()
        .filter_map(|r| BashRule::parse(r.as_ref()))
        .collect();
    if parsed.iter().any(|r| r.pattern == Pattern::Any) {
        return true;
    }
    let Some(parts) = split_command(command) else {
        return false;
    };
    !parts.is_empty()
        && parts
            .iter()
            .all(|part| parsed.iter().any(|r| r.matches_simple(part)))
}

/// Whether any part of `command` matches any of `rules` (for deny rules: one part
/// denied is enough). A command that cannot be split is taken as matching.
pub(crate) fn any_part_matches<S: AsRef<str>>(command: &str, rules: &[S]) -> bool {
    let parsed: Vec<BashRule> = rules
        .iter()
        .filter_map(|r| BashRule::parse(r.as_ref()))
        .collect();
    if parsed.is_empty() {
        return false;
    }
    match split_command(command) {
        Some(parts) => parts
            .iter()
            .any(|part| parsed.iter().any(|r| r.matches_simple(part))),
        None => true,
    }
}

/// `*` matches any run of characters; every other character itself.
fn glob_matches(pieces: &[String], text: &str) -> bool {
    let Some((first, rest)) = pieces.split_first() else {
        return text.is_empty();
    };
    let Some(mut remaining) = text.strip_prefix(first.as_str()) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        return remaining.is_empty();
    };
    for piece in middle {
        match remaining.find(piece.as_str()) {
            Some(at) => remaining = &remaining[at + piece.len()..],
            None => return false,
        }
    }
    remaining.len() >= last.len() && remaining.ends_with(last.as_str())
}

fn collapse_spaces(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The simple commands of a shell command line, whitespace collapsed outside
/// quotes; `None` when it holds a substitution or a file redirection.
fn split_command(command: &str) -> Option<Vec<String>> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let chars: Vec<char> = command.chars().collect();
    let mut i = 0;
    let flush = |current: &mut String, parts: &mut Vec<String>| {
        let part = collapse_outside(current);
        if !part.is_empty() {
            parts.push(part);
        }
        current.clear();
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match quote {
            Some('\'') => {
                current.push(c);
                if c == '\'' {
                    quote = None;
                }
            }
            Some(_) => {
                // Substitutions still run inside double quotes.
                if c == '`' || (c == '$' && next == Some('(')) {
                    return None;
                }
                if c == '\\' {
                    current.push(c);
                    if let Some(n) = next {
                        current.push(n);
                        i += 1;
                    }
                } else {
                    current.push(c);
                    if c == '"' {
                        quote = None;
                    }
                }
            }
            None => match c {
                '\'' | '"' => {
                    quote = Some(c);
                    current.push(c);
                }
                '\\' => {
                    current.push(c);
                    if let Some(n) = next {
                        if n == '\n' {
                            current.pop();
                            current.push(' ');
                        } else {
                            current.push(n);
                        }
                        i += 1;
                    }
                }
                '`' => return None,
                '$' if next == Some('(') => return None,
                '<' | '>' if next == Some('(') => return None,
                '>' | '<' => {
                    if !harmless_redirection(&chars, i) {
                        return None;
                    }
                    current.push(c);
                }
                ';' | '\n' | '|' | '&' => {
                    // `2>&1`, `>&2`: a duplication, not a separator.
                    if c == '&' && matches!(chars.get(i.wrapping_sub(1)), Some('>') | Some('<')) {
                        current.push(c);
                    } else {
                        flush(&mut current, &mut parts);
                        if matches!((c, next), ('&', Some('&')) | ('|', Some('|'))) {
                            i += 1;
                        }
                    }
                }
                _ => current.push(c),
            },
        }
        i += 1;
    }
    if quote.is_some() {
        return None;
    }
    flush(&mut current, &mut parts);
    Some(parts)
}

/// `N>&M`, `>&M` and redirections to `/dev/null` write no file.
fn harmless_redirection(chars: &[char], at: usize) -> bool {
    let rest: String = chars[at + 1..].iter().collect();
    let rest = rest.trim_start_matches('>');
    if let Some(after) = rest.strip_prefix('&') {
        return after.starts_with(|c: char| c.is_ascii_digit() || c == '-');
    }
    let target = rest.trim_start();
    target.starts_with("/dev/null")
        && target["/dev/null".len()..]
            .chars()
            .next()
            .is_none_or(|c| c.is_whitespace() || matches!(c, ';' | '&' | '|' | ')'))
}

/// Collapses runs of whitespace outside quotes and trims.
fn collapse_outside(text: &str) -> String {
    let mut out = String::new();
    let mut quote: Option<char> = None;
    let mut space = false;
    for c in text.chars() {
        match quote {
            Some(q) => {
                out.push(c);
                if c == q {
                    quote = None;
                }
            }
            None if c.is_whitespace() => space = true,
            None => {
                if space && !out.is_empty() {
                    out.push(' ');
                }
                space = false;
                if c == '\'' || c == '"' {
                    quote = Some(c);
                }
                out.push(c);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allows(rules: &[&str], command: &str) -> bool {
        command_matches(command, rules)
    }

    #[test]
    fn the_three_rule_forms() {
        for rule in ["Bash(git status *)", "Bash(git status:*)"] {
            assert!(allows(&[rule], "git status"), "{rule}");
            assert!(allows(&[rule], "git status --short"), "{rule}");
            assert!(allows(&[rule], "git  status   -s"), "{rule}");
            assert!(!allows(&[rule], "git statusx"), "{rule}");
            assert!(!allows(&[rule], "git log"), "{rule}");
            assert!(!allows(&[rule], "sudo git status"), "{rule}");
        }
        assert!(allows(&["Bash(git status)"], "git status"));
        assert!(!allows(&["Bash(git status)"], "git status -s"));
        assert!(allows(&["Bash(cargo * --offline)"], "cargo test --offline"));
        assert!(!allows(&["Bash(cargo * --offline)"], "cargo test"));
        assert!(!allows(&["Read(./**)", "Edit(./**)"], "ls"));
        assert!(!allows(&[], "ls"));
    }

    #[test]
    fn every_part_of_a_compound_command_must_match() {
        let rules = ["Bash(git status *)", "Bash(git diff *)"];
        assert!(allows(&rules, "git status && git diff"));
        assert!(allows(&rules, "git status; git diff --stat | git diff"));
        for command in [
            "git status && rm -rf x",
            "git status; rm -rf x",
            "git status | sh",
            "git status || curl http://x",
            "git status & rm x",
            "git status\nrm x",
            "git status $(rm -rf x)",
            "git status `rm -rf x`",
            "git status \"$(rm -rf x)\"",
            "git status > /tmp/x",
            "git status >> notes.txt",
            "git diff <(cat /etc/passwd)",
            "git status 'unterminated",
        ] {
            assert!(!allows(&rules, command), "{command:?}");
        }
    }

    #[test]
    fn quoting_and_harmless_redirections() {
        let rules = ["Bash(git status *)", "Bash(echo *)"];
        assert!(allows(&rules, "git status 2>&1"));
        assert!(allows(&rules, "git status 2>/dev/null"));
        assert!(allows(&rules, "echo 'a && rm -rf x; $(y)'"));
        assert!(!allows(&rules, "echo \"a $(rm -rf x)\""));
        assert!(!allows(&rules, "echo a > /dev/nullx"));
    }

    #[test]
    fn wildcard_rules_allow_everything() {
        for rule in ["Bash", "Bash(*)", "Bash(:*)", "Bash( * )"] {
            assert!(allows(&[rule], "rm -rf / && curl x"), "{rule}");
        }
    }

    #[test]
    fn deny_rules_match_on_any_part() {
        let deny = ["Bash(rm:*)"];
        assert!(any_part_matches("git status && rm -rf x", &deny));
        assert!(!any_part_matches("git status", &deny));
        assert!(any_part_matches("echo $(whoami)", &deny));
        assert!(!any_part_matches("rm x", &["Edit(./.git/**)"]));
    }
}
