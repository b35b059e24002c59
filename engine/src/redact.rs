//! Replacing secrets by `<redacted>` in everything specbridge records (DESIGN §7).
//!
//! Two kinds of secret are found: values shaped like known credentials (Anthropic,
//! OpenAI, GitHub, AWS and Slack keys, bearer tokens, JWTs), and the values of
//! environment variables whose names say they hold one (KEY, TOKEN, SECRET,
//! PASSWORD, CREDENTIAL), taken from the process environment and the runner's `env`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

use regex::bytes::Regex as BytesRegex;
use regex::Regex;

pub const REDACTED: &str = "<redacted>";

/// Name fragments of environment variables whose values are secrets.
pub const SECRET_NAME_PARTS: &[&str] = &["KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL"];

/// Shorter values are left alone: `KEYBOARD=us` or `TOKEN_TTL=60` would otherwise
/// blank out ordinary words and numbers everywhere.
pub const MIN_SECRET_LEN: usize = 6;

/// Credential shapes. Each starts at a word boundary so that identifiers merely
/// containing a prefix (`task-…`) are left alone; the `Bearer` pattern keeps the
/// word and replaces only the token.
const SHAPES: &[(&str, &str)] = &[
    (r"\bsk-ant-[A-Za-z0-9_\-]{8,}", REDACTED),
    (r"\bsk-(?:proj-)?[A-Za-z0-9_\-]{20,}", REDACTED),
    (r"\b(?:ghp|gho|ghs|ghu|ghr)_[A-Za-z0-9]{20,}", REDACTED),
    (r"\bgithub_pat_[A-Za-z0-9_]{20,}", REDACTED),
    (r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", REDACTED),
    (r"\bxox[abposr]-[A-Za-z0-9\-]{10,}", REDACTED),
    (
        r"\beyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*",
        REDACTED,
    ),
    (
        r"(?i)(\bbearer\s+)[A-Za-z0-9\-._~+/]{8,}=*",
        "${1}<redacted>",
    ),
];

/// Longest line handled in one piece by [`Redactor::redact_file`]; longer lines are
/// cut at a JSON delimiter so memory stays bounded.
pub const MAX_LINE_BYTES: usize = 4 << 20;

#[derive(Debug, thiserror::Error)]
pub enum RedactError {
    #[error("failed to redact {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Built once per run; cheap to share by reference.
#[derive(Debug, Clone)]
pub struct Redactor {
    /// Known secret values, longest first so that a value containing another is
    /// replaced whole.
    literals: Vec<String>,
    literal_re: Option<Regex>,
    literal_bytes: Option<BytesRegex>,
    shapes: Vec<(Regex, &'static str)>,
    shapes_bytes: Vec<(BytesRegex, &'static str)>,
}

impl Default for Redactor {
    fn default() -> Self {
        Redactor::from_pairs(std::iter::empty::<(String, String)>())
    }
}

/// Whether an environment variable's name says it holds a secret.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAME_PARTS.iter().any(|p| upper.contains(p))
}

impl Redactor {
    /// From the process environment plus the runner's `env` map.
    pub fn from_env(runner_env: &BTreeMap<String, String>) -> Self {
        let process = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
        let extra = runner_env.iter().map(|(k, v)| (k.clone(), v.clone()));
        Redactor::from_pairs(process.chain(extra))
    }

    /// From explicit name/value pairs (the environment of a test, say).
    pub fn from_pairs<K, V>(pairs: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut literals: Vec<String> = pairs
            .into_iter()
            .filter(|(k, _)| is_secret_name(k.as_ref()))
            .map(|(_, v)| v.as_ref().to_string())
            .filter(|v| v.trim().chars().count() >= MIN_SECRET_LEN)
            .collect();
        literals.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        literals.dedup();
        let mut r = Redactor {
            literals: Vec::new(),
            literal_re: None,
            literal_bytes: None,
            shapes: SHAPES
                .iter()
                .map(|(p, w)| (Regex::new(p).expect("valid regex"), *w))
                .collect(),
            shapes_bytes: SHAPES
                .iter()
                .map(|(p, w)| (BytesRegex::new(p).expect("valid regex"), *w))
                .collect(),
        };
        r.set_literals(literals);
        r
    }

    /// Adds a value known to be secret (for instance one read from a config file).
    pub fn add_secret(&mut self, value: impl Into<String>) {
        let value = value.into();
        if value.trim().chars().count() < MIN_SECRET_LEN {
            return;
        }
        let mut literals = std::mem::take(&mut self.literals);
        literals.push(value);
        literals.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        literals.dedup();
        self.set_literals(literals);
    }

    fn set_literals(&mut self, literals: Vec<String>) {
        let pattern = literals
            .iter()
            .map(|l| regex::escape(l))
            .collect::<Vec<_>>()
            .join("|");
        self.literal_re = (!literals.is_empty()).then(|| Regex::new(&pattern).expect("escaped"));
        self.literal_bytes =
            (!literals.is_empty()).then(|| BytesRegex::new(&pattern).expect("escaped"));
        self.literals = literals;
    }

    pub fn redact_str(&self, text: &str) -> String {
        let mut out = match &self.literal_re {
            Some(re) => re.replace_all(text, REDACTED).into_owned(),
            None => text.to_string(),
        };
        for (re, with) in &self.shapes {
            if re.is_match(&out) {
                out = re.replace_all(&out, *with).into_owned();
            }
        }
        out
    }

    pub fn redact_bytes(&self, bytes: &[u8]) -> Vec<u8> {
        let mut out = match &self.literal_bytes {
            Some(re) => re.replace_all(bytes, REDACTED.as_bytes()).into_owned(),
            None => bytes.to_vec(),
        };
        for (re, with) in &self.shapes_bytes {
            if re.is_match(&out) {
                out = re.replace_all(&out, with.as_bytes()).into_owned();
            }
        }
        out
    }

    /// Every string in the document, object keys included.
    pub fn redact_json(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        match value {
            Value::String(s) => {
                let r = self.redact_str(s);
                if r != *s {
                    *s = r;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_json(v)),
            Value::Object(map) => {
                let old = std::mem::take(map);
                for (k, mut v) in old {
                    self.redact_json(&mut v);
                    map.insert(self.redact_str(&k), v);
                }
            }
            _ => {}
        }
    }

    /// Copies `src` to `dst` redacted, a line at a time, so memory stays bounded and
    /// no secret is cut in two by a read buffer.
    pub fn redact_file(&self, src: &Path, dst: &Path) -> Result<u64, RedactError> {
        let io = |path: &Path| {
            let path = path.display().to_string();
            move |source| RedactError::Io { path, source }
        };
        let input = fs_err::File::open(src).map_err(io(src))?;
        let output = fs_err::File::create(dst).map_err(io(dst))?;
        let mut writer = std::io::BufWriter::new(output);
        let n = self
            .redact_stream(input, &mut writer, MAX_LINE_BYTES)
            .map_err(io(src))?;
        writer.flush().map_err(io(dst))?;
        writer
            .into_inner()
            .map_err(|e| io(dst)(e.into_error()))?
            .sync_all()
            .map_err(io(dst))?;
        Ok(n)
    }

    /// The line-by-line loop of [`Redactor::redact_file`]; returns bytes written.
    pub fn redact_stream(
        &self,
        input: impl Read,
        mut output: impl Write,
        max_line: usize,
    ) -> std::io::Result<u64> {
        let mut reader = BufReader::new(input);
        let mut pending: Vec<u8> = Vec::new();
        let mut written = 0u64;
        loop {
            let budget = max_line.saturating_sub(pending.len()).max(1) as u64;
            let n = (&mut reader).take(budget).read_until(b'\n', &mut pending)?;
            let complete = pending.last() == Some(&b'\n');
            if n == 0 || complete {
                if !pending.is_empty() {
                    let out = self.redact_bytes(&pending);
                    output.write_all(&out)?;
                    written += out.len() as u64;
                    pending.clear();
                }
                if n == 0 {
                    return Ok(written);
                }
                continue;
            }
            if pending.len() >= max_line {
                // An overlong line: redact up to its last delimiter and carry the rest,
                // so a token is never split. Without any delimiter the cut is forced.
                let cut = last_delimiter(&pending).unwrap_or(pending.len());
                let out = self.redact_bytes(&pending[..cut]);
                output.write_all(&out)?;
                written += out.len() as u64;
                pending.drain(..cut);
            }
        }
    }
}

/// Just past the last byte that no secret contains: JSON structure first (stream
/// output is JSON lines), whitespace only when there is none, since whitespace
/// may sit inside a `Bearer …` pair.
fn last_delimiter(buf: &[u8]) -> Option<usize> {
    let structural = buf
        .iter()
        .rposition(|b| matches!(b, b'"' | b',' | b'{' | b'}' | b'[' | b']'));
    structural
        .or_else(|| buf.iter().rposition(|b| b.is_ascii_whitespace()))
        .map(|i| i + 1)
        .filter(|&i| i > 0 && i < buf.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANTHROPIC: &str = "sk-ant-api03-AbCdEf0123456789_xyzXYZ-abc";
    const OPENAI: &str = "sk-proj-Q1w2E3r4T5y6U7i8O9p0AaSsDdFf";
    const OPENAI_OLD: &str = "sk-1234567890abcdefghijklmnopqrst";
    const GITHUB: &str = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";
    const GITHUB_PAT: &str = "github_pat_11ABCDEFG0123456789_abcdefghijklmnop";
    const AWS: &str = "AKIAIOSFODNN7EXAMPLE";
    const SLACK: &str = "xoxb-123456789012-abcdefghijkl";
    const JWT: &str = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";

    fn plain() -> Redactor {
        Redactor::from_pairs(std::iter::empty::<(&str, &str)>())
    }

    #[test]
    fn redacts_each_token_shape() {
        let r = plain();
        for secret in [
            ANTHROPIC, OPENAI, OPENAI_OLD, GITHUB, GITHUB_PAT, AWS, SLACK, JWT,
        ] {
            let text = format!("value: {secret}, done");
            assert_eq!(r.redact_str(&text), "value: <redacted>, done", "{secret}");
        }
        for kind in ["gho", "ghs", "ghu"] {
            let t = format!("{kind}_abcdefghijklmnopqrstuvwxyz0123");
            assert_eq!(r.redact_str(&t), REDACTED);
        }
    }

    #[test]
    fn keeps_the_bearer_word() {
        let r = plain();
        assert_eq!(
            r.redact_str("Authorization: Bearer abc.DEF-123_456/789=="),
            "Authorization: Bearer <redacted>"
        );
        assert_eq!(
            r.redact_str("authorization: bearer 0123456789"),
            "authorization: bearer <redacted>"
        );
    }

    #[test]
    fn leaves_ordinary_text_alone() {
        let r = plain();
        for text in [
            "task-123 is done",
            "the sk- prefix",
            "risk-management-is-important-for-everyone",
            "AKIA is a prefix",
            "Bearer of bad news",
            "ghp_short",
        ] {
            assert_eq!(r.redact_str(text), text);
        }
    }

    #[test]
    fn redacts_values_of_secret_named_variables() {
        let r = Redactor::from_pairs([
            ("ANTHROPIC_API_KEY", "sk-test"),
            ("MY_PASSWORD", "hunter2hunter2"),
            ("db_credentials", "user:pa55word"),
            ("GH_TOKEN", "short"),
            ("HOME", "/home/user"),
            ("CLIENT_SECRET", "s3cr3t-value"),
        ]);
        assert_eq!(
            r.redact_str("key sk-test, pw hunter2hunter2, db user:pa55word, s3cr3t-value"),
            "key <redacted>, pw <redacted>, db <redacted>, <redacted>"
        );
        // Too short to redact safely; and not a secret name.
        assert_eq!(r.redact_str("short /home/user"), "short /home/user");
    }

    #[test]
    fn the_runner_env_map_counts_too() {
        let env = BTreeMap::from([("SERVICE_TOKEN".to_string(), "canary-0f9e8d7c".to_string())]);
        let r = Redactor::from_env(&env);
        assert_eq!(r.redact_str("got canary-0f9e8d7c!"), "got <redacted>!");
    }

    #[test]
    fn a_longer_secret_containing_a_shorter_one_is_redacted_whole() {
        let r = Redactor::from_pairs([("A_KEY", "abcdef"), ("B_KEY", "abcdefghij")]);
        assert_eq!(r.redact_str("abcdefghij abcdef"), "<redacted> <redacted>");
    }

    #[test]
    fn bytes_match_strings() {
        let r = Redactor::from_pairs([("X_SECRET", "canary-value-1")]);
        let text = format!("a {GITHUB} b canary-value-1 c Bearer tokentoken\n");
        assert_eq!(
            String::from_utf8(r.redact_bytes(text.as_bytes())).unwrap(),
            r.redact_str(&text)
        );
        // Invalid UTF-8 around a secret does not stop redaction.
        let mut raw = vec![0xff, b' '];
        raw.extend_from_slice(AWS.as_bytes());
        assert_eq!(
            r.redact_bytes(&raw),
            [&[0xff, b' '][..], REDACTED.as_bytes()].concat()
        );
    }

    #[test]
    fn redacts_json_values_and_keys() {
        let r = Redactor::from_pairs([("API_KEY", "canary-123456")]);
        let mut v = serde_json::json!({
            "result": format!("used {OPENAI}"),
            "nested": [{"t": "canary-123456"}, 3, null, true],
            "canary-123456": "key is secret",
        });
        r.redact_json(&mut v);
        assert_eq!(
            v,
            serde_json::json!({
                "result": "used <redacted>",
                "nested": [{"t": "<redacted>"}, 3, null, true],
                "<redacted>": "key is secret",
            })
        );
    }

    #[test]
    fn redacts_a_file_with_secrets_across_read_buffer_boundaries() {
        let r = Redactor::from_pairs([("CANARY_TOKEN", "canary-abcdef-012345")]);
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("raw-stdout.log");
        // BufReader reads 8 KiB at a time: put secrets across that boundary.
        let mut text = "x".repeat(8190);
        text.push_str(" canary-abcdef-012345 ");
        text.push_str(&"y".repeat(8185));
        text.push_str(&format!(
            " {JWT}\nsecond line {SLACK}\nlast line without newline {AWS}"
        ));
        std::fs::write(&src, &text).unwrap();
        let dst = dir.path().join("out.log");
        r.redact_file(&src, &dst).unwrap();
        let out = std::fs::read_to_string(&dst).unwrap();
        for secret in ["canary-abcdef-012345", JWT, SLACK, AWS] {
            assert!(!out.contains(secret), "{secret} survived");
        }
        assert_eq!(out.lines().count(), 3);
        assert!(out.ends_with("without newline <redacted>"));
    }

    #[test]
    fn overlong_lines_are_cut_between_tokens() {
        let r = Redactor::from_pairs([("X_TOKEN", "canary-abcdef-012345")]);
        let line = format!(
            r#"{{"a":"{}","b":"canary-abcdef-012345","c":"{GITHUB}","d":"{}"}}"#,
            "p".repeat(50),
            "q".repeat(70)
        ) + "\n";
        // Tokens longer than the line limit are out of scope: the limit is megabytes.
        for max_line in [48, 64, 100, 1000] {
            let mut out = Vec::new();
            r.redact_stream(line.as_bytes(), &mut out, max_line)
                .unwrap();
            let out = String::from_utf8(out).unwrap();
            assert!(
                !out.contains("canary-abcdef-012345"),
                "max_line {max_line}: {out}"
            );
            assert!(!out.contains(GITHUB), "max_line {max_line}: {out}");
            assert_eq!(out, r.redact_str(&line), "max_line {max_line}");
        }
    }

    proptest::proptest! {
        #[test]
        fn an_embedded_secret_never_survives(
            before in "[ -~]{0,40}",
            after in "[ -~]{0,40}",
            which in 0usize..8,
        ) {
            let secrets = [ANTHROPIC, OPENAI, GITHUB, GITHUB_PAT, AWS, SLACK, JWT, "canary-Zq81xw"];
            let secret = secrets[which];
            let r = Redactor::from_pairs([("CANARY_PASSWORD", "canary-Zq81xw")]);
            // Separated by spaces: a shape glued to word characters is another word.
            let text = format!("{before} {secret} {after}");
            let once = r.redact_str(&text);
            proptest::prop_assert!(!once.contains(secret));
            proptest::prop_assert_eq!(r.redact_str(&once), once.clone());
        }
    }
}
