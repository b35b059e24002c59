//! End-to-end tests of the `specbridge` binary: one test binary, one module per area.

mod agent;
mod common;
mod doctor;
mod execute;
mod fanout;
mod init;
mod policy_env;
mod real_cli;
mod replay;
mod resume;
mod run_checks;
mod validate;
mod validate_policy;
