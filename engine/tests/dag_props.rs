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
