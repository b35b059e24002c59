//! End-to-end tests of the `specbridge` binary: one test binary, one module per area.

mod agent;
mod common;
mod doctor;
mod execute;
mod fanout;
mod init;
mod init_projects;
mod inspect;
mod real_cli;
mod replay;
mod report;
mod resume;
mod run_checks;
mod validate;
