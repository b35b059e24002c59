//! Detection of an installed Claude Code CLI: `runner doctor`, and the check made
//! once before each run (docs/claude-code-runner.md).
//!
//! Probes `--version`, then `--help`, then `auth status` only where
//! the help's command list has `auth` (older versions take `auth status` as a
//! prompt: a billed request, or an interactive UI that hangs) and only for the
//! doctor: before a run authentication is checked by the run itself. The output of `auth status` names
//! local folders and account details, so only a one-word summary leaves this module.

use std::path::Path;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::capabilities::{parse_version, Capabilities, CapabilityGap};
use super::help::HelpText;
use super::probe::{probe, resolve_executable, ProbeError, ProbeOutput};
use crate::redact::Redactor;
use crate::status::exit;

/// Each probe's time limit.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(15);

/// Overrides [`PROBE_TIMEOUT`] (milliseconds), for tests of hanging executables.
pub(crate) const PROBE_TIMEOUT_ENV: &str = "SPECBRIDGE_PROBE_TIMEOUT_MS";

pub(crate) const REPORT_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DoctorStatus {
    /// Every required flag is there and authentication is not known to be missing.
    Available,
    /// `auth status` says nobody is logged in.
    Unauthenticated,
    /// A required flag is missing; nothing would be spawned.
    Incompatible,
    /// No executable at the configured command.
    Unavailable,
    /// A probe failed or hung.
    Error,
}

impl DoctorStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DoctorStatus::Available => "available",
            DoctorStatus::Unauthenticated => "unauthenticated",
            DoctorStatus::Incompatible => "incompatible",
            DoctorStatus::Unavailable => "unavailable",
            DoctorStatus::Error => "error",
        }
    }

    /// 0 only when available; every other status means the runner cannot be used.
    pub fn exit_code(self) -> i32 {
        match self {
            DoctorStatus::Available => exit::OK,
            _ => exit::RUNNER_UNAVAILABLE,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum AuthStatus {
    Authenticated,
    Unauthenticated,
    /// `auth status` ran but its answer could not be read.
    Unknown,
    /// The version has no `auth` command, so it was not asked.
    NotChecked,
}

impl AuthStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthStatus::Authenticated => "authenticated",
            AuthStatus::Unauthenticated => "unauthenticated",
            AuthStatus::Unknown => "unknown",
            AuthStatus::NotChecked => "not-checked",
        }
    }
}

/// The result of `runner doctor` (`--json` prints it; `schemas/doctor.schema.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DoctorReport {
    pub schema_version: u32,
    pub runner: String,
    pub status: DoctorStatus,
    /// The command as given.
    pub command: String,
    /// Where the command was found.
    pub resolved_path: Option<String>,
    pub version: Option<String>,
    pub capabilities: Option<Capabilities>,
    /// Required flags that are missing (any makes the runner incompatible).
    pub missing: Vec<CapabilityGap>,
    /// Optional flags that are missing, and what each means.
    pub degraded: Vec<CapabilityGap>,
    pub auth: AuthStatus,
    pub warnings: Vec<String>,
    /// Why the status is `unavailable` or `error`.
    pub error: Option<String>,
    /// Whether stages that allow Bash can run inside the CLI's sandbox here.
    /// `None` when not checked.
    #[serde(default)]
    pub sandbox: Option<SandboxReport>,
}

/// The sandbox around Bash commands on this machine with this CLI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxReport {
    pub works: bool,
    /// Why not, with the install hint where that is the cause.
    pub problem: Option<String>,
}

impl SandboxReport {
    /// The CLI must honour the sandbox settings and the machine must run
    /// bubblewrap and socat.
    pub fn check(caps: Option<&Capabilities>, support: &crate::sandbox::SandboxSupport) -> Self {
        let problem = match caps {
            Some(c) if !c.sandbox_settings => Some(format!(
                "this Claude Code version is not known to honour the sandbox settings (verified from {}); stages that allow Bash need `runner.sandbox: off`",
                super::capabilities::SANDBOX_VERIFIED_SINCE
            )),
            _ => support.problem(true),
        };
        SandboxReport {
            works: problem.is_none(),
            problem,
        }
    }
}

impl DoctorReport {
    fn new(command: &str) -> Self {
        DoctorReport {
            schema_version: REPORT_SCHEMA_VERSION,
            runner: "claude-code".into(),
            status: DoctorStatus::Error,
            command: command.into(),
            resolved_path: None,
            version: None,
            capabilities: None,
            missing: Vec::new(),
            degraded: Vec::new(),
            auth: AuthStatus::NotChecked,
            warnings: Vec::new(),
            error: None,
            sandbox: None,
        }
    }

    pub fn exit_code(&self) -> i32 {
        self.status.exit_code()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DoctorOptions {
    pub probe_timeout: Duration,
}

impl Default for DoctorOptions {
    fn default() -> Self {
        DoctorOptions {
            probe_timeout: PROBE_TIMEOUT,
        }
    }
}

impl DoctorOptions {
    /// The defaults, with [`PROBE_TIMEOUT_ENV`] honoured when it holds a number.
    pub fn from_env() -> Self {
        let probe_timeout = std::env::var(PROBE_TIMEOUT_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map_or(PROBE_TIMEOUT, Duration::from_millis);
        DoctorOptions { probe_timeout }
    }
}

/// Probes `command` and reports what it is and whether specbridge can use it.
pub async fn diagnose(command: &str, options: &DoctorOptions) -> DoctorReport {
    diagnose_with(command, options, AuthCheck::Probe).await
}

/// Whether detection asks `auth status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthCheck {
    /// `runner doctor`: ask, where the version has the command.
    Probe,
    /// Before a run: do not ask. An invocation that fails unauthenticated is
    /// classified `runner-unavailable` (exit 3) anyway, and on a fresh `HOME` the
    /// probe itself makes the CLI's next call slower.
    Lazy,
}

/// [`diagnose`], with `auth status` asked or not.
pub async fn diagnose_with(
    command: &str,
    options: &DoctorOptions,
    auth: AuthCheck,
) -> DoctorReport {
    let mut report = DoctorReport::new(command);
    let path_var = std::env::var_os("PATH");
    let Some(program) = resolve_executable(command, path_var.as_deref()) else {
        report.status = DoctorStatus::Unavailable;
        report.error = Some(format!(
            "no executable `{command}` found{}",
            if command.contains('/') {
                ""
            } else {
                " in PATH"
            }
        ));
        return report;
    };
    report.resolved_path = Some(program.display().to_string());

    // One after the other, on purpose: with Claude Code 2.1.332 asking both at
    // once made detection slower, not faster (docs/performance.md).
    let version = probe(&program, &["--version"], options.probe_timeout).await;
    let Some(version_out) = required(&["--version"], version, &mut report) else {
        return report;
    };
    report.version = parse_version(&version_out.stdout);
    if report.version.is_none() {
        report
            .warnings
            .push("`--version` printed no version number".into());
    }

    let help = probe(&program, &["--help"], options.probe_timeout).await;
    let Some(help_out) = required(&["--help"], help, &mut report) else {
        return report;
    };
    let help = HelpText::parse(&help_out.stdout);
    let caps = Capabilities::detect(report.version.clone(), &help);
    judge_capabilities(&mut report, &caps);

    match auth {
        AuthCheck::Lazy => {}
        AuthCheck::Probe if caps.auth_command => {
            match probe(&program, &["auth", "status"], options.probe_timeout).await {
                Ok(out) => report.auth = summarise_auth(&out),
                Err(e) => {
                    report.auth = AuthStatus::Unknown;
                    report
                        .warnings
                        .push(format!("`auth status` {}", crate::error_chain(&e)));
                }
            }
        }
        AuthCheck::Probe => report.warnings.push(
            "this version has no `auth` command, so authentication was not checked; a run reports it if it is missing"
                .into(),
        ),
    }
    report.status = if !report.missing.is_empty() {
        DoctorStatus::Incompatible
    } else if report.auth == AuthStatus::Unauthenticated {
        DoctorStatus::Unauthenticated
    } else {
        DoctorStatus::Available
    };
    report.capabilities = Some(caps);
    report
}

/// What the capabilities mean for a run: the missing and degraded flags, and the
/// warning about output without stream-json. Shared by the probe and the built-in
/// detection, so that both judge a CLI alike.
fn judge_capabilities(report: &mut DoctorReport, caps: &Capabilities) {
    report.missing = caps.required_missing();
    report.degraded = caps.degraded();
    if caps.print && !caps.stream_json {
        report.warnings.push(
            "`--output-format stream-json --verbose` is not available: output falls back to json, without live progress"
                .into(),
        );
    }
}

/// The report of a CLI whose capabilities are known without asking it (see
/// [`super::known`]): `resolved` is the executable as found, `caps` the built-in
/// capabilities of its version. Authentication is not checked, as before a run.
pub(crate) fn known_report(command: &str, resolved: &Path, caps: Capabilities) -> DoctorReport {
    let mut report = DoctorReport::new(command);
    report.resolved_path = Some(resolved.display().to_string());
    report.version = caps.version.clone();
    judge_capabilities(&mut report, &caps);
    report.status = if report.missing.is_empty() {
        DoctorStatus::Available
    } else {
        DoctorStatus::Incompatible
    };
    report.capabilities = Some(caps);
    report
}

/// Judges one of the probes that must succeed; on failure fills in the report's
/// error (redacted: a failing CLI may print its environment) and returns `None`.
fn required(
    args: &[&str],
    result: Result<ProbeOutput, ProbeError>,
    report: &mut DoctorReport,
) -> Option<ProbeOutput> {
    let shown = format!("`{} {}`", report.command, args.join(" "));
    let failure = match result {
        Ok(out) if out.success() => return Some(out),
        Ok(out) => {
            let status = match out.exit_code {
                Some(code) => format!("exited with status {code}"),
                None => "was killed by a signal".to_string(),
            };
            let first = out
                .stderr
                .lines()
                .chain(out.stdout.lines())
                .map(str::trim)
                .find(|l| !l.is_empty())
                .map(|l| l.chars().take(200).collect::<String>());
            match first {
                Some(line) => format!("{shown} {status}: {line}"),
                None => format!("{shown} {status}"),
            }
        }
        Err(ProbeError::Spawn { source, .. })
            if matches!(
                source.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
            ) =>
        {
            report.status = DoctorStatus::Unavailable;
            report.error = Some(format!("{shown} could not be started: {source}"));
            return None;
        }
        Err(e) => format!("{shown} {}", crate::error_chain(&e)),
    };
    report.status = DoctorStatus::Error;
    report.error = Some(Redactor::from_process_env().redact_str(&failure));
    None
}

/// Reads `auth status` without keeping any of it: JSON with `loggedIn` from 2.1.100;
/// otherwise the exit code (0 logged in, 1 not) where the text agrees.
pub(crate) fn summarise_auth(out: &ProbeOutput) -> AuthStatus {
    if let Ok(json) = serde_json::from_str::<serde_json::Value>(out.stdout.trim()) {
        if let Some(logged_in) = json.get("loggedIn").and_then(serde_json::Value::as_bool) {
            return if logged_in {
                AuthStatus::Authenticated
            } else {
                AuthStatus::Unauthenticated
            };
        }
    }
    let text = format!("{}\n{}", out.stdout, out.stderr).to_ascii_lowercase();
    match out.exit_code {
        Some(0) if !text.contains("not logged in") => AuthStatus::Authenticated,
        Some(_) if text.contains("not logged in") => AuthStatus::Unauthenticated,
        _ => AuthStatus::Unknown,
    }
}

/// The JSON Schema of [`DoctorReport`], as committed in `schemas/doctor.schema.json`.
pub(crate) fn report_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(DoctorReport)).expect("schema serializes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::claude_code::fixtures::version_file;

    fn out(code: i32, stdout: &str) -> ProbeOutput {
        ProbeOutput {
            exit_code: Some(code),
            stdout: stdout.into(),
            stderr: String::new(),
        }
    }

    #[test]
    fn summarises_the_captured_auth_status_outputs() {
        let logged_out = version_file("2.1.332", "auth-status.txt");
        let api_key = version_file("2.1.332", "auth-status-apikey.txt");
        let old = version_file("2.1.100", "auth-status.txt");
        let text = version_file("2.1.332", "auth-status-text.txt");
        let text_key = version_file("2.1.332", "auth-status-apikey-text.txt");
        assert_eq!(
            summarise_auth(&out(1, &logged_out)),
            AuthStatus::Unauthenticated
        );
        assert_eq!(summarise_auth(&out(0, &api_key)), AuthStatus::Authenticated);
        assert_eq!(summarise_auth(&out(1, &old)), AuthStatus::Unauthenticated);
        assert_eq!(summarise_auth(&out(1, &text)), AuthStatus::Unauthenticated);
        assert_eq!(
            summarise_auth(&out(0, &text_key)),
            AuthStatus::Authenticated
        );
        assert_eq!(
            summarise_auth(&out(2, "something odd")),
            AuthStatus::Unknown
        );
    }

    #[test]
    fn exit_code_is_zero_only_when_available() {
        assert_eq!(DoctorStatus::Available.exit_code(), 0);
        for s in [
            DoctorStatus::Unauthenticated,
            DoctorStatus::Incompatible,
            DoctorStatus::Unavailable,
            DoctorStatus::Error,
        ] {
            assert_eq!(s.exit_code(), 3, "{s:?}");
        }
    }

    #[tokio::test]
    async fn a_missing_command_is_unavailable() {
        let report = diagnose("/nonexistent/claude", &DoctorOptions::default()).await;
        assert_eq!(report.status, DoctorStatus::Unavailable);
        assert!(report.error.unwrap().contains("/nonexistent/claude"));
    }
}
