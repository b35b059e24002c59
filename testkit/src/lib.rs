//! Test-only helpers for specbridge: the fake agent CLI, the scripted model server,
//! and the captured CLI data they replay.

pub mod fake;
pub mod model_server;

/// An error with its sources on one line, each cause once (messages never embed
/// their source). The engine's `error_chain`, which the testkit does not link.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
