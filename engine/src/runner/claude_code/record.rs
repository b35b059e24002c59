//! `result.json`: what an attempt's result envelope said and how it was classified.
//! Its schema is `schemas/result.schema.json`, generated from this type.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::envelope::ResultEnvelope;
use super::outcome::Classification;
use crate::status::StageStatus;
use crate::tokens::TokenUsage;

pub(crate) const RESULT_RECORD_SCHEMA_VERSION: u32 = 1;

/// One attempt's `result.json`. Tool inputs and texts come from the agent: the caller
/// redacts them before writing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "specbridge result record")]
pub struct ResultRecord {
    pub schema_version: u32,
    pub subtype: Option<String>,
    pub is_error: Option<bool>,
    pub terminal_reason: Option<String>,
    pub num_turns: Option<u64>,
    pub total_cost_usd: Option<f64>,
    /// Input, output, cache-read and cache-creation tokens over every model the
    /// invocation used; missing when the CLI does not report usage (1.0.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<TokenUsage>,
    pub session_id: Option<String>,
    /// Tool calls the CLI refused; empty also when the CLI does not report them.
    pub permission_denials: Vec<PermissionDenialRecord>,
    /// The tools the `init` event offered, when the output was stream-json.
    pub offered_tools: Option<Vec<String>>,
    // The status the invocation came to; `outcome` on disk (a plain comment: a doc
    // comment would change the generated schema).
    #[serde(rename = "outcome")]
    pub status: StageStatus,
    pub failure_reason: Option<String>,
    pub api_error_status: Option<u16>,
    pub errors: Vec<String>,
    /// The output was taken from the result text because the CLI lacks `--json-schema`.
    pub degraded: bool,
    /// The failure looked transient (overloaded, rate-limited, unreachable API):
    /// the stage may be tried again (`runner.retries`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub transient: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PermissionDenialRecord {
    pub tool_name: String,
    pub tool_use_id: Option<String>,
    pub tool_input: Value,
}

impl ResultRecord {
    pub fn new(
        classification: &Classification,
        envelope: Option<&ResultEnvelope>,
        offered_tools: Option<Vec<String>>,
    ) -> ResultRecord {
        ResultRecord {
            schema_version: RESULT_RECORD_SCHEMA_VERSION,
            subtype: classification.subtype.clone(),
            is_error: classification.is_error,
            terminal_reason: classification.terminal_reason.clone(),
            num_turns: classification.num_turns,
            total_cost_usd: classification.total_cost_usd,
            tokens: classification.tokens,
            session_id: classification.session_id.clone(),
            permission_denials: envelope
                .and_then(|e| e.permission_denials.as_ref())
                .map(|denials| {
                    denials
                        .iter()
                        .map(|d| PermissionDenialRecord {
                            tool_name: d.tool_name.clone(),
                            tool_use_id: d.tool_use_id.clone(),
                            tool_input: d.tool_input.clone(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            offered_tools,
            status: classification.status,
            failure_reason: classification.failure_reason.clone(),
            api_error_status: classification.api_error_status,
            errors: envelope.map(|e| e.errors.clone()).unwrap_or_default(),
            degraded: classification.degraded,
            transient: false,
        }
    }

    /// The JSON Schema of `result.json`, as committed in `schemas/result.schema.json`.
    pub fn json_schema() -> String {
        let schema = schemars::schema_for!(ResultRecord);
        let mut text = serde_json::to_string_pretty(&schema).expect("schemas serialise");
        text.push('\n');
        text
    }
}
