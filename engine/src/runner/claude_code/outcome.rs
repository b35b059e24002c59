//! Turns how an invocation ended (exit, envelope, limits, signals) into a stage outcome
//! (docs/claude-code-runner.md Success and Outcomes).
//!
//! Success needs all of: exit 0, an envelope, `is_error: false`, `subtype: success`
//! and, when a schema is used, structured output that validates. Older versions exit 0
//! with `is_error: false` on max-turns and budget errors, and API errors keep
//! `subtype: success`, so the subtype, `terminal_reason`, `api_error_status` and
//! `errors` are read before the exit code.

use serde_json::Value;

use super::envelope::{json_from_result_text, ResultEnvelope};
use crate::status::StageStatus;
use crate::tokens::TokenUsage;

/// How the structured output travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchemaDelivery {
    /// `--json-schema`: the output is the envelope's `structured_output`.
    #[default]
    Flag,
    /// The CLI has no `--json-schema`: the output is JSON in the result text, and the
    /// run is degraded.
    ResultText,
}

/// Everything known about how one invocation ended.
#[derive(Debug, Clone, Default)]
pub struct ClassifyInput<'a> {
    /// `None` when the process was ended by a signal.
    pub exit_code: Option<i32>,
    pub envelope: Option<&'a ResultEnvelope>,
    /// The stage's output schema, when it has one.
    pub schema: Option<&'a Value>,
    pub schema_delivery: SchemaDelivery,
    /// The process passed an output limit, and why
    /// ([`crate::pipeline::ResolvedRunner::output_limit_reason`]): what it
    /// printed is never parsed, whatever it seems to contain.
    pub output_limit: Option<String>,
    /// The timeout ended the process before its result.
    pub timed_out: bool,
    pub cancelled: bool,
    /// The result arrived, then the process was ended for not exiting: the result
    /// stands, and the exit status (a signal) says nothing about it.
    pub hung_after_result: bool,
    /// The `error` of the stream's last failed assistant message
    /// (e.g. `authentication_failed`).
    pub stream_error: Option<&'a str>,
}

/// The outcome of one invocation.
#[derive(Debug, Clone, PartialEq)]
pub struct Classification {
    pub status: StageStatus,
    pub failure_reason: Option<String>,
    /// The accepted output: only on success, and only when a schema was used.
    pub structured_output: Option<Value>,
    /// The output was taken from the result text (no `--json-schema`).
    pub degraded: bool,
    pub subtype: Option<String>,
    pub is_error: Option<bool>,
    pub terminal_reason: Option<String>,
    pub num_turns: Option<u64>,
    pub total_cost_usd: Option<f64>,
    pub tokens: Option<TokenUsage>,
    pub session_id: Option<String>,
    pub api_error_status: Option<u16>,
}

pub fn classify(input: ClassifyInput<'_>) -> Classification {
    let degraded = input.schema.is_some() && input.schema_delivery == SchemaDelivery::ResultText;
    let (status, failure_reason, structured_output) = classify_end(&input);
    let envelope = input.envelope;
    Classification {
        status,
        failure_reason,
        structured_output,
        degraded,
        subtype: envelope.and_then(|e| e.subtype.clone()),
        is_error: envelope.and_then(|e| e.is_error),
        terminal_reason: envelope.and_then(|e| e.terminal_reason.clone()),
        num_turns: envelope.and_then(|e| e.num_turns),
        total_cost_usd: envelope.and_then(|e| e.total_cost_usd),
        tokens: envelope.and_then(|e| e.tokens),
        session_id: envelope.and_then(|e| e.session_id.clone()),
        api_error_status: envelope.and_then(|e| e.api_error_status),
    }
}

type Classified = (StageStatus, Option<String>, Option<Value>);

fn failed(status: StageStatus, reason: impl Into<String>) -> Classified {
    (status, Some(reason.into()), None)
}

fn classify_end(input: &ClassifyInput<'_>) -> Classified {
    if input.cancelled {
        return failed(StageStatus::Cancelled, "cancelled");
    }
    if input.timed_out {
        return failed(StageStatus::TimedOut, "timed out before a result");
    }
    if let Some(limit) = &input.output_limit {
        return failed(
            StageStatus::Failed,
            format!("{limit}; the process was stopped and its output kept unparsed"),
        );
    }
    let Some(envelope) = input.envelope else {
        return failed(
            StageStatus::Failed,
            format!(
                "{} without a result envelope",
                describe_exit(input.exit_code)
            ),
        );
    };
    let subtype = envelope.subtype.as_deref().unwrap_or("");
    let terminal_reason = envelope.terminal_reason.as_deref().unwrap_or("");
    let details = details(envelope);

    // Limits first: up to 2.1.0 they come with `is_error: false` and exit 0.
    if subtype == "error_max_turns" || terminal_reason == "max_turns" {
        return failed(
            StageStatus::MaxTurns,
            format!("reached the turn limit{details}"),
        );
    }
    if subtype == "error_max_budget_usd" || terminal_reason == "budget_exhausted" {
        return failed(
            StageStatus::BudgetExceeded,
            format!("reached the budget limit{details}"),
        );
    }
    if subtype == "error_max_structured_output_retries"
        || terminal_reason == "structured_output_retry_exhausted"
    {
        return failed(
            StageStatus::MalformedOutput,
            format!("gave up producing structured output that matches the schema{details}"),
        );
    }
    if envelope.is_error == Some(true) {
        if is_unauthenticated(envelope, input.stream_error) {
            return failed(
                StageStatus::RunnerUnavailable,
                format!("the runner is not authenticated{details}"),
            );
        }
        if terminal_reason == "prompt_too_long" {
            return failed(
                StageStatus::Failed,
                format!("the prompt is too long{details}"),
            );
        }
        let what = match envelope.api_error_status {
            Some(status) => format!("API error (HTTP {status})"),
            None if terminal_reason == "api_error" => "API error".to_owned(),
            None => "the runner reported an error".to_owned(),
        };
        return failed(StageStatus::Failed, format!("{what}{details}"));
    }
    if subtype != "success" {
        let subtype = if subtype.is_empty() { "none" } else { subtype };
        return failed(
            StageStatus::Failed,
            format!("result subtype {subtype}{details}"),
        );
    }
    if envelope.is_error != Some(false) {
        return failed(
            StageStatus::Failed,
            "the result envelope has no is_error field",
        );
    }
    if input.exit_code != Some(0) && !input.hung_after_result {
        return failed(
            StageStatus::Failed,
            format!("{} after a success result", describe_exit(input.exit_code)),
        );
    }
    let Some(schema) = input.schema else {
        return (StageStatus::Succeeded, None, None);
    };
    let output = match input.schema_delivery {
        SchemaDelivery::Flag => match &envelope.structured_output {
            Some(output) => output.clone(),
            None => {
                return failed(
                    StageStatus::MalformedOutput,
                    "the agent answered with text only: the result has no structured_output",
                )
            }
        },
        SchemaDelivery::ResultText => {
            match envelope.result.as_deref().and_then(json_from_result_text) {
                Some(output) => output,
                None => {
                    return failed(
                        StageStatus::MalformedOutput,
                        "no JSON document in the result text (whole text or a ```json block)",
                    )
                }
            }
        }
    };
    match validate_output(schema, &output) {
        Ok(()) => (StageStatus::Succeeded, None, Some(output)),
        Err(errors) => failed(
            StageStatus::MalformedOutput,
            format!(
                "the output does not match the schema: {}",
                errors.join("; ")
            ),
        ),
    }
}

fn describe_exit(exit_code: Option<i32>) -> String {
    match exit_code {
        Some(code) => format!("exited with code {code}"),
        None => "ended by a signal".to_owned(),
    }
}

/// `: <errors or result text>`, for failure reasons.
fn details(envelope: &ResultEnvelope) -> String {
    let text = if envelope.errors.is_empty() {
        envelope.result.clone().unwrap_or_default()
    } else {
        envelope.errors.join("; ")
    };
    if text.trim().is_empty() {
        String::new()
    } else {
        format!(": {}", text.trim())
    }
}

fn is_unauthenticated(envelope: &ResultEnvelope, stream_error: Option<&str>) -> bool {
    let result = envelope.result.as_deref().unwrap_or("").to_lowercase();
    envelope.api_error_status == Some(401)
        || envelope.api_error_type.as_deref() == Some("authentication_error")
        || stream_error == Some("authentication_failed")
        || result.contains("not logged in")
        || result.contains("invalid api key")
        || result.contains("authentication_failed")
}

/// Validates an output against its schema; on failure, one message per violation,
/// each prefixed with the JSON pointer of the offending value.
pub fn validate_output(schema: &Value, output: &Value) -> Result<(), Vec<String>> {
    let validator = crate::compiled_schema::validator(schema)
        .map_err(|e| vec![format!("the schema itself is invalid: {e}")])?;
    let errors: Vec<String> = validator
        .iter_errors(output)
        .map(|error| {
            let path = error.instance_path().to_string();
            if path.is_empty() {
                error.to_string()
            } else {
                format!("{path}: {error}")
            }
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}
