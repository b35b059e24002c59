//! The state of the run store, one walk of `.specbridge/`, and what changed
//! between two states.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use specbridge_engine::evidence::RUN_STORE_DIR;
use specbridge_engine::store::layout;

use super::walk::{Folder, Walker};

/// Files and folders under `.specbridge/` by path, with what identifies a version
/// of a file cheaply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunStoreState {
    /// By path relative to `.specbridge/`. Hashed, not ordered: the paths share
    /// long prefixes, which an ordered map compares byte by byte on every insert.
    pub(super) files: HashMap<String, FileId>,
    /// Folders by path relative to `.specbridge/`, with their change time and
    /// listing.
    pub(super) dirs: HashMap<String, Folder>,
    /// `.specbridge/` itself.
    pub(super) root: Option<Folder>,
    /// The store's clock read before the walk began, where it could be: what
    /// tells whether a folder's listing still holds for a later walk
    /// (`walk.rs`).
    pub(super) clock: Option<i128>,
    /// `runs/<id>` of the run folders another process was working on (it held
    /// their `.lock`) before the attempt. Such a folder changes under its own
    /// writer, which re-hashes its records after each of its agent attempts and
    /// whose audit checks every file against the record's announcements, so it is
    /// left out of the comparison: two runs in one repository do not blame each
    /// other's agents for their own records. Only the "before" counts: a folder
    /// that became held during the attempt is compared as any other (an agent
    /// could link a held lock file into an earlier run to hide a change there).
    pub(super) live: HeldRuns,
    /// Set on a state walked while the agent may already run.
    pub(super) beside: Option<Beside>,
}

/// The run folders another process held, as [`RunStoreState::read_held`] read
/// them right after its walk. A state can be handed on (as the next attempt's
/// "before") before they are read: only a comparison against it reads them, and
/// waits until they are there. A state made otherwise holds none.
#[derive(Debug, Clone)]
pub(super) struct HeldRuns(Arc<OnceLock<HashSet<String>>>);

impl Default for HeldRuns {
    fn default() -> HeldRuns {
        HeldRuns::known(HashSet::new())
    }
}

impl HeldRuns {
    /// To be read: [`set`](Self::set) exactly once.
    fn pending() -> HeldRuns {
        HeldRuns(Arc::default())
    }

    pub(super) fn known(held: HashSet<String>) -> HeldRuns {
        HeldRuns(Arc::new(OnceLock::from(held)))
    }

    /// The first reading stands.
    pub(super) fn set(&self, held: HashSet<String>) {
        let _ = self.0.set(held);
    }

    /// Waits for the reading.
    pub(super) fn get(&self) -> &HashSet<String> {
        self.0.wait()
    }
}

impl PartialEq for HeldRuns {
    fn eq(&self, other: &HeldRuns) -> bool {
        self.get() == other.get()
    }
}

impl Eq for HeldRuns {}

/// What makes a walk taken beside the agent a sound "before": the agent may have
/// changed a file before the walk reached it, so the walk saw the changed file
/// and nothing differs afterwards. Every such change leaves a change time at or
/// after `since` (the store's clock before the agent started, which an agent
/// cannot put back): on the file itself (written, truncated, its mode or links
/// changed, renamed), or on the folder it was added to or removed from, whose
/// change time the walk reads after listing it. The store's top two levels — the
/// entries of `.specbridge/` and of `runs/`, whose folders change whenever another
/// run starts — are listed before the agent starts instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Beside {
    pub(super) since: i128,
    pub(super) listed: HashSet<String>,
}

/// Size, modification time and change time (ns), and mode. The change time is
/// what an agent cannot put back: a file edited in place to the same size with
/// its modification time restored (`touch -r`) keeps size and mtime, but every
/// write, `utimensat`, `chmod` and new hard link sets its ctime to now.
pub(super) type FileId = (u64, i128, i128, u32);

/// The store's `worktree.lock`, relative to `.specbridge/`: rewritten by whichever
/// run takes the working tree, beside this one, so never compared.
pub(super) fn tree_lock() -> Option<&'static str> {
    specbridge_engine::store::TREE_LOCK_FILE
        .strip_prefix(layout::STORE_DIR)
        .and_then(|p| p.strip_prefix('/'))
}

impl RunStoreState {
    /// The state of the store folder `store` while no agent of the run is at
    /// work, leaving out the folder `own` (the run's own, which specbridge writes
    /// while the agent runs: its hash chain protects it). `clock` is the store's
    /// clock read before the walk; the listings of `known`, an earlier state
    /// walked with the same `own`, are taken where they still hold.
    pub(super) fn exact(
        store: &Path,
        own: Option<&Path>,
        clock: Option<i128>,
        known: Option<&RunStoreState>,
    ) -> RunStoreState {
        let state = RunStoreState::unheld(store, own, clock, known);
        state.read_held(store);
        state
    }

    /// [`exact`](Self::exact) with the run folders held by another process still
    /// to be read ([`read_held`](Self::read_held), exactly once), which only a
    /// state that will be a "before" needs: [`changed_since`](Self::changed_since)
    /// reads the earlier state's, and waits for them.
    pub(super) fn unheld(
        store: &Path,
        own: Option<&Path>,
        clock: Option<i128>,
        known: Option<&RunStoreState>,
    ) -> RunStoreState {
        let mut state = RunStoreState::of(store, own, known);
        state.clock = clock;
        state.live = HeldRuns::pending();
        state
    }

    /// Reads which of the walked run folders another process holds now, after
    /// the walk ([`held_runs`]).
    pub(super) fn read_held(&self, store: &Path) {
        let runs = self.dirs.keys().filter(|k| run_of(k) == Some(k.as_str()));
        self.live.set(held_runs(store, runs));
    }

    /// The state of `store` walked while the agent may already run, with what
    /// was read before it started.
    pub(super) fn beside_agent(
        store: &Path,
        own: Option<&Path>,
        live: HashSet<String>,
        beside: Beside,
    ) -> RunStoreState {
        let mut state = RunStoreState::of(store, own, None);
        state.live = HeldRuns::known(live);
        state.clock = Some(beside.since);
        state.beside = Some(beside);
        state
    }

    /// One `statx` per file, relative to the folder being listed, and one per
    /// folder, after listing it or in place of listing it again.
    fn of(store: &Path, own: Option<&Path>, known: Option<&RunStoreState>) -> RunStoreState {
        use std::os::unix::fs::MetadataExt;
        let own = own
            .and_then(|own| std::fs::metadata(own).ok())
            .map(|m| (m.dev(), m.ino()));
        let mut state = RunStoreState::default();
        Walker { own, known }.walk(store, &mut String::new(), &mut state);
        state
    }

    /// The paths (relative to the repository root) added, changed or removed since
    /// `before`. A new run folder is another specbridge process's, not the agent's.
    pub(crate) fn changed_since(&self, before: &RunStoreState) -> Vec<String> {
        let runs_before: HashSet<&str> = match &before.beside {
            Some(beside) => beside.listed.iter().filter_map(|k| run_of(k)).collect(),
            None => before
                .files
                .keys()
                .chain(before.dirs.keys())
                .filter_map(|k| run_of(k))
                .collect(),
        };
        let since = before.beside.as_ref().map(|b| b.since);
        let changed_file = |path: &String, id: &FileId| match before.files.get(path) {
            Some(old) => old != id || since.is_some_and(|t| id.2 >= t),
            None => true,
        };
        let mut changed: BTreeSet<&str> = BTreeSet::new();
        changed.extend(
            self.files
                .iter()
                .filter(|(path, id)| changed_file(path, id))
                .map(|(path, _)| path.as_str()),
        );
        let gone =
            |path: &&String| !self.files.contains_key(*path) && !self.dirs.contains_key(*path);
        changed.extend(before.files.keys().filter(gone).map(String::as_str));
        changed.extend(before.dirs.keys().filter(gone).map(String::as_str));
        changed.extend(
            self.dirs
                .keys()
                .filter(|path| !before.dirs.contains_key(*path))
                .map(String::as_str),
        );
        if let Some(beside) = &before.beside {
            changed.extend(beside.listed.iter().filter(gone).map(String::as_str));
            changed.extend(
                before
                    .dirs
                    .iter()
                    .filter(|(path, dir)| *path != layout::RUNS_DIR && dir.ctime >= beside.since)
                    .map(|(path, _)| path.as_str()),
            );
        }
        changed
            .into_iter()
            .filter(|path| match run_of(path) {
                Some(run) => runs_before.contains(run) && !before.live.get().contains(run),
                None => true,
            })
            .map(|path| format!("{RUN_STORE_DIR}/{path}"))
            .collect()
    }
}

/// The entries of `.specbridge/` and of `runs/` (as `runs/<id>`), leaving out the
/// run folder named `own` and `worktree.lock`: listed before a walk beside the
/// agent, which starts after it may have changed them.
pub(super) fn listed(store: &Path, own: &str) -> HashSet<String> {
    let names = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let runs = names(&store.join(layout::RUNS_DIR))
        .into_iter()
        .filter(|name| name != own)
        .map(|name| format!("{}/{name}", layout::RUNS_DIR));
    names(store)
        .into_iter()
        .filter(|name| Some(name.as_str()) != tree_lock())
        .chain(runs)
        .collect()
}

/// Those of the run folders `runs` (as `runs/<id>`) whose `.lock` another
/// process holds, each asked by trying it (`store::held_by_another`: a few
/// system calls a run folder, where `/proc/locks` waited for an RCU grace period
/// of 8 to 22 ms whenever there was one to ask about).
pub(super) fn held_runs<'a>(
    store: &Path,
    runs: impl Iterator<Item = &'a String>,
) -> HashSet<String> {
    runs.filter(|run| {
        specbridge_engine::store::held_by_another(&store.join(run).join(layout::LOCK))
    })
    .cloned()
    .collect()
}

/// `runs/<id>` of a run folder or of a path inside one.
pub(super) fn run_of(path: &str) -> Option<&str> {
    let rest = path.strip_prefix(layout::RUNS_DIR)?.strip_prefix('/')?;
    let id = rest.split('/').next().filter(|id| !id.is_empty())?;
    Some(&path[..layout::RUNS_DIR.len() + 1 + id.len()])
}
