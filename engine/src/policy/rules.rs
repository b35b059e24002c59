//! Permission rules as the pipeline writes them: `allowedBashRules` and
//! `disallowedTools`.
//!
//! The CLI reads a rule list as "comma or space-separated" names, each optionally
//! followed by a parenthesised specifier. A specifier holding `(`, `)` or `,` could
//! close the rule early and smuggle a second one in (`Bash(x) Edit(/**)`), so such
//! rules are refused rather than escaped.

/// Why a Bash rule is refused, and whether that is a safety problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BashRuleProblem {
    /// Not `Bash(…)`.
    NotARule,
    /// Allows every command (`Bash`, `Bash(*)`, `Bash(:*)`, …).
    AllowsEverything,
    /// Holds a character that can end the rule early.
    Smuggling(char),
}

/// Checks one `allowedBashRules` entry.
pub(crate) fn check_bash_rule(rule: &str) -> Result<(), BashRuleProblem> {
    let t = rule.trim();
    let compact: String = t.chars().filter(|c| !c.is_whitespace()).collect();
    if compact.eq_ignore_ascii_case("bash") {
        return Err(BashRuleProblem::AllowsEverything);
    }
    // Any spelling of the tool name: what the CLI makes of `bash(*)` is not worth
    // finding out.
    let head = t.get(..5).unwrap_or_default();
    let Some(spec) = head
        .eq_ignore_ascii_case("Bash(")
        .then(|| &t[5..])
        .and_then(|rest| rest.strip_suffix(')'))
    else {
        return Err(BashRuleProblem::NotARule);
    };
    if let Some(c) = spec
        .chars()
        .find(|c| matches!(c, '(' | ')' | ',') || c.is_control())
    {
        return Err(BashRuleProblem::Smuggling(c));
    }
    // A specifier of wildcards, colons and blanks alone matches every command.
    if spec
        .chars()
        .all(|c| c == '*' || c == ':' || c.is_whitespace())
    {
        return Err(BashRuleProblem::AllowsEverything);
    }
    Ok(())
}

/// Checks one `disallowedTools` entry: a tool name, optionally with a specifier.
/// Deny rules only narrow the policy; the check is about the shape, so that one
/// entry cannot turn into several.
pub(crate) fn check_deny_rule(rule: &str) -> Result<(), String> {
    let t = rule.trim();
    let (name, spec) = match t.find('(') {
        Some(open) => {
            let Some(spec) = t[open + 1..].strip_suffix(')') else {
                return Err("a rule's specifier must end with `)`".into());
            };
            (&t[..open], Some(spec))
        }
        None => (t, None),
    };
    let name_ok = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !name_ok {
        return Err(format!("`{name}` is not a tool name"));
    }
    if let Some(c) = spec.and_then(|s| {
        s.chars()
            .find(|c| matches!(c, '(' | ')' | ',') || c.is_control())
    }) {
        return Err(format!(
            "the specifier holds `{}`, which can end the rule early",
            c.escape_default()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bash_rules() {
        for ok in [
            "Bash(git status *)",
            "Bash(git status:*)",
            "Bash(cargo test)",
        ] {
            assert_eq!(check_bash_rule(ok), Ok(()), "{ok}");
        }
        for all in [
            "Bash",
            " bash ",
            "Bash(*)",
            "Bash(:*)",
            "Bash( * )",
            "Bash(**)",
            "Bash()",
            "Bash(*:*)",
        ] {
            assert_eq!(
                check_bash_rule(all),
                Err(BashRuleProblem::AllowsEverything),
                "{all}"
            );
        }
        assert_eq!(
            check_bash_rule("git status"),
            Err(BashRuleProblem::NotARule)
        );
        assert_eq!(
            check_bash_rule("Read(./**)"),
            Err(BashRuleProblem::NotARule)
        );
        assert_eq!(
            check_bash_rule("Bash(x) Edit(/**)"),
            Err(BashRuleProblem::Smuggling(')'))
        );
        assert_eq!(
            check_bash_rule("Bash(x),Edit(/**)"),
            Err(BashRuleProblem::Smuggling(')'))
        );
        assert_eq!(
            check_bash_rule("Bash(a,b)"),
            Err(BashRuleProblem::Smuggling(','))
        );
    }

    #[test]
    fn deny_rules() {
        for ok in ["Bash(rm:*)", "WebFetch", "Edit(./secrets/**)", "mcp__x__y"] {
            assert_eq!(check_deny_rule(ok), Ok(()), "{ok}");
        }
        for bad in ["Edit(./a) Read", "Edit(./a", "(x)", "Bash(a,b)", "1x"] {
            assert!(check_deny_rule(bad).is_err(), "{bad}");
        }
    }
}
