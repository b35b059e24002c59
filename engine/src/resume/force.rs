//! `resume --rerun STAGE`: stages run again on purpose, with everything that
//! depends on them, whatever their records say.

use std::collections::BTreeSet;
use std::sync::Mutex;

use crate::resume::reuse::{Reason, Why};
use crate::scheduler::Node;

/// The `--rerun` patterns of a resume, and the nodes they forced so far.
#[derive(Debug, Default)]
pub struct Forced {
    patterns: Vec<String>,
    hit: Mutex<BTreeSet<String>>,
}

impl Forced {
    pub fn new(patterns: Vec<String>) -> Self {
        Forced {
            patterns,
            hit: Mutex::new(BTreeSet::new()),
        }
    }

    /// Whether `node` runs again on purpose: a pattern names it (or, for a fan-out
    /// instance, its stage), or it needs a node that does. Asked in dependency
    /// order, so a forced node's dependents are found forced too.
    pub fn check(&self, node: &Node) -> Option<Why> {
        let mut hit = self.hit.lock().expect("forced lock");
        let named = self.patterns.iter().find(|p| {
            glob_match(p, &node.id)
                || node
                    .instance_of
                    .as_deref()
                    .is_some_and(|s| glob_match(p, s))
        });
        let why = match named {
            Some(p) => Why::with(Reason::Forced, format!("--rerun {p}")),
            None => {
                let need = node.needs.iter().find(|n| hit.contains(n.as_str()))?;
                Why::with(Reason::Forced, format!("needs `{need}`"))
            }
        };
        hit.insert(node.id.clone());
        Some(why)
    }
}

/// The patterns that match none of `ids` (stage ids, instance ids).
pub(crate) fn unmatched<'a>(patterns: &'a [String], ids: &[&str]) -> Vec<&'a str> {
    patterns
        .iter()
        .filter(|p| !ids.iter().any(|id| glob_match(p, id)))
        .map(String::as_str)
        .collect()
}

/// `*` matches any run of characters, `?` one; everything else itself.
pub(crate) fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Iterative matching with a single backtrack point for the last `*`.
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while j < t.len() {
        if i < p.len() && (p[i] == '?' || p[i] == t[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some((i, j));
            i += 1;
        } else if let Some((si, sj)) = star {
            i = si + 1;
            j = sj + 1;
            star = Some((si, sj + 1));
        } else {
            return false;
        }
    }
    p[i..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::StageKind;

    #[test]
    fn globs_match_instances() {
        assert!(glob_match("implement.*", "implement.t1"));
        assert!(glob_match("implement", "implement"));
        assert!(!glob_match("implement", "implement.t1"));
        assert!(glob_match("*.t?", "implement.t1"));
        assert!(!glob_match("design", "designs"));
        assert!(glob_match("*", ""));
    }

    #[test]
    fn a_forced_node_forces_what_needs_it_and_nothing_else() {
        let f = Forced::new(vec!["design".into()]);
        let n = |id: &str, needs: &[&str]| {
            Node::stage(
                id,
                StageKind::Generate,
                needs.iter().map(std::string::ToString::to_string).collect(),
            )
        };
        assert!(f.check(&n("requirements", &[])).is_none());
        let why = f.check(&n("design", &["requirements"])).unwrap();
        assert_eq!(why.detail.as_deref(), Some("--rerun design"));
        let why = f.check(&n("tasks", &["design"])).unwrap();
        assert_eq!(why.detail.as_deref(), Some("needs `design`"));
        assert!(f.check(&n("other", &["requirements"])).is_none());
        let mut inst = n("implement.t1", &["tasks"]);
        inst.instance_of = Some("implement".into());
        assert!(f.check(&inst).is_some());
        let g = Forced::new(vec!["implement".into()]);
        let mut inst = n("implement.t1", &[]);
        inst.instance_of = Some("implement".into());
        assert!(
            g.check(&inst).is_some(),
            "a stage name forces its instances"
        );
    }

    #[test]
    fn unknown_patterns_are_named() {
        let pats = vec!["design".to_string(), "nope*".to_string()];
        assert_eq!(unmatched(&pats, &["design", "tasks"]), vec!["nope*"]);
    }
}
