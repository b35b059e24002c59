//! The run's own records, checked after every agent attempt (docs/claude-code-runner.md): every
//! announced file must still have the sha256 it was announced with, and the event
//! log must be exactly what this process appended. An agent that touched them is a
//! safety violation at once, not a later audit finding.

use std::collections::BTreeMap;
use std::path::Path;

use crate::events::RunEvent;
use crate::store::atomic::sha256_file;
use crate::store::events::{verify_chain, EventLog};
use crate::store::layout;

/// One record that is no longer what specbridge wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordChange {
    /// Relative to the run folder.
    pub path: String,
    pub what: String,
}

impl std::fmt::Display for RecordChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the run record `{}` {}", self.path, self.what)
    }
}

/// Compares the folder with the log. The caller holds the log, so no record is
/// being written meanwhile.
pub(crate) fn changed_records(dir: &Path, log: &EventLog) -> Vec<RecordChange> {
    let events = log.path();
    let mut changes = Vec::new();
    match verify_chain(events) {
        Ok(check)
            if check.is_intact()
                && check.events == log.last_seq()
                && check.last_hash == log.head() => {}
        Ok(check) => changes.push(RecordChange {
            path: layout::EVENTS.into(),
            what: match check.problems.first() {
                Some(p) => format!("was edited (line {}: {})", p.line, p.message),
                None => format!(
                    "was edited: it holds {} events where {} were written",
                    check.events,
                    log.last_seq()
                ),
            },
        }),
        Err(e) => changes.push(RecordChange {
            path: layout::EVENTS.into(),
            what: format!("cannot be read: {}", crate::error_chain(&e)),
        }),
    }
    for (rel, sha) in announced(events) {
        let what = match sha256_file(&dir.join(&rel)) {
            Ok(now) if now == sha => continue,
            Ok(_) => "changed after specbridge wrote it".to_string(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                "was deleted after specbridge wrote it".to_string()
            }
            Err(e) => format!("cannot be read: {e}"),
        };
        changes.push(RecordChange { path: rel, what });
    }
    changes
}

/// The last announced sha256 of every record.
fn announced(events: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in crate::events::line::read_all(events) {
        if let RunEvent::RecordWritten(r) = line.event {
            out.insert(r.path, r.sha256);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::store::RunStore;

    #[test]
    fn a_changed_deleted_record_or_an_edited_log_is_named() {
        let repo = tempfile::tempdir().unwrap();
        let run = RunStore::new(repo.path())
            .create(crate::redact::Redactor::default())
            .unwrap();
        run.write_bytes("pipeline.yaml", b"name: a\n").unwrap();
        run.write_json("stages/a/stage.json", &serde_json::json!({"x": 1}))
            .unwrap();
        // Rewritten by specbridge: the last announcement counts.
        run.write_json("stages/a/stage.json", &serde_json::json!({"x": 2}))
            .unwrap();
        assert_eq!(run.changed_records(), []);

        std::fs::write(run.dir().join("pipeline.yaml"), b"name: b\n").unwrap();
        std::fs::remove_file(run.dir().join("stages/a/stage.json")).unwrap();
        let changes: Vec<String> = run
            .changed_records()
            .iter()
            .map(std::string::ToString::to_string)
            .collect();
        assert_eq!(
            changes,
            [
                "the run record `pipeline.yaml` changed after specbridge wrote it",
                "the run record `stages/a/stage.json` was deleted after specbridge wrote it",
            ]
        );

        let events = run.dir().join("events.jsonl");
        let mut text = std::fs::read_to_string(&events).unwrap();
        text.push_str("{\"seq\":99}\n");
        std::fs::write(&events, text).unwrap();
        let changes = run.changed_records();
        assert_eq!(changes[0].path, "events.jsonl", "{changes:?}");
    }
}
