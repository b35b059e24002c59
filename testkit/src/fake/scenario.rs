//! The behaviours the fake can be asked for, by stable name (`FAKE_CLAUDE_SCENARIO`).

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scenario {
    /// Reads a file, answers (with `structured_output` when `--json-schema` is given).
    Success,
    /// Answers with text only: with a schema, `success` without `structured_output`.
    TextOnly,
    /// `error_max_structured_output_retries`, exit 1.
    SchemaRetriesExhausted,
    /// `error_max_turns` in the shape of the impersonated version.
    MaxTurns,
    /// `error_max_turns` in the old shape: `is_error: false`, exit 0.
    MaxTurnsOld,
    /// `error_max_budget_usd`.
    Budget,
    /// HTTP 500 until the retries run out: `api_error_status: 500`, exit 1.
    Api500,
    /// Repeated 529 Overloaded: `api_error_status: 529`, exit 1.
    Api529,
    /// "Not logged in · Please run /login", exit 1; `auth status` says logged out.
    NotLoggedIn,
    /// Prints the init event, then hangs without a result.
    HangBeforeResult,
    /// Prints a whole successful transcript, then hangs instead of exiting.
    HangAfterResult,
    /// 50 MiB of stdout before the result.
    StdoutFlood,
    /// 5 MiB of stderr, then a normal success.
    StderrFlood,
    /// Lines that are not JSON, exit 2.
    Garbage,
    /// Writes a file (`FAKE_CLAUDE_WRITE=path[=content]`, default `fake-output.txt`).
    WriteFile,
    /// A Bash call the CLI refuses, then writes a file as `write-file` does.
    RefusedThenWrite,
    /// Writes a file and commits it.
    GitCommit,
    /// Appends to a protected path (`FAKE_CLAUDE_PROTECTED`, default `specbridge.yaml`).
    TouchProtected,
    /// Ignores SIGTERM and hangs.
    IgnoreSigterm,
    /// Leaves a `sleep 300` running in its process group, then succeeds.
    Grandchild,
    /// The init event offers one tool more than asked (`FAKE_CLAUDE_EXTRA_TOOL`,
    /// default `Bash`); a second later the agent writes a file (as `write-file`).
    InitExtraTool,
    /// The init event reports `acceptEdits` whatever was asked; a second later the
    /// agent writes a file (as `write-file`).
    InitModeDiffers,
    /// Runs a shell command through the Bash tool (`FAKE_CLAUDE_COMMAND`, default
    /// `touch bash-ran.txt`), then succeeds.
    RunCommand,
}

impl Scenario {
    pub const ALL: [Scenario; 23] = [
        Scenario::Success,
        Scenario::TextOnly,
        Scenario::SchemaRetriesExhausted,
        Scenario::MaxTurns,
        Scenario::MaxTurnsOld,
        Scenario::Budget,
        Scenario::Api500,
        Scenario::Api529,
        Scenario::NotLoggedIn,
        Scenario::HangBeforeResult,
        Scenario::HangAfterResult,
        Scenario::StdoutFlood,
        Scenario::StderrFlood,
        Scenario::Garbage,
        Scenario::WriteFile,
        Scenario::RefusedThenWrite,
        Scenario::GitCommit,
        Scenario::TouchProtected,
        Scenario::IgnoreSigterm,
        Scenario::Grandchild,
        Scenario::InitExtraTool,
        Scenario::InitModeDiffers,
        Scenario::RunCommand,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Scenario::Success => "success",
            Scenario::TextOnly => "text-only",
            Scenario::SchemaRetriesExhausted => "schema-retries-exhausted",
            Scenario::MaxTurns => "max-turns",
            Scenario::MaxTurnsOld => "max-turns-old",
            Scenario::Budget => "budget",
            Scenario::Api500 => "api-500",
            Scenario::Api529 => "api-529",
            Scenario::NotLoggedIn => "not-logged-in",
            Scenario::HangBeforeResult => "hang-before-result",
            Scenario::HangAfterResult => "hang-after-result",
            Scenario::StdoutFlood => "stdout-flood",
            Scenario::StderrFlood => "stderr-flood",
            Scenario::Garbage => "garbage",
            Scenario::WriteFile => "write-file",
            Scenario::RefusedThenWrite => "refused-then-write",
            Scenario::GitCommit => "git-commit",
            Scenario::TouchProtected => "touch-protected",
            Scenario::IgnoreSigterm => "ignore-sigterm",
            Scenario::Grandchild => "grandchild",
            Scenario::InitExtraTool => "init-extra-tool",
            Scenario::InitModeDiffers => "init-mode-differs",
            Scenario::RunCommand => "run-command",
        }
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Scenario {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scenario::ALL
            .into_iter()
            .find(|scenario| scenario.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Scenario::ALL.iter().map(|s| s.name()).collect();
                format!("unknown scenario '{s}' (known: {})", names.join(", "))
            })
    }
}
