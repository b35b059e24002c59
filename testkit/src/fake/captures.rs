//! The captured outputs of released Claude Code versions, embedded so that the fake
//! binary is self-contained.

macro_rules! fixture {
    ($path:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/claude-code/",
            $path
        ))
    };
}

/// The version the fake impersonates when `FAKE_CLAUDE_VERSION` is unset.
pub const DEFAULT_VERSION: &str = "2.1.332";

/// Every version with captures, oldest first.
pub const VERSIONS: [&str; 4] = ["1.0.0", "2.0.50", "2.1.100", "2.1.332"];

/// What one captured version printed, and the shapes of its print-mode output.
#[derive(Debug, Clone, Copy)]
pub struct VersionCapture {
    pub version: &'static str,
    pub version_txt: &'static str,
    pub help_txt: &'static str,
    /// `auth status` when not logged in (for versions without an `auth` command: what
    /// taking "auth status" as a prompt printed).
    pub auth_status: &'static str,
    /// `auth status` with `ANTHROPIC_API_KEY` set, where captured.
    pub auth_status_api_key: Option<&'static str>,
    /// `auth status --text`, not logged in and logged in, where captured.
    pub auth_status_text: Option<(&'static str, &'static str)>,
    /// A success envelope of this version, the template for every envelope it prints.
    pub success_envelope: &'static str,
    /// A stream-json transcript of this version (or the nearest captured one); its
    /// first line is the template of the `system/init` event.
    pub transcript: &'static str,
}

impl VersionCapture {
    pub fn lookup(version: &str) -> Option<VersionCapture> {
        let capture = match version {
            "1.0.0" => VersionCapture {
                version: "1.0.0",
                version_txt: fixture!("versions/1.0.0/version.txt"),
                help_txt: fixture!("versions/1.0.0/help.txt"),
                auth_status: fixture!("versions/1.0.0/auth-status.txt"),
                auth_status_api_key: None,
                auth_status_text: None,
                success_envelope: fixture!("result-envelopes/1.0.0-success.json"),
                transcript: fixture!("stream-json/1.0.30-tool-call.jsonl"),
            },
            "2.0.50" => VersionCapture {
                version: "2.0.50",
                version_txt: fixture!("versions/2.0.50/version.txt"),
                help_txt: fixture!("versions/2.0.50/help.txt"),
                auth_status: fixture!("versions/2.0.50/auth-status.txt"),
                auth_status_api_key: None,
                auth_status_text: None,
                success_envelope: fixture!("result-envelopes/2.0.50-success.json"),
                transcript: fixture!("stream-json/2.0.50-tool-call.jsonl"),
            },
            "2.1.100" => VersionCapture {
                version: "2.1.100",
                version_txt: fixture!("versions/2.1.100/version.txt"),
                help_txt: fixture!("versions/2.1.100/help.txt"),
                auth_status: fixture!("versions/2.1.100/auth-status.txt"),
                auth_status_api_key: None,
                auth_status_text: None,
                success_envelope: fixture!("result-envelopes/2.1.100-success.json"),
                transcript: fixture!("stream-json/2.1.100-tool-call.jsonl"),
            },
            "2.1.332" => VersionCapture {
                version: "2.1.332",
                version_txt: fixture!("versions/2.1.332/version.txt"),
                help_txt: fixture!("versions/2.1.332/help.txt"),
                auth_status: fixture!("versions/2.1.332/auth-status.txt"),
                auth_status_api_key: Some(fixture!("versions/2.1.332/auth-status-apikey.txt")),
                auth_status_text: Some((
                    fixture!("versions/2.1.332/auth-status-text.txt"),
                    fixture!("versions/2.1.332/auth-status-apikey-text.txt"),
                )),
                success_envelope: fixture!("result-envelopes/2.1.332-00-smoke.json"),
                transcript: fixture!("stream-json/2.1.332-tool-call.jsonl"),
            },
            _ => return None,
        };
        Some(capture)
    }

    /// `(major, minor, patch)`, for comparisons between shapes.
    pub fn semver(&self) -> (u32, u32, u32) {
        let mut parts = self.version.split('.').map(|p| p.parse().unwrap_or(0));
        (
            parts.next().unwrap_or(0),
            parts.next().unwrap_or(0),
            parts.next().unwrap_or(0),
        )
    }

    /// Up to 2.1.0, `error_max_turns` and `error_max_budget_usd` came with
    /// `is_error: false` and exit 0.
    pub fn limit_errors_look_successful(&self) -> bool {
        self.semver() <= (2, 1, 0)
    }

    /// From 2.1.200 the CLI stops right after StructuredOutput and `result` is the JSON.
    pub fn result_is_structured_json(&self) -> bool {
        self.semver() >= (2, 1, 200)
    }

    /// The tools a print-mode session offers when `--tools` does not restrict them.
    pub fn default_tools(&self) -> Vec<String> {
        let init = self.init_template();
        match init.get("tools").and_then(|t| t.as_array()) {
            Some(tools) if tools.len() > 1 => tools
                .iter()
                .filter_map(|t| t.as_str().map(str::to_owned))
                .collect(),
            // The 2.1.332 captures were all made with `--tools Read`; its default set is
            // taken to be the 2.1.100 one.
            _ => VersionCapture::lookup("2.1.100")
                .expect("2.1.100 is captured")
                .default_tools(),
        }
    }

    pub fn init_template(&self) -> serde_json::Value {
        let first = self.transcript.lines().next().unwrap_or("{}");
        serde_json::from_str(first).expect("captured init event is JSON")
    }

    pub fn envelope_template(&self) -> serde_json::Value {
        serde_json::from_str(self.success_envelope).expect("captured envelope is JSON")
    }

    /// The model named by the captured init event.
    pub fn default_model(&self) -> String {
        self.init_template()
            .get("model")
            .and_then(|m| m.as_str())
            .unwrap_or("claude-sonnet-4-6")
            .to_owned()
    }
}
