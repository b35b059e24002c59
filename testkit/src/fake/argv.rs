//! Parses an argv the way the impersonated version's option parser (commander) would:
//! only the options its help lists, with their declared arity.

use super::help_spec::{Arity, HelpSpec, OptionSpec};

/// One parsed command line.
#[derive(Debug, Clone, Default)]
pub struct Invocation {
    /// Options in order of appearance, under their first listed name.
    pub options: Vec<(String, Vec<String>)>,
    pub positionals: Vec<String>,
}

impl Invocation {
    pub fn has(&self, name: &str) -> bool {
        self.options.iter().any(|(n, _)| n == name)
    }

    /// The value of the last occurrence of an option (commander keeps the last one).
    pub fn value(&self, name: &str) -> Option<&str> {
        self.options
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.first().map(String::as_str))
    }

    /// Every value of every occurrence (variadic and repeated options).
    pub fn values(&self, name: &str) -> Vec<&str> {
        self.options
            .iter()
            .filter(|(n, _)| n == name)
            .flat_map(|(_, v)| v.iter().map(String::as_str))
            .collect()
    }
}

/// A command line the real CLI refuses, with its message (printed on stderr, exit 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgvError(pub String);

/// `--max-turns` is accepted by every version but listed by none.
fn max_turns() -> OptionSpec {
    OptionSpec {
        names: vec!["--max-turns".to_owned()],
        arity: Arity::Required,
        choices: None,
    }
}

pub fn parse(help: &HelpSpec, args: &[String]) -> Result<Invocation, ArgvError> {
    let max_turns = max_turns();
    let lookup = |name: &str| -> Option<OptionSpec> {
        if name == "--max-turns" {
            return Some(max_turns.clone());
        }
        help.option(name).cloned()
    };
    let mut invocation = Invocation::default();
    let mut index = 0;
    let mut only_positionals = false;
    while index < args.len() {
        let arg = &args[index];
        index += 1;
        if only_positionals || !arg.starts_with('-') || arg == "-" {
            invocation.positionals.push(arg.clone());
            continue;
        }
        if arg == "--" {
            only_positionals = true;
            continue;
        }
        let (name, inline) = match arg.split_once('=') {
            Some((name, value)) if name.starts_with("--") => (name, Some(value.to_owned())),
            _ => (arg.as_str(), None),
        };
        let spec =
            lookup(name).ok_or_else(|| ArgvError(format!("error: unknown option '{name}'")))?;
        let canonical = spec
            .names
            .iter()
            .find(|n| n.starts_with("--"))
            .unwrap_or(&spec.names[0])
            .clone();
        let mut values = Vec::new();
        match (spec.arity, inline) {
            (Arity::Flag, Some(_)) => {
                return Err(ArgvError(format!(
                    "error: option '{canonical}' does not take an argument"
                )))
            }
            (Arity::Flag, None) => {}
            (_, Some(value)) => values.push(value),
            (Arity::Required, None) => match args.get(index) {
                Some(value) => {
                    values.push(value.clone());
                    index += 1;
                }
                None => {
                    return Err(ArgvError(format!(
                        "error: option '{canonical}' argument missing"
                    )))
                }
            },
            (Arity::Optional, None) => {
                if let Some(value) = args.get(index).filter(|v| !v.starts_with('-')) {
                    values.push(value.clone());
                    index += 1;
                }
            }
            (Arity::Variadic, None) => {
                while let Some(value) = args.get(index).filter(|v| !v.starts_with('-')) {
                    values.push(value.clone());
                    index += 1;
                }
                if values.is_empty() {
                    return Err(ArgvError(format!(
                        "error: option '{canonical}' argument missing"
                    )));
                }
            }
        }
        if let (Some(choices), Some(value)) = (&spec.choices, values.first()) {
            // From 2.1.200 `default` is no longer listed but still accepted.
            let still_accepted = canonical == "--permission-mode" && value == "default";
            if !choices.contains(value) && !still_accepted {
                let placeholder = if canonical == "--permission-mode" {
                    "<mode>"
                } else {
                    "<value>"
                };
                return Err(ArgvError(format!(
                    "error: option '{canonical} {placeholder}' argument '{value}' is invalid. \
                     Allowed choices are {}.",
                    choices.join(", ")
                )));
            }
        }
        invocation.options.push((canonical, values));
    }
    Ok(invocation)
}

/// Splits `--tools`/`--allowedTools` values: comma or space separated, keeping
/// parentheses (`Bash(git status:*)`) together.
pub fn tool_list<'a>(values: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut tools = Vec::new();
    for value in values {
        let mut depth = 0usize;
        let mut current = String::new();
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
                ',' | ' ' if depth == 0 => {
                    if !current.trim().is_empty() {
                        tools.push(current.trim().to_owned());
                    }
                    current.clear();
                }
                _ => current.push(c),
            }
        }
        if !current.trim().is_empty() {
            tools.push(current.trim().to_owned());
        }
    }
    tools
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::captures::VersionCapture;

    fn parse_for(version: &str, args: &[&str]) -> Result<Invocation, ArgvError> {
        let help = HelpSpec::parse(VersionCapture::lookup(version).unwrap().help_txt);
        let args: Vec<String> = args.iter().map(std::string::ToString::to_string).collect();
        parse(&help, &args)
    }

    #[test]
    fn variadic_options_stop_at_the_next_option() {
        let inv = parse_for(
            "2.1.332",
            &[
                "-p",
                "--allowed-tools",
                "Read",
                "Bash(git status:*)",
                "--verbose",
            ],
        )
        .unwrap();
        assert_eq!(inv.values("--allowedTools"), ["Read", "Bash(git status:*)"]);
        assert!(inv.has("--print") && inv.has("--verbose"));
    }

    #[test]
    fn flags_the_version_does_not_list_are_unknown() {
        let err = parse_for("1.0.0", &["-p", "--json-schema", "{}"]).unwrap_err();
        assert_eq!(err.0, "error: unknown option '--json-schema'");
        assert!(parse_for("1.0.0", &["-p", "--max-turns", "3"]).is_ok());
    }

    #[test]
    fn permission_mode_choices_follow_the_help() {
        let err = parse_for("2.1.100", &["--permission-mode", "manual"]).unwrap_err();
        assert!(err.0.contains("argument 'manual' is invalid"), "{}", err.0);
        assert!(parse_for("2.1.332", &["--permission-mode", "manual"]).is_ok());
        assert!(parse_for("2.1.332", &["--permission-mode=default"]).is_ok());
    }

    #[test]
    fn tool_lists_keep_rules_with_spaces_together() {
        assert_eq!(
            tool_list(["Read,Glob Grep", "Bash(git status *)"]),
            ["Read", "Glob", "Grep", "Bash(git status *)"]
        );
    }
}
