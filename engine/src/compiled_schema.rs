//! Output schemas compiled once per process. Compiling a JSON schema builds its
//! validator tree and resolves its references (about a millisecond for the first
//! schema of a process, less after), and one agent attempt needs the same schema
//! three times (checked when the stage is
//! prepared, when the result is classified, when the output is kept); a run with
//! many stages needs the same few schemas again and again. Validation (which
//! checks that a schema file compiles) and the audit (which checks kept outputs)
//! take theirs from here too.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;

/// The compiled validator of `schema`; compiled at the first call for a schema
/// with this exact text, shared afterwards. A schema that does not compile is not
/// remembered: its error (the compiler's message) is made again each time.
pub fn validator(schema: &Value) -> Result<Arc<jsonschema::Validator>, String> {
    static COMPILED: OnceLock<Mutex<HashMap<String, Arc<jsonschema::Validator>>>> = OnceLock::new();
    let key = schema.to_string();
    let compiled = COMPILED.get_or_init(Mutex::default);
    if let Some(v) = compiled.lock().expect("schema cache lock").get(&key) {
        return Ok(Arc::clone(v));
    }
    let v = Arc::new(jsonschema::validator_for(schema).map_err(|e| e.to_string())?);
    compiled
        .lock()
        .expect("schema cache lock")
        .insert(key, Arc::clone(&v));
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_same_schema_is_compiled_once_and_a_broken_one_never_cached() {
        let schema = json!({"type": "object", "required": ["a"]});
        let first = validator(&schema).unwrap();
        let again = validator(&schema).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert!(first.is_valid(&json!({"a": 1})));
        assert!(!again.is_valid(&json!({})));
        let other = validator(&json!({"type": "object", "required": ["b"]})).unwrap();
        assert!(!Arc::ptr_eq(&first, &other));
        let broken = json!({"type": 12});
        assert!(validator(&broken).is_err());
        assert!(validator(&broken).is_err());
    }
}
