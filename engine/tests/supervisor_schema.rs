//! `schemas/process.schema.json` is generated from `ProcessRecord`, and what the
//! supervisor writes conforms to it.

mod supervisor_common;

use std::path::PathBuf;

use specbridge_engine::supervisor::{run, CancelToken};

fn committed_schema_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../schemas/process.schema.json")
}

#[tokio::test]
async fn a_written_record_conforms_to_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = supervisor_common::sh(dir.path(), "printf 0123456789; sleep 1000");
    spec.max_stdout_bytes = 3;
    let record = run(spec, CancelToken::new(), None, |_, _| {})
        .await
        .unwrap();
    let written = serde_json::to_value(&record).unwrap();

    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(committed_schema_path()).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let problems: Vec<String> = validator
        .iter_errors(&written)
        .map(|e| e.to_string())
        .collect();
    assert!(problems.is_empty(), "{problems:#?}\n{written:#}");

    assert_eq!(written["schemaVersion"], 1);
    assert_eq!(written["limitExceeded"], "stdout");
    assert_eq!(written["signal"], "SIGTERM");
    let millis = regex::Regex::new(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$").unwrap();
    for key in ["startedAt", "endedAt"] {
        assert!(
            millis.is_match(written[key].as_str().unwrap()),
            "{key}: {}",
            written[key]
        );
    }
    let read_back: specbridge_engine::supervisor::ProcessRecord =
        serde_json::from_value(written).unwrap();
    assert_eq!(read_back, record);
}
