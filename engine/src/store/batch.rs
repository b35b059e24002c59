//! Several records written at the same time. Each goes through the one write
//! protocol of [`RunHandle`] (intent, synced bytes, rename, folder sync,
//! announcement), exactly as if written alone; only the waits overlap. The
//! syncs of records written together share the file system's journal commits,
//! so a few records cost about what one costs, which matters where an agent
//! attempt waits on them (docs/run-directory.md, "Writing rules").

use serde_json::Value;

use super::atomic::json_bytes;
use super::durable::off_the_worker;
use super::run::{Gate, RunHandle, StoreError};

/// What a record of [`RunHandle::write_all`] holds: JSON (written pretty, its
/// strings and keys redacted, like `write_json`) or bytes (redacted, like
/// `write_bytes`).
pub enum RecordBody<'a> {
    Json(Value),
    Bytes(&'a [u8]),
}

impl RunHandle {
    /// Writes independent records at once and announces each; returns each
    /// record's sha256 or error, in the order given. Records whose order matters
    /// (one names another's hash, or marks another complete) are never written
    /// together.
    pub fn write_all(
        &self,
        records: Vec<(String, RecordBody<'_>)>,
    ) -> Vec<Result<String, StoreError>> {
        off_the_worker(|| {
            std::thread::scope(|scope| {
                let writers: Vec<_> = records
                    .into_iter()
                    .map(|(rel, body)| scope.spawn(move || self.write_one(&rel, body)))
                    .collect();
                writers
                    .into_iter()
                    .map(|w| {
                        w.join()
                            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                    })
                    .collect()
            })
        })
    }

    fn write_one(&self, rel: &str, body: RecordBody<'_>) -> Result<String, StoreError> {
        let path = self.path(rel)?;
        let bytes = match body {
            RecordBody::Json(mut value) => {
                self.redactor().redact_json(&mut value);
                json_bytes(&path, &value)?
            }
            RecordBody::Bytes(bytes) => self.redactor().redact_bytes(bytes),
        };
        self.put_synced(rel, &path, &bytes, Gate::Open)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::RunStore;

    #[test]
    fn records_written_together_are_each_written_redacted_and_announced() {
        let dir = tempfile::tempdir().unwrap();
        let store = RunStore::new(dir.path());
        let mut redactor = crate::redact::Redactor::default();
        redactor.add_secret("TOKEN", "hunter2-secret-value".to_string());
        let run = store.create(redactor).unwrap();
        let results = run.write_all(vec![
            (
                "a.json".into(),
                RecordBody::Json(json!({"k": "hunter2-secret-value"})),
            ),
            (
                "b.md".into(),
                RecordBody::Bytes(b"plain hunter2-secret-value"),
            ),
            ("../escape".into(), RecordBody::Bytes(b"x")),
        ]);
        assert!(results[0].is_ok() && results[1].is_ok(), "{results:?}");
        assert!(
            results[2].is_err(),
            "a path outside the run folder is refused"
        );
        let b = std::fs::read(run.dir().join("b.md")).unwrap();
        let a = std::fs::read_to_string(run.dir().join("a.json")).unwrap();
        assert!(!a.contains("hunter2") && !String::from_utf8_lossy(&b).contains("hunter2"));
        assert_eq!(results[1].as_ref().unwrap(), &crate::store::sha256_hex(&b));
        // Each record: its intent, then its announcement, in one unbroken chain.
        let events = std::fs::read_to_string(run.dir().join("events.jsonl")).unwrap();
        for rel in ["a.json", "b.md"] {
            let kinds: Vec<_> = events
                .lines()
                .filter(|l| l.contains(&format!("\"path\":\"{rel}\"")))
                .map(|l| serde_json::from_str::<Value>(l).unwrap()["type"].clone())
                .collect();
            assert_eq!(
                kinds,
                [json!("record-intent"), json!("record-written")],
                "{events}"
            );
        }
        let chain = crate::store::verify_chain(&run.dir().join("events.jsonl")).unwrap();
        assert!(chain.problems.is_empty() && chain.torn_tail.is_none());
    }
}
