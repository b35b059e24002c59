//! The prompt context of an agent stage (DESIGN §3): `pipeline`, `stage`, `item`
//! for fan-out instances, and `stages.<id>.output` / `.document` for exactly the
//! stages it needs, directly or transitively — read back from this run's records.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{json, Value};
use specbridge_engine::pipeline::{PipelineFile, StageDef};
use specbridge_engine::scheduler::Node;
use specbridge_engine::store::{is_safe_component, sha256_hex, RunHandle, StageRecord};
use specbridge_engine::StageStatus;

use crate::context::RunContext;
use crate::prompt::{PromptContext, UpstreamView};

/// A stage's view of its upstream: the template context, and the sha256 of each
/// visible stage's `output.json` (for the input hash).
#[derive(Debug, Clone)]
pub struct StageInputs {
    pub context: PromptContext,
    pub upstream_hashes: BTreeMap<String, Option<String>>,
}

/// The ids of every stage `stage` needs, directly or through others (a `forEach`
/// source counts as a need).
pub fn visible_stages(pipeline: &PipelineFile, stage: &StageDef) -> BTreeSet<String> {
    let by_id: BTreeMap<&str, &StageDef> =
        pipeline.stages.iter().map(|s| (s.id.as_str(), s)).collect();
    let direct = |s: &StageDef| {
        let mut needs = s.needs.clone();
        if let Some(fe) = &s.for_each {
            needs.push(fe.stage.clone());
        }
        needs
    };
    let mut seen = BTreeSet::new();
    let mut stack = direct(stage);
    while let Some(id) = stack.pop() {
        if seen.insert(id.clone()) {
            if let Some(s) = by_id.get(id.as_str()) {
                stack.extend(direct(s));
            }
        }
    }
    seen
}

/// Builds the context from the run folder and the repository.
pub fn stage_inputs(
    ctx: &RunContext,
    stage: &StageDef,
    node: &Node,
    run: &RunHandle,
) -> Result<StageInputs, String> {
    stage_inputs_in(ctx, stage, node, run.dir())
}

/// [`stage_inputs`] from a run folder that may not be open for writing (resume
/// planning reads it before the event log is repaired).
pub fn stage_inputs_in(
    ctx: &RunContext,
    stage: &StageDef,
    node: &Node,
    run: &Path,
) -> Result<StageInputs, String> {
    let mut stages = BTreeMap::new();
    let mut upstream_hashes = BTreeMap::new();
    for id in visible_stages(&ctx.pipeline, stage) {
        if ctx.stage(&id).is_some_and(|s| s.for_each.is_some()) {
            // A fan-out stage has no output of its own: what it did is in its
            // instances, and a rerun of one must count as a change upstream.
            upstream_hashes.extend(instance_hashes(run, &id)?);
        }
        let (output, sha) = read_output(run, &id)?;
        let document = ctx
            .stage(&id)
            .and_then(|s| s.output.as_ref())
            .and_then(|o| o.document.as_ref())
            .map(|doc| read_document(&ctx.root, doc))
            .transpose()?
            .flatten();
        if sha.is_some() || ctx.stage(&id).is_none_or(|s| s.for_each.is_none()) {
            upstream_hashes.insert(id.clone(), sha);
        }
        stages.insert(id, UpstreamView { output, document });
    }
    let item = match (&stage.for_each, &node.item_id) {
        (Some(fe), Some(item_id)) => Some(find_item(run, &fe.stage, &fe.items, item_id)?),
        _ => None,
    };
    let mut stage_value = serde_json::to_value(stage).map_err(|e| e.to_string())?;
    if let Value::Object(map) = &mut stage_value {
        // Runner settings may hold environment values; templates never need them.
        map.remove("runner");
        if node.id != stage.id {
            map.insert("instanceId".into(), Value::from(node.id.clone()));
        }
    }
    Ok(StageInputs {
        context: PromptContext {
            pipeline: json!({ "name": ctx.pipeline.name, "version": ctx.pipeline.version }),
            stage: stage_value,
            item,
            stages,
            attempt: Default::default(),
        },
        upstream_hashes,
    })
}

/// The output hash of every succeeded instance of fan-out stage `stage` in this run
/// (retired and failed ones are not what downstream stages saw).
fn instance_hashes(run: &Path, stage: &str) -> Result<BTreeMap<String, Option<String>>, String> {
    let mut out = BTreeMap::new();
    let prefix = format!("{stage}.");
    let Ok(entries) = std::fs::read_dir(run.join("stages")) else {
        return Ok(out);
    };
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if !name.starts_with(&prefix) {
            continue;
        }
        let Ok(bytes) = std::fs::read(entry.path().join("stage.json")) else {
            continue;
        };
        let Ok(record) = serde_json::from_slice::<StageRecord>(&bytes) else {
            continue;
        };
        if record.instance_of.as_deref() == Some(stage) && record.status == StageStatus::Succeeded {
            let (_, sha) = read_output(run, &name)?;
            out.insert(name, sha);
        }
    }
    Ok(out)
}

/// `stages/<id>/output.json` of this run and its sha256; `Null` when the stage
/// wrote none (a check stage, a fan-out placeholder).
fn read_output(run: &Path, id: &str) -> Result<(Value, Option<String>), String> {
    if !is_safe_component(id) {
        return Err(format!("refusing unsafe stage id `{id}`"));
    }
    let path = run.join("stages").join(id).join("output.json");
    match std::fs::read(&path) {
        Ok(bytes) => {
            let value = serde_json::from_slice(&bytes)
                .map_err(|e| format!("failed to read the output of stage `{id}`: {e}"))?;
            Ok((value, Some(sha256_hex(&bytes))))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((Value::Null, None)),
        Err(e) => Err(format!("failed to read the output of stage `{id}`: {e}")),
    }
}

fn read_document(root: &Path, doc: &str) -> Result<Option<String>, String> {
    match std::fs::read_to_string(root.join(doc)) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("failed to read document {doc}: {e}")),
    }
}

/// The item of a fan-out instance: the element of the source's output array whose
/// `id` is the instance's item id.
fn find_item(run: &Path, source: &str, pointer: &str, item_id: &str) -> Result<Value, String> {
    let (output, _) = read_output(run, source)?;
    output
        .pointer(pointer)
        .and_then(Value::as_array)
        .and_then(|items| {
            items
                .iter()
                .find(|i| i.get("id").and_then(Value::as_str) == Some(item_id))
        })
        .cloned()
        .ok_or_else(|| {
            format!(
                "failed to find item `{item_id}` at {pointer} in the output of stage `{source}`"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_needed_stages_are_visible_transitively() {
        let p: PipelineFile = serde_yaml::from_str(
            "version: 1\nname: t\nstages:\n\
             - {id: a, kind: check, argv: [x]}\n\
             - {id: b, kind: check, argv: [x], needs: [a]}\n\
             - {id: c, kind: check, argv: [x]}\n\
             - {id: d, kind: check, argv: [x], needs: [b]}\n\
             - {id: e, kind: execute, forEach: {stage: c, items: /tasks}, needs: [a]}\n",
        )
        .unwrap();
        let vis = |id: &str| {
            let s = p.stages.iter().find(|s| s.id == id).unwrap();
            visible_stages(&p, s).into_iter().collect::<Vec<_>>()
        };
        assert_eq!(vis("d"), ["a", "b"]);
        assert_eq!(vis("a"), Vec::<String>::new());
        assert_eq!(vis("e"), ["a", "c"]);
    }
}
