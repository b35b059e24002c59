//! The JSON Schema of the pipeline file, generated from the typed model so the two
//! cannot disagree. `schemas/pipeline.schema.json` is this, committed (a test keeps
//! them equal).

use std::sync::OnceLock;

use serde_json::Value;

use crate::pipeline::model::PipelineFile;

/// The schema as a JSON value.
pub fn pipeline_schema() -> Value {
    let root = schemars::schema_for!(PipelineFile);
    serde_json::to_value(root).expect("a generated schema serializes")
}

/// The schema, generated once per process.
pub(crate) fn cached() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(pipeline_schema)
}
