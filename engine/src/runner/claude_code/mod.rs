//! The Claude Code runner.

pub mod envelope;
pub mod outcome;
pub mod record;
pub mod stream;
