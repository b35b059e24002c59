//! The scheduler's bookkeeping: which node is where, and what is ready next.

use std::collections::BTreeMap;

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
}

impl SchedState {
    pub fn new(nodes: Vec<Node>) -> Self {
        let status = nodes
            .iter()
            .map(|n| (n.id.clone(), StageStatus::Pending))
            .collect();
        SchedState {
            nodes: nodes.into_iter().map(|n| (n.id.clone(), n)).collect(),
            status,
            reports: BTreeMap::new(),
            totals: Totals::default(),
            expansions: Vec::new(),
        }
    }

    pub fn node(&self, id: &str) -> &Node {
        &self.nodes[id]
    }

    pub fn set(&mut self, id: &str, s: StageStatus) {
        self.status.insert(id.to_string(), s);
    }

    pub fn record(&mut self, id: &str, report: StageReport) {
        self.reports.insert(id.to_string(), report);
    }

    /// A retried node: its next attempt comes after `attempts`.
    pub fn set_prior_attempts(&mut self, id: &str, attempts: u32) {
        if let Some(node) = self.nodes.get_mut(id) {
            node.prior_attempts = attempts;
        }
    }

    pub fn next_attempt(&self, id: &str) -> u32 {
        self.nodes[id].prior_attempts + 1
    }

    pub fn pending_ids(&self) -> Vec<String> {
        self.status
            .iter()
            .filter(|(_, s)| **s == StageStatus::Pending)
            .map(|(id, _)| id.clone())
            .collect()
    }

    pub fn any_failed(&self) -> bool {
        self.status
            .values()
            .any(|s| s.is_terminal() && !s.passed() && !s.not_run())
    }

    /// Pending nodes that can never run, each with the need that blocks it and
    /// that need's status.
    pub fn blocked(&self) -> Vec<(String, String, StageStatus)> {
        self.pending_ids()
            .into_iter()
            .filter_map(|id| {
                let (blocker, status) = self.nodes[&id].needs.iter().find_map(|n| {
                    let s = *self.status.get(n.as_str())?;
                    (s.is_terminal() && !s.passed()).then(|| (n.clone(), s))
                })?;
                Some((id, blocker, status))
            })
            .collect()
    }

    /// Why `need` did not pass, in a few words, for a blocked dependent.
    pub fn blocker_reason(&self, need: &str, status: StageStatus) -> String {
        match self.reports.get(need).and_then(|r| r.outcome.as_deref()) {
            Some(o) if status == StageStatus::Blocked => o.to_string(),
            Some(o) => format!("{status}: {o}"),
            _ => status.to_string(),
        }
    }

    /// The ready node with the smallest id: every need succeeded. Taking the
    /// smallest id keeps the order deterministic.
    pub fn next_ready(&self) -> Option<String> {
        self.pending_ids().into_iter().find(|id| {
            self.nodes[id]
                .needs
                .iter()
                .all(|n| self.status.get(n.as_str()).is_some_and(|s| s.passed()))
        })
    }

    pub fn all_done(&self) -> bool {
        self.status.values().all(|s| s.is_terminal())
    }

    /// Replace a placeholder by its instances; whatever needed the placeholder now
    /// needs every instance.
    pub fn expand(&mut self, placeholder: &str, instances: Vec<Node>) {
        self.nodes.remove(placeholder);
        self.status.remove(placeholder);
        let ids: Vec<String> = instances.iter().map(|n| n.id.clone()).collect();
        self.expansions.push((placeholder.to_string(), ids.clone()));
        for n in self.nodes.values_mut() {
            if let Some(pos) = n.needs.iter().position(|x| x == placeholder) {
                n.needs.remove(pos);
                for (k, id) in ids.iter().enumerate() {
                    n.needs.insert(pos + k, id.clone());
                }
            }
        }
        for n in instances {
            self.status.insert(n.id.clone(), StageStatus::Pending);
            self.nodes.insert(n.id.clone(), n);
        }
    }

    pub fn into_outcome(self, cancelled: bool) -> RunOutcome {
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
