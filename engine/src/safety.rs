//! Flags and permission modes that are never allowed (DESIGN §7).
//!
//! They are rejected at three layers: pipeline validation, argv assembly, and
//! [`assert_argv_safe`] just before spawn. Each layer stands alone, so a bug in
//! one of them is not a bypass.

use std::sync::OnceLock;

use regex::Regex;

/// Flags that turn permission checks off, or offer to.
pub const FORBIDDEN_FLAGS: &[&str] = &[
    "--dangerously-skip-permissions",
    "--allow-dangerously-skip-permissions",
];

/// Permission modes that approve actions without the rules: `bypassPermissions`,
/// and `auto`, in which a classifier approves actions.
pub const FORBIDDEN_MODES: &[&str] = &["bypassPermissions", "auto"];

/// The forbidden flag or mode that `token` is or carries, if any.
///
/// `token` is a flag (`--dangerously-skip-permissions`, also as `--flag=value`) or a
/// permission-mode value. A flag name found inside a longer token (a settings JSON
/// string, say) counts too; `auto` counts only as the whole token, since it is an
/// ordinary word elsewhere.
pub fn forbidden_in(token: &str) -> Option<&'static str> {
    let token = token.trim();
    if let Some(flag) = FORBIDDEN_FLAGS.iter().find(|f| token.contains(**f)) {
        return Some(flag);
    }
    if token.contains("bypassPermissions") {
        return Some("bypassPermissions");
    }
    FORBIDDEN_MODES.iter().find(|m| token == **m).copied()
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SafetyError {
    #[error("refusing to run: argument {index} ({forbidden}) turns off permission checks")]
    ForbiddenArgument {
        index: usize,
        forbidden: &'static str,
    },
    #[error("refusing to run: permission mode `{mode}` is never allowed")]
    ForbiddenMode { index: usize, mode: String },
}

/// The last check before spawn: no forbidden flag anywhere in `argv`, no forbidden
/// mode after `--permission-mode` (separate or as `--permission-mode=…`), and no
/// forbidden `defaultMode` inside an inline settings JSON.
pub fn assert_argv_safe(argv: &[String]) -> Result<(), SafetyError> {
    static DEFAULT_MODE: OnceLock<Regex> = OnceLock::new();
    let default_mode = DEFAULT_MODE
        .get_or_init(|| Regex::new(r#""defaultMode"\s*:\s*"([^"]*)""#).expect("valid regex"));
    let mut mode_next = false;
    for (index, arg) in argv.iter().enumerate() {
        if mode_next {
            mode_next = false;
            check_mode(index, arg)?;
        }
        if let Some(forbidden) = FORBIDDEN_FLAGS
            .iter()
            .find(|f| arg.contains(**f))
            .copied()
            .or_else(|| {
                arg.contains("bypassPermissions")
                    .then_some("bypassPermissions")
            })
        {
            return Err(SafetyError::ForbiddenArgument { index, forbidden });
        }
        if arg == "--permission-mode" {
            mode_next = true;
        } else if let Some(mode) = arg.strip_prefix("--permission-mode=") {
            check_mode(index, mode)?;
        }
        for c in default_mode.captures_iter(arg) {
            check_mode(index, &c[1])?;
        }
    }
    Ok(())
}

fn check_mode(index: usize, mode: &str) -> Result<(), SafetyError> {
    if FORBIDDEN_MODES.contains(&mode.trim()) {
        return Err(SafetyError::ForbiddenMode {
            index,
            mode: mode.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn forbidden_in_names_flags_and_modes() {
        assert_eq!(
            forbidden_in("--dangerously-skip-permissions"),
            Some("--dangerously-skip-permissions")
        );
        assert_eq!(
            forbidden_in("--allow-dangerously-skip-permissions=true"),
            Some("--allow-dangerously-skip-permissions")
        );
        assert_eq!(forbidden_in("bypassPermissions"), Some("bypassPermissions"));
        assert_eq!(forbidden_in("auto"), Some("auto"));
        assert_eq!(forbidden_in("automatic"), None);
        assert_eq!(forbidden_in("acceptEdits"), None);
        assert_eq!(forbidden_in("--print"), None);
    }

    #[test]
    fn passes_a_normal_argv() {
        let a = argv(&["--print", "--permission-mode", "default", "--model", "auto"]);
        assert_eq!(assert_argv_safe(&a), Ok(()));
    }

    #[test]
    fn rejects_each_forbidden_flag_anywhere() {
        for flag in FORBIDDEN_FLAGS {
            let a = argv(&["--print", "--model", "sonnet", flag]);
            assert_eq!(
                assert_argv_safe(&a),
                Err(SafetyError::ForbiddenArgument {
                    index: 3,
                    forbidden: flag
                })
            );
        }
    }

    #[test]
    fn rejects_forbidden_modes_in_every_spelling() {
        for mode in FORBIDDEN_MODES {
            let separate = argv(&["--print", "--permission-mode", mode]);
            assert!(assert_argv_safe(&separate).is_err(), "{mode}");
            let joined = argv(&["--print", &format!("--permission-mode={mode}")]);
            assert!(assert_argv_safe(&joined).is_err(), "{mode}");
            let settings = format!(r#"{{"permissions": {{"defaultMode": "{mode}"}}}}"#);
            let inline = argv(&["--settings", &settings]);
            assert!(assert_argv_safe(&inline).is_err(), "{mode}");
        }
    }
}
