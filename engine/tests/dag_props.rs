//! Property tests of the stage graph on random DAGs.

use proptest::prelude::*;
use specbridge_engine::dag::StageGraph;

/// A random DAG: stage number j may need any stage number i < j.
fn dag() -> impl Strategy<Value = (usize, Vec<(usize, usize)>)> {
    (2usize..12).prop_flat_map(|n| {
        let pairs: Vec<(usize, usize)> = (0..n).flat_map(|j| (0..j).map(move |i| (i, j))).collect();
        let len = pairs.len();
        (Just(n), proptest::sample::subsequence(pairs, 0..=len))
    })
}

fn id(i: usize) -> String {
    // Reverse the numbering so that the id order is not the construction order.
    format!("s{:02}", 99 - i)
}

fn build(n: usize, edges: &[(usize, usize)]) -> StageGraph {
    let mut g = StageGraph::new();
    for i in 0..n {
        g.add_node(&id(i));
    }
    for &(i, j) in edges {
        g.add_edge(&id(i), &id(j));
    }
    g
}

proptest! {
    #[test]
    fn topological_order_respects_every_edge((n, edges) in dag()) {
        let g = build(n, &edges);
        let order = g.topo_order().expect("a DAG has an order");
        prop_assert_eq!(order.len(), n);
        let pos = |s: &str| order.iter().position(|o| o == s).unwrap();
        for &(i, j) in &edges {
            prop_assert!(pos(&id(i)) < pos(&id(j)), "{} must come before {}", id(i), id(j));
        }
        // Deterministic: building again gives the same order.
        prop_assert_eq!(build(n, &edges).topo_order().unwrap(), order);
    }

    #[test]
    fn an_added_back_edge_is_reported_as_a_real_cycle(
        (n, edges) in dag(),
        pick in any::<proptest::sample::Index>(),
    ) {
        prop_assume!(!edges.is_empty());
        let (i, j) = edges[pick.index(edges.len())];
        let mut g = build(n, &edges);
        // j needs i already; now i needs j too.
        prop_assert!(g.add_edge(&id(j), &id(i)));
        let cycle = g.topo_order().expect_err("a back-edge makes a cycle");
        let path = &cycle.0;
        prop_assert!(path.len() >= 3);
        prop_assert_eq!(path.first(), path.last());
        for step in path.windows(2) {
            prop_assert!(
                g.needs(&step[0]).contains(&step[1].as_str()),
                "{} does not need {}", step[0], step[1]
            );
        }
        let inner = &path[..path.len() - 1];
        let distinct: std::collections::BTreeSet<_> = inner.iter().collect();
        prop_assert_eq!(distinct.len(), inner.len(), "a cycle path visits each stage once");
        prop_assert!(!g.find_cycles().is_empty());
    }
}

/// Any graph: stages (ids may repeat) whose needs name any stage, themselves
/// included, or one that does not exist, possibly twice.
fn any_graph() -> impl Strategy<Value = Vec<(String, Vec<String>)>> {
    let name = (0usize..14).prop_map(|i| format!("s{i:02}"));
    prop::collection::vec((name.clone(), prop::collection::vec(name, 0..4)), 0..12)
}

/// The order the graph must give, worked out the plain way: repeatedly the
/// smallest id whose needs are all placed; None when some stage never is.
fn reference_order(stages: &[(String, Vec<String>)]) -> Option<Vec<String>> {
    use std::collections::{BTreeMap, BTreeSet};
    let mut needs: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (id, _) in stages {
        needs.entry(id.as_str()).or_default();
    }
    // A repeated id is one stage, needing what each of its entries needs.
    for (id, ns) in stages {
        for n in ns {
            if needs.contains_key(n.as_str()) {
                needs.get_mut(id.as_str()).unwrap().insert(n.as_str());
            }
        }
    }
    let mut order: Vec<String> = Vec::new();
    while order.len() < needs.len() {
        let placed: BTreeSet<&str> = order.iter().map(String::as_str).collect();
        let next = needs
            .iter()
            .find(|(id, ns)| !placed.contains(*id) && ns.iter().all(|n| placed.contains(n)))?;
        order.push(next.0.to_string());
    }
    Some(order)
}

proptest! {
    /// `from_needs` builds the graph that adding each stage and then each need
    /// one at a time builds: same ids, edges, order and cycles.
    #[test]
    fn from_needs_equals_adding_one_at_a_time(stages in any_graph()) {
        let built = StageGraph::from_needs(
            stages.iter().map(|(id, ns)| (id.as_str(), ns.iter().map(String::as_str))),
        );
        let mut added = StageGraph::new();
        for (id, _) in &stages {
            added.add_node(id);
        }
        for (id, ns) in &stages {
            for n in ns {
                added.add_edge(n, id);
            }
        }
        prop_assert_eq!(built.ids().collect::<Vec<_>>(), added.ids().collect::<Vec<_>>());
        for id in added.ids() {
            prop_assert_eq!(built.needs(id), added.needs(id));
            prop_assert_eq!(built.dependents(id), added.dependents(id));
        }
        prop_assert_eq!(built.topo_order(), added.topo_order());
        prop_assert_eq!(built.find_cycles(), added.find_cycles());
    }

    /// The order is the smallest-id-first order, and there is none exactly when
    /// the stages cannot all be placed; a self-dependency is a cycle of its own.
    #[test]
    fn the_order_is_the_reference_order(stages in any_graph()) {
        let g = StageGraph::from_needs(
            stages.iter().map(|(id, ns)| (id.as_str(), ns.iter().map(String::as_str))),
        );
        let expected = reference_order(&stages);
        prop_assert_eq!(g.topo_order().ok(), expected.clone());
        prop_assert_eq!(g.find_cycles().is_empty(), expected.is_some());
        for cycle in g.find_cycles() {
            let path = &cycle.0;
            prop_assert_eq!(path.first(), path.last());
            for step in path.windows(2) {
                prop_assert!(g.needs(&step[0]).contains(&step[1].as_str()));
            }
        }
    }
}

/// A random graph that may have cycles and needs of unknown stages: stage j may
/// need any stage number below `n + 2` (two of them do not exist), itself included.
fn any_needs() -> impl Strategy<Value = (usize, Vec<Vec<usize>>)> {
    (1usize..12).prop_flat_map(|n| {
        (
            Just(n),
            proptest::collection::vec(proptest::collection::vec(0..n + 2, 0..4), n),
        )
    })
}

proptest! {
    /// The index-level order is the graph's order, stage for stage, and fails
    /// exactly where the graph finds a cycle.
    #[test]
    fn the_order_by_index_is_the_graphs_order((n, needs) in any_needs()) {
        let ids: Vec<String> = (0..n + 2).map(id).collect();
        let named: Vec<(&str, Vec<&str>)> = (0..n)
            .map(|j| (ids[j].as_str(), needs[j].iter().map(|&i| ids[i].as_str()).collect()))
            .collect();
        let stages: Vec<(&str, std::iter::Copied<std::slice::Iter<'_, &str>>)> =
            named.iter().map(|(id, needs)| (*id, needs.iter().copied())).collect();
        let graph = StageGraph::from_needs(named.iter().map(|(id, needs)| (*id, needs.iter().copied())));
        let by_index = specbridge_engine::dag::order_indexes(&stages)
            .map(|order| order.into_iter().map(|i| ids[i].clone()).collect::<Vec<_>>());
        prop_assert_eq!(by_index, graph.topo_order().ok());
    }
}
