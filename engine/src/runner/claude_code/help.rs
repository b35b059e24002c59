//! Reading `claude --help` without relying on its column layout.
//!
//! The layout changed several times (FACTS.md): 80-column wrapping, one option per
//! line of up to ~600 characters, aliases such as `--allowedTools, --allowed-tools`,
//! and from 2.1.200 a long flag spec with its description on the next line, indented
//! six spaces. What stays stable is commander's shape: a section header at column 0
//! ending in `:`, entries starting at the section's smallest indent, and every line
//! indented further belonging to the entry above it. So entries are joined first and
//! only then read: the flag spec is the part before the first run of two spaces (or
//! the whole first line when the description was pushed to the next one).

use std::sync::OnceLock;

use regex::Regex;

/// One option of the help text, with its wrapped lines joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelpOption {
    /// Every flag token of the spec, short and long (`-p`, `--print`).
    pub flags: Vec<String>,
    /// The description, wrapped lines joined with single spaces.
    pub description: String,
    /// Values listed as `(choices: "a", "b")`, when the description lists them.
    pub choices: Option<Vec<String>>,
}

/// One subcommand of the `Commands:` section (`plugin|plugins` gives two names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelpCommand {
    pub names: Vec<String>,
}

/// What a help text offers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HelpText {
    pub options: Vec<HelpOption>,
    pub commands: Vec<HelpCommand>,
}

impl HelpText {
    pub fn parse(text: &str) -> HelpText {
        let mut help = HelpText::default();
        for section in sections(text) {
            let is_commands = section.title.to_ascii_lowercase().contains("command");
            for entry in entries(&section.lines) {
                let (spec, description) = split_entry(&entry);
                if spec.starts_with('-') {
                    help.options.push(HelpOption {
                        flags: flag_tokens(&spec),
                        choices: choices(&description),
                        description,
                    });
                } else if is_commands {
                    help.commands.push(HelpCommand {
                        names: command_names(&spec),
                    });
                }
            }
        }
        help
    }

    /// The option whose spec names `flag` exactly (a mention inside another
    /// option's description does not count).
    pub fn option(&self, flag: &str) -> Option<&HelpOption> {
        self.options
            .iter()
            .find(|o| o.flags.iter().any(|f| f == flag))
    }

    pub(crate) fn has_flag(&self, flag: &str) -> bool {
        self.option(flag).is_some()
    }

    pub fn has_command(&self, name: &str) -> bool {
        self.commands
            .iter()
            .any(|c| c.names.iter().any(|n| n == name))
    }
}

struct Section<'a> {
    title: &'a str,
    lines: Vec<&'a str>,
}

/// Splits the text at headers: a line at column 0 ending in `:` (`Options:`).
/// Text before the first header (usage, summary) is dropped.
fn sections(text: &str) -> Vec<Section<'_>> {
    let mut out: Vec<Section<'_>> = Vec::new();
    for line in text.lines() {
        let line = line.trim_end();
        let at_col0 = !line.is_empty() && !line.starts_with(char::is_whitespace);
        if at_col0 && line.ends_with(':') {
            out.push(Section {
                title: line.trim_end_matches(':'),
                lines: Vec::new(),
            });
        } else if at_col0 {
            // Unindented prose ends a section without starting a new one.
            if let Some(s) = out.last_mut() {
                if !s.lines.is_empty() {
                    out.push(Section {
                        title: "",
                        lines: Vec::new(),
                    });
                }
            }
        } else if let Some(s) = out.last_mut() {
            s.lines.push(line);
        }
    }
    out
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// Joins each entry's lines: an entry starts at the section's smallest indent;
/// deeper lines continue it. A blank line ends the entry.
fn entries(lines: &[&str]) -> Vec<Vec<String>> {
    let base = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| indent(l))
        .min();
    let Some(base) = base else {
        return Vec::new();
    };
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut open = false;
    for line in lines {
        if line.trim().is_empty() {
            open = false;
            continue;
        }
        if indent(line) <= base || !open {
            out.push(vec![line.trim().to_string()]);
            open = true;
        } else if let Some(e) = out.last_mut() {
            e.push(line.trim().to_string());
        }
    }
    out
}

/// The spec is the first line up to the first gap of two or more spaces; when the
/// first line has no such gap, the description starts on the next line.
fn split_entry(lines: &[String]) -> (String, String) {
    let first = &lines[0];
    let (spec, head) = match first.find("  ") {
        Some(i) => (first[..i].to_string(), first[i..].trim().to_string()),
        None => (first.clone(), String::new()),
    };
    let mut description = head;
    for l in &lines[1..] {
        if !description.is_empty() {
            description.push(' ');
        }
        description.push_str(l);
    }
    (spec, description)
}

fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("valid regex"))
}

/// Flag tokens of a spec such as `--allowedTools, --allowed-tools <tools...>` or
/// `-r, --resume [value]`; placeholders in `<>` and `[]` are not flags.
fn flag_tokens(spec: &str) -> Vec<String> {
    static PLACEHOLDER: OnceLock<Regex> = OnceLock::new();
    static FLAG: OnceLock<Regex> = OnceLock::new();
    let bare = re(&PLACEHOLDER, r"<[^>]*>|\[[^\]]*\]").replace_all(spec, " ");
    re(&FLAG, r"(?:^|[\s,])(--?[A-Za-z0-9][A-Za-z0-9-]*)")
        .captures_iter(&bare)
        .map(|c| c[1].to_string())
        .collect()
}

/// `(choices: "a", "b", …)`, stopping at anything that is not a quoted value
/// (commander may add `default: "x"` inside the same parentheses).
fn choices(description: &str) -> Option<Vec<String>> {
    static LIST: OnceLock<Regex> = OnceLock::new();
    static VALUE: OnceLock<Regex> = OnceLock::new();
    let list = re(&LIST, r#"\(choices:\s*((?:"[^"]*"\s*,?\s*)+)"#).captures(description)?;
    let values = re(&VALUE, r#""([^"]*)""#)
        .captures_iter(&list[1])
        .map(|c| c[1].to_string())
        .collect();
    Some(values)
}

/// `plugin|plugins [options]` → `plugin`, `plugins`.
fn command_names(spec: &str) -> Vec<String> {
    spec.split_whitespace()
        .next()
        .unwrap_or("")
        .split('|')
        .filter(|n| !n.is_empty())
        .map(String::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::claude_code::fixtures::help_text;

    #[test]
    fn reads_the_80_column_layout_of_1_0_0() {
        let help = HelpText::parse(&help_text("1.0.0"));
        assert!(help.has_flag("--print") && help.has_flag("-p"));
        assert!(help.has_flag("--allowedTools"));
        assert!(!help.has_flag("--allowed-tools"));
        assert!(!help.has_flag("--permission-mode"));
        let format = help.option("--output-format").unwrap();
        assert_eq!(
            format.choices.as_deref(),
            Some(&["text".to_string(), "json".into(), "stream-json".into()][..])
        );
        assert!(help.has_command("doctor") && !help.has_command("auth"));
    }

    #[test]
    fn reads_one_line_options_with_aliases_in_2_0_50() {
        let help = HelpText::parse(&help_text("2.0.50"));
        let allowed = help.option("--allowed-tools").unwrap();
        assert_eq!(allowed.flags, ["--allowedTools", "--allowed-tools"]);
        let modes = help.option("--permission-mode").unwrap().choices.clone();
        assert_eq!(
            modes.unwrap(),
            [
                "acceptEdits",
                "bypassPermissions",
                "default",
                "dontAsk",
                "plan"
            ]
        );
        assert!(help.has_flag("--json-schema") && help.has_flag("--tools"));
        assert!(!help.has_flag("--max-budget-usd"));
        assert!(!help.has_command("auth"));
        assert!(help.has_command("setup-token"));
    }

    #[test]
    fn reads_the_wrapped_layout_with_next_line_descriptions_of_2_1_332() {
        let help = HelpText::parse(&help_text("2.1.332"));
        let allowed = help.option("--allowedTools").unwrap();
        assert_eq!(allowed.flags, ["--allowedTools", "--allowed-tools"]);
        assert!(allowed.description.starts_with("Comma or space-separated"));
        let modes = help.option("--permission-mode").unwrap().choices.clone();
        assert_eq!(
            modes.unwrap(),
            [
                "acceptEdits",
                "auto",
                "bypassPermissions",
                "manual",
                "dontAsk",
                "plan"
            ]
        );
        // `default: "host"` inside the parentheses is not a choice.
        let prompts = help.option("--permission-prompts").unwrap();
        assert_eq!(prompts.choices.clone().unwrap(), ["host", "none"]);
        assert!(help.has_flag("--exclude-dynamic-system-prompt-sections"));
        assert!(help.has_flag("--bg") && help.has_flag("--background"));
        assert!(help.has_command("auth") && help.has_command("plugins"));
        assert!(help.has_command("upgrade"));
    }

    #[test]
    fn no_entry_leaks_into_its_neighbour() {
        for v in ["1.0.0", "2.0.50", "2.1.100", "2.1.332"] {
            let help = HelpText::parse(&help_text(v));
            for o in &help.options {
                assert!(!o.flags.is_empty(), "{v}: option without flags: {o:?}");
                assert!(
                    o.flags.iter().all(|f| f.starts_with('-')),
                    "{v}: bad flag in {o:?}"
                );
            }
            // Every option line of the capture starting at the entry indent is one entry.
            let starts = help_text(v)
                .split("\nCommands:")
                .next()
                .unwrap()
                .lines()
                .filter(|l| l.starts_with("  -"))
                .count();
            assert_eq!(help.options.len(), starts, "{v}");
        }
    }

    #[test]
    fn a_flag_named_only_in_a_description_is_absent() {
        let text = "Usage: x\n\nOptions:\n  --bare   Minimal mode (use with --print or\n           --json-schema)\n  -h, --help  Display help\n";
        let help = HelpText::parse(text);
        assert!(help.has_flag("--bare"));
        assert!(!help.has_flag("--print"));
        assert!(!help.has_flag("--json-schema"));
    }

    #[test]
    fn word_boundaries_keep_similar_flags_apart() {
        let text =
            "Options:\n  --print-config      Print config\n  --tools-list <x>    List tools\n";
        let help = HelpText::parse(text);
        assert!(!help.has_flag("--print"));
        assert!(!help.has_flag("--tools"));
        assert!(help.has_flag("--print-config"));
    }

    #[test]
    fn reads_wrapped_choices_swapped_aliases_and_unsorted_options() {
        let text = "\
Usage: claude [options] [command] [prompt]

Options:
  --verbose                    Verbose
  --allowed-tools, --allowedTools <tools...>
      Tools to allow
  --permission-mode <mode>     Permission mode (choices:
                               \"acceptEdits\",
                               \"manual\", \"dontAsk\",
                               \"plan\")
  -p, --print                  Print

Commands:
  auth|login                   Manage authentication
";
        let help = HelpText::parse(text);
        assert_eq!(
            help.option("--allowedTools").unwrap().flags,
            ["--allowed-tools", "--allowedTools"]
        );
        assert_eq!(
            help.option("--permission-mode")
                .unwrap()
                .choices
                .clone()
                .unwrap(),
            ["acceptEdits", "manual", "dontAsk", "plan"]
        );
        assert!(help.has_flag("-p") && help.has_flag("--verbose"));
        assert!(help.has_command("auth"));
    }

    #[test]
    fn options_under_an_unknown_section_title_still_count() {
        let text = "Flags:\n    --print    Print\n    --json-schema <s>\n        Schema\n";
        let help = HelpText::parse(text);
        assert!(help.has_flag("--print") && help.has_flag("--json-schema"));
    }
}
