//! The forbidden flags and permission modes (docs/claude-code-runner.md), in one place.
//!
//! Three layers reject them: pipeline validation, argv assembly, and an assertion
//! just before spawn. All three ask this module, so the list cannot drift apart.

/// Flags that switch off Claude Code's permission prompts.
pub const FORBIDDEN_FLAGS: &[&str] = &[
    "--dangerously-skip-permissions",
    "--allow-dangerously-skip-permissions",
];

/// Permission modes that approve actions without the user's rules: a bypass, or a
/// classifier deciding in the user's place.
pub const FORBIDDEN_MODES: &[&str] = &["bypassPermissions", "auto"];

/// The permission modes a pipeline may configure.
pub(crate) const ALLOWED_MODES: &[&str] = &["default", "acceptEdits", "plan", "dontAsk"];

/// The forbidden flag or mode inside one token (an argument, a rule, an environment
/// value), if any. Matches inside longer text too (`--dangerously-skip-permissions=true`,
/// `"--permission-mode bypassPermissions"`), because the token may be split later by
/// whatever reads it.
pub(crate) fn forbidden_in(token: &str) -> Option<&'static str> {
    // The longer flag contains the shorter one as a suffix; test it first so the
    // report names what was written.
    for flag in FORBIDDEN_FLAGS.iter().rev() {
        if token.contains(flag) {
            return Some(flag);
        }
    }
    if contains_word(token, "bypassPermissions") {
        return Some("bypassPermissions");
    }
    if permission_mode_auto(token) {
        return Some("--permission-mode auto");
    }
    None
}

/// The first forbidden flag or mode in an argument list, with the index of the
/// argument that holds it. Also catches a mode given as the next argument
/// (`--permission-mode`, `auto`).
pub(crate) fn forbidden_in_args<S: AsRef<str>>(args: &[S]) -> Option<(usize, &'static str)> {
    for (i, arg) in args.iter().enumerate() {
        let arg = arg.as_ref();
        if let Some(hit) = forbidden_in(arg) {
            return Some((i, hit));
        }
        if arg == "--permission-mode" {
            if let Some(next) = args.get(i + 1) {
                if let Some(mode) = forbidden_mode(next.as_ref()) {
                    return Some((i + 1, mode));
                }
            }
        }
    }
    None
}

/// The forbidden mode named by a permission-mode value, if it is one.
pub(crate) fn forbidden_mode(mode: &str) -> Option<&'static str> {
    FORBIDDEN_MODES.iter().copied().find(|m| *m == mode.trim())
}

fn contains_word(text: &str, word: &str) -> bool {
    // `contains` is a quick scan; `match_indices` sets up a searcher per call,
    // which a validation of thousands of strings pays for every one of them.
    text.contains(word)
        && text.match_indices(word).any(|(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + word.len()..].chars().next();
            !before.is_some_and(is_word_char) && !after.is_some_and(is_word_char)
        })
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// `--permission-mode auto` or `--permission-mode=auto` inside one token.
fn permission_mode_auto(token: &str) -> bool {
    token.contains("--permission-mode")
        && token.match_indices("--permission-mode").any(|(at, flag)| {
            let rest = &token[at + flag.len()..];
            let rest = rest.trim_start_matches(|c: char| c == '=' || c.is_whitespace());
            let rest = rest.trim_start_matches(['"', '\'']);
            rest.starts_with("auto")
                && !rest["auto".len()..]
                    .chars()
                    .next()
                    .is_some_and(is_word_char)
        })
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
pub(crate) fn assert_argv_safe(argv: &[String]) -> Result<(), SafetyError> {
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
        for mode in default_modes(arg) {
            check_mode(index, mode)?;
        }
    }
    Ok(())
}

/// Every value of a `"defaultMode": "…"` pair in `arg`, as the pattern
/// `"defaultMode"\s*:\s*"([^"]*)"` finds them (leftmost first, none
/// overlapping; a property test holds the two equal). Written out rather than
/// compiled: compiling the pattern cost every agent attempt a few hundred
/// microseconds before its spawn.
fn default_modes(arg: &str) -> impl Iterator<Item = &str> {
    const KEY: &str = "\"defaultMode\"";
    let mut from = 0;
    std::iter::from_fn(move || {
        while let Some(found) = arg[from..].find(KEY) {
            let start = from + found;
            match value_after_key(&arg[start + KEY.len()..]) {
                Some((value, rest)) => {
                    from = arg.len() - rest.len();
                    return Some(value);
                }
                // The key's closing quote may open the next key.
                None => from = start + 1,
            }
        }
        from = arg.len();
        None
    })
}

/// `\s*:\s*"([^"]*)"` at the start of `text`: the value and what follows it.
fn value_after_key(text: &str) -> Option<(&str, &str)> {
    let text = text.trim_start_matches(char::is_whitespace);
    let text = text
        .strip_prefix(':')?
        .trim_start_matches(char::is_whitespace);
    let text = text.strip_prefix('"')?;
    let end = text.find('"')?;
    Some((&text[..end], &text[end + 1..]))
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
    use proptest::prelude::*;

    proptest! {
        /// The scanner finds what the pattern it replaced finds, on text made
        /// of the pieces that matter to it (Unicode spaces included).
        #[test]
        fn default_modes_are_what_the_pattern_finds(pieces in proptest::collection::vec(
            prop::sample::select(vec![
                "\"defaultMode\"", "\"defaultMode", "defaultMode\"", "\"", ":", " ", "\t",
                "\n", "\u{a0}", "\u{2003}", "auto", "bypassPermissions", "plan", "{", "}",
                ",", "x", "é",
            ]),
            0..40,
        )) {
            let text: String = pieces.concat();
            let pattern = regex::Regex::new(r#""defaultMode"\s*:\s*"([^"]*)""#).unwrap();
            let wanted: Vec<&str> = pattern
                .captures_iter(&text)
                .map(|c| c.get(1).unwrap().as_str())
                .collect();
            let found: Vec<&str> = default_modes(&text).collect();
            prop_assert_eq!(found, wanted);
        }
    }

    #[test]
    fn flags_are_found_inside_tokens() {
        assert_eq!(
            forbidden_in("--dangerously-skip-permissions"),
            Some("--dangerously-skip-permissions")
        );
        assert_eq!(
            forbidden_in("--allow-dangerously-skip-permissions"),
            Some("--allow-dangerously-skip-permissions")
        );
        assert_eq!(
            forbidden_in("--dangerously-skip-permissions=true"),
            Some("--dangerously-skip-permissions")
        );
        assert_eq!(
            forbidden_in("--permission-mode bypassPermissions"),
            Some("bypassPermissions")
        );
        assert_eq!(
            forbidden_in("--permission-mode=auto"),
            Some("--permission-mode auto")
        );
        assert_eq!(
            forbidden_in("x --permission-mode  'auto' y"),
            Some("--permission-mode auto")
        );
    }

    #[test]
    fn ordinary_tokens_pass() {
        for ok in [
            "Bash(git status *)",
            "auto",
            "--permission-mode default",
            "--permission-mode automatic-ish",
            "bypassPermissionsX",
            "--model",
        ] {
            assert_eq!(forbidden_in(ok), None, "{ok:?}");
        }
    }

    #[test]
    fn mode_as_next_argument_is_found() {
        assert_eq!(
            forbidden_in_args(&["--verbose", "--permission-mode", "auto"]),
            Some((2, "auto"))
        );
        assert_eq!(
            forbidden_in_args(&["--permission-mode", "plan", "auto"]),
            None
        );
        assert_eq!(
            forbidden_in_args(&["-x", "--dangerously-skip-permissions"]),
            Some((1, "--dangerously-skip-permissions"))
        );
    }

    fn argv(items: &[&str]) -> Vec<String> {
        items.iter().map(std::string::ToString::to_string).collect()
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
        assert_eq!(forbidden_mode("auto"), Some("auto"));
        assert_eq!(forbidden_mode("automatic"), None);
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
