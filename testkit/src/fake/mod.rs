//! The fake agent CLI (`fake-claude`): answers `--version`, `--help` and `auth status`
//! with the captured output of a released Claude Code version, and in print mode reads
//! the prompt from stdin and prints stream-json or json shaped like the captures.
//! Like 2.1.332, print mode gives up on a stdin that has said nothing 3 s after
//! the start ([`STDIN_WAIT`]): it warns, goes on without input and fails for
//! want of a prompt.
//!
//! Environment:
//! - `FAKE_CLAUDE_VERSION`: the version impersonated (default 2.1.332; see
//!   [`captures::VERSIONS`]). Flags its help does not list are refused as unknown.
//! - `FAKE_CLAUDE_SCENARIO`: what a print-mode run does (see [`Scenario`]).
//! - `FAKE_CLAUDE_OUTPUT`: the structured output, inline JSON or `@path`. Without it, a
//!   minimal instance of the `--json-schema` is synthesised. It is not checked against
//!   the schema, so tests can hand the engine output that breaks it.
//! - `FAKE_CLAUDE_RESULT`: the `result` text; `FAKE_CLAUDE_COST`: `total_cost_usd`.
//! - `FAKE_CLAUDE_SCRIPT`: a JSON list of steps consumed one per print-mode invocation,
//!   each a scenario name or `{"scenario", "output", "result", "cost", "write",
//!   "match"}`; an item with `match` is taken only by a prompt containing that text,
//!   and `write` (`path[=content]`) replaces `FAKE_CLAUDE_WRITE` for that item.
//! - `FAKE_CLAUDE_LOG`: a file that gets one JSON line per invocation
//!   ([`invocation_log::LoggedInvocation`]).
//! - `FAKE_CLAUDE_WRITE`, `FAKE_CLAUDE_PROTECTED`, `FAKE_CLAUDE_GRANDCHILD_PIDFILE`,
//!   `FAKE_CLAUDE_HANG_SECS`, `FAKE_CLAUDE_EXTRA_TOOL`, `FAKE_CLAUDE_COMMAND`:
//!   parameters of single scenarios.
//! - `FAKE_CLAUDE_LOGGED_OUT=1`: `auth status` reports not logged in (as it does under
//!   the `not-logged-in` scenario).

pub mod argv;
pub mod captures;
pub mod help_spec;
pub mod invocation_log;
pub mod output;
pub mod play;
pub mod scenario;
pub mod schema_instance;
pub mod script;
pub mod transcript;

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;

pub use captures::{VersionCapture, DEFAULT_VERSION};
pub use scenario::Scenario;

use argv::{tool_list, Invocation};
use help_spec::HelpSpec;
use invocation_log::LoggedInvocation;
use output::{Format, Output};
use play::Play;
use transcript::Session;

/// The exit code of a fake that was set up wrong (never one the real CLI uses).
pub const MISCONFIGURED: i32 = 99;

/// Runs the fake on this process's arguments and environment; returns the exit code.
pub fn run() -> i32 {
    STARTED.get_or_init(std::time::Instant::now);
    let args: Vec<String> = std::env::args().skip(1).collect();
    let env = |name: &str| std::env::var(name).ok();
    let version = env("FAKE_CLAUDE_VERSION").unwrap_or_else(|| DEFAULT_VERSION.to_owned());
    let Some(capture) = VersionCapture::lookup(&version) else {
        eprintln!(
            "fake-claude: no captures of version {version} (known: {})",
            captures::VERSIONS.join(", ")
        );
        return MISCONFIGURED;
    };
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let mut env_names: Vec<String> = std::env::vars_os()
        .filter_map(|(name, _)| name.into_string().ok())
        .filter(|name| invocation_log::is_recorded_env_name(name))
        .collect();
    env_names.sort();
    let mut log = Log {
        path: env("FAKE_CLAUDE_LOG").map(PathBuf::from),
        entry: LoggedInvocation {
            argv: args.clone(),
            stdin: String::new(),
            cwd: cwd.display().to_string(),
            pid: std::process::id(),
            env: env_names,
            scenario: None,
        },
        written: false,
    };
    let code = dispatch(capture, &args, cwd, &mut log);
    log.write();
    code
}

/// The invocation log entry, written once: before a scenario plays (so that hanging
/// scenarios are logged too) or when the process ends.
struct Log {
    path: Option<PathBuf>,
    entry: LoggedInvocation,
    written: bool,
}

impl Log {
    fn write(&mut self) {
        if self.written {
            return;
        }
        self.written = true;
        if let Some(path) = &self.path {
            if let Err(e) = invocation_log::append(path, &self.entry) {
                eprintln!("fake-claude: failed to append to {}: {e}", path.display());
            }
        }
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn fail(message: &str) -> i32 {
    eprintln!("{message}");
    1
}

fn print_text(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

fn dispatch(capture: VersionCapture, args: &[String], cwd: PathBuf, log: &mut Log) -> i32 {
    let env = |name: &str| std::env::var(name).ok();
    let help = HelpSpec::parse(capture.help_txt);
    let logged_out = env("FAKE_CLAUDE_LOGGED_OUT").is_some_and(|v| v == "1")
        || env("FAKE_CLAUDE_SCENARIO").is_some_and(|s| s == Scenario::NotLoggedIn.name());
    // Subcommands have options of their own (`auth status --text`).
    if let Some(command) = args.first().filter(|c| help.has_command(c)) {
        return match (command.as_str(), args.get(1).map(String::as_str)) {
            ("auth", Some("status")) => auth_status(&capture, &args[2..], logged_out),
            _ => {
                eprintln!("fake-claude: command '{}' is not emulated", args.join(" "));
                MISCONFIGURED
            }
        };
    }
    let invocation = match argv::parse(&help, args) {
        Ok(invocation) => invocation,
        Err(error) => return fail(&error.0),
    };
    if invocation.has("--version") {
        print_text(capture.version_txt);
        return 0;
    }
    if invocation.has("--help") {
        print_text(capture.help_txt);
        return 0;
    }
    let positionals: Vec<&str> = invocation.positionals.iter().map(String::as_str).collect();
    if !invocation.has("--print") {
        return interactive(&capture, &positionals, log);
    }
    print_mode(capture, &invocation, cwd, log)
}

fn auth_status(capture: &VersionCapture, options: &[String], logged_out: bool) -> i32 {
    let text_mode = options.iter().any(|o| o == "--text");
    let logged_in = !logged_out;
    let out = match (capture.auth_status_text, text_mode, logged_in) {
        (Some((_, yes)), true, true) => yes.to_owned(),
        (Some((no, _)), true, false) => no.to_owned(),
        (_, _, false) => capture.auth_status.to_owned(),
        (_, _, true) => match capture.auth_status_api_key {
            Some(text) => text.to_owned(),
            None => {
                // Versions captured only logged out: the same object, logged in by key.
                let mut status: serde_json::Value =
                    serde_json::from_str(capture.auth_status).expect("auth status is JSON");
                status["loggedIn"] = true.into();
                status["authMethod"] = "api_key".into();
                format!(
                    "{}\n",
                    serde_json::to_string_pretty(&status).expect("serialises")
                )
            }
        },
    };
    print_text(&out);
    if logged_in {
        0
    } else {
        1
    }
}

/// Without `-p` the real CLI opens its interactive UI; versions without an `auth`
/// command take `auth status` that way, as a prompt.
fn interactive(capture: &VersionCapture, positionals: &[&str], log: &mut Log) -> i32 {
    log.entry.stdin.clear();
    log.write();
    if capture.semver() < (1, 0, 30) {
        // 1.0.0 draws its UI, fails to set raw mode and hangs.
        print_text(capture.auth_status);
        return play::hang(&|name| std::env::var(name).ok());
    }
    if positionals.first() == Some(&"auth") {
        print_text(capture.auth_status);
        return 1;
    }
    eprintln!("fake-claude: the interactive mode is not emulated; use -p");
    MISCONFIGURED
}

/// When this process started: [`STDIN_WAIT`] counts from then.
static STARTED: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// How long print mode waits for its input to begin, from the CLI's start.
/// Claude Code 2.1.332 with stdin a pipe that stays silent: after 3 s it warns
/// ([`NO_STDIN_WARNING`]), goes on without input and fails for want of a
/// prompt (docs/claude-code-runner.md, "The prompt held").
pub const STDIN_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// What 2.1.332 prints on stderr when [`STDIN_WAIT`] passes without input.
pub const NO_STDIN_WARNING: &str = "Warning: no stdin data received in 3s, proceeding without it. \
If piping from a slow command, redirect stdin explicitly: < /dev/null to skip, or wait longer.";

/// Whether stdin has something to read (a byte, or its end) within `wait`.
fn stdin_ready_within(wait: std::time::Duration) -> bool {
    let mut fd = libc::pollfd {
        fd: 0,
        events: libc::POLLIN,
        revents: 0,
    };
    let millis = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX);
    loop {
        // SAFETY: one pollfd, owned here, for the length of the call.
        let n = unsafe { libc::poll(&mut fd, 1, millis) };
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        // Anything but a silent pipe (input, its end, an error) is read as before.
        return n != 0;
    }
}

fn print_mode(
    capture: VersionCapture,
    invocation: &Invocation,
    cwd: PathBuf,
    log: &mut Log,
) -> i32 {
    let mut stdin = String::new();
    if !std::io::stdin().is_terminal() {
        let started = STARTED.get_or_init(std::time::Instant::now);
        if stdin_ready_within(STDIN_WAIT.saturating_sub(started.elapsed())) {
            let mut bytes = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut bytes);
            stdin = String::from_utf8_lossy(&bytes).into_owned();
        } else {
            eprintln!("{NO_STDIN_WARNING}");
        }
    }
    log.entry.stdin = stdin.clone();
    let prompt = if stdin.trim().is_empty() {
        invocation.positionals.join(" ")
    } else {
        stdin
    };
    if prompt.trim().is_empty() {
        return fail(
            "Error: Input must be provided either through stdin or as a prompt argument when \
             using --print",
        );
    }
    let format = Format::parse(invocation.value("--output-format"));
    if format == Format::StreamJson && !invocation.has("--verbose") {
        return fail("Error: When using --print, --output-format=stream-json requires --verbose");
    }
    let session_id = match invocation.value("--session-id") {
        Some(id) => match uuid::Uuid::parse_str(id) {
            Ok(_) => id.to_owned(),
            Err(_) => return fail("Error: Invalid session ID. Must be a valid UUID."),
        },
        None => match invocation.value("--resume") {
            Some(id) if !invocation.has("--fork-session") => id.to_owned(),
            _ => uuid::Uuid::new_v4().to_string(),
        },
    };
    let schema = match invocation.value("--json-schema") {
        Some(text) => match serde_json::from_str::<serde_json::Value>(text) {
            Ok(schema) => Some(schema),
            Err(e) => return fail(&format!("Error: --json-schema is not valid JSON: {e}")),
        },
        None => None,
    };
    let bypass = invocation.has("--dangerously-skip-permissions")
        || invocation.value("--permission-mode") == Some("bypassPermissions");
    if bypass && is_root() {
        return fail(
            "--dangerously-skip-permissions cannot be used with root/sudo privileges for \
             security reasons",
        );
    }
    let max_turns = match invocation.value("--max-turns").map(str::parse::<u64>) {
        Some(Ok(n)) => Some(n),
        Some(Err(_)) => return fail("Error: --max-turns must be a positive number"),
        None => None,
    };
    let max_budget_usd = invocation
        .value("--max-budget-usd")
        .and_then(|v| v.parse().ok());

    let env = |name: &str| std::env::var(name).ok();
    let step = match script::next_step(&env, &prompt, log.path.as_deref()) {
        Ok(step) => step,
        Err(message) => {
            eprintln!("fake-claude: {message}");
            return MISCONFIGURED;
        }
    };
    log.entry.scenario = Some(step.scenario.name().to_owned());
    log.write();

    let tools = offered_tools(&capture, invocation, schema.is_some());
    let model = invocation
        .value("--model")
        .map_or_else(|| capture.default_model(), str::to_owned);
    // The real CLI reports `manual` (2.1.200+) as `default`.
    let permission_mode = match invocation.value("--permission-mode") {
        None | Some("manual") => "default",
        Some(mode) => mode,
    }
    .to_owned();
    let session = Session::new(
        capture,
        session_id,
        model,
        cwd.display().to_string(),
        tools,
        permission_mode,
    );
    Play {
        session,
        output: Output { format },
        step,
        schema,
        max_turns,
        max_budget_usd,
        cwd,
        env: Box::new(|name| std::env::var(name).ok()),
        denials: Vec::new(),
    }
    .run()
}

/// The tools a session offers: `--tools` restricts the default set (unknown names are
/// ignored), bare names in `--disallowedTools` are removed, and `--json-schema` adds
/// `StructuredOutput`. `--allowedTools` only pre-approves; it offers nothing.
pub fn offered_tools(
    capture: &VersionCapture,
    invocation: &Invocation,
    schema: bool,
) -> Vec<String> {
    let defaults = capture.default_tools();
    let mut tools = if invocation.has("--tools") {
        let named = tool_list(invocation.values("--tools"));
        if named.iter().any(|t| t == "default") {
            defaults
        } else {
            defaults.into_iter().filter(|t| named.contains(t)).collect()
        }
    } else {
        defaults
    };
    let denied = tool_list(invocation.values("--disallowedTools"));
    tools.retain(|t| !denied.contains(t));
    if schema {
        tools.push("StructuredOutput".to_owned());
    }
    tools
}
