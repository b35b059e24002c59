//! Every committed schema in `schemas/` is the one generated from the code.

use std::path::Path;

use specbridge_engine::schemas;

#[test]
fn committed_schemas_equal_the_generated_ones() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas");
    let bless = std::env::var_os("SPECBRIDGE_BLESS").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for (name, schema) in schemas::all() {
        let path = dir.join(name);
        let generated = schemas::text(&schema);
        if bless {
            std::fs::write(&path, &generated).unwrap();
        }
        if std::fs::read_to_string(&path).unwrap_or_default() != generated {
            stale.push(name);
        }
        jsonschema::validator_for(&schema)
            .unwrap_or_else(|e| panic!("{name} does not compile: {e}"));
    }
    assert!(
        stale.is_empty(),
        "stale schemas {stale:?}: regenerate with SPECBRIDGE_BLESS=1 cargo test -p specbridge-engine --test schemas"
    );
}
