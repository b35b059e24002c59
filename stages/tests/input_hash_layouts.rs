//! Input-hash layout 2 (direct needs only) against layout 1 (every ancestor) on
//! random DAGs: the same stages are reused after random edits.
//!
//! The model: a stage that writes an output (an agent stage) writes one that
//! depends on its definition and on every output it can see, so a stage that runs
//! again with changed inputs writes a changed output; a check stage writes none.
//! Each layout runs the DAG once in its own run folder with the real upstream and
//! hash functions, then, after the same edits, decides for each stage in order
//! (as the scheduler asks just before a stage would run) whether its recorded
//! result is reused; a stage that is not reused writes its new record and output.
//!
//! Where the model does not hold — an agent that reruns and writes byte-identical
//! output — layout 2 reuses the stages below it and layout 1 reran them; that is
//! the intended difference (docs/resume.md).

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use specbridge_engine::orchestrate::PipelineSource;
use specbridge_engine::pipeline::{PipelineFile, RunOverrides};
use specbridge_engine::supervisor::CancelToken;
use specbridge_stages::input_hash::{
    input_hash, input_parts, HashInputs, INPUT_HASH_FORMAT, LEGACY_INPUT_HASH_FORMAT,
};
use specbridge_stages::upstream::{upstream_for, visible_stages};
use specbridge_stages::RunContext;

#[derive(Debug, Clone)]
struct Dag {
    /// Per stage: writes an output (else a check), and the earlier stages it needs.
    stages: Vec<(bool, Vec<usize>)>,
}

fn dag() -> impl Strategy<Value = Dag> {
    (2usize..10)
        .prop_flat_map(|n| {
            proptest::collection::vec(
                (
                    any::<bool>(),
                    proptest::collection::vec(any::<prop::sample::Index>(), 0..3),
                ),
                n,
            )
        })
        .prop_map(|raw| Dag {
            stages: raw
                .into_iter()
                .enumerate()
                .map(|(i, (writes, needs))| {
                    let mut needs: Vec<usize> = if i == 0 {
                        Vec::new()
                    } else {
                        needs.iter().map(|ix| ix.index(i)).collect()
                    };
                    needs.sort();
                    needs.dedup();
                    (writes, needs)
                })
                .collect(),
        })
}

fn id(i: usize) -> String {
    format!("s{i}")
}

/// The pipeline with each stage's definition at `versions[i]` (its description).
fn context(dag: &Dag, versions: &[u32]) -> RunContext {
    let mut yaml = String::from("version: 1\nname: p\nstages:\n");
    for (i, (writes, needs)) in dag.stages.iter().enumerate() {
        let needs: Vec<String> = needs.iter().map(|&n| id(n)).collect();
        let kind = if *writes {
            "kind: generate, prompt: p.md, output: {schema: builtin:document}"
        } else {
            "kind: check, argv: [\"true\"]"
        };
        yaml.push_str(&format!(
            "  - {{id: {}, {kind}, description: v{}, needs: [{}]}}\n",
            id(i),
            versions[i],
            needs.join(", ")
        ));
    }
    let file: PipelineFile = serde_yaml::from_str(&yaml).unwrap();
    let source = PipelineSource {
        path: "specbridge.yaml".into(),
        bytes: yaml.into_bytes(),
        file: std::sync::Arc::new(file),
    };
    RunContext::new(
        Path::new("/"),
        &source,
        RunOverrides::default(),
        CancelToken::new(),
        false,
    )
}

fn sha(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// The hash and parts stage `i` has now in `layout`.
fn hash_now(ctx: &RunContext, i: usize, run: &Path, layout: u32) -> (String, Value) {
    let stage = ctx.stage(&id(i)).unwrap();
    let upstream = upstream_for(layout, ctx, stage, run).unwrap();
    let inputs = HashInputs {
        layout,
        stage,
        settings: json!({}),
        prompt: None,
        schema: None,
        upstream: &upstream,
        item_id: None,
        item: None,
    };
    (
        input_hash(&inputs),
        serde_json::to_value(input_parts(&inputs)).unwrap(),
    )
}

/// Runs stage `i`: its record, and for an output stage an output that depends on
/// its definition and everything it sees.
fn run_stage(ctx: &RunContext, dag: &Dag, i: usize, run: &Path, layout: u32) {
    let (hash, parts) = hash_now(ctx, i, run, layout);
    let dir = run.join("stages").join(id(i));
    std::fs::create_dir_all(&dir).unwrap();
    let stage = ctx.stage(&id(i)).unwrap();
    let kind = if dag.stages[i].0 { "generate" } else { "check" };
    let record = json!({
        "schemaVersion": 1, "stageId": id(i), "kind": kind, "status": "succeeded",
        "attempts": 1, "inputHash": hash, "inputParts": parts,
    });
    std::fs::write(dir.join("stage.json"), record.to_string()).unwrap();
    if dag.stages[i].0 {
        let seen: BTreeMap<String, Option<String>> = visible_stages(ctx, stage)
            .into_iter()
            .map(|v| {
                let out = std::fs::read_to_string(run.join("stages").join(&v).join("output.json"));
                (v, out.ok().map(|o| sha(&o)))
            })
            .collect();
        let output = json!({ "stage": id(i), "definition": stage.description, "seen": seen });
        std::fs::write(dir.join("output.json"), output.to_string()).unwrap();
    }
}

/// Runs everything at `before`, then decides stage by stage at `after`: reused
/// (`true`) or run again.
fn reuse_decisions(dag: &Dag, before: &[u32], after: &[u32], layout: u32) -> Vec<bool> {
    let run = tempfile::tempdir().unwrap();
    let first = context(dag, before);
    for i in 0..dag.stages.len() {
        run_stage(&first, dag, i, run.path(), layout);
    }
    let second = context(dag, after);
    (0..dag.stages.len())
        .map(|i| {
            let record: Value = serde_json::from_slice(
                &std::fs::read(run.path().join("stages").join(id(i)).join("stage.json")).unwrap(),
            )
            .unwrap();
            let (now, _) = hash_now(&second, i, run.path(), layout);
            let reused = record["inputHash"] == now.as_str();
            if !reused {
                run_stage(&second, dag, i, run.path(), layout);
            }
            reused
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn direct_needs_reuse_exactly_what_every_ancestor_reused(
        dag in dag(),
        edits in proptest::collection::vec(any::<bool>(), 10),
    ) {
        let n = dag.stages.len();
        let before = vec![0u32; n];
        let after: Vec<u32> = (0..n).map(|i| u32::from(edits[i])).collect();
        let legacy = reuse_decisions(&dag, &before, &after, LEGACY_INPUT_HASH_FORMAT);
        let direct = reuse_decisions(&dag, &before, &after, INPUT_HASH_FORMAT);
        prop_assert_eq!(&legacy, &direct, "dag {:?}, edits {:?}", dag, after);
        // Not vacuous: an edited stage is never reused, an untouched DAG always is.
        for i in 0..n {
            if after[i] == 1 {
                prop_assert!(!direct[i]);
            }
        }
        prop_assert!(reuse_decisions(&dag, &before, &before, INPUT_HASH_FORMAT).iter().all(|&r| r));
    }
}

#[test]
fn a_chain_records_one_upstream_entry_per_stage() {
    let n = 60;
    let dag = Dag {
        stages: (0..n)
            .map(|i| (i % 3 == 0, if i == 0 { vec![] } else { vec![i - 1] }))
            .collect(),
    };
    let run = tempfile::tempdir().unwrap();
    let ctx = context(&dag, &vec![0; n]);
    for i in 0..n {
        run_stage(&ctx, &dag, i, run.path(), INPUT_HASH_FORMAT);
    }
    for i in 1..n {
        let record: Value = serde_json::from_slice(
            &std::fs::read(run.path().join("stages").join(id(i)).join("stage.json")).unwrap(),
        )
        .unwrap();
        let upstream = record["inputParts"]["upstream"].as_object().unwrap();
        assert_eq!(upstream.keys().collect::<Vec<_>>(), [&id(i - 1)]);
    }
    // The first stage below an edited root runs again, through checks too.
    let mut after = vec![0; n];
    after[0] = 1;
    let decisions = reuse_decisions(&dag, &vec![0; n], &after, INPUT_HASH_FORMAT);
    assert!(decisions.iter().all(|&r| !r), "{decisions:?}");
}
