//! Error messages name what failed; their causes come from `source()`, and the
//! one-line chain (`error_chain`) prints each cause once. Real failures, not
//! hand-built errors: a message that embedded its source would print it twice.

use std::error::Error;
use std::path::Path;

use specbridge_engine::error_chain;
use specbridge_engine::evidence::GitSnapshot;
use specbridge_engine::redact::Redactor;
use specbridge_engine::store::{verify_chain, RunStore};

/// Every message of `e`'s chain leaves out the text of its source, and the chain
/// holds each cause's text once.
fn assert_each_cause_once(e: &dyn Error) {
    let mut cur: Option<&dyn Error> = Some(e);
    let mut depth = 0;
    while let Some(err) = cur {
        if let Some(source) = err.source() {
            let (own, cause) = (err.to_string(), source.to_string());
            assert!(
                !own.contains(&cause),
                "`{own}` embeds its source `{cause}`, which the chain prints again"
            );
            depth += 1;
        }
        cur = err.source();
    }
    assert!(depth > 0, "`{e}` has no source: the test proves nothing");
    let chain = error_chain(e);
    let mut cur = e.source();
    while let Some(c) = cur {
        let text = c.to_string();
        assert_eq!(chain.matches(&text).count(), 1, "`{text}` in `{chain}`");
        cur = c.source();
    }
}

#[test]
fn a_run_folder_that_cannot_be_created() {
    let dir = tempfile::tempdir().unwrap();
    // `.specbridge` is a file: the runs folder cannot be made under it.
    std::fs::write(dir.path().join(".specbridge"), "").unwrap();
    let Err(e) = RunStore::new(dir.path()).create(Redactor::default()) else {
        panic!("the run folder was created under a file");
    };
    assert!(error_chain(&e).starts_with("failed to create run folder"));
    assert_each_cause_once(&e);
}

#[test]
fn an_event_log_that_cannot_be_read() {
    let dir = tempfile::tempdir().unwrap();
    let e = verify_chain(&dir.path().join("missing").join("events.jsonl")).unwrap_err();
    assert_each_cause_once(&e);
}

#[test]
fn a_record_that_cannot_be_written() {
    let dir = tempfile::tempdir().unwrap();
    let run = RunStore::new(dir.path())
        .create(Redactor::default())
        .unwrap();
    // A folder where the record would go: the rename onto it fails.
    std::fs::create_dir_all(run.dir().join("stages/a/record.json/inner")).unwrap();
    let e = run
        .write_json("stages/a/record.json", &serde_json::json!({}))
        .unwrap_err();
    assert!(error_chain(&e).contains("failed to write"), "{e}");
    assert_each_cause_once(&e);
}

#[test]
fn git_that_cannot_run_where_asked() {
    let e = GitSnapshot::take(Path::new("/nonexistent/specbridge/repository")).unwrap_err();
    assert_each_cause_once(&e);
}
