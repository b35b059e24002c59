//! `forEach` fan-out (docs/stage-kinds.md): one instance of a stage per item of an upstream
//! stage's output array.
//!
//! Items are checked when the upstream stage's output is accepted
//! ([`check_consumers`]), so an unsafe or duplicate item id fails that stage
//! before any instance runs; [`expand`] then grows the placeholder.

use std::collections::BTreeSet;

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

/// Why the items of a fan-out cannot be used (the stage whose output they are in,
/// `stage`, and where, `at`: the stage and the pointer).
#[derive(Debug, thiserror::Error)]
pub enum FanOutError {
    #[error("`{pointer}` is not in the output of `{stage}`")]
    Missing { pointer: String, stage: String },
    #[error("`{pointer}` in the output of `{stage}` is not an array")]
    NotAnArray { pointer: String, stage: String },
    #[error("item {index} of `{at}` has no string `id`")]
    NoId { index: usize, at: String },
    #[error("item {index} of `{at}` has an id of {id_bytes} bytes: its instance id `{start}…` would be {instance_bytes} bytes, more than the {MAX_ID_BYTES} a stage folder may take")]
    IdTooLong {
        index: usize,
        at: String,
        id_bytes: usize,
        start: String,
        instance_bytes: usize,
    },
    #[error("item {index} of `{at}` has the unsafe id `{id}`: ids must be [A-Za-z0-9._-], not start with a dot, and not contain `..`")]
    UnsafeId {
        index: usize,
        at: String,
        id: String,
    },
    #[error("item id `{id}` appears twice in `{at}`")]
    Duplicate { id: String, at: String },
    #[error("item `{id}` of `{at}` has a dependsOn that is not a string")]
    DependencyNotAString { id: String, at: String },
    #[error("item `{id}` of `{at}`: dependsOn must be an array of ids")]
    DependenciesNotAnArray { id: String, at: String },
    #[error("item `{id}` of `{at}` depends on itself")]
    SelfDependency { id: String, at: String },
    #[error("item `{id}` of `{at}` depends on `{dependency}`, which is not an item")]
    UnknownDependency {
        id: String,
        at: String,
        dependency: String,
    },
    #[error("the items of `{at}` depend on each other in a cycle: {cycle}")]
    Cycle { at: String, cycle: String },
    /// The items, as the `forEach` stage `consumer` would grow instances from them.
    #[error("fan-out of `{consumer}`")]
    Consumer {
        consumer: String,
        #[source]
        source: Box<FanOutError>,
    },
    #[error("stage `{0}` is not in the pipeline")]
    UnknownStage(String),
    #[error("stage `{0}` has no forEach")]
    NoForEach(String),
    #[error(transparent)]
    Store(#[from] specbridge_engine::store::StoreError),
    #[error("failed to read {rel}")]
    ReadOutput {
        rel: String,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to parse {rel}")]
    ParseOutput {
        rel: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("item `{item}` is no longer in `{at}`")]
    ItemGone { item: String, at: String },
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
) -> Result<Vec<Item>, FanOutError> {
    let at = format!("{stage}{pointer}");
    let arr = output
        .pointer(pointer)
        .ok_or_else(|| FanOutError::Missing {
            pointer: pointer.to_string(),
            stage: stage.to_string(),
        })?
        .as_array()
        .ok_or_else(|| FanOutError::NotAnArray {
            pointer: pointer.to_string(),
            stage: stage.to_string(),
        })?;
    let mut items = Vec::new();
    let mut seen = BTreeSet::new();
    for (index, v) in arr.iter().enumerate() {
        let id = v
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| FanOutError::NoId {
                index,
                at: at.clone(),
            })?;
        let instance = instance_id(consumer, id);
        if instance.len() > MAX_ID_BYTES {
            return Err(FanOutError::IdTooLong {
                index,
                at,
                id_bytes: id.len(),
                start: instance[..40.min(instance.len())].to_string(),
                instance_bytes: instance.len(),
            });
        }
        if !is_safe_component(id) || id.contains("..") {
            return Err(FanOutError::UnsafeId {
                index,
                at,
                id: id.to_string(),
            });
        }
        if !seen.insert(id.to_string()) {
            return Err(FanOutError::Duplicate {
                id: id.to_string(),
                at,
            });
        }
        let depends_on = match v.get("dependsOn") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|d| {
                    d.as_str()
                        .map(String::from)
                        .ok_or_else(|| FanOutError::DependencyNotAString {
                            id: id.to_string(),
                            at: at.clone(),
                        })
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(FanOutError::DependenciesNotAnArray {
                    id: id.to_string(),
                    at,
                })
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
                return Err(FanOutError::SelfDependency {
                    id: it.id.clone(),
                    at,
                });
            }
            if !seen.contains(d) {
                return Err(FanOutError::UnknownDependency {
                    id: it.id.clone(),
                    at,
                    dependency: d.clone(),
                });
            }
        }
    }
    let graph = StageGraph::from_needs(
        items
            .iter()
            .map(|i| (i.id.as_str(), i.depends_on.iter().map(String::as_str))),
    );
    if let Err(cycle) = graph.topo_order() {
        return Err(FanOutError::Cycle {
            at,
            cycle: cycle.to_string(),
        });
    }
    Ok(items)
}

/// The `forEach` stages fed by `source`.
pub(crate) fn consumers<'a>(file: &'a PipelineFile, source: &str) -> Vec<&'a StageDef> {
    file.stages
        .iter()
        .filter(|s| s.for_each.as_ref().is_some_and(|f| f.stage == source))
        .collect()
}

/// Check the output of `source` for every stage that fans out over it.
pub(crate) fn check_consumers(
    file: &PipelineFile,
    source: &str,
    output: &Value,
) -> Result<(), FanOutError> {
    for c in consumers(file, source) {
        let fe = c.for_each.as_ref().expect("a consumer has forEach");
        items(output, &fe.items, source, &c.id).map_err(|e| FanOutError::Consumer {
            consumer: c.id.clone(),
            source: Box::new(e),
        })?;
    }
    Ok(())
}

/// The instance id of an item: `<stage>.<item-id>`.
pub(crate) fn instance_id(stage: &str, item: &str) -> String {
    format!("{stage}.{item}")
}

/// The accepted output of a stage in this run.
pub(crate) fn read_output(run: &RunHandle, stage: &str) -> Result<Value, FanOutError> {
    let rel = layout::output_rel(stage);
    let bytes = std::fs::read(run.path(&rel)?).map_err(|source| FanOutError::ReadOutput {
        rel: rel.clone(),
        source,
    })?;
    serde_json::from_slice(&bytes).map_err(|source| FanOutError::ParseOutput { rel, source })
}

/// Grow a placeholder into its instances: each needs what the stage needs, plus
/// the instances of the items it depends on.
pub(crate) fn expand(
    stage: &StageDef,
    placeholder: &Node,
    run: &RunHandle,
) -> Result<Vec<Node>, FanOutError> {
    let fe = stage
        .for_each
        .as_ref()
        .ok_or_else(|| FanOutError::NoForEach(stage.id.clone()))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ids(out: &Value) -> Result<Vec<(String, Vec<String>)>, String> {
        Ok(items(out, "/tasks", "tasks", "implement")
            .map_err(|e| e.to_string())?
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
