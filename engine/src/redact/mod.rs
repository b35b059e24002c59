//! Replacing secrets by `<redacted>` in everything specbridge records (docs/claude-code-runner.md).
//!
//! Two kinds of secret are found: values shaped like known credentials (the table in
//! [`shapes`], shared with audit), and known values: those of environment variables
//! whose names say they hold one (KEY, TOKEN, SECRET, PASSWORD, PASSWD, CREDENTIAL,
//! AUTH), from specbridge's whole environment and every `runner.env` of the
//! pipeline, and those the pipeline names in `secrets:`.
//!
//! The run store owns the one redactor of a run and applies it to every byte it
//! writes (docs/run-directory.md); nothing else writes run records.

pub mod shapes;
mod stream;

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::bytes::Regex;

pub use shapes::{Shape, SHAPES};
pub use stream::RedactingWriter;

pub(crate) const REDACTED: &str = "<redacted>";

/// Name fragments of environment variables whose values are secrets.
pub(crate) const SECRET_NAME_PARTS: &[&str] = &[
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
];

/// Shorter values are never used as needles: `KEYBOARD=us` or `TOKEN_TTL=3600`
/// would otherwise blank out ordinary words and numbers everywhere. A secret that
/// short is not protected by redaction (docs/pipeline-format.md says so).
pub(crate) const MIN_SECRET_LEN: usize = 8;

/// Each shape on its own, for the replacement and for naming what was found.
/// Compiled at the first text that [`BOUNDARY_RE`] says may hold a secret: most
/// runs never need them.
static SHAPE_RES: LazyLock<Vec<(Regex, &'static Shape)>> = LazyLock::new(|| {
    SHAPES
        .iter()
        .map(|s| (Regex::new(&s.compiled_pattern()).expect("valid shape"), s))
        .collect()
});

/// Everything a cut of a stream must not fall inside: each shape that stays on
/// one line, and the private-key block's header and footer (the block itself is
/// followed by the stream writer's state).
///
/// Where it finds nothing, no shape matches either (each shape is one of its
/// alternatives, and a private key starts with the header), so it is also the
/// one scan of a text that holds no secret: the shapes one by one are tried
/// only where it finds something.
static BOUNDARY_RE: LazyLock<Regex> = LazyLock::new(|| {
    let mut parts: Vec<String> = SHAPES
        .iter()
        .filter(|s| s.name != "private-key")
        .map(|s| format!("(?:{})", s.anonymous_pattern()))
        .collect();
    parts.push(format!("(?:{})", shapes::PEM_BEGIN));
    parts.push(format!("(?:{})", shapes::PEM_END));
    Regex::new(&parts.join("|")).expect("valid shapes")
});

/// Compiles the pattern every redaction starts with on a thread of its own. A
/// run calls it before its first record, which is redacted, and would otherwise
/// wait about 1.5 ms for the compilation on the path of every run's start.
pub fn warm_up() {
    crate::beside::force_aside("specbridge-redact", &BOUNDARY_RE);
}

/// Whether some shape may match in `bytes` ([`BOUNDARY_RE`]).
fn may_hold_a_shape(bytes: &[u8]) -> bool {
    BOUNDARY_RE.is_match(bytes)
}

/// Every shape replaced in turn, keeping what a shape marks as not secret.
fn replace_shapes(mut out: Vec<u8>) -> Vec<u8> {
    for (re, _) in SHAPE_RES.iter() {
        if re.is_match(&out) {
            out = re
                .replace_all(&out, |caps: &regex::bytes::Captures<'_>| {
                    // `keep` holds the escape when both matched.
                    let kept = caps.name("keep").or_else(|| caps.name("esc"));
                    let mut with = kept.map_or_else(Vec::new, |m| m.as_bytes().to_vec());
                    with.extend_from_slice(REDACTED.as_bytes());
                    with
                })
                .into_owned();
        }
    }
    out
}

/// A known secret value and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Literal {
    value: String,
    /// The environment variable it was read from.
    name: String,
}

/// One kind of secret found in a text, where it first appears.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// `a GitHub token`, or `the value of $MY_SECRET` — never the secret.
    pub kind: String,
    /// 1-based line of the first occurrence.
    pub line: u64,
}

/// Built once per run and owned by the run store; cheap to share by reference.
#[derive(Debug, Clone)]
pub struct Redactor {
    /// Known secret values, longest first so that a value containing another is
    /// replaced whole.
    literals: Vec<Literal>,
    literal_re: Option<Regex>,
}

impl Default for Redactor {
    /// Shapes only, no known values.
    fn default() -> Self {
        Redactor::from_pairs(std::iter::empty::<(String, String)>())
    }
}

/// Whether an environment variable's name says it holds a secret. `AUTH` counts
/// except as part of `AUTHOR` (`GIT_AUTHOR_NAME`); `AUTHORIZATION` counts.
pub(crate) fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAME_PARTS.iter().any(|part| {
        upper.match_indices(part).any(|(at, _)| {
            if *part != "AUTH" {
                return true;
            }
            let rest = &upper[at + part.len()..];
            !rest.starts_with("OR") || rest.starts_with("ORIZ")
        })
    })
}

impl Redactor {
    /// The redactor of a run of `file`: specbridge's whole environment, the `env`
    /// of the pipeline's runner and of every stage's runner, and the variables the
    /// pipeline declares in `secrets:` (whatever their names).
    pub fn for_pipeline(file: &crate::pipeline::PipelineFile) -> Self {
        let mut runner_env: BTreeMap<String, String> = file.runner.env.clone().unwrap_or_default();
        for stage in &file.stages {
            if let Some(more) = stage.runner.as_ref().and_then(|r| r.env.as_ref()) {
                runner_env.extend(more.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
        }
        let process: Vec<(String, String)> = process_env().collect();
        let mut r = Redactor::from_pairs(process.iter().cloned().chain(runner_env.clone()));
        for name in &file.secrets {
            let values = process
                .iter()
                .filter(|(k, _)| k == name)
                .map(|(_, v)| v)
                .chain(runner_env.get(name));
            for value in values {
                r.add_secret(name, value.clone());
            }
        }
        r
    }

    /// From specbridge's own environment only (for output outside a run).
    pub fn from_process_env() -> Self {
        Redactor::from_pairs(process_env())
    }

    /// From explicit name/value pairs (the environment of a test, say).
    pub(crate) fn from_pairs<K, V>(pairs: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut r = Redactor {
            literals: Vec::new(),
            literal_re: None,
        };
        let found: Vec<(String, String)> = pairs
            .into_iter()
            .filter(|(k, _)| is_secret_name(k.as_ref()))
            .map(|(k, v)| (k.as_ref().to_string(), v.as_ref().to_string()))
            .collect();
        r.add_all(found);
        r
    }

    /// Adds a value known to be secret, read from the variable `name`.
    pub(crate) fn add_secret(&mut self, name: &str, value: impl Into<String>) {
        self.add_all(vec![(name.to_string(), value.into())]);
    }

    fn add_all(&mut self, pairs: Vec<(String, String)>) {
        for (name, value) in pairs {
            // A value over several lines (a key in a variable) is also looked for a
            // line at a time: a log is redacted as it streams, a line at a time.
            let lines: Vec<String> = if value.contains('\n') {
                value.lines().map(str::to_string).collect()
            } else {
                Vec::new()
            };
            for v in std::iter::once(value).chain(lines) {
                if v.trim().chars().count() >= MIN_SECRET_LEN {
                    self.literals.push(Literal {
                        value: v,
                        name: name.clone(),
                    });
                }
            }
        }
        self.literals.sort_by(|a, b| {
            b.value
                .len()
                .cmp(&a.value.len())
                .then_with(|| a.value.cmp(&b.value))
        });
        self.literals.dedup_by(|a, b| a.value == b.value);
        let pattern = self
            .literals
            .iter()
            .map(|l| regex::escape(&l.value))
            .collect::<Vec<_>>()
            .join("|");
        self.literal_re =
            (!self.literals.is_empty()).then(|| Regex::new(&pattern).expect("escaped literals"));
    }

    /// The longest known value, in bytes (what a stream must keep back).
    pub(crate) fn longest_literal(&self) -> usize {
        self.literals.first().map_or(0, |l| l.value.len())
    }

    pub fn redact_bytes(&self, bytes: &[u8]) -> Vec<u8> {
        let out = self.replace_literals(bytes);
        if !may_hold_a_shape(&out) {
            return out;
        }
        replace_shapes(out)
    }

    /// Every known secret value replaced.
    fn replace_literals(&self, bytes: &[u8]) -> Vec<u8> {
        match &self.literal_re {
            Some(re) => re.replace_all(bytes, REDACTED.as_bytes()).into_owned(),
            None => bytes.to_vec(),
        }
    }

    pub fn redact_str(&self, text: &str) -> String {
        match String::from_utf8(self.redact_bytes(text.as_bytes())) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        }
    }

    /// Every string in the document, object keys included.
    pub(crate) fn redact_json(&self, value: &mut serde_json::Value) {
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

    /// Each kind of secret in `bytes` with the line it first appears on, in order
    /// of appearance. Names what was found, never the value.
    pub fn find(&self, bytes: &[u8]) -> Vec<Found> {
        let mut hits: Vec<(usize, String)> = Vec::new();
        if let Some(re) = &self.literal_re {
            for m in re.find_iter(bytes) {
                let name = self
                    .literals
                    .iter()
                    .find(|l| l.value.as_bytes() == m.as_bytes())
                    .map_or("a secret", |l| l.name.as_str());
                hits.push((m.start(), format!("the value of ${name}")));
            }
        }
        if may_hold_a_shape(bytes) {
            for (re, shape) in SHAPE_RES.iter() {
                if let Some(m) = re.find(bytes) {
                    hits.push((m.start(), shape.label.to_string()));
                }
            }
        }
        hits.sort();
        let mut found: Vec<Found> = Vec::new();
        for (at, kind) in hits {
            if found.iter().all(|f| f.kind != kind) {
                let line = 1 + bytes[..at].iter().filter(|b| **b == b'\n').count() as u64;
                found.push(Found { kind, line });
            }
        }
        found
    }

    /// Byte ranges of `bytes` that a cut must not fall inside (see
    /// [`RedactingWriter`]).
    pub(crate) fn boundary_spans(&self, bytes: &[u8]) -> Vec<(usize, usize)> {
        let mut spans: Vec<(usize, usize)> = BOUNDARY_RE
            .find_iter(bytes)
            .map(|m| (m.start(), m.end()))
            .collect();
        if let Some(re) = &self.literal_re {
            spans.extend(re.find_iter(bytes).map(|m| (m.start(), m.end())));
        }
        spans
    }
}

fn process_env() -> impl Iterator<Item = (String, String)> {
    std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
}

#[cfg(test)]
mod tests;
