//! `request.json`: what one invocation was asked to do, written before it is spawned.
//! Its schema is `schemas/request.schema.json`, generated from this type.
//!
//! The prompt is not here (it is `prompt.md`), nor is the argv (it is `process.json`'s
//! `redactedArgv`), nor any environment value: only the names of the extra variables.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::argv::{InvocationRequest, Operation, OutputFormat, SkippedFlag, ToolPolicy};
use crate::pipeline::ResolvedRunner;

pub(crate) const REQUEST_SCHEMA_VERSION: u32 = 1;

/// What an invocation is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum OperationKind {
    Generate,
    Execute,
    /// An execute attempt continuing an earlier session with `--resume`.
    Continue,
}

/// How the stage's structured output travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SchemaDeliveryRecord {
    /// `--json-schema`, inline: the output is the envelope's `structured_output`.
    JsonSchemaFlag,
    /// The CLI has no `--json-schema`: the output is read from the result text
    /// (degraded).
    ResultText,
    /// The stage has no output schema.
    None,
}

/// One attempt's `request.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "specbridge invocation request (request.json)")]
pub struct RequestRecord {
    /// Always 1.
    #[schemars(range(min = 1, max = 1))]
    pub schema_version: u32,
    /// The stage (or fan-out instance) id.
    pub stage: String,
    pub attempt: u32,
    pub operation: OperationKind,
    /// `runner.command` as configured.
    pub command: String,
    /// The detected CLI version, when known.
    pub cli_version: Option<String>,
    pub output_format: OutputFormat,
    /// The tools and permission mode as passed.
    pub tool_policy: ToolPolicy,
    pub model: Option<String>,
    pub effort: Option<String>,
    pub max_turns: u32,
    /// Per invocation, in US dollars.
    pub max_budget_usd: f64,
    pub timeout_ms: u64,
    pub kill_grace_ms: u64,
    pub max_stdout_bytes: u64,
    pub max_stderr_bytes: u64,
    /// The session id passed with `--session-id`, or continued with `--resume`.
    pub session_id: Option<String>,
    /// Settings not passed because the CLI lacks their flag.
    pub skipped_flags: Vec<SkippedFlag>,
    pub warnings: Vec<String>,
    /// Some setting could not be passed, or the output is read from text.
    pub degraded: bool,
    pub schema_delivery: SchemaDeliveryRecord,
    /// sha256 of `output-schema.json`, when the stage has a schema.
    pub schema_sha256: Option<String>,
    /// sha256 of the prompt as sent (before redaction; `prompt.md` is redacted).
    pub prompt_sha256: String,
    /// Names of the extra environment variables from `runner.env` (never values).
    pub env_names: Vec<String>,
    /// Inherited variables removed from the agent's environment because they
    /// change Claude Code's settings or permissions (names only).
    pub scrubbed_env_names: Vec<String>,
    /// The working directory: the repository root.
    pub cwd: String,
}

/// What [`RequestRecord::new`] needs besides the assembled request.
#[derive(Debug, Clone, Copy)]
pub struct RequestContext<'a> {
    pub stage: &'a str,
    pub attempt: u32,
    pub runner: &'a ResolvedRunner,
    pub cli_version: Option<&'a str>,
    pub has_schema: bool,
    pub schema_sha256: Option<&'a str>,
    pub prompt_sha256: &'a str,
    pub cwd: &'a str,
    /// Inherited names removed from the agent's environment.
    pub scrubbed_env: &'a [String],
}

impl RequestRecord {
    pub fn new(request: &InvocationRequest, ctx: RequestContext<'_>) -> RequestRecord {
        let schema_delivery = match (ctx.has_schema, request.json_schema_inline) {
            (false, _) => SchemaDeliveryRecord::None,
            (true, true) => SchemaDeliveryRecord::JsonSchemaFlag,
            (true, false) => SchemaDeliveryRecord::ResultText,
        };
        let runner = ctx.runner;
        RequestRecord {
            schema_version: REQUEST_SCHEMA_VERSION,
            stage: ctx.stage.to_string(),
            attempt: ctx.attempt,
            operation: match request.operation {
                Operation::Generate => OperationKind::Generate,
                Operation::Execute => OperationKind::Execute,
                Operation::Continue { .. } => OperationKind::Continue,
            },
            command: request.program.clone(),
            cli_version: ctx.cli_version.map(str::to_string),
            output_format: request.output_format,
            tool_policy: request.tool_policy.clone(),
            model: runner.model.clone(),
            effort: runner.effort.clone(),
            max_turns: runner.max_turns,
            max_budget_usd: runner.max_budget_usd,
            timeout_ms: duration_ms(runner.timeout.as_duration()),
            kill_grace_ms: duration_ms(runner.kill_grace.as_duration()),
            max_stdout_bytes: runner.max_stdout_bytes.bytes(),
            max_stderr_bytes: runner.max_stderr_bytes.bytes(),
            session_id: request.session_id.map(|s| s.to_string()),
            skipped_flags: request.skipped_flags.clone(),
            warnings: {
                let mut w = request.warnings.clone();
                if !ctx.scrubbed_env.is_empty() {
                    w.push(scrubbed_warning(ctx.scrubbed_env));
                }
                w
            },
            degraded: request.degraded || schema_delivery == SchemaDeliveryRecord::ResultText,
            schema_delivery,
            schema_sha256: ctx.schema_sha256.map(str::to_string),
            prompt_sha256: ctx.prompt_sha256.to_string(),
            env_names: runner.env_names(),
            scrubbed_env_names: ctx.scrubbed_env.to_vec(),
            cwd: ctx.cwd.to_string(),
        }
    }

    /// The JSON Schema of `request.json`, as committed in `schemas/request.schema.json`.
    pub fn json_schema() -> String {
        let schema = schemars::schema_for!(RequestRecord);
        let mut text = serde_json::to_string_pretty(&schema).expect("schemas serialise");
        text.push('\n');
        text
    }
}

/// The warning recorded when inherited variables were removed.
pub fn scrubbed_warning(names: &[String]) -> String {
    format!(
        "specbridge's environment sets {}, which change Claude Code's settings or permissions; removed from the agent's environment",
        names.join(", ")
    )
}

fn duration_ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
