//! End-to-end tests of the `specbridge` binary: one test binary, one module per area.

mod agent;
mod common;
mod crash;
mod doctor;
mod execute;
mod fanout;
mod init;
mod real_cli;
mod repair;
mod replay;
mod resume;
mod run_checks;
mod signals;
mod validate;
