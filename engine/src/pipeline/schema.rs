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

/// `schemas/pipeline.schema.json` as committed, which a test holds equal to
/// [`pipeline_schema`]: the structural check reads it instead of generating
/// it, a fifth of the time (0.07 against 0.3–0.5 ms, paid by every process
/// that checks a file its user cache does not vouch for).
pub(crate) const COMMITTED: &str = include_str!("../../../schemas/pipeline.schema.json");

/// The schema the structural check uses, read once per process.
pub(crate) fn cached() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| serde_json::from_str(COMMITTED).expect("the committed schema is JSON"))
}
