//! Reads the option table of a captured help text, so that the fake accepts exactly the
//! flags (and `--permission-mode` choices) the impersonated version accepts.

/// How many values an option takes, as commander declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    Flag,
    Required,
    Optional,
    Variadic,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionSpec {
    /// Every spelling, e.g. `["--allowedTools", "--allowed-tools"]` or `["-p", "--print"]`.
    pub names: Vec<String>,
    pub arity: Arity,
    /// The `(choices: …)` list, with wrapped lines joined.
    pub choices: Option<Vec<String>>,
}

#[derive(Debug, Clone)]
pub struct HelpSpec {
    pub options: Vec<OptionSpec>,
    pub commands: Vec<String>,
}

impl HelpSpec {
    pub fn parse(help: &str) -> HelpSpec {
        let mut options = Vec::new();
        let mut commands = Vec::new();
        let mut section = "";
        // Each entry: the spec line and the description lines that follow it.
        let mut current: Option<(String, String)> = None;
        let flush = |current: &mut Option<(String, String)>, options: &mut Vec<OptionSpec>| {
            if let Some((spec, description)) = current.take() {
                options.push(option_spec(&spec, &description));
            }
        };
        for line in help.lines() {
            if !line.starts_with(' ') && line.ends_with(':') {
                flush(&mut current, &mut options);
                section = line.trim_end_matches(':');
                continue;
            }
            match section {
                "Options" => {
                    if line.starts_with("  -") {
                        flush(&mut current, &mut options);
                        let body = &line[2..];
                        let (spec, description) = match body.find("  ") {
                            Some(at) => (&body[..at], body[at..].trim()),
                            None => (body, ""),
                        };
                        current = Some((spec.to_owned(), description.to_owned()));
                    } else if let Some((_, description)) = current.as_mut() {
                        description.push(' ');
                        description.push_str(line.trim());
                    }
                }
                "Commands" => {
                    if let Some(rest) = line.strip_prefix("  ") {
                        if !rest.starts_with(' ') {
                            let word = rest.split([' ', '|']).next().unwrap_or("");
                            if !word.is_empty() {
                                commands.push(word.to_owned());
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        flush(&mut current, &mut options);
        HelpSpec { options, commands }
    }

    pub fn option(&self, name: &str) -> Option<&OptionSpec> {
        self.options
            .iter()
            .find(|o| o.names.iter().any(|n| n == name))
    }

    pub fn has_command(&self, name: &str) -> bool {
        self.commands.iter().any(|c| c == name)
    }
}

fn option_spec(spec: &str, description: &str) -> OptionSpec {
    let (names, argument) = match spec.find(" <").or_else(|| spec.find(" [")) {
        Some(at) => (&spec[..at], spec[at + 1..].trim()),
        None => (spec, ""),
    };
    let arity = if argument.is_empty() {
        Arity::Flag
    } else if argument.contains("...") {
        Arity::Variadic
    } else if argument.starts_with('[') {
        Arity::Optional
    } else {
        Arity::Required
    };
    OptionSpec {
        names: names.split(", ").map(|n| n.trim().to_owned()).collect(),
        arity,
        choices: choices(description),
    }
}

fn choices(description: &str) -> Option<Vec<String>> {
    let start = description.find("(choices: ")? + "(choices: ".len();
    let rest = &description[start..];
    let end = rest.find(')')?;
    Some(
        rest[..end]
            .split(',')
            .map(str::trim)
            // "default: …" and "preset: …" follow the choices inside the same parentheses.
            .take_while(|c| c.starts_with('"'))
            .map(|c| c.trim_matches('"').to_owned())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::captures::VersionCapture;

    fn spec(version: &str) -> HelpSpec {
        HelpSpec::parse(VersionCapture::lookup(version).unwrap().help_txt)
    }

    #[test]
    fn wrapped_permission_mode_choices_are_joined() {
        let modes = spec("2.1.332")
            .option("--permission-mode")
            .unwrap()
            .choices
            .clone()
            .unwrap();
        assert_eq!(
            modes,
            [
                "acceptEdits",
                "auto",
                "bypassPermissions",
                "manual",
                "dontAsk",
                "plan"
            ]
        );
    }

    #[test]
    fn arities_and_aliases_come_from_the_spec() {
        let help = spec("2.1.332");
        let allowed = help.option("--allowed-tools").unwrap();
        assert_eq!(allowed.names, ["--allowedTools", "--allowed-tools"]);
        assert_eq!(allowed.arity, Arity::Variadic);
        assert_eq!(help.option("-r").unwrap().arity, Arity::Optional);
        assert_eq!(help.option("--json-schema").unwrap().arity, Arity::Required);
        assert_eq!(help.option("--print").unwrap().arity, Arity::Flag);
    }

    #[test]
    fn old_versions_lack_new_flags_and_the_auth_command() {
        let old = spec("1.0.0");
        assert!(old.option("--permission-mode").is_none());
        assert!(old.option("--json-schema").is_none());
        assert!(!old.has_command("auth"));
        assert!(spec("2.1.100").has_command("auth"));
        assert!(!spec("2.0.50").has_command("auth"));
    }
}
