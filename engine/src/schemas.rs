//! Every JSON Schema that `schemas/` holds, generated from the types that write
//! the records. One test (`engine/tests/schemas.rs`) checks that each committed file
//! equals its generated text; `SPECBRIDGE_BLESS=1` rewrites them.

use schemars::schema_for;
use serde_json::{json, Value};

use crate::store::{PlanRecord, RunRecord, StageRecord};

/// `(file name under schemas/, schema)` for every generated schema.
pub fn all() -> Vec<(&'static str, Value)> {
    let gen = |s: schemars::schema::RootSchema| serde_json::to_value(s).expect("schema is JSON");
    let mut all = vec![
        (
            "pipeline.schema.json",
            crate::pipeline::schema::pipeline_schema(),
        ),
        ("run.schema.json", gen(schema_for!(RunRecord))),
        ("stage.schema.json", gen(schema_for!(StageRecord))),
        ("plan.schema.json", gen(schema_for!(PlanRecord))),
        ("event.schema.json", event_schema()),
        (
            "process.schema.json",
            crate::supervisor::process_record_schema(),
        ),
        (
            "result.schema.json",
            serde_json::from_str(&crate::runner::claude_code::record::ResultRecord::json_schema())
                .expect("schema is JSON"),
        ),
        (
            "tool-call.schema.json",
            gen(schema_for!(
                crate::runner::claude_code::observe::ToolCallRecord
            )),
        ),
        (
            "request.schema.json",
            serde_json::from_str(
                &crate::runner::claude_code::request::RequestRecord::json_schema(),
            )
            .expect("schema is JSON"),
        ),
        (
            "doctor.schema.json",
            crate::runner::claude_code::doctor::report_schema(),
        ),
        (
            "verification.schema.json",
            gen(schema_for!(
                crate::evidence::verification::VerificationRecord
            )),
        ),
    ];
    all.extend(
        crate::evidence::record_schemas()
            .into_iter()
            .map(|(name, schema)| (name, gen(schema))),
    );
    all
}

/// The text a schema file holds: pretty JSON and a final newline.
pub fn text(schema: &Value) -> String {
    serde_json::to_string_pretty(schema).expect("schema is JSON") + "\n"
}

/// One line of `events.jsonl`. Events carry more fields by type; these four are
/// on every line.
fn event_schema() -> Value {
    json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "events.jsonl line",
        "description": "One event of a run's append-only, hash-chained log. `prev` is the sha256 (hex) of the previous line's bytes without its newline, 64 zeros for the first line.",
        "type": "object",
        "required": ["seq", "at", "type", "prev"],
        "properties": {
            "seq": { "type": "integer", "minimum": 1 },
            "at": { "type": "string", "description": "RFC 3339 UTC with milliseconds" },
            "type": { "type": "string", "examples": ["run-started", "record-written", "stage-started", "stage-retrying", "process-spawned", "stage-expanded", "stage-finished", "run-finished"] },
            "prev": { "type": "string", "pattern": "^[0-9a-f]{64}$" },
            "path": { "type": "string", "description": "record-written: the file, relative to the run folder" },
            "sha256": { "type": "string", "pattern": "^[0-9a-f]{64}$" },
            "stage": { "type": "string" },
            "attempt": { "type": "integer" },
            "status": { "type": "string" }
        },
        "additionalProperties": true
    })
}
