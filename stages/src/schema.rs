//! The output schema of an agent stage: `builtin:NAME` (embedded in the engine) or a
//! JSON Schema file relative to the pipeline file's folder.

use std::path::{Path, PathBuf};

use serde_json::Value;
use specbridge_engine::builtin_schemas;
use specbridge_engine::pipeline::{StageDef, StageKind};

/// What execute stages without `output` report with.
pub(crate) const EXECUTE_DEFAULT: &str = "builtin:task-result";

/// A schema as used by one stage: what the pipeline named, its exact bytes (hashed
/// into the stage's input hash) and its parsed form.
#[derive(Debug, Clone, PartialEq)]
pub struct StageSchema {
    pub name: String,
    pub bytes: Vec<u8>,
    pub value: Value,
}

#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("failed to find built-in schema `{0}` (the built-in schemas are builtin:document, builtin:tasks, builtin:task-result)")]
    UnknownBuiltin(String),
    #[error("failed to read schema file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to parse schema `{name}` as JSON")]
    Parse {
        name: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("failed to use schema `{name}`: it is not a valid JSON Schema: {message}")]
    Invalid { name: String, message: String },
}

/// Loads the schema named `name`.
pub fn load(name: &str, pipeline_dir: &Path) -> Result<StageSchema, SchemaError> {
    let bytes = match name.strip_prefix(builtin_schemas::PREFIX) {
        Some(builtin) => builtin_schemas::builtin(builtin)
            .ok_or_else(|| SchemaError::UnknownBuiltin(name.to_string()))?
            .as_bytes()
            .to_vec(),
        None => {
            let path = pipeline_dir.join(name);
            std::fs::read(&path).map_err(|source| SchemaError::Read { path, source })?
        }
    };
    let value: Value = serde_json::from_slice(&bytes).map_err(|source| SchemaError::Parse {
        name: name.to_string(),
        source,
    })?;
    // A schema file is compiled here, so that one that does not compile stops
    // the stage before anything is spawned. A built-in one compiles (an engine
    // test holds every one to it), so it is left for the agent's time
    // ([`StageSchema::compile_beside`]): compiling it and the meta-schema it
    // is checked against is about a millisecond of CPU that an agent's spawn
    // would wait for.
    if !name.starts_with(builtin_schemas::PREFIX) {
        specbridge_engine::compiled_schema::validator(&value).map_err(|message| {
            SchemaError::Invalid {
                name: name.to_string(),
                message,
            }
        })?;
    }
    Ok(StageSchema {
        name: name.to_string(),
        bytes,
        value,
    })
}

impl StageSchema {
    /// Compiles the schema into the process's cache on a thread of its own, for
    /// the output to be checked with when the agent ends; started as the agent
    /// is, whose run it hides in, and at the lower priority of all such work
    /// (about 1.8 ms of CPU that the CLI's busy start would otherwise share).
    /// Compiled already, or with no thread to be had, it is compiled when first
    /// needed.
    pub(crate) fn compile_beside(&self) {
        let value = self.value.clone();
        let _ = specbridge_engine::beside::spawn_beside_agent("specbridge-schema", move || {
            let _ = specbridge_engine::compiled_schema::validator(&value);
        });
    }
}

/// The schema name a stage uses: its `output.schema`; for execute stages without
/// one, `builtin:task-result`; none for check stages.
pub(crate) fn name_for(stage: &StageDef) -> Option<&str> {
    match (&stage.output, stage.kind) {
        (_, StageKind::Check) => None,
        (Some(out), _) => Some(out.schema.as_str()),
        (None, StageKind::Execute) => Some(EXECUTE_DEFAULT),
        (None, StageKind::Generate) => None,
    }
}

/// Loads the schema a stage uses, if it has one.
pub(crate) fn for_stage(
    stage: &StageDef,
    pipeline_dir: &Path,
) -> Result<Option<StageSchema>, SchemaError> {
    name_for(stage).map(|n| load(n, pipeline_dir)).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_and_files_load_and_bad_ones_say_why() {
        let dir = tempfile::tempdir().unwrap();
        let doc = load("builtin:document", dir.path()).unwrap();
        assert_eq!(
            doc.value["required"],
            serde_json::json!(["summary", "markdown"])
        );
        std::fs::write(dir.path().join("s.json"), r#"{"type":"object"}"#).unwrap();
        assert_eq!(
            load("s.json", dir.path()).unwrap().bytes,
            br#"{"type":"object"}"#
        );
        std::fs::write(dir.path().join("bad.json"), "{").unwrap();
        std::fs::write(dir.path().join("notschema.json"), r#"{"type": 3}"#).unwrap();
        for (name, wanted) in [
            (
                "builtin:nope",
                "failed to find built-in schema `builtin:nope`",
            ),
            ("missing.json", "failed to read schema file"),
            ("bad.json", "failed to parse schema `bad.json`"),
            ("notschema.json", "not a valid JSON Schema"),
        ] {
            let e = load(name, dir.path()).unwrap_err().to_string();
            assert!(e.contains(wanted), "{name}: {e}");
        }
    }
}
