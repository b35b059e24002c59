//! Token usage of agent invocations, summed per attempt, stage and run.

use std::ops::{Add, AddAssign};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Tokens one or more invocations used. Cache reads and cache creation are counted
/// apart from `input` because they are billed at other rates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    #[serde(default)]
    pub input: u64,
    #[serde(default)]
    pub output: u64,
    #[serde(default)]
    pub cache_read: u64,
    #[serde(default)]
    pub cache_creation: u64,
}

impl TokenUsage {
    /// Every token, cached or not.
    pub fn total(&self) -> u64 {
        self.input + self.output + self.cache_read + self.cache_creation
    }

    /// The usage of a result envelope. `modelUsage` (one entry per model, 2.0 and
    /// later) is summed when present: `usage` covers only the main model, so it misses
    /// what a helper model such as haiku used. `usage` is the fallback; neither
    /// (1.0.0) gives `None`.
    pub(crate) fn from_envelope(envelope: &Value) -> Option<TokenUsage> {
        let by_model = envelope
            .get("modelUsage")
            .and_then(Value::as_object)
            .filter(|models| !models.is_empty());
        if let Some(models) = by_model {
            let mut sum = TokenUsage::default();
            for model in models.values() {
                let n = |key: &str| model.get(key).and_then(Value::as_u64).unwrap_or(0);
                sum += TokenUsage {
                    input: n("inputTokens"),
                    output: n("outputTokens"),
                    cache_read: n("cacheReadInputTokens"),
                    cache_creation: n("cacheCreationInputTokens"),
                };
            }
            return Some(sum);
        }
        let usage = envelope.get("usage").and_then(Value::as_object)?;
        let n = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
        Some(TokenUsage {
            input: n("input_tokens"),
            output: n("output_tokens"),
            cache_read: n("cache_read_input_tokens"),
            cache_creation: n("cache_creation_input_tokens"),
        })
    }
}

impl AddAssign for TokenUsage {
    fn add_assign(&mut self, other: TokenUsage) {
        self.input += other.input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_creation += other.cache_creation;
    }
}

impl Add for TokenUsage {
    type Output = TokenUsage;
    fn add(mut self, other: TokenUsage) -> TokenUsage {
        self += other;
        self
    }
}

impl std::iter::Sum for TokenUsage {
    fn sum<I: Iterator<Item = TokenUsage>>(iter: I) -> TokenUsage {
        iter.fold(TokenUsage::default(), Add::add)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(name: &str) -> Value {
        let path = format!(
            "{}/../testkit/fixtures/claude-code/result-envelopes/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn model_usage_is_summed_over_models() {
        let envelope = serde_json::json!({
            "usage": {"input_tokens": 200, "output_tokens": 40},
            "modelUsage": {
                "haiku": {"inputTokens": 200, "outputTokens": 40,
                          "cacheReadInputTokens": 5, "cacheCreationInputTokens": 1},
                "sonnet": {"inputTokens": 300, "outputTokens": 60,
                           "cacheReadInputTokens": 7, "cacheCreationInputTokens": 2}
            }
        });
        assert_eq!(
            TokenUsage::from_envelope(&envelope),
            Some(TokenUsage {
                input: 500,
                output: 100,
                cache_read: 12,
                cache_creation: 3
            })
        );
    }

    #[test]
    fn captured_envelopes_of_each_generation() {
        // 2.0.50 reports haiku and sonnet in modelUsage; `usage` holds only one of them.
        assert_eq!(
            TokenUsage::from_envelope(&capture("2.0.50-success.json")),
            Some(TokenUsage {
                input: 500,
                output: 100,
                cache_read: 0,
                cache_creation: 0
            })
        );
        assert_eq!(
            TokenUsage::from_envelope(&capture("2.1.332-b-acceptedits.json")),
            Some(TokenUsage {
                input: 400,
                output: 80,
                cache_read: 0,
                cache_creation: 0
            })
        );
        assert_eq!(
            TokenUsage::from_envelope(&capture("1.0.0-success.json")),
            None
        );
    }

    #[test]
    fn usage_is_the_fallback_and_old_envelopes_have_none() {
        let envelope = serde_json::json!({
            "usage": {"input_tokens": 9, "output_tokens": 4,
                      "cache_read_input_tokens": 3, "cache_creation_input_tokens": 2},
            "modelUsage": {}
        });
        assert_eq!(
            TokenUsage::from_envelope(&envelope),
            Some(TokenUsage {
                input: 9,
                output: 4,
                cache_read: 3,
                cache_creation: 2
            })
        );
        assert_eq!(
            TokenUsage::from_envelope(&serde_json::json!({"cost_usd": 0.1})),
            None
        );
    }
}
