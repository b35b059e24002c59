//! Test-only helpers for specbridge: the fake agent CLI, the scripted model server,
//! and the captured CLI data they replay.

pub mod fake;
pub mod model_server;
