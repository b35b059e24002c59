//! The scheduler's bookkeeping: which node is where, and what is ready next.
//!
//! Kept incrementally (a count of unmet needs per pending node, the dependents of
//! each node, the ready and possibly blocked sets) so that a turn of the scheduler
//! costs the degree of the nodes it touches, not a scan of the whole plan: a scan
//! per turn is quadratic in the number of stages.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::scheduler::node::{Node, StageReport};
use crate::scheduler::RunOutcome;
use crate::status::StageStatus;
use crate::store::Totals;

pub(crate) struct SchedState {
    nodes: BTreeMap<String, Node>,
    status: BTreeMap<String, StageStatus>,
    reports: BTreeMap<String, StageReport>,
    pub totals: Totals,
    expansions: Vec<(String, Vec<String>)>,
    /// Nodes whose status is `Pending`.
    pending: BTreeSet<String>,
    /// For each pending node, how many of its needs (counted as listed) have not
    /// passed their gate.
    unmet: HashMap<String, usize>,
    /// Each node id → the nodes that need it (one entry per listing).
    dependents: HashMap<String, Vec<String>>,
    /// Pending nodes with no unmet need.
    ready: BTreeSet<String>,
    /// Pending nodes with a need that ended without passing its gate.
    maybe_blocked: BTreeSet<String>,
    /// Nodes that ended without passing, other than blocked and skipped ones.
    failed: usize,
    /// Nodes not in a terminal status.
    unfinished: usize,
    /// For each node blocked in this process, the stage whose failure blocked
    /// it and why (``"`a` (check-failed: exit code 3)"``).
    block_roots: HashMap<String, String>,
}

/// Ended without passing its gate, and not merely left out (blocked, skipped).
fn fails(s: StageStatus) -> bool {
    s.is_terminal() && !s.passed() && !s.not_run()
}

/// Ended without passing its gate: nothing may build on it.
fn blocks(s: StageStatus) -> bool {
    s.is_terminal() && !s.passed()
}

impl SchedState {
    pub(crate) fn new(nodes: Vec<Node>) -> Self {
        let mut st = SchedState {
            nodes: BTreeMap::new(),
            status: BTreeMap::new(),
            reports: BTreeMap::new(),
            totals: Totals::default(),
            expansions: Vec::new(),
            pending: BTreeSet::new(),
            unmet: HashMap::new(),
            dependents: HashMap::new(),
            ready: BTreeSet::new(),
            maybe_blocked: BTreeSet::new(),
            failed: 0,
            unfinished: 0,
            block_roots: HashMap::new(),
        };
        for n in &nodes {
            st.status.insert(n.id.clone(), StageStatus::Pending);
        }
        st.unfinished = st.status.len();
        for n in nodes {
            st.nodes.insert(n.id.clone(), n);
        }
        let ids: Vec<String> = st.nodes.keys().cloned().collect();
        for id in ids {
            st.track_pending(&id);
        }
        st
    }

    /// Registers pending node `id` against its needs' current statuses.
    fn track_pending(&mut self, id: &str) {
        let needs = self.nodes[id].needs.clone();
        let mut unmet = 0;
        let mut blocked = false;
        for need in needs {
            let s = self.status.get(&need).copied();
            if !s.is_some_and(StageStatus::passed) {
                unmet += 1;
            }
            blocked |= s.is_some_and(blocks);
            self.dependents
                .entry(need)
                .or_default()
                .push(id.to_string());
        }
        self.pending.insert(id.to_string());
        self.unmet.insert(id.to_string(), unmet);
        if unmet == 0 {
            self.ready.insert(id.to_string());
        }
        if blocked {
            self.maybe_blocked.insert(id.to_string());
        }
    }

    pub(crate) fn node(&self, id: &str) -> &Node {
        &self.nodes[id]
    }

    pub(crate) fn set(&mut self, id: &str, s: StageStatus) {
        let old = self.status.insert(id.to_string(), s);
        let was_terminal = old.is_some_and(super::super::status::StageStatus::is_terminal);
        match (was_terminal, s.is_terminal()) {
            (false, true) if old.is_some() => self.unfinished -= 1,
            (true, false) => self.unfinished += 1,
            (false, false) if old.is_none() => self.unfinished += 1,
            _ => {}
        }
        if old.is_some_and(fails) {
            self.failed -= 1;
        }
        if fails(s) {
            self.failed += 1;
        }
        if old == Some(StageStatus::Pending) && s != StageStatus::Pending {
            self.pending.remove(id);
            self.ready.remove(id);
            self.maybe_blocked.remove(id);
            self.unmet.remove(id);
        }
        if s == StageStatus::Pending && old != Some(StageStatus::Pending) {
            self.track_pending(id);
        }
        let succeeded = |x: Option<StageStatus>| x.is_some_and(StageStatus::passed);
        let dependents = self.dependents.get(id).cloned().unwrap_or_default();
        for d in dependents {
            if !self.pending.contains(&d) {
                continue;
            }
            let count = self.unmet.get_mut(&d).expect("pending nodes are counted");
            if succeeded(Some(s)) && !succeeded(old) {
                *count -= 1;
                if *count == 0 {
                    self.ready.insert(d.clone());
                }
            } else if succeeded(old) && !succeeded(Some(s)) {
                *count += 1;
                self.ready.remove(&d);
            }
            if blocks(s) {
                self.maybe_blocked.insert(d);
            }
        }
    }

    pub(crate) fn record(&mut self, id: &str, report: StageReport) {
        self.reports.insert(id.to_string(), report);
    }

    /// A retried node: its next attempt comes after `attempts`.
    pub(crate) fn set_prior_attempts(&mut self, id: &str, attempts: u32) {
        if let Some(node) = self.nodes.get_mut(id) {
            node.prior_attempts = attempts;
        }
    }

    pub(crate) fn next_attempt(&self, id: &str) -> u32 {
        self.nodes[id].prior_attempts + 1
    }

    /// Pending ids, in id order.
    pub(crate) fn pending_ids(&self) -> Vec<String> {
        self.pending.iter().cloned().collect()
    }

    pub(crate) fn any_failed(&self) -> bool {
        self.failed > 0
    }

    /// Pending nodes that can never run, each with the first need (in listed
    /// order) that blocks it and that need's status.
    pub(crate) fn blocked(&self) -> Vec<(String, String, StageStatus)> {
        self.maybe_blocked
            .iter()
            .filter_map(|id| {
                self.nodes[id].needs.iter().find_map(|n| {
                    let s = *self.status.get(n.as_str())?;
                    blocks(s).then(|| (id.clone(), n.clone(), s))
                })
            })
            .collect()
    }

    /// Why `id` cannot start behind `need`, which ended `status` without
    /// passing its gate: the need and, when the need was itself blocked, the
    /// stage whose failure blocked it. Each blocked stage names that first
    /// failure once, so a reason stays a line long however deep the chain
    /// below the failure (it used to hold every blocked stage's reason in turn,
    /// a record as long as the chain above it).
    pub(crate) fn block(&mut self, id: &str, need: &str, status: StageStatus) -> String {
        let blocked = status == StageStatus::Blocked;
        let (reason, root) = match self.block_roots.get(need).filter(|_| blocked) {
            Some(root) => (
                format!("blocked by `{need}`, itself blocked by {root}"),
                root.clone(),
            ),
            // A need that failed, or one blocked before this process (its
            // reason as it was recorded).
            None => {
                let why = match self.reports.get(need).and_then(|r| r.reason.as_deref()) {
                    Some(o) if blocked => o.to_string(),
                    Some(o) => format!("{status}: {o}"),
                    None => status.to_string(),
                };
                let root = format!("`{need}` ({why})");
                (format!("blocked by {root}"), root)
            }
        };
        self.block_roots.insert(id.to_string(), root);
        reason
    }

    /// The ready node with the smallest id: every need passed its gate. Taking the
    /// smallest id keeps the order deterministic.
    pub(crate) fn next_ready(&self) -> Option<String> {
        self.ready.first().cloned()
    }

    pub(crate) fn all_done(&self) -> bool {
        self.unfinished == 0
    }

    /// Replace a placeholder by its instances; whatever needed the placeholder now
    /// needs every instance.
    pub(crate) fn expand(&mut self, placeholder: &str, instances: Vec<Node>) {
        if self.status.get(placeholder) == Some(&StageStatus::Pending) {
            self.pending.remove(placeholder);
            self.ready.remove(placeholder);
            self.maybe_blocked.remove(placeholder);
            self.unmet.remove(placeholder);
        }
        if let Some(n) = self.nodes.remove(placeholder) {
            for need in &n.needs {
                if let Some(ds) = self.dependents.get_mut(need) {
                    if let Some(pos) = ds.iter().position(|d| d == placeholder) {
                        ds.remove(pos);
                    }
                }
            }
        }
        if let Some(old) = self.status.remove(placeholder) {
            if !old.is_terminal() {
                self.unfinished -= 1;
            }
            if fails(old) {
                self.failed -= 1;
            }
        }
        let ids: Vec<String> = instances.iter().map(|n| n.id.clone()).collect();
        self.expansions.push((placeholder.to_string(), ids.clone()));
        let mut users = self.dependents.remove(placeholder).unwrap_or_default();
        users.dedup();
        for user in &users {
            let Some(n) = self.nodes.get_mut(user) else {
                continue;
            };
            let before = n.needs.iter().filter(|x| *x == placeholder).count();
            if let Some(pos) = n.needs.iter().position(|x| x == placeholder) {
                n.needs.remove(pos);
                for (k, id) in ids.iter().enumerate() {
                    n.needs.insert(pos + k, id.clone());
                }
            }
            let after = n.needs.iter().filter(|x| *x == placeholder).count();
            for id in &ids {
                self.dependents
                    .entry(id.clone())
                    .or_default()
                    .push(user.clone());
            }
            // Instances are pending: each is an unmet need in place of the
            // placeholder's listing that was replaced.
            if let Some(count) = self.unmet.get_mut(user) {
                *count = *count - (before - after) + ids.len();
                if *count == 0 {
                    self.ready.insert(user.clone());
                } else {
                    self.ready.remove(user);
                }
            }
        }
        for n in instances {
            let id = n.id.clone();
            self.status.insert(id.clone(), StageStatus::Pending);
            self.unfinished += 1;
            self.nodes.insert(id.clone(), n);
            self.track_pending(&id);
        }
    }

    pub(crate) fn into_outcome(self, cancelled: bool) -> RunOutcome {
        RunOutcome {
            statuses: self.status,
            reports: self.reports,
            totals: self.totals,
            cancelled,
            nodes: self.nodes.into_values().collect(),
            expansions: self.expansions,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::model::StageKind;

    fn node(id: &str, needs: &[&str]) -> Node {
        Node::stage(
            id,
            StageKind::Check,
            needs.iter().map(std::string::ToString::to_string).collect(),
        )
    }

    #[test]
    fn ready_blocked_and_done_follow_the_statuses() {
        let mut st = SchedState::new(vec![
            node("a", &[]),
            node("b", &["a"]),
            node("c", &["a", "b"]),
            node("d", &["missing"]),
        ]);
        assert_eq!(st.next_ready().as_deref(), Some("a"));
        st.set("a", StageStatus::Running);
        assert_eq!(st.next_ready(), None);
        st.set("a", StageStatus::Succeeded);
        assert_eq!(st.next_ready().as_deref(), Some("b"));
        st.set("b", StageStatus::Running);
        st.set("b", StageStatus::Failed);
        assert!(st.any_failed());
        assert_eq!(
            st.blocked(),
            [("c".to_string(), "b".to_string(), StageStatus::Failed)]
        );
        st.set("c", StageStatus::Blocked);
        assert!(st.blocked().is_empty());
        assert!(!st.all_done());
        assert_eq!(st.pending_ids(), ["d"]);
        st.set("d", StageStatus::Skipped);
        assert!(st.all_done());
        // A gate failure blocks like a failure.
        let mut st = SchedState::new(vec![node("x", &[]), node("y", &["x"])]);
        st.set("x", StageStatus::Unverified);
        assert_eq!(st.next_ready(), None);
        assert_eq!(st.blocked()[0].2, StageStatus::Unverified);
    }

    #[test]
    fn expansion_replaces_the_placeholder_in_its_users() {
        let mut st = SchedState::new(vec![node("a", &[]), node("p", &["a"]), node("z", &["p"])]);
        st.set("a", StageStatus::Succeeded);
        assert_eq!(st.next_ready().as_deref(), Some("p"));
        st.expand("p", vec![node("p.1", &["a"]), node("p.2", &["a"])]);
        assert_eq!(st.node("z").needs, ["p.1", "p.2"]);
        assert_eq!(st.next_ready().as_deref(), Some("p.1"));
        st.set("p.1", StageStatus::Succeeded);
        st.set("p.2", StageStatus::Succeeded);
        assert_eq!(st.next_ready().as_deref(), Some("z"));
        // No instances: the users are ready at once.
        let mut st = SchedState::new(vec![node("p", &[]), node("z", &["p"])]);
        st.expand("p", Vec::new());
        assert_eq!(st.next_ready().as_deref(), Some("z"));
        st.set("z", StageStatus::Succeeded);
        assert!(st.all_done());
    }
}
