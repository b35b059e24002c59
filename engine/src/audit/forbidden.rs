//! Permission bypasses that must never appear in a recorded argv (docs/claude-code-runner.md). The
//! list is the one validation and the argv assembler reject ([`crate::safety`]):
//! audit is the last of the layers and checks what was actually recorded.

pub use crate::safety::FORBIDDEN_FLAGS;
pub use crate::safety::FORBIDDEN_MODES as FORBIDDEN_PERMISSION_MODES;

const PERMISSION_MODE: &str = "--permission-mode";

/// Each forbidden flag or mode in `argv`, described for a finding.
pub(crate) fn forbidden_in(argv: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    let mut i = 0;
    while i < argv.len() {
        let arg = &argv[i];
        i += 1;
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v)),
            _ => (arg.as_str(), None),
        };
        if FORBIDDEN_FLAGS.contains(&flag) {
            found.push(format!("`{flag}`"));
        } else if flag == PERMISSION_MODE {
            let value = match inline {
                Some(v) => Some(v),
                None => {
                    // The mode is this flag's value: judged here, not again below.
                    i += 1;
                    argv.get(i - 1).map(String::as_str)
                }
            };
            if let Some(mode) = value.filter(|v| FORBIDDEN_PERMISSION_MODES.contains(v)) {
                found.push(format!("`{PERMISSION_MODE} {mode}`"));
            }
        } else if arg.contains("bypassPermissions") || arg.contains("dangerously-skip-permissions")
        {
            // Smuggled in another value, such as inline `--settings` JSON.
            found.push(format!("a bypass inside `{}`", shorten(arg)));
        }
    }
    found
}

/// The value of `--permission-mode`, in either form.
pub fn permission_mode(argv: &[String]) -> Option<&str> {
    argv.iter().enumerate().find_map(|(i, arg)| {
        if arg == PERMISSION_MODE {
            argv.get(i + 1).map(String::as_str)
        } else {
            arg.strip_prefix("--permission-mode=")
        }
    })
}

fn shorten(s: &str) -> String {
    const MAX: usize = 60;
    if s.chars().count() <= MAX {
        s.to_string()
    } else {
        let head: String = s.chars().take(MAX).collect();
        format!("{head}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &[&str]) -> Vec<String> {
        s.iter().map(std::string::ToString::to_string).collect()
    }

    #[test]
    fn every_form_of_a_bypass_is_found() {
        for (args, expect) in [
            (
                &["claude", "-p", "--dangerously-skip-permissions"][..],
                "`--dangerously-skip-permissions`",
            ),
            (
                &["claude", "--allow-dangerously-skip-permissions"][..],
                "`--allow-dangerously-skip-permissions`",
            ),
            (
                &["claude", "--permission-mode", "bypassPermissions"][..],
                "`--permission-mode bypassPermissions`",
            ),
            (
                &["claude", "--permission-mode=auto"][..],
                "`--permission-mode auto`",
            ),
            (
                &[
                    "claude",
                    "--settings",
                    r#"{"permissions":{"defaultMode":"bypassPermissions"}}"#,
                ][..],
                "a bypass inside",
            ),
        ] {
            let found = forbidden_in(&argv(args));
            assert_eq!(found.len(), 1, "{args:?}: {found:?}");
            assert!(found[0].starts_with(expect), "{found:?}");
        }
    }

    #[test]
    fn safe_modes_and_lookalikes_pass() {
        let ok = argv(&[
            "claude",
            "--permission-mode",
            "default",
            "--allowedTools",
            "Read,Glob,Grep",
            "--model",
            "auto",
        ]);
        assert!(forbidden_in(&ok).is_empty());
        assert_eq!(permission_mode(&ok), Some("default"));
        assert_eq!(
            permission_mode(&argv(&["c", "--permission-mode=plan"])),
            Some("plan")
        );
    }
}
