//! The committed pipeline schema is the one generated from the model, and every
//! example pipeline passes both the schema and full validation.

use std::path::{Path, PathBuf};

use specbridge_engine::pipeline::schema::pipeline_schema;
use specbridge_engine::pipeline::validate::load_and_validate;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn examples() -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(repo().join("examples"))
        .map(|rd| {
            rd.filter_map(std::result::Result::ok)
                .map(|e| e.path().join("specbridge.yaml"))
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

#[test]
fn every_example_passes_schema_and_validation() {
    let examples = examples();
    assert!(!examples.is_empty(), "no examples/*/specbridge.yaml found");
    let validator = jsonschema::validator_for(&pipeline_schema()).expect("schema compiles");
    for path in examples {
        let text = std::fs::read_to_string(&path).unwrap();
        let yaml: serde_json::Value = serde_yaml::from_str(&text).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&yaml)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{}: {errors:?}", path.display());
        // Examples are run from their own folder, which is their repository root.
        let root = path.parent().unwrap();
        if let Err(diags) = load_and_validate(&path, root) {
            let text: Vec<String> = diags.iter().map(std::string::ToString::to_string).collect();
            panic!("{} does not validate:\n{}", path.display(), text.join("\n"));
        }
    }
}
