//! The pipeline file as typed structs (docs/pipeline-format.md).
//!
//! Everything a user can write is optional here unless the format requires it;
//! defaults are applied later by [`crate::pipeline::resolve`], so that validation
//! can tell "not written" apart from "written as the default".

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::pipeline::units::{ByteSize, DurationSpec};

/// The whole pipeline file.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(title = "specbridge pipeline file")]
pub struct PipelineFile {
    /// Format version; only `1` exists.
    #[schemars(range(min = 1, max = 1))]
    pub version: u32,
    /// A short name for the pipeline, shown in run listings.
    pub name: String,
    /// Defaults for every agent stage; a stage overrides keys in its own `runner:`.
    #[serde(default)]
    pub runner: RunnerSettings,
    /// Run-level limits.
    #[serde(default)]
    pub budget: Budget,
    /// Stages running at once (execute stages never overlap). Default 2.
    #[serde(default)]
    pub concurrency: Option<u32>,
    /// Paths (relative to the repository root) that no agent may change, in addition
    /// to the always-protected ones.
    #[serde(default)]
    pub protected_paths: Vec<String>,
    /// Default verification commands for execute stages.
    #[serde(default)]
    pub verification: Vec<VerificationCommand>,
    /// Names of environment variables whose values are secrets whatever their
    /// names: redacted from every record like `*_TOKEN` values (values under 8
    /// characters are not looked for).
    #[serde(default)]
    pub secrets: Vec<String>,
    /// Let an agent's change put a secret into the repository: recorded as a
    /// `secret-in-change` finding instead of failing the stage (exit 1).
    #[serde(default)]
    pub allow_secret_in_change: bool,
    /// The stages, in any order; `needs` gives the edges.
    #[serde(deserialize_with = "stages_at_their_count")]
    #[schemars(with = "Vec<StageDef>")]
    pub stages: Vec<StageDef>,
}

/// Run-level budget.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Budget {
    /// No new invocation starts once the run has spent at least this much.
    #[serde(default)]
    pub max_budget_usd: Option<f64>,
}

/// The kind of runner behind agent stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RunnerKind {
    ClaudeCode,
    Replay,
}

/// Runner settings as written; every key is optional so that a stage's `runner:`
/// can override single keys of the pipeline's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RunnerSettings {
    #[serde(default)]
    pub kind: Option<RunnerKind>,
    /// Executable, resolved through PATH (never through a shell).
    #[serde(default)]
    pub command: Option<String>,
    /// Arguments placed before specbridge's own.
    #[serde(default)]
    pub command_args: Option<Vec<String>>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub effort: Option<String>,
    #[serde(default)]
    pub max_turns: Option<u32>,
    /// How many more attempts an agent stage gets after a transient API failure
    /// (overloaded, rate-limited, 5xx, unreachable); 0 disables. Default 2.
    #[serde(default)]
    pub retries: Option<u32>,
    /// Per invocation, in US dollars.
    #[serde(default)]
    pub max_budget_usd: Option<f64>,
    /// Per invocation.
    #[serde(default)]
    pub timeout: Option<DurationSpec>,
    /// Delay between SIGTERM and SIGKILL.
    #[serde(default)]
    pub kill_grace: Option<DurationSpec>,
    /// `default`, `acceptEdits`, `plan` or `dontAsk` (never a bypass mode).
    #[serde(default)]
    pub permission_mode: Option<String>,
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// Bash permission rules such as `Bash(git status *)`.
    #[serde(default)]
    pub allowed_bash_rules: Option<Vec<String>>,
    /// Extra deny rules, added to the built-in ones.
    #[serde(default)]
    pub disallowed_tools: Option<Vec<String>>,
    /// Folders relative to the repository root, passed as `--plugin-dir`.
    #[serde(default)]
    pub plugin_dirs: Option<Vec<String>>,
    /// Claude Code settings files to load (`user`, `project`, `local`). Default: none,
    /// since a settings file can widen the policy; an opt-in is warned about.
    #[serde(default)]
    pub setting_sources: Option<Vec<String>>,
    /// MCP server configuration files (relative to the repository root) passed with
    /// `--mcp-config`; without them no MCP server is loaded. An opt-in, warned about.
    #[serde(default)]
    pub mcp_config: Option<Vec<String>>,
    /// The Claude Code sandbox for stages that allow Bash: `off`, or settings for it.
    #[serde(default)]
    pub sandbox: Option<SandboxSetting>,
    /// Extra environment for the agent; values are never recorded.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub max_stdout_bytes: Option<ByteSize>,
    #[serde(default)]
    pub max_stderr_bytes: Option<ByteSize>,
    /// For `kind: replay`: the recorded run directory to answer from.
    #[serde(default)]
    pub from: Option<String>,
}

/// `runner.sandbox`: the CLI's own sandbox around Bash commands. On by default
/// whenever a stage allows Bash; `off` is an explicit opt-out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum SandboxSetting {
    /// `off`: Bash runs unconfined (warned about on every run).
    Switch(SandboxSwitch),
    Settings(SandboxSettings),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SandboxSwitch {
    Off,
}

/// What sandboxed commands may reach besides the repository.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SandboxSettings {
    /// Absolute folders (or `~/…`) that sandboxed commands may write, such as a
    /// build cache. The repository is always writable.
    #[serde(default)]
    pub writable_paths: Vec<String>,
    /// Hosts sandboxed commands may connect to (`crates.io`, `*.npmjs.org`,
    /// `db.example.com:5432`). None by default.
    #[serde(default)]
    pub allowed_domains: Vec<String>,
}

/// The three stage kinds.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum StageKind {
    /// Spec generation: read-only.
    Generate,
    /// Task execution: may change the working tree with an explicit allowlist.
    Execute,
    /// A command, no model.
    Check,
}

impl StageKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StageKind::Generate => "generate",
            StageKind::Execute => "execute",
            StageKind::Check => "check",
        }
    }

    pub fn is_agent(self) -> bool {
        !matches!(self, StageKind::Check)
    }
}

/// One stage as written. Fields that only some kinds use are checked by validation,
/// so that a misplaced key gets a message naming the stage and the kind.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StageDef {
    pub id: String,
    pub kind: StageKind,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub needs: Vec<String>,
    /// generate/execute: a file path relative to the pipeline file's folder, or
    /// inline template text (anything containing a newline).
    #[serde(default)]
    pub prompt: Option<String>,
    /// generate/execute: the output contract.
    #[serde(default)]
    pub output: Option<OutputSpec>,
    /// Fan out into one instance per item of an upstream output array.
    #[serde(default)]
    pub for_each: Option<ForEachSpec>,
    /// Overrides of the pipeline's runner keys.
    // Boxed: most stages have none, and inline they made every stage 472 bytes
    // larger (a pipeline of 10,000 stages, 4.5 MiB more to allocate and fault in).
    #[serde(default)]
    pub runner: Option<Box<RunnerSettings>>,
    /// check: the command, as an array.
    #[serde(default)]
    pub argv: Option<Argv>,
    /// check: timeout for the command (default 10m).
    #[serde(default)]
    pub timeout: Option<DurationSpec>,
    /// execute: verification commands replacing the pipeline's defaults.
    #[serde(default)]
    pub verification: Option<Vec<VerificationCommand>>,
    /// check: how the command is confined (default: bubblewrap, repository
    /// writable, no network).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<CommandSandbox>,
}

/// The output contract of an agent stage.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OutputSpec {
    /// `builtin:NAME` or a path to a JSON Schema file.
    pub schema: String,
    /// Where specbridge writes the `markdown` field of the output (generate only).
    #[serde(default)]
    pub document: Option<String>,
}

/// Fan-out source.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ForEachSpec {
    /// An upstream generate stage.
    pub stage: String,
    /// JSON pointer to an array in that stage's output, e.g. `/tasks`.
    pub items: String,
}

/// A verification command run by specbridge after an execute stage.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct VerificationCommand {
    pub name: String,
    pub argv: Argv,
    #[serde(default)]
    pub timeout: Option<DurationSpec>,
    /// A required command must pass for `verified` (default true).
    #[serde(default)]
    pub required: Option<bool>,
    /// How the command is confined (default: bubblewrap, repository writable, no
    /// network).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<CommandSandbox>,
}

/// The confinement of a command specbridge runs itself (a check stage, a
/// verification command): the code it runs may be the agent's. Not written means
/// confined with no opt-ins.
// Left out of serialisation when not written, so that the input hashes of
// pipelines without it (and their recordings) stay as they were.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum CommandSandbox {
    /// `off`: run with the user's full rights, warned on every run.
    Off(SandboxOff),
    /// Confined, with what a real build needs opened up.
    Confined(CommandSandboxOptions),
}

/// The only word that turns a command's sandbox off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SandboxOff {
    Off,
}

/// Opt-ins of a confined command.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CommandSandboxOptions {
    /// Extra writable paths outside the repository: absolute, or `~/…` for the
    /// user's home (a build cache, say). Created as folders when missing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable: Vec<String>,
    /// Keep the network (default false: no network, not even loopback of the host).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub network: bool,
}

/// A command line. Only the array form is valid; the string form is accepted by the
/// parser so that validation can say "this is a shell string" with its location
/// instead of a type error.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Argv {
    List(Vec<String>),
    Shell(String),
}

/// Read by its shape, as `untagged` reads it, without first copying the value
/// into serde's buffered form to try each variant in turn (a copy of every
/// command line of a pipeline, made and dropped).
impl<'de> Deserialize<'de> for Argv {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Shape;
        impl<'de> serde::de::Visitor<'de> for Shape {
            type Value = Argv;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an argv array of strings, or a string")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Argv, E> {
                Ok(Argv::Shell(text.to_owned()))
            }
            fn visit_string<E: serde::de::Error>(self, text: String) -> Result<Argv, E> {
                Ok(Argv::Shell(text))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Argv, A::Error> {
                let mut words = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
                while let Some(word) = seq.next_element::<String>()? {
                    words.push(word);
                }
                Ok(Argv::List(words))
            }
        }
        deserializer.deserialize_any(Shape)
    }
}

impl Argv {
    /// The argv when it is a proper array.
    pub fn as_list(&self) -> Option<&[String]> {
        match self {
            Argv::List(v) => Some(v),
            Argv::Shell(_) => None,
        }
    }
}

/// More than any pipeline has: a count past it is not reserved ahead.
const STAGES_RESERVED_AT_MOST: usize = 100_000;

/// The stages made room for once, at the count the document gives. serde's own
/// `Vec` reading reserves at most 1 MiB ahead and then doubles, copying every
/// stage read so far at each step: for 10,000 stages, 7 MiB copied into pages
/// touched for the first time, only to be freed. The count comes from the
/// document already read (a reader streaming its input gives none, and the
/// vector grows as before), and is believed up to [`STAGES_RESERVED_AT_MOST`].
fn stages_at_their_count<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<StageDef>, D::Error> {
    struct Stages;
    impl<'de> serde::de::Visitor<'de> for Stages {
        type Value = Vec<StageDef>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a sequence of stages")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let reserve = seq.size_hint().unwrap_or(0).min(STAGES_RESERVED_AT_MOST);
            let mut stages = Vec::with_capacity(reserve);
            while let Some(stage) = seq.next_element()? {
                stages.push(stage);
            }
            Ok(stages)
        }
    }
    deserializer.deserialize_seq(Stages)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_argv_is_read_by_its_shape_from_yaml_and_from_json_alike() {
        let list: Argv = serde_yaml::from_str("[make, 'check all']").unwrap();
        assert_eq!(list, Argv::List(vec!["make".into(), "check all".into()]));
        let shell: Argv = serde_yaml::from_str("make check").unwrap();
        assert_eq!(shell, Argv::Shell("make check".into()));
        let from_value: Argv = serde_json::from_value(serde_json::json!(["a", "b"])).unwrap();
        assert_eq!(from_value, Argv::List(vec!["a".into(), "b".into()]));
        // Written back in the shape it was read in.
        assert_eq!(
            serde_json::to_value(&list).unwrap(),
            serde_json::json!(["make", "check all"])
        );
        assert_eq!(
            serde_json::to_value(&shell).unwrap(),
            serde_json::json!("make check")
        );

        for wrong in [
            serde_json::json!(5),
            serde_json::json!(["make", 5]),
            serde_json::json!({"a": 1}),
        ] {
            let error = serde_json::from_value::<Argv>(wrong.clone())
                .unwrap_err()
                .to_string();
            assert!(error.contains("invalid type"), "{wrong}: {error}");
        }
    }

    #[test]
    fn the_stages_read_from_a_document_take_the_room_they_need_once() {
        // More stages than serde's own reading reserves ahead (1 MiB of them).
        let n = (1 << 20) / std::mem::size_of::<StageDef>() + 100;
        let stages: Vec<serde_json::Value> = (0..n)
            .map(|i| serde_json::json!({"id": format!("s{i}"), "kind": "check", "argv": ["true"]}))
            .collect();
        let document = serde_json::json!({"version": 1, "name": "t", "stages": stages});
        let file: PipelineFile = serde::Deserialize::deserialize(&document).unwrap();
        assert_eq!(file.stages.len(), n);
        assert_eq!(file.stages.capacity(), n);
        assert_eq!(file.stages[n - 1].id, format!("s{}", n - 1));
        // A reader that gives no count (YAML read as it streams) grows the list.
        let yaml = "version: 1\nname: t\nstages:\n  - { id: a, kind: check, argv: [x] }\n  - { id: b, kind: check, argv: [y] }\n";
        let file: PipelineFile = serde_yaml::from_str(yaml).unwrap();
        assert_eq!(
            file.stages
                .iter()
                .map(|s| s.id.as_str())
                .collect::<Vec<_>>(),
            ["a", "b"]
        );
    }
}
