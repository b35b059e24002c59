use serde_json::{json, Value};

use super::*;
use crate::redact::Redactor;
use crate::store::layout::attempt;
use crate::store::{RunHandle, RunStore};

/// A run written through the writer: the reader must find what it wrote where
/// the writer put it.
fn recorded_run(store: &RunStore) -> RunHandle {
    let run = store.create(Redactor::default()).unwrap();
    for (id, attempts) in [("spec", 2u32), ("impl.t-1", 1)] {
        run.write_json(
            &layout::stage_record_rel(id),
            &json!({
                "stageId": id, "kind": "generate", "status": "succeeded",
                "attempts": attempts, "needs": []
            }),
        )
        .unwrap();
        for n in 1..=attempts {
            let rel = layout::attempt_rel(id, n);
            run.write_json(
                &layout::in_attempt(&rel, attempt::RESULT),
                &json!({ "n": n }),
            )
            .unwrap();
        }
    }
    run.write_json(&layout::output_rel("spec"), &json!({ "doc": "x" }))
        .unwrap();
    run.write_json(
        layout::PLAN,
        &json!({ "schemaVersion": 1, "nodes": [
            { "id": "spec", "kind": "generate", "needs": [] },
            { "id": "impl.t-1", "kind": "execute", "needs": ["spec"] },
        ] }),
    )
    .unwrap();
    run
}

#[test]
fn reads_back_what_the_writer_wrote() {
    let repo = tempfile::tempdir().unwrap();
    let store = RunStore::new(repo.path());
    let run = recorded_run(&store);
    let reader = store.reader("latest").unwrap();
    assert_eq!(reader.id(), run.id());
    assert_eq!(reader.stage_ids().unwrap(), ["impl.t-1", "spec"]);
    assert_eq!(reader.attempt_numbers("spec").unwrap(), [1, 2]);
    let second = reader.attempt("spec", 2);
    assert_eq!(second.rel(), "stages/spec/attempt-002");
    assert_eq!(
        second.json::<Value>(attempt::RESULT).unwrap(),
        json!({ "n": 2 })
    );
    assert!(second.json_opt::<Value>(attempt::PROCESS).is_none());
    assert!(!reader.attempt("spec", 3).exists());
    assert!(reader.output_bytes("spec").unwrap().is_some());
    assert!(reader.output_bytes("impl.t-1").unwrap().is_none());
    assert_eq!(
        shown_order(&reader),
        ["spec", "impl.t-1"],
        "plan order, not id order"
    );
    assert_eq!(reader.stage_records().unwrap().len(), 2);
    assert!(reader.plan().unwrap().is_some());
}

#[test]
fn missing_folders_are_empty_not_errors() {
    let repo = tempfile::tempdir().unwrap();
    let store = RunStore::new(repo.path());
    let run = store.create(Redactor::default()).unwrap();
    let reader = RunReader::at(run.dir());
    assert_eq!(reader.id(), run.id());
    assert!(reader.stage_ids().unwrap().is_empty());
    assert!(reader.attempt_numbers("spec").unwrap().is_empty());
    assert!(reader.stage("spec").unwrap().is_none());
    assert!(reader.plan().unwrap().is_none());
    assert!(reader.stages_in_plan_order().unwrap().is_empty());
    let e = reader.run().unwrap_err();
    assert!(
        matches!(&e, StoreError::Read { path, .. } if path.ends_with("run.json")),
        "{e}"
    );
}

#[test]
fn unsafe_stage_ids_are_refused() {
    let repo = tempfile::tempdir().unwrap();
    let store = RunStore::new(repo.path());
    let run = recorded_run(&store);
    let reader = RunReader::at(run.dir());
    for bad in ["..", "../x", "a/b", ""] {
        assert!(
            matches!(reader.stage(bad), Err(StoreError::UnsafePath(_))),
            "{bad:?}"
        );
        assert!(reader.output_bytes(bad).is_err(), "{bad:?}");
        assert!(reader.attempt_numbers(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn a_run_folder_deleted_under_the_reader_is_a_clear_error() {
    let repo = tempfile::tempdir().unwrap();
    let store = RunStore::new(repo.path());
    let run = recorded_run(&store);
    let reader = store.reader(run.id()).unwrap();
    let attempt = reader.attempt("spec", 1);
    std::fs::remove_dir_all(run.dir()).unwrap();
    let gone = |e: StoreError| {
        assert!(matches!(e, StoreError::RunGone(_)), "{e}");
        let text = e.to_string();
        assert!(
            text.contains(run.id()) && text.contains("no longer exists"),
            "{text}"
        );
    };
    gone(reader.run().unwrap_err());
    gone(reader.stage_ids().unwrap_err());
    gone(reader.stage("spec").unwrap_err());
    gone(reader.plan().unwrap_err());
    gone(reader.stages_in_plan_order().unwrap_err());
    gone(reader.attempt_numbers("spec").unwrap_err());
    gone(reader.output_bytes("spec").unwrap_err());
    gone(attempt.json::<Value>(attempt::RESULT).unwrap_err());
    assert!(attempt.json_opt::<Value>(attempt::RESULT).is_none());
}

#[test]
fn selection_by_prefix_reports_ambiguity() {
    let repo = tempfile::tempdir().unwrap();
    let store = RunStore::new(repo.path());
    let runs = store.runs_dir().to_path_buf();
    for id in [
        "01900000-0000-7000-8000-000000000001",
        "01900000-0000-7000-8000-000000000002",
        "01910000-0000-7000-8000-000000000003",
    ] {
        std::fs::create_dir_all(runs.join(id)).unwrap();
    }
    let e = store.reader("0190").unwrap_err();
    assert!(e.to_string().contains("matches 2 runs"), "{e}");
    assert_eq!(
        store.reader("0191").unwrap().id(),
        "01910000-0000-7000-8000-000000000003"
    );
    let listed: Vec<(String, String)> = store
        .readers()
        .unwrap()
        .into_iter()
        .map(|(r, short)| (r.id().to_string(), short))
        .collect();
    assert_eq!(listed.len(), 3);
    assert_eq!(listed[2].1, "01910000");
    assert_eq!(listed[0].1, listed[0].0, "only the whole id tells 1 from 2");
    // A run folder without a run.json (a crash before the first record) is
    // listed; reading its record says what is missing.
    let e = store.readers().unwrap()[0].0.run().unwrap_err();
    assert!(e.to_string().contains("run.json"), "{e}");
}

/// A run large enough that its records are read in two halves at once: every
/// record is found once, in plan order (the plan is the reverse of the ids'),
/// and a record that cannot be read fails `stage_records` from either half.
#[test]
fn a_large_run_s_records_are_all_read_in_plan_order_from_both_halves() {
    let repo = tempfile::tempdir().unwrap();
    let store = RunStore::new(repo.path());
    let run = store.create(Redactor::default()).unwrap();
    let ids: Vec<String> = (0..150).map(|i| format!("s{i:03}")).collect();
    let record = |id: &str| {
        json!({
            "stageId": id, "kind": "check", "status": "succeeded",
            "attempts": 1, "needs": []
        })
    };
    for id in &ids {
        run.write_json(&layout::stage_record_rel(id), &record(id))
            .unwrap();
    }
    let nodes: Vec<Value> = ids
        .iter()
        .rev()
        .map(|id| json!({ "id": id, "kind": "check", "needs": [] }))
        .collect();
    run.write_json(layout::PLAN, &json!({ "schemaVersion": 1, "nodes": nodes }))
        .unwrap();
    let reader = store.reader("latest").unwrap();
    assert!(reader.stage_ids().unwrap().len() >= 2 * crate::beside::HALVES_FROM);

    let reversed: Vec<String> = ids.iter().rev().cloned().collect();
    assert_eq!(shown_order(&reader), reversed);
    let records = reader.stage_records().unwrap();
    assert_eq!(records.keys().cloned().collect::<Vec<_>>(), ids);

    for broken in ["s010", "s140"] {
        let path = run.dir().join(layout::stage_record_rel(broken));
        std::fs::write(&path, "{").unwrap();
        assert!(reader.stage_records().is_err(), "{broken} unreadable");
        assert_eq!(
            shown_order(&reader).len(),
            ids.len() - 1,
            "left out for display"
        );
        std::fs::write(&path, serde_json::to_vec(&record(broken)).unwrap()).unwrap();
    }
}

/// The stage ids `runs show` lists, in its order.
fn shown_order(reader: &RunReader) -> Vec<String> {
    reader
        .stages_in_plan_order()
        .unwrap()
        .into_iter()
        .map(|s| s.stage_id)
        .collect()
}
