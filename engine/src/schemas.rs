//! Every JSON Schema that `schemas/` holds, generated from the types that write
//! the records. One test (`engine/tests/schemas.rs`) checks that each committed file
//! equals its generated text; `SPECBRIDGE_BLESS=1` rewrites them.

use schemars::schema_for;
use serde_json::Value;

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
        ("event.schema.json", crate::events::schema::event_schema()),
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
