//! The stage graph: stages as nodes, `needs` as edges from the needed stage to the
//! stage that needs it.
//!
//! Every order this module returns is deterministic (ties broken by id), so plans,
//! records and printed graphs are the same from run to run. Nodes are plain ids, so
//! fan-out instances (`implement.task-1`) can be added once an upstream stage has
//! produced its items.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};
use std::fmt;

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::Direction;

/// A dependency cycle, in `needs` order: each id needs the next; the last equals
/// the first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycle(pub Vec<String>);

impl fmt::Display for Cycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join(" → "))
    }
}

/// [`StageGraph::topo_order`] of `stages` as indexes into it, without building
/// the graph: every stage after all it needs, the smallest id first among stages
/// ready together. None when the needs have a cycle (a self-dependency counts).
/// Needs naming no stage in the list are left out; ids are expected to be
/// unique (validation makes them so), the first stage with an id being its node.
pub fn order_indexes<'a, N>(stages: &[(&'a str, N)]) -> Option<Vec<usize>>
where
    N: Clone + IntoIterator<Item = &'a str>,
{
    let mut by_id: HashMap<&str, usize> = HashMap::with_capacity(stages.len());
    for (i, (id, _)) in stages.iter().enumerate() {
        by_id.entry(*id).or_insert(i);
    }
    // A need given twice is counted twice and met twice: the same order as the
    // graph's one edge per pair.
    let mut waiting = vec![0usize; stages.len()];
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); stages.len()];
    for (i, (_, needs)) in stages.iter().enumerate() {
        for a in needs
            .clone()
            .into_iter()
            .filter_map(|n| by_id.get(n).copied())
        {
            waiting[i] += 1;
            dependents[a].push(i);
        }
    }
    let deps = &dependents;
    let order = smallest_id_first(|i| stages[i].0, waiting, |i| deps[i].iter().copied());
    (order.len() == stages.len()).then_some(order)
}

/// The walk both orders share: `waiting[i]` is how many needs of node `i` are
/// unmet, `dependents(i)` the nodes that need it; among nodes ready together the
/// smallest id goes first. Shorter than the graph where its needs have a cycle.
fn smallest_id_first<'a, I>(
    id: impl Fn(usize) -> &'a str,
    mut waiting: Vec<usize>,
    dependents: impl Fn(usize) -> I,
) -> Vec<usize>
where
    I: IntoIterator<Item = usize>,
{
    let mut ready: BinaryHeap<Reverse<(&str, usize)>> = waiting
        .iter()
        .enumerate()
        .filter(|(_, w)| **w == 0)
        .map(|(i, _)| Reverse((id(i), i)))
        .collect();
    let mut order = Vec::with_capacity(waiting.len());
    while let Some(Reverse((_, i))) = ready.pop() {
        order.push(i);
        for next in dependents(i) {
            waiting[next] -= 1;
            if waiting[next] == 0 {
                ready.push(Reverse((id(next), next)));
            }
        }
    }
    order
}

#[derive(Debug, Clone, Default)]
pub struct StageGraph {
    graph: DiGraph<String, ()>,
    index: BTreeMap<String, NodeIndex>,
}

impl StageGraph {
    pub fn new() -> Self {
        Self::default()
    }

    /// A graph of stages and what each needs. Needs naming a stage that is not in
    /// the list are left out: validation reports them with their location.
    pub fn from_needs<'a, I, N>(stages: I) -> Self
    where
        I: IntoIterator<Item = (&'a str, N)>,
        N: IntoIterator<Item = &'a str>,
    {
        // Ids are looked up through a hash map while building and the sorted
        // index is built once at the end: one ordered insert per node and two
        // ordered lookups per edge cost a third of a 10,000-stage validation.
        let stages: Vec<(&str, N)> = stages.into_iter().collect();
        let mut graph = DiGraph::with_capacity(stages.len(), stages.len() * 2);
        let mut by_id: HashMap<&str, NodeIndex> = HashMap::with_capacity(stages.len());
        for (id, _) in &stages {
            // The first stage with an id is its node, as with `add_node`.
            by_id
                .entry(*id)
                .or_insert_with(|| graph.add_node((*id).to_string()));
        }
        // A need named twice by one stage is one edge. That is told by a mark
        // per node (the turn that last added an edge from it), not by
        // `contains_edge`, which walks every edge of the needed node: a stage
        // that 10,000 others need made that quadratic.
        let mut marked = vec![usize::MAX; graph.node_count()];
        let mut filled = vec![false; graph.node_count()];
        for (turn, (id, needs)) in stages.into_iter().enumerate() {
            let b = by_id[id];
            // A second stage with an id already seen (validation reports it)
            // adds to the first one's node, which may hold the edge already.
            let again = std::mem::replace(&mut filled[b.index()], true);
            for need in needs {
                let Some(&a) = by_id.get(need) else {
                    continue;
                };
                if std::mem::replace(&mut marked[a.index()], turn) == turn {
                    continue;
                }
                if !(again && graph.contains_edge(a, b)) {
                    graph.add_edge(a, b, ());
                }
            }
        }
        let index = by_id
            .into_iter()
            .map(|(id, ix)| (id.to_string(), ix))
            .collect();
        StageGraph { graph, index }
    }

    /// Adds a node; false when the id is already there.
    pub fn add_node(&mut self, id: &str) -> bool {
        if self.index.contains_key(id) {
            return false;
        }
        let ix = self.graph.add_node(id.to_string());
        self.index.insert(id.to_string(), ix);
        true
    }

    /// Records that `dependent` needs `needed`; false when either is unknown or the
    /// edge exists already.
    pub fn add_edge(&mut self, needed: &str, dependent: &str) -> bool {
        let (Some(&a), Some(&b)) = (self.index.get(needed), self.index.get(dependent)) else {
            return false;
        };
        if self.graph.contains_edge(a, b) {
            return false;
        }
        self.graph.add_edge(a, b, ());
        true
    }

    pub fn contains(&self, id: &str) -> bool {
        self.index.contains_key(id)
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Every id, sorted.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.index.keys().map(String::as_str)
    }

    /// The stages `id` needs directly, sorted.
    pub fn needs(&self, id: &str) -> Vec<&str> {
        self.neighbours(id, Direction::Incoming)
    }

    /// The stages that need `id` directly, sorted.
    pub fn dependents(&self, id: &str) -> Vec<&str> {
        self.neighbours(id, Direction::Outgoing)
    }

    fn neighbours(&self, id: &str, dir: Direction) -> Vec<&str> {
        let Some(&ix) = self.index.get(id) else {
            return Vec::new();
        };
        let set: BTreeSet<&str> = self
            .graph
            .neighbors_directed(ix, dir)
            .map(|n| self.graph[n].as_str())
            .collect();
        set.into_iter().collect()
    }

    /// Every stage after all it needs; among stages that are ready together, the
    /// smallest id first. Fails with one cycle when there is any.
    pub fn topo_order(&self) -> Result<Vec<String>, Cycle> {
        // Counted and walked by node index: no id is compared except to order
        // the ready nodes. `add_edge` keeps at most one edge per pair, so the
        // edges into a node are its distinct needs.
        let waiting: Vec<usize> = self
            .graph
            .node_indices()
            .map(|ix| {
                self.graph
                    .neighbors_directed(ix, Direction::Incoming)
                    .count()
            })
            .collect();
        let order: Vec<String> = smallest_id_first(
            |i| self.graph[NodeIndex::new(i)].as_str(),
            waiting,
            |i| {
                self.graph
                    .neighbors_directed(NodeIndex::new(i), Direction::Outgoing)
                    .map(NodeIndex::index)
            },
        )
        .into_iter()
        .map(|i| self.graph[NodeIndex::new(i)].clone())
        .collect();
        if order.len() == self.len() {
            Ok(order)
        } else {
            Err(self
                .find_cycles()
                .into_iter()
                .next()
                .expect("a graph without a topological order has a cycle"))
        }
    }

    /// One cycle per strongly connected group of stages (a self-dependency counts),
    /// each starting at the group's smallest id, sorted by that id.
    pub fn find_cycles(&self) -> Vec<Cycle> {
        let mut cycles = Vec::new();
        for scc in petgraph::algo::tarjan_scc(&self.graph) {
            // A lone stage is a cycle only when it needs itself: decided without
            // building a set per stage, as almost every group is a lone stage.
            if let [ix] = scc[..] {
                if !self.graph.contains_edge(ix, ix) {
                    continue;
                }
            }
            let members: BTreeSet<&str> = scc.iter().map(|&ix| self.graph[ix].as_str()).collect();
            let start = *members.iter().next().expect("components are not empty");
            cycles.push(self.cycle_through(start, &members));
        }
        cycles.sort_by(|a, b| a.0[0].cmp(&b.0[0]));
        cycles
    }

    /// A simple cycle from `start` back to it along `needs`, staying inside one
    /// strongly connected group (so one exists); depth-first, smallest id first.
    fn cycle_through(&self, start: &str, members: &BTreeSet<&str>) -> Cycle {
        let mut path = vec![start];
        let mut seen = BTreeSet::from([start]);
        // Each frame: the candidates still to try from the node at that depth.
        let mut stack: Vec<Vec<&str>> = vec![self.next_steps(start, members)];
        while let Some(candidates) = stack.last_mut() {
            let Some(next) = candidates.pop() else {
                stack.pop();
                path.pop();
                continue;
            };
            if next == start {
                path.push(start);
                return Cycle(path.into_iter().map(String::from).collect());
            }
            if seen.insert(next) {
                path.push(next);
                stack.push(self.next_steps(next, members));
            }
        }
        unreachable!("a strongly connected group with an edge has a cycle through each member")
    }

    /// The needs of `id` inside the group, reversed so that popping yields the
    /// smallest id first.
    fn next_steps<'a>(&'a self, id: &str, members: &BTreeSet<&str>) -> Vec<&'a str> {
        let mut v: Vec<&str> = self
            .needs(id)
            .into_iter()
            .filter(|n| members.contains(n))
            .collect();
        v.reverse();
        v
    }

    /// The given stages and everything they need, directly or transitively.
    pub fn ancestors<'a>(&self, ids: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
        self.closure(ids, Direction::Incoming)
    }

    #[cfg(test)]
    /// The given stages and everything that needs them, directly or transitively.
    pub fn descendants<'a>(&self, ids: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
        self.closure(ids, Direction::Outgoing)
    }

    fn closure<'a>(
        &self,
        ids: impl IntoIterator<Item = &'a str>,
        dir: Direction,
    ) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let mut todo: Vec<NodeIndex> = ids
            .into_iter()
            .filter_map(|id| self.index.get(id).copied())
            .collect();
        while let Some(ix) = todo.pop() {
            if out.insert(self.graph[ix].clone()) {
                todo.extend(self.graph.neighbors_directed(ix, dir));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(edges: &[(&'static str, &'static [&'static str])]) -> StageGraph {
        StageGraph::from_needs(edges.iter().map(|(id, needs)| (*id, needs.iter().copied())))
    }

    #[test]
    fn ties_are_broken_by_id() {
        let g = graph(&[("c", &[]), ("b", &[]), ("a", &["c"]), ("d", &["b"])]);
        assert_eq!(g.topo_order().unwrap(), ["b", "c", "a", "d"]);
    }

    #[test]
    fn a_three_stage_cycle_is_reported_whole() {
        let g = graph(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"]), ("d", &[])]);
        let cycle = g.topo_order().unwrap_err();
        assert_eq!(cycle.to_string(), "a → b → c → a");
    }

    #[test]
    fn a_self_dependency_is_a_cycle() {
        let g = graph(&[("a", &["a"])]);
        assert_eq!(g.find_cycles(), vec![Cycle(vec!["a".into(), "a".into()])]);
    }

    /// A need named twice is one edge, also when a second stage with an id
    /// already seen (which validation reports) names it again.
    #[test]
    fn each_need_is_one_edge() {
        let g = graph(&[
            ("a", &[]),
            ("b", &["a", "a"]),
            ("c", &["a", "b", "a"]),
            ("b", &["a", "c", "c"]),
        ]);
        // a → b, a → c, b → c, c → b
        assert_eq!(g.graph.edge_count(), 4);
        assert_eq!(g.needs("b"), ["a", "c"]);
        assert_eq!(g.dependents("a"), ["b", "c"]);
    }

    proptest::proptest! {
        /// The edges are exactly the (need, stage) pairs of known ids, each
        /// once, whatever the repeats among ids and needs.
        #[test]
        fn the_edges_are_the_known_needs_once_each(
            stages in proptest::collection::vec(
                (0u8..8, proptest::collection::vec(0u8..10, 0..6)),
                0..12,
            )
        ) {
            let name = |n: u8| format!("s{n}");
            let stages: Vec<(String, Vec<String>)> = stages
                .iter()
                .map(|(id, needs)| (name(*id), needs.iter().map(|n| name(*n)).collect()))
                .collect();
            let g = StageGraph::from_needs(
                stages.iter().map(|(id, needs)| (id.as_str(), needs.iter().map(String::as_str))),
            );
            let known: BTreeSet<&str> = stages.iter().map(|(id, _)| id.as_str()).collect();
            let model: BTreeSet<(&str, &str)> = stages
                .iter()
                .flat_map(|(id, needs)| needs.iter().map(move |n| (n.as_str(), id.as_str())))
                .filter(|(need, _)| known.contains(need))
                .collect();
            let edges: Vec<(&str, &str)> = g
                .graph
                .edge_indices()
                .map(|e| {
                    let (a, b) = g.graph.edge_endpoints(e).unwrap();
                    (g.graph[a].as_str(), g.graph[b].as_str())
                })
                .collect();
            proptest::prop_assert_eq!(edges.len(), model.len(), "{:?}", edges);
            proptest::prop_assert_eq!(edges.into_iter().collect::<BTreeSet<_>>(), model);
        }
    }

    #[test]
    fn unknown_needs_are_left_out() {
        let g = graph(&[("a", &["ghost"])]);
        assert_eq!(g.topo_order().unwrap(), ["a"]);
    }

    #[test]
    fn ancestors_and_descendants_include_the_start() {
        let g = graph(&[("a", &[]), ("b", &["a"]), ("c", &["b"]), ("x", &[])]);
        assert_eq!(
            g.ancestors(["c"]).into_iter().collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
        assert_eq!(
            g.descendants(["b"]).into_iter().collect::<Vec<_>>(),
            ["b", "c"]
        );
    }
}
