//! Reading a pipeline file: bytes → YAML → structural check against the schema →
//! typed [`PipelineFile`], keeping the exact bytes, their sha256 and every node's
//! position.

use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::diagnostic::{Diagnostic, Location};
use crate::pipeline::forbidden;
use crate::pipeline::locate::SourceIndex;
use crate::pipeline::model::PipelineFile;
use crate::pipeline::{checked_cache, schema_errors};

/// The only format version this build reads.
pub(crate) const SUPPORTED_VERSION: u64 = 1;

/// A pipeline file that parsed and matched the schema.
#[derive(Debug, Clone)]
pub struct LoadedPipeline {
    /// The file as given to [`load`].
    pub path: PathBuf,
    /// The bytes exactly as read (the run store keeps them).
    pub raw: Vec<u8>,
    /// sha256 of `raw`, lowercase hex.
    pub sha256: String,
    pub file: PipelineFile,
    /// The document as JSON, for checks that walk every value.
    pub document: Value,
    pub index: SourceIndex,
}

impl LoadedPipeline {
    /// The folder prompt and schema paths are relative to.
    pub fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }

    /// Where to point for a document path such as `stages[1].needs[0]`.
    pub(crate) fn locate(&self, path: &str) -> Option<Location> {
        self.index.nearest(path)
    }
}

/// Pipeline bytes that passed the structural check (the JSON Schema pass) in an
/// earlier process of this same specbridge version: a run that started with them.
/// That check is a function of the bytes and the version's schema alone, so
/// running it again on the same bytes proves nothing new and costs the schema's
/// compilation (the larger part of a no-op resume's time). Every other check —
/// the semantic ones, the safety scan, the files the pipeline names, which may
/// have changed since — runs as always.
#[derive(Debug, Clone)]
pub struct CheckedBefore {
    sha256: String,
}

impl CheckedBefore {
    /// Bytes with this sha256 were checked by specbridge `version`; `None` unless
    /// that is this build's version (another version's schema may differ).
    pub fn by(sha256: &str, version: &str) -> Option<Self> {
        (version == env!("CARGO_PKG_VERSION")).then(|| CheckedBefore {
            sha256: sha256.to_string(),
        })
    }

    fn vouches_for(&self, sha256: &str) -> bool {
        self.sha256 == sha256
    }
}

/// Read and parse a pipeline file. On failure, every problem found, each located.
pub fn load(path: &Path) -> Result<LoadedPipeline, Vec<Diagnostic>> {
    load_checked(path, None)
}

/// [`load`], leaving out the structural check when `checked` vouches for the
/// bytes read (the same sha256); any other bytes are checked in full.
pub fn load_checked(
    path: &Path,
    checked: Option<&CheckedBefore>,
) -> Result<LoadedPipeline, Vec<Diagnostic>> {
    match std::fs::read(path) {
        Ok(raw) => load_bytes(path, raw, checked),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(vec![Diagnostic::error(
            "file-not-found",
            path,
            "pipeline file not found",
        )
        .with_help("create one with `specbridge init`, or name another with `-f FILE`")]),
        Err(e) => Err(vec![Diagnostic::error(
            "unreadable-file",
            path,
            format!("failed to read the pipeline file: {e}"),
        )]),
    }
}

/// Parse pipeline bytes that were read from `path`.
pub(crate) fn load_bytes(
    path: &Path,
    raw: Vec<u8>,
    checked: Option<&CheckedBefore>,
) -> Result<LoadedPipeline, Vec<Diagnostic>> {
    let one = |d: Diagnostic| Err(vec![d]);
    let Ok(text) = std::str::from_utf8(&raw) else {
        return one(Diagnostic::error(
            "not-utf8",
            path,
            "the pipeline file is not UTF-8 text",
        ));
    };
    if is_blank(text) {
        return one(
            Diagnostic::error("empty-file", path, "the pipeline file is empty")
                .with_help("a pipeline needs at least `version: 1`, a `name` and `stages`; `specbridge init` writes a starter"),
        );
    }
    use super::yaml_json::Plain;
    let not_yaml = |message: &str, at: Option<Location>| {
        Diagnostic::error(
            "not-yaml",
            path,
            format!("the pipeline file is not valid YAML: {message}"),
        )
        .at(at)
    };
    let document = match super::yaml_json::plain_yaml_to_json(text) {
        Plain::Read(document) => document,
        // serde_yaml's own error at the same place, without its minutes of
        // parsing a hostile depth first (yaml_json.rs).
        Plain::TooDeep(at) => {
            let at = Location {
                line: at.line,
                column: at.column,
            };
            return one(not_yaml("recursion limit exceeded", Some(at)));
        }
        Plain::Declined => match serde_yaml::from_str::<serde_yaml::Value>(text) {
            Ok(yaml) => yaml_to_json(&yaml),
            Err(e) => return one(not_yaml(&yaml_message(&e), yaml_location(&e))),
        },
    };
    let index = SourceIndex::build(text);
    if !document.is_object() {
        return one(
            Diagnostic::error(
                "not-a-mapping",
                path,
                format!(
                    "the pipeline file must be a mapping with keys such as `version` and `stages`, found {}",
                    shape(&document)
                ),
            )
            .at(index.value("")),
        );
    }
    if let Some(v) = document.get("version").filter(|v| v.is_number()) {
        if v.as_u64() != Some(SUPPORTED_VERSION) {
            // Another version may mean another format: other messages would mislead.
            return one(Diagnostic::error(
                "unsupported-version",
                path,
                format!(
                    "unsupported version `{v}`: this specbridge reads version {SUPPORTED_VERSION}"
                ),
            )
            .at(index.value("version"))
            .with_path("version")
            .with_help("set `version: 1`, or use the specbridge release that wrote this file"));
        }
    }
    let sha256 = hex::encode(Sha256::digest(&raw));
    // The document already holds every value: reading the typed file from it
    // saves a second YAML parse. Only when that fails is the YAML read again,
    // for serde_yaml's located message (or its reading, where the two differ).
    // The structural check reads the document alone too: it runs beside the
    // typed reading, whose result is dropped unused when the check fails.
    let read_typed = || -> Option<PipelineFile> { serde::Deserialize::deserialize(&document).ok() };
    // Left out for bytes it passed before: the run being resumed vouches for
    // the file it started with, the user's cache for recent passes
    // (`checked_cache.rs`).
    let vouched =
        checked.is_some_and(|c| c.vouches_for(&sha256)) || checked_cache::vouches_for(&sha256);
    let (mut problems, typed) = if vouched {
        (Vec::new(), read_typed())
    } else {
        crate::beside::beside(|| schema_errors::check(&document, &index, path), read_typed)
    };
    if problems.is_empty() && !vouched {
        checked_cache::remember(&sha256);
    }
    if !problems.is_empty() {
        // A bypass attempt is reported even in a file that is otherwise broken.
        problems.extend(forbidden::scan(&document, &index, path));
        sort(&mut problems);
        return Err(problems);
    }
    let file: PipelineFile = match typed.map_or_else(|| serde_yaml::from_str(text), Ok) {
        Ok(f) => f,
        Err(e) => {
            return one(
                Diagnostic::error("invalid-value", path, yaml_message(&e)).at(yaml_location(&e))
            )
        }
    };
    Ok(LoadedPipeline {
        path: path.to_path_buf(),
        raw,
        sha256,
        file,
        document,
        index,
    })
}

/// Order diagnostics by where they are, unlocated ones last.
pub fn sort(diags: &mut [Diagnostic]) {
    diags.sort_by(|a, b| {
        let key = |d: &Diagnostic| (d.location.is_none(), d.location, d.message.clone());
        key(a).cmp(&key(b))
    });
}

/// Nothing but whitespace, comments and document markers.
fn is_blank(text: &str) -> bool {
    text.lines().all(|l| {
        let l = l.trim();
        l.is_empty() || l.starts_with('#') || l == "---" || l == "..."
    })
}

fn yaml_location(e: &serde_yaml::Error) -> Option<Location> {
    e.location().map(|l| Location {
        line: l.line(),
        column: l.column(),
    })
}

/// serde_yaml's message without its own `at line L column C`: the location is
/// printed in front already.
fn yaml_message(e: &serde_yaml::Error) -> String {
    use std::sync::OnceLock;
    static AT: OnceLock<regex::Regex> = OnceLock::new();
    let re =
        AT.get_or_init(|| regex::Regex::new(r" at line \d+ column \d+").expect("static regex"));
    let text = e.to_string();
    match e.location() {
        // Keep a second location (a context such as "while parsing a mapping at …").
        Some(_) => re.replacen(&text, 1, "").into_owned(),
        None => text,
    }
}

fn shape(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// The YAML value as JSON for schema validation. Keys that are not strings are
/// written as YAML would print them; tags are dropped.
pub(super) fn yaml_to_json(v: &serde_yaml::Value) -> Value {
    use serde_yaml::Value as Y;
    match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(*b),
        Y::Number(n) => {
            if let Some(i) = n.as_u64() {
                Value::from(i)
            } else if let Some(i) = n.as_i64() {
                Value::from(i)
            } else {
                n.as_f64()
                    .and_then(serde_json::Number::from_f64)
                    .map_or(Value::Null, Value::Number)
            }
        }
        Y::String(s) => Value::String(s.clone()),
        Y::Sequence(items) => Value::Array(items.iter().map(yaml_to_json).collect()),
        Y::Mapping(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let key = match k {
                        Y::String(s) => s.clone(),
                        other => serde_yaml::to_string(other)
                            .map(|s| s.trim_end().to_string())
                            .unwrap_or_default(),
                    };
                    (key, yaml_to_json(v))
                })
                .collect(),
        ),
        Y::Tagged(t) => yaml_to_json(&t.value),
    }
}

#[cfg(test)]
mod checked_before_tests {
    use super::*;

    const BROKEN: &str = "version: 1\nname: x\nstages:\n  - { id: a, kind: check, argz: [true] }\n";

    fn problems(checked: Option<&CheckedBefore>) -> Vec<String> {
        match load_bytes(Path::new("p.yaml"), BROKEN.as_bytes().to_vec(), checked) {
            Ok(_) => Vec::new(),
            Err(d) => d.into_iter().map(|d| d.code).collect(),
        }
    }

    #[test]
    fn only_the_exact_bytes_checked_by_this_version_skip_the_structural_check() {
        let sha = hex::encode(Sha256::digest(BROKEN.as_bytes()));
        let this = env!("CARGO_PKG_VERSION");
        assert!(problems(None).contains(&"unknown-key".to_string()));
        assert!(CheckedBefore::by(&sha, "0.0.0-another").is_none());
        assert!(CheckedBefore::by(&sha, &format!("{this}+x")).is_none());
        let other_bytes = CheckedBefore::by(&"0".repeat(64), this).unwrap();
        assert!(problems(Some(&other_bytes)).contains(&"unknown-key".to_string()));
        // The vouch covers these bytes: the check is left out, which is why only a
        // resume that recorded them may hold one.
        let same = CheckedBefore::by(&sha, this).unwrap();
        assert!(!problems(Some(&same)).contains(&"unknown-key".to_string()));
    }
}
