//! `secret-in-change`: a secret in the lines an agent added to the repository.
//!
//! `diff.patch` is redacted like every record, so the secret never reaches the run
//! folder; but the user's repository now holds it, which the evidence must say.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::redact::Redactor;

/// Something the evidence of an attempt shows that is not a safety violation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvidenceFinding {
    /// `secret-in-change`.
    pub code: String,
    /// Names the kind of secret, the path and the line; never the secret.
    pub message: String,
    /// The repository path the finding is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The line in the changed file (1-based), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// The pipeline allows it (`allowSecretInChange: true`): recorded, not failed.
    pub allowed: bool,
}

pub const SECRET_IN_CHANGE: &str = "secret-in-change";

/// Each kind of secret in each file's added lines of `patch`, at the first line
/// (of the changed file) it appears on.
pub fn secrets_in_change(patch: &[u8], redactor: &Redactor, allowed: bool) -> Vec<EvidenceFinding> {
    let mut findings: Vec<EvidenceFinding> = Vec::new();
    let mut path: Option<String> = None;
    let mut line: Option<u64> = None;
    for raw in patch.split(|b| *b == b'\n') {
        if let Some(rest) = raw.strip_prefix(b"diff --git ") {
            path = String::from_utf8_lossy(rest)
                .rsplit_once(" b/")
                .map(|(_, p)| p.to_string());
            line = None;
        } else if let Some(rest) = raw.strip_prefix(b"+++ ") {
            if let Some(p) = rest.strip_prefix(b"b/") {
                path = Some(String::from_utf8_lossy(p).into_owned());
            }
        } else if raw.starts_with(b"@@ ") {
            line = hunk_start(raw);
        } else if let Some(added) = raw.strip_prefix(b"+") {
            for found in redactor.find(added) {
                let known = findings.iter().any(|f| {
                    f.path == path && f.message.contains(&format!(" holds {} ", found.kind))
                });
                if !known {
                    let at = path.as_deref().unwrap_or("a changed file");
                    let where_ = line.map_or(String::new(), |l| format!(" at line {l}"));
                    findings.push(EvidenceFinding {
                        code: SECRET_IN_CHANGE.into(),
                        message: format!(
                            "the change holds {} in {at}{where_}: the repository now contains a secret; remove it and rotate the credential",
                            found.kind
                        ),
                        path: path.clone(),
                        line,
                        allowed,
                    });
                }
            }
            line = line.map(|l| l + 1);
        } else if raw.starts_with(b" ") {
            line = line.map(|l| l + 1);
        }
    }
    findings
}

/// The first line of the new side of a hunk header `@@ -a,b +c,d @@`.
fn hunk_start(header: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(header).ok()?;
    let plus = text.split_whitespace().find(|w| w.starts_with('+'))?;
    plus[1..].split(',').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_secret_is_named_with_its_file_and_line() {
        let r = Redactor::from_pairs([("MY_SECRET", "canary-diff-0001")]);
        let patch = b"diff --git a/src/a.rs b/src/a.rs\n--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1,2 +1,3 @@\n fn a() {}\n+const T: &str = \"ghp_16C7e42F292c6912E7710c838347Ae178B4a\";\n-old canary-diff-0001\n fn b() {}\ndiff --git a/new.env b/new.env\nnew file mode 100644\n--- /dev/null\n+++ b/new.env\n@@ -0,0 +1,2 @@\n+A=1\n+X=canary-diff-0001\n";
        let found = secrets_in_change(patch, &r, false);
        assert_eq!(found.len(), 2, "{found:#?}");
        assert_eq!(found[0].path.as_deref(), Some("src/a.rs"));
        assert_eq!(found[0].line, Some(2));
        assert!(found[0]
            .message
            .contains("a GitHub token in src/a.rs at line 2"));
        assert_eq!(found[1].path.as_deref(), Some("new.env"));
        assert_eq!(found[1].line, Some(2));
        assert!(found[1].message.contains("the value of $MY_SECRET"));
        for f in &found {
            assert!(!f.message.contains("canary-diff-0001") && !f.message.contains("ghp_"));
        }
    }

    #[test]
    fn removed_lines_and_clean_changes_are_no_finding() {
        let r = Redactor::from_pairs([("MY_SECRET", "canary-diff-0001")]);
        let patch =
            b"diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-canary-diff-0001\n+clean\n";
        assert!(secrets_in_change(patch, &r, false).is_empty());
    }
}
