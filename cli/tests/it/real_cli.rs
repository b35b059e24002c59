//! Tier 3 (docs/testing.md): the `specbridge` binary driving the **real** Claude Code CLI,
//! pointed with `ANTHROPIC_BASE_URL` at the testkit's scripted model server.
//!
//! Each test proves one assumption specbridge makes about the CLI (argv, tool
//! restriction, permission rules, result envelopes, error classification, process
//! control) against the real program, so that a wrong one fails here rather than in a
//! user's repository. Without the CLI the tests skip with a message, except in CI
//! (`CI=true`), where they fail. `docs/testing.md` lists what each one pins down.

mod confinement;
mod crash;
mod detection;
mod execute;
mod generate;
mod harness;
mod observed;
mod red_to_green;
mod secrets;
mod spec_to_task;
mod verify_sandbox;
