//! The Claude Code sandbox around Bash commands (docs/claude-code-runner.md, "Shell inside the
//! sandbox"), turned on through specbridge's own `--settings`.
//!
//! Keys verified on 2.1.332 (docs/claude-code-runner.md): `enabled`,
//! `failIfUnavailable` (without it a missing backend runs commands unconfined),
//! `autoAllowBashIfSandboxed: false` (the sandbox never replaces the rules),
//! `allowUnsandboxedCommands: false` (no escape hatch), `filesystem.allowWrite`
//! and `network.allowedDomains`.

use serde_json::{json, Value};

use crate::pipeline::SandboxSettings;

/// What a stage that allows Bash runs under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxPlan {
    /// The sandbox, with what the pipeline added to it.
    On(SandboxSettings),
    /// `runner.sandbox: off`.
    Off,
}

impl SandboxPlan {
    /// The `--settings` JSON that turns the sandbox on; `None` when it is off.
    pub(crate) fn settings_json(&self) -> Option<Value> {
        let SandboxPlan::On(s) = self else {
            return None;
        };
        let mut sandbox = json!({
            "enabled": true,
            "failIfUnavailable": true,
            "autoAllowBashIfSandboxed": false,
            "allowUnsandboxedCommands": false,
        });
        if !s.writable_paths.is_empty() {
            sandbox["filesystem"] = json!({ "allowWrite": s.writable_paths });
        }
        if !s.allowed_domains.is_empty() {
            sandbox["network"] = json!({ "allowedDomains": s.allowed_domains });
        }
        Some(json!({ "sandbox": sandbox }))
    }
}

/// Why a relative path leaves the repository, if it does.
pub fn escapes(path: &str) -> Option<&'static str> {
    let p = path.trim();
    if p.is_empty() {
        Some("is empty")
    } else if p.starts_with('/') || p.starts_with('~') {
        Some("is absolute")
    } else if p.split(['/', '\\']).any(|c| c == "..") {
        Some("contains `..`")
    } else {
        None
    }
}

/// Folders no sandboxed command may be given write access to: each would let a
/// command change what runs next (shell start-up files, the CLI's own settings)
/// or everything at once.
const NEVER_WRITABLE: &[&str] = &[
    "~/.claude",
    "~/.ssh",
    "~/.config",
    "~/.bashrc",
    "~/.profile",
];

/// Checks one `sandbox.writablePaths` entry.
pub(crate) fn check_writable_path(path: &str) -> Result<(), String> {
    let p = path.trim();
    if !(p.starts_with('/') || p.starts_with("~/")) {
        return Err("is not absolute; the repository is writable already, so name a folder outside it (`/…` or `~/…`)".into());
    }
    if p.split('/').any(|c| c == ".." || c == ".") {
        return Err("contains `.` or `..`".into());
    }
    if p.chars()
        .any(|c| matches!(c, '*' | '?' | '[' | ']' | '{' | '}') || c.is_control())
    {
        return Err("holds a wildcard; name the folder itself".into());
    }
    let trimmed = p.trim_end_matches('/');
    let depth = trimmed
        .trim_start_matches('~')
        .split('/')
        .filter(|c| !c.is_empty())
        .count();
    if depth == 0 || (p.starts_with('/') && depth < 2) {
        return Err("covers too much; the sandbox would confine nothing".into());
    }
    if let Some(n) = NEVER_WRITABLE
        .iter()
        .find(|n| trimmed == **n || trimmed.starts_with(&format!("{n}/")))
    {
        return Err(format!("is under `{n}`, which decides what runs next"));
    }
    Ok(())
}

/// Checks one `sandbox.allowedDomains` entry: a host, an optional leading `*.`,
/// an optional `:port`.
pub(crate) fn check_domain(domain: &str) -> Result<(), String> {
    let d = domain.trim();
    let (host, port) = match d.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (d, None),
    };
    if let Some(p) = port {
        if p.parse::<u16>().map_or(true, |n| n == 0) {
            return Err("has a port that is not a number from 1 to 65535".into());
        }
    }
    let bare = host.strip_prefix("*.").unwrap_or(host);
    let labels: Vec<&str> = bare.split('.').collect();
    let label_ok = |l: &&str| {
        !l.is_empty()
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !l.starts_with('-')
    };
    if bare.is_empty() || !labels.iter().all(label_ok) {
        return Err("is not a host name".into());
    }
    if host.starts_with("*.") && labels.len() < 2 {
        return Err("allows a whole top-level domain".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writable_paths() {
        for ok in ["/tmp/build-cache", "~/.cargo/registry", "/var/cache/x/"] {
            assert_eq!(check_writable_path(ok), Ok(()), "{ok}");
        }
        for bad in [
            "target",
            "/",
            "~",
            "~/",
            "/tmp",
            "/home/../etc",
            "~/.claude",
            "~/.claude/x",
            "~/.ssh",
            "/tmp/*",
            "./x",
        ] {
            assert!(check_writable_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn domains() {
        for ok in [
            "crates.io",
            "*.npmjs.org",
            "db.example.com:5432",
            "localhost",
            "127.0.0.1:8080",
        ] {
            assert_eq!(check_domain(ok), Ok(()), "{ok}");
        }
        for bad in [
            "*", "*.com", "", "a b", "x:0", "x:99999", "http://x", "-x.com",
        ] {
            assert!(check_domain(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn settings_json_turns_everything_strict() {
        let on = SandboxPlan::On(SandboxSettings::default())
            .settings_json()
            .unwrap();
        assert_eq!(on["sandbox"]["enabled"], true);
        assert_eq!(on["sandbox"]["failIfUnavailable"], true);
        assert_eq!(on["sandbox"]["autoAllowBashIfSandboxed"], false);
        assert_eq!(on["sandbox"]["allowUnsandboxedCommands"], false);
        assert!(on["sandbox"].get("filesystem").is_none());
        assert_eq!(SandboxPlan::Off.settings_json(), None);
    }
}
