//! Which failed invocations are worth another attempt: the API was overloaded,
//! rate-limited, failed on its side or could not be reached. The CLI retries
//! those itself first (its `system/api_retry` events); this is for when it gave up.
//!
//! Only a plain `failed` invocation is ever transient: a turn or budget limit,
//! malformed output, a missing login, a timeout or a safety violation would end
//! the same way again.

use std::sync::OnceLock;
use std::time::Duration;

use regex::Regex;

use crate::runner::claude_code::envelope::ResultEnvelope;

/// A failure that another attempt may not have.
#[derive(Debug, Clone, PartialEq)]
pub struct Transient {
    /// The `Retry-After` the error text carried, when it carried one.
    pub retry_after: Option<Duration>,
}

/// Phrases the CLI and the API use for errors on their side or on the way there.
const MARKERS: &[&str] = &[
    "overloaded",
    "rate limit",
    "rate_limit",
    "too many requests",
    "connection error",
    "connection reset",
    "econnreset",
    "econnrefused",
    "etimedout",
    "socket hang up",
    "fetch failed",
    "internal server error",
    "service unavailable",
    "bad gateway",
    "gateway timeout",
];

/// Whether an invocation that ended `failed` did so for a transient reason, from
/// its result envelope, the number of `api_retry` events in its stream, and its
/// stderr (all that is left when the CLI died without an envelope).
pub fn detect(
    envelope: Option<&ResultEnvelope>,
    api_retries: u32,
    stderr: &str,
) -> Option<Transient> {
    let text = match envelope {
        Some(e) => {
            let mut text = e.result.clone().unwrap_or_default();
            for error in &e.errors {
                text.push('\n');
                text.push_str(error);
            }
            text
        }
        None => String::new(),
    };
    let by_status = envelope
        .and_then(|e| e.api_error_status)
        .is_some_and(|s| s == 408 || s == 429 || (500..=599).contains(&s));
    let by_type = envelope
        .and_then(|e| e.api_error_type.as_deref())
        .is_some_and(|t| {
            matches!(
                t,
                "overloaded_error" | "rate_limit_error" | "api_error" | "timeout_error"
            )
        });
    // The CLI retried the API and then stopped on an API error: it gave up on a
    // transient condition.
    let gave_up = api_retries > 0
        && envelope.is_some_and(|e| e.terminal_reason.as_deref() == Some("api_error"));
    let lower = format!("{text}\n{stderr}").to_lowercase();
    let by_text = MARKERS.iter().any(|m| lower.contains(m));
    let unauthenticated = envelope.is_some_and(|e| e.api_error_status == Some(401));
    if unauthenticated || !(by_status || by_type || gave_up || by_text) {
        return None;
    }
    Some(Transient {
        retry_after: retry_after(&lower),
    })
}

/// `retry-after: 12`, `Retry-After: 12s` or `retry after 12 seconds`, capped so
/// that a hostile or mistaken value cannot park a run for hours.
fn retry_after(lower: &str) -> Option<Duration> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"retry[- _]after[\s:=]*([0-9]{1,6})(\.[0-9]+)?\s*(ms|s|sec|seconds?)?")
            .expect("a valid pattern")
    });
    let caps = re.captures(lower)?;
    let value: u64 = caps.get(1)?.as_str().parse().ok()?;
    let delay = match caps.get(3).map(|m| m.as_str()) {
        Some("ms") => Duration::from_millis(value),
        _ => Duration::from_secs(value),
    };
    Some(delay.min(MAX_RETRY_AFTER))
}

/// The longest `Retry-After` honoured.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn envelope(v: serde_json::Value) -> ResultEnvelope {
        ResultEnvelope::from_value(v).expect("an envelope")
    }

    fn api_error(status: u16, text: &str) -> ResultEnvelope {
        envelope(json!({
            "type": "result", "subtype": "success", "is_error": true,
            "api_error_status": status, "terminal_reason": "api_error", "result": text
        }))
    }

    #[test]
    fn overloaded_rate_limited_and_server_errors_are_transient() {
        for status in [429, 500, 502, 503, 529] {
            assert!(
                detect(Some(&api_error(status, "API Error")), 0, "").is_some(),
                "{status}"
            );
        }
    }

    #[test]
    fn client_errors_and_logins_are_not() {
        assert_eq!(detect(Some(&api_error(400, "bad request")), 0, ""), None);
        assert_eq!(detect(Some(&api_error(401, "overloaded")), 3, ""), None);
        let plain = envelope(json!({
            "type": "result", "subtype": "success", "is_error": true, "result": "the prompt is bad"
        }));
        assert_eq!(detect(Some(&plain), 0, ""), None);
    }

    #[test]
    fn stderr_alone_tells_a_connection_error() {
        assert!(detect(None, 0, "Error: read ECONNRESET").is_some());
        assert_eq!(detect(None, 0, "Error: unknown option --frobnicate"), None);
    }

    #[test]
    fn api_retries_followed_by_an_api_error_are_transient() {
        let e = envelope(json!({
            "type": "result", "subtype": "success", "is_error": true,
            "terminal_reason": "api_error", "result": "something went wrong"
        }));
        assert!(detect(Some(&e), 2, "").is_some());
        assert_eq!(detect(Some(&e), 0, ""), None);
    }

    #[test]
    fn retry_after_is_read_and_capped() {
        let t = detect(Some(&api_error(429, "rate limited; retry-after: 7")), 0, "").unwrap();
        assert_eq!(t.retry_after, Some(Duration::from_secs(7)));
        let t = detect(Some(&api_error(529, "Retry-After: 250ms")), 0, "").unwrap();
        assert_eq!(t.retry_after, Some(Duration::from_millis(250)));
        let t = detect(Some(&api_error(529, "retry after 999999 seconds")), 0, "").unwrap();
        assert_eq!(t.retry_after, Some(MAX_RETRY_AFTER));
        let t = detect(Some(&api_error(529, "Overloaded")), 0, "").unwrap();
        assert_eq!(t.retry_after, None);
    }
}
