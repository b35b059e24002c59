//! End-to-end tests of the `specbridge` binary: one test binary, one module per area.

mod agent;
mod common;
mod crash;
mod detection_cache;
mod doctor;
mod events;
mod execute;
mod fanout;
mod init;
mod init_projects;
mod inspect;
mod observed;
mod policy_env;
mod real_cli;
mod repair;
mod replay;
mod report;
mod resume;
mod retry;
mod run_checks;
mod sandbox;
mod secrets;
mod signals;
mod validate;
mod validate_confinement;
mod validate_policy;
