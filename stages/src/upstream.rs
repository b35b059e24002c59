//! What a stage sees upstream (docs/stage-kinds.md, docs/resume.md).
//!
//! - The prompt context of an agent stage: `pipeline`, `stage`, `item` for fan-out
//!   instances, and `stages.<id>.output` / `.document` for exactly the stages it
//!   needs, directly or transitively — read back from this run's records.
//! - The upstream part of the input hash: one entry per **direct** need (a `forEach`
//!   source counts as one). Each entry chains: an output-writing need's
//!   `output.json` changes when anything above it changed, a check need (which
//!   writes no output) stands for the upstream it saw itself, a fan-out need for
//!   its instances' outputs. So the cost is linear in the edges of the DAG, and
//!   nothing proportional to a stage's ancestors is written into its record.
//!   [`legacy_upstream_hashes`] keeps the layout-1 form (every ancestor) for
//!   records made before.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{json, Value};
use specbridge_engine::pipeline::{StageDef, StageKind};
use specbridge_engine::scheduler::Node;
use specbridge_engine::store::{
    is_safe_component, sha256_hex, InputParts, RunReader, StageRecord, StoreError,
};
use specbridge_engine::StageStatus;

use crate::context::RunContext;
use crate::input_hash::canonical_json;
use crate::prompt::{PromptContext, UpstreamView};

/// What a stage may see of its upstream stages could not be read.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("refusing unsafe stage id `{0}`")]
    UnsafeId(String),
    /// A record of the run; the store's message names its path.
    #[error(transparent)]
    Record(#[from] StoreError),
    #[error("failed to read the output of stage `{stage}`")]
    Output {
        stage: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("failed to read document {path}")]
    Document {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to find item `{item}` at {pointer} in the output of stage `{stage}`")]
    MissingItem {
        item: String,
        pointer: String,
        stage: String,
    },
    #[error("failed to give stage `{stage}` to its template")]
    StageValue {
        stage: String,
        #[source]
        source: serde_json::Error,
    },
}

/// A stage's view of its upstream: the template context, and the upstream part of
/// its input hash.
#[derive(Debug, Clone)]
pub struct StageInputs {
    pub context: PromptContext,
    pub upstream_hashes: BTreeMap<String, Option<String>>,
}

/// The stages `stage` needs directly: its `needs`, then its `forEach` source, each
/// once.
pub(crate) fn direct_needs(stage: &StageDef) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::with_capacity(stage.needs.len() + 1);
    let source = stage.for_each.as_ref().map(|fe| fe.stage.as_str());
    for id in stage.needs.iter().map(String::as_str).chain(source) {
        if !out.contains(&id) {
            out.push(id);
        }
    }
    out
}

/// The ids of every stage `stage` needs, directly or through others (a `forEach`
/// source counts as a need). Linear in the ancestors found (stages by id are
/// indexed in the context).
pub fn visible_stages(ctx: &RunContext, stage: &StageDef) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack: Vec<&str> = direct_needs(stage);
    while let Some(id) = stack.pop() {
        if seen.insert(id.to_string()) {
            if let Some(s) = ctx.stage(id) {
                stack.extend(direct_needs(s));
            }
        }
    }
    seen
}

/// The template context of an agent stage.
pub(crate) fn prompt_context(
    ctx: &RunContext,
    stage: &StageDef,
    node: &Node,
    run: &Path,
) -> Result<PromptContext, UpstreamError> {
    let mut stages = BTreeMap::new();
    for id in visible_stages(ctx, stage) {
        let def = ctx.stage(&id);
        // Check stages and fan-out stages never write an output of their own.
        let output = if def.is_some_and(|s| s.kind == StageKind::Check || s.for_each.is_some()) {
            Value::Null
        } else {
            read_output(run, &id)?
        };
        let document = def
            .and_then(|s| s.output.as_ref())
            .and_then(|o| o.document.as_ref())
            .map(|doc| read_document(&ctx.root, doc))
            .transpose()?
            .flatten();
        stages.insert(id, UpstreamView { output, document });
    }
    let item = match (&stage.for_each, &node.item_id) {
        (Some(fe), Some(item_id)) => {
            // The source is one of the stages seen above, its output read
            // already: a plan of hundreds of tasks is parsed once an instance.
            let output = match stages.get(&fe.stage).map(|view| &view.output) {
                Some(seen) if !seen.is_null() => Cow::Borrowed(seen),
                _ => Cow::Owned(read_output(run, &fe.stage)?),
            };
            Some(find_item(&output, &fe.stage, &fe.items, item_id)?)
        }
        _ => None,
    };
    let mut stage_value =
        serde_json::to_value(stage).map_err(|source| UpstreamError::StageValue {
            stage: stage.id.clone(),
            source,
        })?;
    if let Value::Object(map) = &mut stage_value {
        // Runner settings may hold environment values; templates never need them.
        map.remove("runner");
        if node.id != stage.id {
            map.insert("instanceId".into(), Value::from(node.id.clone()));
        }
    }
    Ok(PromptContext {
        pipeline: json!({ "name": ctx.pipeline.name, "version": ctx.pipeline.version }),
        stage: stage_value,
        item,
        stages,
        attempt: Default::default(),
    })
}

/// The upstream part of the input hash (layout 2): for each direct need, the
/// sha256 of its `output.json`; for a check need, the digest of the upstream it
/// saw ([`seen_digest`]); for a fan-out need, each succeeded instance's output.
pub(crate) fn upstream_hashes(
    ctx: &RunContext,
    stage: &StageDef,
    run: &Path,
) -> Result<BTreeMap<String, Option<String>>, UpstreamError> {
    let mut out = BTreeMap::new();
    for id in direct_needs(stage) {
        match ctx.stage(id) {
            Some(s) if s.for_each.is_some() => {
                // A fan-out stage has no output of its own: what it did is in its
                // instances, and a rerun of one must count as a change upstream.
                out.extend(instance_hashes(run, id)?);
            }
            Some(s) if s.kind == StageKind::Check => {
                out.insert(id.to_string(), seen_digest(ctx, run, id)?);
            }
            _ => {
                out.insert(id.to_string(), output_sha(run, id)?);
            }
        }
    }
    Ok(out)
}

/// The upstream part in input-hash layout `layout`.
pub fn upstream_for(
    layout: u32,
    ctx: &RunContext,
    stage: &StageDef,
    run: &Path,
) -> Result<BTreeMap<String, Option<String>>, UpstreamError> {
    if layout == crate::input_hash::LEGACY_INPUT_HASH_FORMAT {
        legacy_upstream_hashes(ctx, stage, run)
    } else {
        upstream_hashes(ctx, stage, run)
    }
}

/// What a check stage stands for downstream: the sha256 of the canonical JSON of
/// the upstream part recorded in its `stage.json`, or null when that is empty or
/// unrecorded. A check writes no output, so this is what carries a change above it
/// down the chain (its own argv or timeout changing does not, as in layout 1).
fn seen_digest(ctx: &RunContext, run: &Path, id: &str) -> Result<Option<String>, UpstreamError> {
    if !is_safe_component(id) {
        return Err(UpstreamError::UnsafeId(id.to_string()));
    }
    if let Some(kept) = ctx.kept_digests.lock().expect("kept digests lock").get(id) {
        return Ok(kept.clone());
    }
    let record: StageRecord = match RunReader::at(run).stage(id) {
        Ok(Some(record)) => record,
        Ok(None) => return Ok(None),
        // The error names the record's path, which names the stage.
        Err(e) => return Err(e.into()),
    };
    Ok(stands_for(record.input_parts.as_ref()))
}

/// What a check stage whose record holds `parts` stands for downstream.
fn stands_for(parts: Option<&InputParts>) -> Option<String> {
    parts
        .filter(|p| !p.upstream.is_empty())
        .map(|p| digest_of(&p.upstream))
}

/// Check stage `id` has a record holding `parts` in this run: it was settled from
/// that record (a resume's reuse), or it ran in this process with those parts,
/// which the scheduler writes into its `stage.json`. What it stands for
/// downstream is then known without reading the record (which, for a stage that
/// just ended, may still be in the batch being written).
pub(crate) fn remember_digest(ctx: &RunContext, id: &str, parts: Option<&InputParts>) {
    ctx.kept_digests
        .lock()
        .expect("kept digests lock")
        .insert(id.to_string(), stands_for(parts));
}

/// Whether every direct need of `stage` is a check stage whose digest is known
/// in memory ([`remember_digest`]): its upstream part reads no record.
pub(crate) fn digests_in_memory(ctx: &RunContext, stage: &StageDef) -> bool {
    let kept = ctx.kept_digests.lock().expect("kept digests lock");
    direct_needs(stage).into_iter().all(|id| {
        ctx.stage(id).is_some_and(|s| s.kind == StageKind::Check) && kept.contains_key(id)
    })
}

/// The sha256 of an upstream map's canonical JSON.
pub(crate) fn digest_of(upstream: &BTreeMap<String, Option<String>>) -> String {
    let value = serde_json::to_value(upstream).expect("maps of strings serialise");
    sha256_hex(canonical_json(&value).as_bytes())
}

/// The upstream part of input-hash layout 1: every stage `stage` sees, directly or
/// transitively, with the sha256 of its `output.json` (null when it wrote none).
/// Quadratic in a chain's depth; used only to match records made with layout 1.
pub(crate) fn legacy_upstream_hashes(
    ctx: &RunContext,
    stage: &StageDef,
    run: &Path,
) -> Result<BTreeMap<String, Option<String>>, UpstreamError> {
    let mut out = BTreeMap::new();
    for id in visible_stages(ctx, stage) {
        if ctx.stage(&id).is_some_and(|s| s.for_each.is_some()) {
            out.extend(instance_hashes(run, &id)?);
        }
        let sha = output_sha(run, &id)?;
        if sha.is_some() || ctx.stage(&id).is_none_or(|s| s.for_each.is_none()) {
            out.insert(id, sha);
        }
    }
    Ok(out)
}

/// The output hash of every succeeded instance of fan-out stage `stage` in this run
/// (retired and failed ones are not what downstream stages saw).
fn instance_hashes(
    run: &Path,
    stage: &str,
) -> Result<BTreeMap<String, Option<String>>, UpstreamError> {
    let mut out = BTreeMap::new();
    let prefix = format!("{stage}.");
    let reader = RunReader::at(run);
    let Ok(ids) = reader.stage_ids() else {
        return Ok(out);
    };
    for name in ids {
        if !name.starts_with(&prefix) {
            continue;
        }
        let Ok(Some(record)) = reader.stage(&name) else {
            continue;
        };
        if record.instance_of.as_deref() == Some(stage) && record.status == StageStatus::Succeeded {
            let sha = output_sha(run, &name)?;
            out.insert(name, sha);
        }
    }
    Ok(out)
}

/// `stages/<id>/output.json` of this run; `Null` when the stage wrote none (a
/// check stage, a fan-out placeholder).
fn read_output(run: &Path, id: &str) -> Result<Value, UpstreamError> {
    match output_bytes(run, id)? {
        Some(bytes) => serde_json::from_slice(&bytes).map_err(|source| UpstreamError::Output {
            stage: id.to_string(),
            source,
        }),
        None => Ok(Value::Null),
    }
}

/// The sha256 of `stages/<id>/output.json` of this run, `None` when the stage
/// wrote none: all an input hash takes of an upstream output, read without
/// parsing it (a fan-out's plan would be parsed again for every instance).
fn output_sha(run: &Path, id: &str) -> Result<Option<String>, UpstreamError> {
    Ok(output_bytes(run, id)?.map(|bytes| sha256_hex(&bytes)))
}

fn output_bytes(run: &Path, id: &str) -> Result<Option<Vec<u8>>, UpstreamError> {
    if !is_safe_component(id) {
        return Err(UpstreamError::UnsafeId(id.to_string()));
    }
    Ok(RunReader::at(run).output_bytes(id)?)
}

fn read_document(root: &Path, doc: &str) -> Result<Option<String>, UpstreamError> {
    match std::fs::read_to_string(root.join(doc)) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(UpstreamError::Document {
            path: doc.to_string(),
            source,
        }),
    }
}

/// The item of a fan-out instance: the element of the source's output array whose
/// `id` is the instance's item id.
fn find_item(
    output: &Value,
    source: &str,
    pointer: &str,
    item_id: &str,
) -> Result<Value, UpstreamError> {
    output
        .pointer(pointer)
        .and_then(Value::as_array)
        .and_then(|items| {
            items
                .iter()
                .find(|i| i.get("id").and_then(Value::as_str) == Some(item_id))
        })
        .cloned()
        .ok_or_else(|| UpstreamError::MissingItem {
            item: item_id.to_string(),
            pointer: pointer.to_string(),
            stage: source.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use specbridge_engine::orchestrate::PipelineSource;
    use specbridge_engine::pipeline::{PipelineFile, RunOverrides};
    use specbridge_engine::supervisor::CancelToken;

    #[test]
    fn only_needed_stages_are_visible_transitively() {
        let p: PipelineFile = serde_yaml::from_str(
            "version: 1\nname: t\nstages:\n\
             - {id: a, kind: check, argv: [x]}\n\
             - {id: b, kind: check, argv: [x], needs: [a]}\n\
             - {id: c, kind: check, argv: [x]}\n\
             - {id: d, kind: check, argv: [x], needs: [b]}\n\
             - {id: e, kind: execute, forEach: {stage: c, items: /tasks}, needs: [a, c]}\n",
        )
        .unwrap();
        let source = PipelineSource {
            path: "specbridge.yaml".into(),
            bytes: Vec::new(),
            file: std::sync::Arc::new(p),
        };
        let ctx = RunContext::new(
            Path::new("/"),
            &source,
            RunOverrides::default(),
            CancelToken::new(),
            false,
        );
        let vis = |id: &str| {
            visible_stages(&ctx, ctx.stage(id).unwrap())
                .into_iter()
                .collect::<Vec<_>>()
        };
        assert_eq!(vis("d"), ["a", "b"]);
        assert_eq!(vis("a"), Vec::<String>::new());
        assert_eq!(vis("e"), ["a", "c"]);
        assert_eq!(direct_needs(ctx.stage("e").unwrap()), ["a", "c"]);
    }
}
