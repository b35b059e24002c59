//! `changed-files.json`: which paths an attempt changed, decided by comparing the
//! per-path sha256 of two snapshots — never by what the model says it changed.

use std::collections::BTreeSet;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::paths::normalize_rel_path;
use super::snapshot::{EntryKind, GitSnapshot, PathState, PathStatus};
use crate::store::SCHEMA_VERSION;

fn schema_version() -> u32 {
    SCHEMA_VERSION
}

/// A file specbridge itself wrote during the stage (a document), which must not be
/// attributed to the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnWrite {
    pub path: String,
    /// The sha256 specbridge wrote. When given, a path whose content differs from it
    /// was changed by someone else after specbridge wrote it, and is attributed.
    pub sha256: Option<String>,
}

impl OwnWrite {
    pub fn new(path: &str, sha256: Option<String>) -> Self {
        OwnWrite {
            path: normalize_rel_path(path),
            sha256,
        }
    }
}

/// What changed between two snapshots. Every list is sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangedFiles {
    #[serde(default = "schema_version")]
    pub schema_version: u32,
    /// Paths that did not exist (or were not tracked) and now do.
    pub added: Vec<String>,
    pub modified: Vec<String>,
    pub deleted: Vec<String>,
    /// Dirty before the attempt and untouched by it (`--allow-dirty`).
    pub pre_existing: Vec<String>,
    /// Dirty before the attempt and changed again during it: whose change is whose
    /// cannot be told apart, so such a path blocks `verified`.
    pub ambiguous: Vec<String>,
    /// Written by specbridge itself (documents).
    pub own_writes: Vec<String>,
    /// Whose change `added`, `modified` and `deleted` are: absent means the
    /// attempt's agent; `human` for `resume --reverify`, which spawns no agent and
    /// records the change made by hand since the last attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributed_to: Option<ChangeAuthor>,
}

/// Who made a recorded change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ChangeAuthor {
    Agent,
    Human,
}

impl ChangedFiles {
    /// Changes attributed to the agent: added, modified and deleted paths.
    pub fn attributed(&self) -> impl Iterator<Item = &String> {
        self.added.iter().chain(&self.modified).chain(&self.deleted)
    }

    pub fn attributed_count(&self) -> usize {
        self.added.len() + self.modified.len() + self.deleted.len()
    }

    /// Every path the attempt changed, attributable or not: what protection and the
    /// read-only rule of generate stages look at.
    pub(crate) fn changed_during_attempt(&self) -> impl Iterator<Item = &String> {
        self.attributed().chain(&self.ambiguous)
    }
}

/// Compare two snapshots. A path absent from a snapshot has HEAD's content, so a path
/// dirty in neither did not change; a path whose state is equal in both did not
/// change either.
pub fn attribute(
    before: &GitSnapshot,
    after: &GitSnapshot,
    own_writes: &[OwnWrite],
) -> ChangedFiles {
    let mut changed = ChangedFiles {
        schema_version: SCHEMA_VERSION,
        ..ChangedFiles::default()
    };
    let paths: BTreeSet<&String> = before.entries.keys().chain(after.entries.keys()).collect();
    for path in paths {
        let (b, a) = (before.entries.get(path), after.entries.get(path));
        if let (Some(b), Some(a)) = (b, a) {
            if b.same_content(a) {
                changed.pre_existing.push(path.clone());
                continue;
            }
        }
        if is_own_write(path, a, own_writes) {
            changed.own_writes.push(path.clone());
            continue;
        }
        match (b, a) {
            (Some(_), _) => changed.ambiguous.push(path.clone()),
            (None, Some(a)) if a.kind == EntryKind::Missing => changed.deleted.push(path.clone()),
            (None, Some(a)) if matches!(a.status, PathStatus::Untracked | PathStatus::Added) => {
                changed.added.push(path.clone());
            }
            (None, Some(_)) => changed.modified.push(path.clone()),
            (None, None) => unreachable!("the path came from one of the snapshots"),
        }
    }
    // git status never lists git's own files, so any difference there is the attempt's.
    let control: BTreeSet<&String> = before
        .git_control
        .keys()
        .chain(after.git_control.keys())
        .collect();
    for path in control {
        match (before.git_control.get(path), after.git_control.get(path)) {
            (None, Some(_)) => changed.added.push(path.clone()),
            (Some(_), None) => changed.deleted.push(path.clone()),
            (Some(b), Some(a)) if b != a => changed.modified.push(path.clone()),
            _ => {}
        }
    }
    for list in [
        &mut changed.added,
        &mut changed.modified,
        &mut changed.deleted,
    ] {
        list.sort();
    }
    changed
}

fn is_own_write(path: &str, after: Option<&PathState>, own_writes: &[OwnWrite]) -> bool {
    own_writes.iter().any(|w| {
        w.path == path
            && match &w.sha256 {
                None => true,
                Some(sha) => after.and_then(|a| a.sha256.as_ref()) == Some(sha),
            }
    })
}
