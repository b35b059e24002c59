//! `RunHandle::defer_json_behind`: a record whose bytes the batch's writer
//! makes. What the scheduler relies on to queue a stage's end records without
//! serializing them on the way to the next stage.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde::ser::Error as _;
use serde_json::{json, Value};

use crate::events::{CrashRepaired, RunEvent};
use crate::redact::Redactor;
use crate::store::{RunHandle, RunStore, StoreError};

const CANARY: &str = "canary-behind-7a8b";

fn secret_run(base: &tempfile::TempDir) -> RunHandle {
    RunStore::new(base.path())
        .create(Redactor::from_pairs([("MY_TOKEN", CANARY)]))
        .unwrap()
}

fn repaired(what: &str) -> RunEvent {
    RunEvent::CrashRepaired(CrashRepaired {
        repaired: vec![what.to_string()],
    })
}

/// A value that counts how often it is serialized.
struct Counted(Arc<AtomicUsize>, Value);

impl serde::Serialize for Counted {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.fetch_add(1, Ordering::SeqCst);
        self.1.serialize(s)
    }
}

struct Unserializable;

impl serde::Serialize for Unserializable {
    fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(S::Error::custom("no JSON for this"))
    }
}

#[test]
fn a_record_made_behind_is_written_in_its_place_as_one_made_at_once() {
    let value = json!({"stage": "a", "note": format!("token {CANARY}")});
    let rel = "stages/a/stage.json";
    let (at_once_base, behind_base) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (at_once, behind) = (secret_run(&at_once_base), secret_run(&behind_base));

    at_once.defer_event(repaired("before")).unwrap();
    at_once.defer_json(rel, &value).unwrap();
    at_once.defer_event(repaired("after")).unwrap();
    at_once.flush().unwrap();

    let made = Arc::new(AtomicUsize::new(0));
    behind.defer_event(repaired("before")).unwrap();
    behind
        .defer_json_behind(rel, Counted(Arc::clone(&made), value))
        .unwrap();
    behind.defer_event(repaired("after")).unwrap();
    assert_eq!(made.load(Ordering::SeqCst), 0, "not made by the caller");
    assert!(!behind.dir().join(rel).exists());
    behind.flush().unwrap();
    assert_eq!(made.load(Ordering::SeqCst), 1, "made once, by the writer");

    assert_eq!(
        super::logged(behind.dir()),
        super::logged(at_once.dir()),
        "the same log, in the same order"
    );
    let bytes = std::fs::read(behind.dir().join(rel)).unwrap();
    assert_eq!(bytes, std::fs::read(at_once.dir().join(rel)).unwrap());
    let text = String::from_utf8_lossy(&bytes);
    assert!(
        text.contains("<redacted>") && !text.contains(CANARY),
        "{text}"
    );
    assert_eq!(behind.changed_records(), [], "announced with its sha");
}

#[test]
fn a_record_that_cannot_be_made_fails_its_batch_and_stops_the_run_s_writes() {
    let base = tempfile::tempdir().unwrap();
    let run = secret_run(&base);
    let before = super::logged(run.dir());
    run.defer_json("stages/a/stage.json", &json!({"a": 1}))
        .unwrap();
    run.defer_json_behind("stages/b/stage.json", Unserializable)
        .unwrap();

    let failed = run.flush().unwrap_err();
    assert!(
        failed.to_string().contains("stages/b/stage.json"),
        "{failed}"
    );
    assert_eq!(
        super::logged(run.dir()),
        before,
        "nothing of the batch written"
    );
    assert!(!run.dir().join("stages/a/stage.json").exists());
    assert!(run.failure().is_some());
    assert!(matches!(
        run.write_json("stages/c/stage.json", &json!({})),
        Err(StoreError::Stopped { .. })
    ));
}
