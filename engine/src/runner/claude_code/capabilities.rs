//! What an installed Claude Code CLI supports, read from its `--help` (docs/claude-code-runner.md).

use std::sync::OnceLock;

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::help::HelpText;

/// The flags specbridge uses, found in one CLI version's help text.
///
/// Recorded in `run.json`, so the field names are part of the record format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    /// `X.Y.Z` from `--version`, when it could be read.
    pub version: Option<String>,
    pub print: bool,
    pub output_format: bool,
    /// `--output-format stream-json` is listed (and `--verbose`, which it needs).
    pub stream_json: bool,
    pub verbose: bool,
    pub model: bool,
    /// The spelling to use: `--allowedTools`, or `--allowed-tools` when only that exists.
    pub allowed_tools_flag: Option<String>,
    pub disallowed_tools_flag: Option<String>,
    pub tools: bool,
    pub permission_mode: bool,
    /// The listed `--permission-mode` choices, when the help lists them.
    pub permission_modes: Option<Vec<String>>,
    pub json_schema: bool,
    pub session_id: bool,
    pub resume: bool,
    pub max_budget_usd: bool,
    pub effort: bool,
    pub setting_sources: bool,
    /// `--strict-mcp-config`: MCP servers only from `--mcp-config`.
    pub strict_mcp_config: bool,
    pub mcp_config: bool,
    /// `--restricted` (2.1.300+): settings files ignored, file tools confined to
    /// the working directory, code-running tools only when `--tools` names them.
    pub restricted: bool,
    /// `--settings` is listed and the version is one whose sandbox settings were
    /// verified (2.1.300+): specbridge can turn the sandbox on for Bash.
    pub sandbox_settings: bool,
    pub plugin_dir: bool,
    pub no_session_persistence: bool,
    /// Never listed by any version, accepted by all (FACTS.md): always true.
    pub max_turns: bool,
    /// The help's command list has `auth`; only then is `auth status` safe to run
    /// (older versions take it as a prompt: billed, or a hang).
    pub auth_command: bool,
}

/// A capability that is missing, and what that means for the user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapabilityGap {
    pub flag: String,
    pub meaning: String,
}

impl CapabilityGap {
    fn new(flag: &str, meaning: &str) -> Self {
        CapabilityGap {
            flag: flag.into(),
            meaning: meaning.into(),
        }
    }
}

/// What each optional flag's absence means (docs/claude-code-runner.md). Order is the report order.
pub const OPTIONAL_MEANINGS: [(&str, &str); 10] = [
    (
        "--json-schema",
        "structured output is read from the result text (a whole-text JSON document or the last fenced json block); runs are marked degraded",
    ),
    (
        "--tools",
        "the CLI offers all its default tools; read-only stages deny the mutating ones through --disallowedTools instead",
    ),
    (
        "--session-id",
        "invocations cannot be given their own session id; the CLI's id is read from the result",
    ),
    (
        "--resume",
        "an interrupted execute stage starts over instead of continuing its session",
    ),
    (
        "--max-budget-usd",
        "the per-invocation budget (maxBudgetUsd) is not enforced by the CLI; only the run budget, checked between invocations, applies",
    ),
    ("--effort", "the runner's `effort` setting is ignored"),
    (
        "--setting-sources",
        "the CLI loads the user's, the project's and the local settings files, whose allow rules and hooks can widen the policy specbridge records; runs are marked degraded",
    ),
    (
        "--strict-mcp-config",
        "MCP servers configured in settings files may be loaded; runs are marked degraded",
    ),
    (
        "--plugin-dir",
        "the runner's `pluginDirs` is ignored; no plugins are loaded from them",
    ),
    (
        "--no-session-persistence",
        "none for specbridge runs, which keep sessions so that resume can continue them",
    ),
];

pub fn optional_meaning(flag: &str) -> &'static str {
    OPTIONAL_MEANINGS
        .iter()
        .find(|(f, _)| *f == flag)
        .map_or("not used", |(_, m)| *m)
}

impl Capabilities {
    pub fn detect(version: Option<String>, help: &HelpText) -> Capabilities {
        let has = |f: &str| help.has_flag(f);
        let pick = |camel: &str, kebab: &str| {
            [camel, kebab]
                .into_iter()
                .find(|f| has(f))
                .map(String::from)
        };
        let formats = help
            .option("--output-format")
            .and_then(|o| o.choices.clone());
        let stream_listed = match (&formats, help.option("--output-format")) {
            (Some(list), _) => list.iter().any(|f| f == "stream-json"),
            (None, Some(o)) => o.description.contains("stream-json"),
            (None, None) => false,
        };
        Capabilities {
            version: version.clone(),
            print: has("--print"),
            output_format: has("--output-format"),
            stream_json: stream_listed && has("--verbose"),
            verbose: has("--verbose"),
            model: has("--model"),
            allowed_tools_flag: pick("--allowedTools", "--allowed-tools"),
            disallowed_tools_flag: pick("--disallowedTools", "--disallowed-tools"),
            tools: has("--tools"),
            permission_mode: has("--permission-mode"),
            permission_modes: help
                .option("--permission-mode")
                .and_then(|o| o.choices.clone()),
            json_schema: has("--json-schema"),
            session_id: has("--session-id"),
            resume: has("--resume"),
            max_budget_usd: has("--max-budget-usd"),
            effort: has("--effort"),
            setting_sources: has("--setting-sources"),
            strict_mcp_config: has("--strict-mcp-config"),
            mcp_config: has("--mcp-config"),
            restricted: has("--restricted"),
            sandbox_settings: has("--settings")
                && version
                    .as_deref()
                    .is_some_and(|v| version_at_least(v, SANDBOX_VERIFIED_SINCE)),
            plugin_dir: has("--plugin-dir"),
            no_session_persistence: has("--no-session-persistence"),
            max_turns: true,
            auth_command: help.has_command("auth"),
        }
    }

    /// Required flags that are missing: any one makes the CLI `incompatible`.
    pub fn required_missing(&self) -> Vec<CapabilityGap> {
        let mut out = Vec::new();
        if !self.print {
            out.push(CapabilityGap::new(
                "--print",
                "the CLI cannot run without its interactive interface",
            ));
        }
        if !self.output_format {
            out.push(CapabilityGap::new(
                "--output-format",
                "the CLI cannot report a machine-readable result",
            ));
        }
        if self.allowed_tools_flag.is_none() {
            out.push(CapabilityGap::new(
                "--allowedTools",
                "tools cannot be pre-approved, so stages cannot be given a tool allowlist",
            ));
        }
        if self.disallowed_tools_flag.is_none() {
            out.push(CapabilityGap::new(
                "--disallowedTools",
                "tools cannot be denied, so mutating tools cannot be kept out of stages",
            ));
        }
        if !self.permission_mode {
            out.push(CapabilityGap::new(
                "--permission-mode",
                "the permission mode cannot be set, so the CLI's configured mode (possibly a bypass) would apply",
            ));
        }
        out
    }

    /// Optional flags that are missing, each a degraded-mode warning.
    pub fn degraded(&self) -> Vec<CapabilityGap> {
        let present = [
            self.json_schema,
            self.tools,
            self.session_id,
            self.resume,
            self.max_budget_usd,
            self.effort,
            self.setting_sources,
            self.strict_mcp_config,
            self.plugin_dir,
            self.no_session_persistence,
        ];
        OPTIONAL_MEANINGS
            .iter()
            .zip(present)
            .filter(|(_, p)| !p)
            .map(|((flag, meaning), _)| CapabilityGap::new(flag, meaning))
            .collect()
    }

    #[cfg(test)]
    pub fn is_compatible(&self) -> bool {
        self.required_missing().is_empty()
    }

    /// The value to pass for a permission mode: `default` becomes `manual` where the
    /// help lists `manual` but no longer `default` (2.1.200+). `None` when the help
    /// lists choices and the mode is not among them.
    pub fn permission_mode_value(&self, mode: &str) -> Option<String> {
        let Some(modes) = &self.permission_modes else {
            return Some(mode.to_string());
        };
        let listed = |m: &str| modes.iter().any(|x| x == m);
        if listed(mode) {
            Some(mode.to_string())
        } else if mode == "default" && listed("manual") {
            Some("manual".into())
        } else {
            None
        }
    }
}

/// The first version family whose sandbox settings (`sandbox.enabled`,
/// `failIfUnavailable`, …) were verified to confine Bash commands. Older versions
/// may ignore the keys silently, which would leave Bash unconfined.
pub const SANDBOX_VERIFIED_SINCE: &str = "2.1.300";

/// `a >= b` for `X.Y.Z` versions (a pre-release suffix is ignored).
pub fn version_at_least(a: &str, b: &str) -> bool {
    let parse = |v: &str| -> Vec<u64> {
        v.split(['-', '+'])
            .next()
            .unwrap_or(v)
            .split('.')
            .map(|p| p.parse().unwrap_or(0))
            .collect()
    };
    parse(a) >= parse(b)
}

/// `2.1.332 (Claude Code)` → `2.1.332`.
pub fn parse_version(output: &str) -> Option<String> {
    static VERSION: OnceLock<Regex> = OnceLock::new();
    VERSION
        .get_or_init(|| Regex::new(r"\b(\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.\-]+)?)").unwrap())
        .captures(output)
        .map(|c| c[1].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::claude_code::fixtures::{captured, CAPTURED_VERSIONS};

    fn flags(gaps: &[CapabilityGap]) -> Vec<&str> {
        gaps.iter().map(|g| g.flag.as_str()).collect()
    }

    #[test]
    fn reads_the_version_line() {
        for v in CAPTURED_VERSIONS {
            assert_eq!(captured(v).version.as_deref(), Some(v));
        }
        assert_eq!(parse_version("no version here"), None);
    }

    #[test]
    fn version_1_0_0_is_incompatible_for_want_of_permission_mode() {
        let caps = captured("1.0.0");
        assert_eq!(flags(&caps.required_missing()), ["--permission-mode"]);
        assert!(!caps.auth_command);
        assert!(caps.stream_json);
    }

    #[test]
    fn version_2_0_50_is_compatible_and_degraded() {
        let caps = captured("2.0.50");
        assert!(caps.is_compatible());
        assert_eq!(
            flags(&caps.degraded()),
            ["--max-budget-usd", "--effort", "--no-session-persistence"]
        );
        assert_eq!(caps.allowed_tools_flag.as_deref(), Some("--allowedTools"));
        assert!(!caps.auth_command);
    }

    #[test]
    fn versions_2_1_100_and_2_1_332_have_everything() {
        for v in ["2.1.100", "2.1.332"] {
            let caps = captured(v);
            assert!(caps.is_compatible(), "{v}");
            assert!(caps.degraded().is_empty(), "{v}: {:?}", caps.degraded());
            assert!(caps.auth_command && caps.stream_json && caps.max_turns);
        }
    }

    #[test]
    fn default_maps_to_manual_only_where_default_is_no_longer_listed() {
        assert_eq!(
            captured("2.1.100")
                .permission_mode_value("default")
                .as_deref(),
            Some("default")
        );
        let newest = captured("2.1.332");
        assert_eq!(
            newest.permission_mode_value("default").as_deref(),
            Some("manual")
        );
        assert_eq!(
            newest.permission_mode_value("acceptEdits").as_deref(),
            Some("acceptEdits")
        );
        assert_eq!(newest.permission_mode_value("delegate"), None);
        assert_eq!(
            captured("1.0.0").permission_mode_value("plan").as_deref(),
            Some("plan")
        );
    }

    /// A help text of a version between or after the captured ones: 2.1.200-style
    /// wrapping with only the kebab-case alias, and a new option layout element.
    #[test]
    fn reads_an_unseen_help_text() {
        let text = "\
Usage: claude [options] [command] [prompt]

Options:
  --allowed-tools <tools...>
      Comma or space-separated list of tool names to allow
  --disallowed-tools <tools...>
      Tool names to deny
  --json-schema <schema>                JSON Schema for structured output
  --output-format <format>              Output format (only works with --print):
                                        \"text\" (default) (choices: \"text\",
                                        \"json\", \"stream-json\", \"ndjson\")
  --permission-mode <mode>              Permission mode (choices: \"acceptEdits\",
                                        \"manual\", \"plan\")
  -p, --print                           Print response and exit
  --verbose                             Verbose output

Commands:
  auth                                  Manage authentication
";
        let caps = Capabilities::detect(Some("3.0.0".into()), &HelpText::parse(text));
        assert!(caps.is_compatible(), "{:?}", caps.required_missing());
        assert_eq!(caps.allowed_tools_flag.as_deref(), Some("--allowed-tools"));
        assert_eq!(
            caps.disallowed_tools_flag.as_deref(),
            Some("--disallowed-tools")
        );
        assert!(caps.stream_json && caps.json_schema && caps.auth_command);
        assert!(!caps.tools && !caps.session_id);
        assert_eq!(
            caps.permission_mode_value("default").as_deref(),
            Some("manual")
        );
    }

    #[test]
    fn serializes_camel_case() {
        let json = serde_json::to_value(captured("2.1.332")).unwrap();
        assert_eq!(json["allowedToolsFlag"], "--allowedTools");
        assert_eq!(json["maxBudgetUsd"], true);
        assert_eq!(json["permissionModes"][3], "manual");
    }
}
