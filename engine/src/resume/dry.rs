//! `resume --dry-run`: each stage's decision from the recorded outputs alone,
//! spawning nothing and writing nothing.
//!
//! A stage downstream of one that runs again cannot be decided before that stage
//! has produced its new output: if it comes out byte-identical the stage is still
//! reused. Such a stage is reported as `rerun` with the reason `upstream may
//! change` — unless a reason of its own (failed, prompt changed, …) already
//! decides it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::dag::StageGraph;
use crate::resume::executor::altered_output;
use crate::resume::force::Forced;
use crate::resume::reuse::{reuse_or_rerun, Current, Reason, ReuseDecision, Why};
use crate::scheduler::{Node, StageExecutor};
use crate::status::StageStatus;
use crate::store::StageRecord;

/// The decision for every node of `nodes` (fan-out stages through the instances
/// recorded for them), in dependency order.
pub fn plan_dry_run(
    nodes: &[Node],
    recorded: &BTreeMap<String, StageRecord>,
    executor: &dyn StageExecutor,
    run_dir: &Path,
    root: &Path,
    forced: &Forced,
) -> Vec<ReuseDecision> {
    let mut out = Vec::new();
    // Node id → whether it runs again (a fan-out stage: whether any instance does).
    let mut reruns: BTreeMap<String, bool> = BTreeMap::new();
    for node in topo(nodes.iter().cloned()) {
        if !node.placeholder {
            let d = decide_one(&node, recorded, executor, run_dir, root, &reruns, forced);
            reruns.insert(node.id.clone(), d.action != crate::resume::Action::Reuse);
            out.push(d);
            continue;
        }
        let instances: Vec<Node> = recorded
            .values()
            .filter(|r| {
                r.instance_of.as_deref() == Some(node.id.as_str())
                    && r.status != StageStatus::Retired
            })
            .map(|r| Node {
                id: r.stage_id.clone(),
                kind: r.kind,
                needs: r.needs.clone(),
                instance_of: r.instance_of.clone(),
                item_id: r.item_id.clone(),
                placeholder: false,
                prior_attempts: r.attempts,
            })
            .collect();
        let source_reruns = node.needs.iter().any(|n| reruns.get(n) == Some(&true));
        if instances.is_empty() {
            let why = if source_reruns {
                Why::with(
                    Reason::UpstreamMayChange,
                    "its instances follow the new output",
                )
            } else {
                Why::with(Reason::NewStage, "not expanded yet")
            };
            reruns.insert(node.id.clone(), true);
            out.push(ReuseDecision::rerun(&node.id, why));
            continue;
        }
        let mut any = false;
        for inst in topo(instances) {
            let d = decide_one(&inst, recorded, executor, run_dir, root, &reruns, forced);
            let rerun = d.action != crate::resume::Action::Reuse;
            any |= rerun;
            reruns.insert(inst.id.clone(), rerun);
            out.push(d);
        }
        reruns.insert(node.id.clone(), any || source_reruns);
    }
    out
}

fn decide_one(
    node: &Node,
    recorded: &BTreeMap<String, StageRecord>,
    executor: &dyn StageExecutor,
    run_dir: &Path,
    root: &Path,
    reruns: &BTreeMap<String, bool>,
    forced: &Forced,
) -> ReuseDecision {
    if let Some(why) = forced.check(node) {
        return ReuseDecision::rerun(&node.id, why);
    }
    let rec = recorded.get(&node.id);
    let current = executor.inputs(node, run_dir, rec.and_then(|r| r.input_hash.as_deref()));
    let current_ref = match &current {
        Some(Ok((hash, parts))) => Ok(Current {
            input_hash: hash,
            input_parts: parts,
        }),
        Some(Err(e)) => Err(e.as_str()),
        None => Err("this stage kind cannot compute its input hash"),
    };
    let altered = rec.and_then(|r| altered_output(r, run_dir, root));
    let why = reuse_or_rerun(rec.map(Into::into), current_ref, altered.as_deref());
    let rerunning: Vec<&str> = node
        .needs
        .iter()
        .filter(|n| reruns.get(n.as_str()) == Some(&true))
        .map(String::as_str)
        .collect();
    match why {
        Some(w) if w.reason != Reason::UpstreamOutputChanged || rerunning.is_empty() => {
            ReuseDecision::rerun(&node.id, w)
        }
        _ if !rerunning.is_empty() => ReuseDecision::rerun(
            &node.id,
            Why::with(Reason::UpstreamMayChange, rerunning.join(", ")),
        ),
        _ => ReuseDecision::reuse(&node.id),
    }
}

/// Nodes in dependency order (needs outside the set are ignored), ties by id.
fn topo(nodes: impl IntoIterator<Item = Node>) -> Vec<Node> {
    let nodes: Vec<Node> = nodes.into_iter().collect();
    let ids: BTreeSet<&str> = nodes.iter().map(|n| n.id.as_str()).collect();
    let graph = StageGraph::from_needs(nodes.iter().map(|n| {
        (
            n.id.as_str(),
            n.needs
                .iter()
                .map(String::as_str)
                .filter(|x| ids.contains(x))
                .collect::<Vec<_>>(),
        )
    }));
    let order = graph
        .topo_order()
        .unwrap_or_else(|_| nodes.iter().map(|n| n.id.clone()).collect());
    order
        .iter()
        .filter_map(|id| nodes.iter().find(|n| &n.id == id).cloned())
        .collect()
}
