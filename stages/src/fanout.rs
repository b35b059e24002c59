//! `forEach` fan-out (docs/stage-kinds.md): one instance of a stage per item of an upstream
//! stage's output array.
//!
//! Items are checked when the upstream stage's output is accepted
//! ([`check_consumers`]), so an unsafe or duplicate item id fails that stage
//! before any instance runs; [`expand`] then grows the placeholder.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use specbridge_engine::dag::StageGraph;
use specbridge_engine::pipeline::{PipelineFile, StageDef};
use specbridge_engine::scheduler::Node;
use specbridge_engine::store::layout;
use specbridge_engine::store::{is_safe_component, RunHandle, MAX_ID_BYTES};

/// One item as the instances see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub id: String,
    pub depends_on: Vec<String>,
    pub value: Value,
}

/// The items at `pointer` of `output`, checked: an array of objects, each with a
/// path-safe, unique string `id` and `dependsOn` naming only siblings, without
/// cycles.
/// `consumer` is the `forEach` stage, whose instance ids (`<consumer>.<item>`) must
/// fit in a folder name.
pub fn items(
    output: &Value,
    pointer: &str,
    stage: &str,
    consumer: &str,
) -> Result<Vec<Item>, String> {
    let arr = output
        .pointer(pointer)
        .ok_or_else(|| format!("`{pointer}` is not in the output of `{stage}`"))?
        .as_array()
        .ok_or_else(|| format!("`{pointer}` in the output of `{stage}` is not an array"))?;
    let mut items = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, v) in arr.iter().enumerate() {
        let id = v
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("item {i} of `{stage}{pointer}` has no string `id`"))?;
        let instance = instance_id(consumer, id);
        if instance.len() > MAX_ID_BYTES {
            return Err(format!(
                "item {i} of `{stage}{pointer}` has an id of {} bytes: its instance id `{}…` would be {} bytes, more than the {MAX_ID_BYTES} a stage folder may take",
                id.len(),
                &instance[..40.min(instance.len())],
                instance.len()
            ));
        }
        if !is_safe_component(id) || id.contains("..") {
            return Err(format!(
                "item {i} of `{stage}{pointer}` has the unsafe id `{id}`: ids must be [A-Za-z0-9._-], not start with a dot, and not contain `..`"
            ));
        }
        if !seen.insert(id.to_string()) {
            return Err(format!(
                "item id `{id}` appears twice in `{stage}{pointer}`"
            ));
        }
        let depends_on = match v.get("dependsOn") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|d| {
                    d.as_str().map(String::from).ok_or_else(|| {
                        format!("item `{id}` of `{stage}{pointer}` has a dependsOn that is not a string")
                    })
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(format!(
                    "item `{id}` of `{stage}{pointer}`: dependsOn must be an array of ids"
                ))
            }
        };
        items.push(Item {
            id: id.to_string(),
            depends_on,
            value: v.clone(),
        });
    }
    for it in &items {
        for d in &it.depends_on {
            if d == &it.id {
                return Err(format!(
                    "item `{}` of `{stage}{pointer}` depends on itself",
                    it.id
                ));
            }
            if !seen.contains(d) {
                return Err(format!(
                    "item `{}` of `{stage}{pointer}` depends on `{d}`, which is not an item",
                    it.id
                ));
            }
        }
    }
    let graph = StageGraph::from_needs(
        items
            .iter()
            .map(|i| (i.id.as_str(), i.depends_on.iter().map(String::as_str))),
    );
    if let Err(cycle) = graph.topo_order() {
        return Err(format!(
            "the items of `{stage}{pointer}` depend on each other in a cycle: {cycle}"
        ));
    }
    Ok(items)
}

/// The `forEach` stages fed by `source`.
pub fn consumers<'a>(file: &'a PipelineFile, source: &str) -> Vec<&'a StageDef> {
    file.stages
        .iter()
        .filter(|s| s.for_each.as_ref().is_some_and(|f| f.stage == source))
        .collect()
}

/// Check the output of `source` for every stage that fans out over it.
pub fn check_consumers(file: &PipelineFile, source: &str, output: &Value) -> Result<(), String> {
    for c in consumers(file, source) {
        let fe = c.for_each.as_ref().expect("a consumer has forEach");
        items(output, &fe.items, source, &c.id)
            .map_err(|e| format!("fan-out of `{}`: {e}", c.id))?;
    }
    Ok(())
}

/// The instance id of an item: `<stage>.<item-id>`.
pub fn instance_id(stage: &str, item: &str) -> String {
    format!("{stage}.{item}")
}

/// The accepted output of a stage in this run.
pub fn read_output(run: &RunHandle, stage: &str) -> Result<Value, String> {
    let rel = layout::output_rel(stage);
    let path = run.path(&rel).map_err(|e| e.to_string())?;
    let bytes = std::fs::read(&path).map_err(|e| format!("failed to read {rel}: {e}"))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("failed to parse {rel}: {e}"))
}

/// Grow a placeholder into its instances: each needs what the stage needs, plus
/// the instances of the items it depends on.
pub fn expand(stage: &StageDef, placeholder: &Node, run: &RunHandle) -> Result<Vec<Node>, String> {
    let fe = stage
        .for_each
        .as_ref()
        .ok_or_else(|| format!("stage `{}` has no forEach", stage.id))?;
    let output = read_output(run, &fe.stage)?;
    let items = items(&output, &fe.items, &fe.stage, &stage.id)?;
    Ok(items
        .iter()
        .map(|it| {
            let mut needs = placeholder.needs.clone();
            needs.extend(it.depends_on.iter().map(|d| instance_id(&stage.id, d)));
            Node {
                id: instance_id(&stage.id, &it.id),
                kind: stage.kind,
                needs,
                instance_of: Some(stage.id.clone()),
                item_id: Some(it.id.clone()),
                placeholder: false,
                prior_attempts: 0,
            }
        })
        .collect())
}

/// The item an instance was made for.
pub fn item_of(file: &PipelineFile, run: &RunHandle, node: &Node) -> Result<Option<Value>, String> {
    let (Some(stage_id), Some(item_id)) = (&node.instance_of, &node.item_id) else {
        return Ok(None);
    };
    let stage = file
        .stages
        .iter()
        .find(|s| &s.id == stage_id)
        .ok_or_else(|| format!("stage `{stage_id}` is not in the pipeline"))?;
    let fe = stage
        .for_each
        .as_ref()
        .ok_or_else(|| format!("stage `{stage_id}` has no forEach"))?;
    let output = read_output(run, &fe.stage)?;
    let by_id: BTreeMap<String, Value> = items(&output, &fe.items, &fe.stage, stage_id)?
        .into_iter()
        .map(|i| (i.id, i.value))
        .collect();
    by_id.get(item_id).cloned().map(Some).ok_or_else(|| {
        format!(
            "item `{item_id}` is no longer in `{}{}`",
            fe.stage, fe.items
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ids(out: &Value) -> Result<Vec<(String, Vec<String>)>, String> {
        Ok(items(out, "/tasks", "tasks", "implement")?
            .into_iter()
            .map(|i| (i.id, i.depends_on))
            .collect())
    }

    #[test]
    fn items_with_dependencies_are_read() {
        let out = json!({"tasks": [
            {"id": "t1"}, {"id": "t2", "dependsOn": []}, {"id": "t3", "dependsOn": ["t1"]}
        ]});
        assert_eq!(
            ids(&out).unwrap(),
            vec![
                ("t1".to_string(), vec![]),
                ("t2".to_string(), vec![]),
                ("t3".to_string(), vec!["t1".to_string()])
            ]
        );
    }

    #[test]
    fn unsafe_duplicate_dangling_and_cyclic_items_are_refused() {
        let cases = [
            (json!({"tasks": [{"id": "../x"}]}), "unsafe id `../x`"),
            (json!({"tasks": [{"id": ".hidden"}]}), "unsafe id `.hidden`"),
            (json!({"tasks": [{"id": "a/b"}]}), "unsafe id `a/b`"),
            (
                json!({"tasks": [{"id": "a"}, {"id": "a"}]}),
                "appears twice",
            ),
            (
                json!({"tasks": [{"id": "a", "dependsOn": ["z"]}]}),
                "`z`, which is not an item",
            ),
            (
                json!({"tasks": [{"id": "a", "dependsOn": ["a"]}]}),
                "depends on itself",
            ),
            (
                json!({"tasks": [{"id": "a", "dependsOn": ["b"]}, {"id": "b", "dependsOn": ["a"]}]}),
                "cycle",
            ),
            (json!({"tasks": [{"title": "no id"}]}), "has no string `id`"),
            (
                json!({"tasks": [{"id": "a".repeat(300)}]}),
                "has an id of 300 bytes",
            ),
            (
                json!({"tasks": [{"id": "a".repeat(191)}]}),
                "would be 201 bytes, more than the 200",
            ),
            (json!({"tasks": {}}), "is not an array"),
            (json!({}), "is not in the output"),
        ];
        for (out, want) in cases {
            let e = ids(&out).unwrap_err();
            assert!(e.contains(want), "{out}: {e}");
        }
    }
}
