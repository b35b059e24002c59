//! Drawing the stage graph: Mermaid, Graphviz dot, or JSON.

use std::collections::HashMap;

use serde::Serialize;

use crate::dag::StageGraph;
use crate::pipeline::model::PipelineFile;
use crate::store::PlanRecord;

/// `items` in the graph's topological order (ties by id; the graph's ids when it
/// has a cycle), found by id through a map rather than a scan per id, which is
/// quadratic in the pipeline's size. The first of a repeated id wins.
fn in_order<'a, T>(
    graph: &StageGraph,
    items: &'a [T],
    id: impl Fn(&T) -> &String,
) -> impl Iterator<Item = &'a T> {
    let by_id: HashMap<&str, &T> = items.iter().rev().map(|t| (id(t).as_str(), t)).collect();
    graph
        .topo_order()
        .unwrap_or_else(|_| graph.ids().map(String::from).collect())
        .into_iter()
        .filter_map(move |i| by_id.get(i.as_str()).copied())
}

/// One node as drawn.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphNode {
    pub id: String,
    pub kind: String,
    pub needs: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub for_each: Option<String>,
    /// For the graph of a recorded run: the node's status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// A graph ready to draw: nodes in topological order (ties by id).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GraphView {
    pub nodes: Vec<GraphNode>,
}

impl GraphView {
    /// The graph of a pipeline that validated (so it has no cycle), drawn from the
    /// graph validation built ([`crate::pipeline::ValidPipeline::graph`]).
    pub fn of_pipeline(file: &PipelineFile, graph: &StageGraph) -> Self {
        let nodes = in_order(graph, &file.stages, |s| &s.id)
            .map(|s| GraphNode {
                id: s.id.clone(),
                kind: s.kind.as_str().to_string(),
                needs: needs_of(graph, &s.id),
                for_each: s.for_each.as_ref().map(|f| f.stage.clone()),
                status: None,
            })
            .collect();
        GraphView { nodes }
    }

    /// The expanded graph of a recorded run: the nodes of its `plan.json` (fan-out
    /// instances in place of their stage), each with the status its `stage.json`
    /// records.
    pub fn of_run(plan: &PlanRecord, status_of: impl Fn(&str) -> Option<String>) -> Self {
        let graph = StageGraph::from_needs(
            plan.nodes
                .iter()
                .map(|n| (n.id.as_str(), n.needs.iter().map(String::as_str))),
        );
        let nodes = in_order(&graph, &plan.nodes, |n| &n.id)
            .map(|n| GraphNode {
                id: n.id.clone(),
                kind: n.kind.as_str().to_string(),
                needs: n.needs.clone(),
                for_each: n.instance_of.clone(),
                status: status_of(&n.id).or_else(|| Some("pending".into())),
            })
            .collect();
        GraphView { nodes }
    }

    pub fn to_mermaid(&self) -> String {
        let mut out = String::from("flowchart TD\n");
        for n in &self.nodes {
            let label = match &n.status {
                Some(st) => format!("{}<br/>{} · {st}", n.id, n.kind),
                None => format!("{}<br/>{}", n.id, n.kind),
            };
            out.push_str(&format!("    {}[\"{}\"]\n", mermaid_id(&n.id), label));
        }
        for n in &self.nodes {
            for need in &n.needs {
                out.push_str(&format!(
                    "    {} --> {}\n",
                    mermaid_id(need),
                    mermaid_id(&n.id)
                ));
            }
        }
        let styled: Vec<(&GraphNode, StatusStyle)> = self
            .nodes
            .iter()
            .filter_map(|n| Some((n, StatusStyle::of(n.status.as_deref()?)?)))
            .collect();
        for style in StatusStyle::ALL {
            if styled.iter().any(|(_, s)| *s == style) {
                out.push_str(&format!(
                    "    classDef {} fill:{},stroke:{}\n",
                    style.name(),
                    style.fill(),
                    style.stroke()
                ));
            }
        }
        for (n, style) in &styled {
            out.push_str(&format!(
                "    class {} {}\n",
                mermaid_id(&n.id),
                style.name()
            ));
        }
        out
    }

    pub fn to_dot(&self) -> String {
        let mut out = String::from("digraph pipeline {\n    rankdir=TB;\n    node [shape=box];\n");
        for n in &self.nodes {
            let label = match &n.status {
                Some(st) => format!("{}\\n{} · {st}", n.id, n.kind),
                None => format!("{}\\n{}", n.id, n.kind),
            };
            let style = match n.status.as_deref().and_then(StatusStyle::of) {
                Some(s) => format!(
                    ", style=filled, fillcolor=\"{}\", color=\"{}\"",
                    s.fill(),
                    s.stroke()
                ),
                None => String::new(),
            };
            out.push_str(&format!(
                "    {} [label={}{style}];\n",
                dot_id(&n.id),
                dot_string(&label)
            ));
        }
        for n in &self.nodes {
            for need in &n.needs {
                out.push_str(&format!("    {} -> {};\n", dot_id(need), dot_id(&n.id)));
            }
        }
        out.push_str("}\n");
        out
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("serializable")
    }
}

/// How a recorded status is drawn: a stage that passed its gate, one that ended at
/// its gate, one that failed, one that never ran because of another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StatusStyle {
    Passed,
    Gate,
    Failed,
    Blocked,
}

impl StatusStyle {
    const ALL: [StatusStyle; 4] = [
        StatusStyle::Passed,
        StatusStyle::Gate,
        StatusStyle::Failed,
        StatusStyle::Blocked,
    ];

    fn of(status: &str) -> Option<Self> {
        use crate::status::StageStatus as S;
        let parsed: S = serde_json::from_value(serde_json::Value::String(status.into())).ok()?;
        Some(match parsed {
            S::Pending | S::Running | S::Retired => return None,
            s if s.passed() => StatusStyle::Passed,
            s if s.is_gate_failure() => StatusStyle::Gate,
            s if s.not_run() => StatusStyle::Blocked,
            _ => StatusStyle::Failed,
        })
    }

    fn name(self) -> &'static str {
        match self {
            StatusStyle::Passed => "passed",
            StatusStyle::Gate => "gateFailed",
            StatusStyle::Failed => "failed",
            StatusStyle::Blocked => "blocked",
        }
    }

    fn fill(self) -> &'static str {
        match self {
            StatusStyle::Passed => "#d4edda",
            StatusStyle::Gate => "#fff3cd",
            StatusStyle::Failed => "#f8d7da",
            StatusStyle::Blocked => "#e2e3e5",
        }
    }

    fn stroke(self) -> &'static str {
        match self {
            StatusStyle::Passed => "#28a745",
            StatusStyle::Gate => "#d39e00",
            StatusStyle::Failed => "#dc3545",
            StatusStyle::Blocked => "#6c757d",
        }
    }
}

fn needs_of(graph: &StageGraph, id: &str) -> Vec<String> {
    graph.needs(id).into_iter().map(String::from).collect()
}

/// Mermaid node ids: stage ids are `[a-z0-9_-]` (instances add `.`), which
/// Mermaid reads fine except for a few reserved words and dots.
fn mermaid_id(id: &str) -> String {
    let safe: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("s_{safe}")
}

fn dot_id(id: &str) -> String {
    dot_string(id)
}

fn dot_string(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\\\""))
}
