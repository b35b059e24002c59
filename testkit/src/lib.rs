//! Test-only helpers for specbridge: the fake agent CLI and the captured data it replays.

pub mod fake;
