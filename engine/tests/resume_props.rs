//! Resume planning as a property: for random DAGs and random sets of stages whose
//! prompt changed, the stages that run again are exactly the changed ones plus
//! everything downstream whose inputs changed — a stage whose upstream reran but
//! came out byte-identical is reused.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use specbridge_engine::resume::{reuse_or_rerun, Current, Reason, Recorded};
use specbridge_engine::status::StageStatus;
use specbridge_engine::store::{sha256_hex, InputParts};

/// A random DAG: stage `i` needs a subset of the stages before it. Each stage
/// either always answers the same (`stable`) or answers from its inputs.
#[derive(Debug, Clone)]
struct Graph {
    needs: Vec<Vec<usize>>,
    stable: Vec<bool>,
}

fn graph() -> impl Strategy<Value = Graph> {
    (1usize..9).prop_flat_map(|n| {
        let needs = (0..n)
            .map(|i| proptest::collection::btree_set(0..i.max(1), 0..=i.min(3)))
            .collect::<Vec<_>>();
        (needs, proptest::collection::vec(any::<bool>(), n)).prop_map(move |(needs, stable)| {
            Graph {
                needs: needs
                    .into_iter()
                    .enumerate()
                    .map(|(i, s)| s.into_iter().filter(|&x| x < i).collect())
                    .collect(),
                stable,
            }
        })
    })
}

impl Graph {
    fn len(&self) -> usize {
        self.needs.len()
    }

    /// What a stage sees: its needs, transitively (as prompt templates do).
    fn visible(&self, i: usize) -> BTreeSet<usize> {
        let mut seen = BTreeSet::new();
        let mut stack = self.needs[i].clone();
        while let Some(x) = stack.pop() {
            if seen.insert(x) {
                stack.extend(self.needs[x].iter().copied());
            }
        }
        seen
    }

    fn parts(&self, i: usize, prompt: u32, outputs: &[String]) -> InputParts {
        InputParts {
            definition: sha256_hex(format!("stage-{i}").as_bytes()),
            prompt: Some(sha256_hex(format!("prompt-{i}-v{prompt}").as_bytes())),
            schema: Some(sha256_hex(b"schema")),
            upstream: self
                .visible(i)
                .into_iter()
                .map(|u| (format!("s{u}"), Some(sha256_hex(outputs[u].as_bytes()))))
                .collect(),
        }
    }

    /// The agent's answer: fixed for a stable stage, else a function of its inputs.
    fn output(&self, i: usize, parts: &InputParts) -> String {
        if self.stable[i] {
            format!("answer-{i}")
        } else {
            hash(parts)
        }
    }
}

fn hash(parts: &InputParts) -> String {
    sha256_hex(serde_json::to_string(parts).unwrap().as_bytes())
}

/// The first run: every stage succeeds. Returns each stage's recorded parts and
/// output.
fn first_run(g: &Graph) -> (Vec<InputParts>, Vec<String>) {
    let mut parts = Vec::new();
    let mut outputs: Vec<String> = Vec::new();
    for i in 0..g.len() {
        let p = g.parts(i, 0, &outputs);
        outputs.push(g.output(i, &p));
        parts.push(p);
    }
    (parts, outputs)
}

/// A resume after the prompts of `changed` were edited, deciding each stage just
/// before it would start, as the scheduler does. Returns the rerun set and the
/// outputs as they end.
fn resume(
    g: &Graph,
    recorded: &[InputParts],
    old_outputs: &[String],
    changed: &BTreeSet<usize>,
) -> (BTreeSet<usize>, Vec<String>, BTreeMap<usize, Reason>) {
    let mut outputs = old_outputs.to_vec();
    let mut rerun = BTreeSet::new();
    let mut reasons = BTreeMap::new();
    for i in 0..g.len() {
        let version = u32::from(changed.contains(&i));
        let now = g.parts(i, version, &outputs);
        let recorded_hash = hash(&recorded[i]);
        let current_hash = hash(&now);
        let verdict = reuse_or_rerun(
            Some(Recorded {
                status: StageStatus::Succeeded,
                input_hash: Some(&recorded_hash),
                input_parts: Some(&recorded[i]),
            }),
            Ok(Current {
                input_hash: &current_hash,
                input_parts: &now,
            }),
            None,
        );
        if let Some(why) = verdict {
            rerun.insert(i);
            reasons.insert(i, why.reason);
            outputs[i] = g.output(i, &now);
        }
    }
    (rerun, outputs, reasons)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_rerun_set_is_the_changed_stages_and_everything_downstream_whose_inputs_changed(
        g in graph(),
        picks in proptest::collection::vec(any::<bool>(), 8),
    ) {
        let changed: BTreeSet<usize> =
            (0..g.len()).filter(|&i| picks[i]).collect();
        let (recorded, old_outputs) = first_run(&g);
        let (rerun, new_outputs, reasons) = resume(&g, &recorded, &old_outputs, &changed);

        // The specification, stated on sets: a stage runs again when it changed,
        // or when something it sees ran again and came out different.
        let mut expected = BTreeSet::new();
        for i in 0..g.len() {
            let upstream_differs = g
                .visible(i)
                .into_iter()
                .any(|u| expected.contains(&u) && new_outputs[u] != old_outputs[u]);
            if changed.contains(&i) || upstream_differs {
                expected.insert(i);
            }
        }
        prop_assert_eq!(&rerun, &expected);

        // Nothing outside the changed stages' downstream runs again.
        for i in &rerun {
            prop_assert!(
                changed.contains(i) || g.visible(*i).iter().any(|u| changed.contains(u)),
                "stage {} ran again with nothing changed upstream", i
            );
        }
        // The reason names the cause: an upstream change before an edited prompt.
        for (i, reason) in &reasons {
            let upstream_differs = g
                .visible(*i)
                .into_iter()
                .any(|u| new_outputs[u] != old_outputs[u]);
            let want = if upstream_differs {
                Reason::UpstreamOutputChanged
            } else {
                Reason::PromptChanged
            };
            prop_assert_eq!(*reason, want, "stage {}", i);
        }
    }

    #[test]
    fn changing_nothing_reruns_nothing(g in graph()) {
        let (recorded, outputs) = first_run(&g);
        let (rerun, _, _) = resume(&g, &recorded, &outputs, &BTreeSet::new());
        prop_assert!(rerun.is_empty());
    }
}
