//! What an agent attempt changed under `.specbridge/` outside its own run folder
//! (docs/evidence.md): git snapshots never list the run store, so the store is
//! compared file by file (size, modification and change times, mode) before and
//! after the agent, and every difference is a `protected-path-changed` violation.
//! A run folder another process works on is its writer's to guard, and is left
//! out.
//!
//! A store keeps every earlier run, so the comparison walks thousands of files in
//! a repository used for a while (about 3.4 µs a file on the 2-core machine of
//! docs/performance.md: 20 ms for 300 earlier runs of one agent stage, where the
//! stage itself costs 22 ms of specbridge's time). So no walk waits on another:
//! the state after an attempt is taken on a thread beside the after-snapshot
//! ([`StoreCheck`]), and the state before it comes from a [`StoreBaseline`] when
//! one is still exact.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use specbridge_engine::evidence::{ProtectionReason, Violation, ViolationKind, RUN_STORE_DIR};
use specbridge_engine::store::layout;
use specbridge_engine::store::RunHandle;
use specbridge_engine::supervisor;

/// Files under `.specbridge/` by path, with what identifies a version of them
/// cheaply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunStoreState {
    /// By path relative to `.specbridge/`. Hashed, not ordered: the paths share
    /// long prefixes, which an ordered map compares byte by byte on every insert.
    files: HashMap<String, FileId>,
    /// `runs/<id>` of the run folders another process was working on (it held
    /// their `.lock`) when the walk ended. Such a folder, when it was being
    /// worked on before the attempt, changes under its own writer, which
    /// re-hashes its records after each of its agent attempts and whose audit
    /// checks every file against the record's announcements, so it is left out
    /// of the comparison: two runs in one repository do not blame each other's
    /// agents for their own records. Only the "before" counts: a folder that
    /// became held during the attempt is compared as any other (an agent could
    /// link a held lock file into an earlier run to hide a change there).
    live: HashSet<String>,
}

/// Size, modification time and change time (ns), and mode. The change time is
/// what an agent cannot put back: a file edited in place to the same size with
/// its modification time restored (`touch -r`) keeps size and mtime, but every
/// write, `utimensat`, `chmod` and new hard link sets its ctime to now.
type FileId = (u64, i128, i128, u32);

impl RunStoreState {
    /// Everything under `.specbridge/` except this run's own folder, which
    /// specbridge writes while the agent runs (its hash chain protects it).
    pub fn take(root: &Path, run: &RunHandle) -> RunStoreState {
        RunStoreState::of(&root.join(RUN_STORE_DIR), Some(run.dir()))
    }

    /// The state of the store folder `store`, leaving out the folder `own`.
    ///
    /// One `statx` per file, relative to the folder being listed, and none for a
    /// folder: the listing gives its type and inode, and only a folder listed
    /// with the own run folder's inode is asked for its device too.
    fn of(store: &Path, own: Option<&Path>) -> RunStoreState {
        use std::os::unix::fs::MetadataExt;
        let own = own
            .and_then(|own| std::fs::metadata(own).ok())
            .map(|m| (m.dev(), m.ino()));
        let mut state = RunStoreState::default();
        let mut rel = String::new();
        walk(store, &mut rel, own, &mut state.files);
        state.live = live_runs(&store.join(layout::RUNS_DIR));
        state
    }

    /// The paths (relative to the repository root) added, changed or removed since
    /// `before`. A new run folder is another specbridge process's, not the agent's.
    pub(crate) fn changed_since(&self, before: &RunStoreState) -> Vec<String> {
        let runs_before: HashSet<&str> = before.files.keys().filter_map(|k| run_of(k)).collect();
        let new_run = |path: &str| run_of(path).is_some_and(|run| !runs_before.contains(run));
        let live = |path: &str| run_of(path).is_some_and(|run| before.live.contains(run));
        let mut changed: Vec<String> = self
            .files
            .iter()
            .filter(|(path, id)| match before.files.get(*path) {
                Some(old) => old != *id,
                None => !new_run(path),
            })
            .map(|(path, _)| path.clone())
            .chain(
                before
                    .files
                    .keys()
                    .filter(|path| !self.files.contains_key(*path))
                    .cloned(),
            )
            .filter(|path| !live(path))
            .map(|path| format!("{RUN_STORE_DIR}/{path}"))
            .collect();
        changed.sort();
        changed
    }
}

/// `runs/<id>` of each folder in `runs` whose `.lock` a process holds now.
fn live_runs(runs: &Path) -> HashSet<String> {
    let held = specbridge_engine::store::held_flocks();
    let Ok(entries) = std::fs::read_dir(runs) else {
        return HashSet::new();
    };
    entries
        .flatten()
        .filter(|e| specbridge_engine::store::is_held(&e.path().join(layout::LOCK), &held))
        .map(|e| format!("{}/{}", layout::RUNS_DIR, e.file_name().to_string_lossy()))
        .collect()
}

/// `runs/<id>` of a path inside a run folder.
fn run_of(path: &str) -> Option<&str> {
    let rest = path.strip_prefix(layout::RUNS_DIR)?.strip_prefix('/')?;
    let id = rest.split_once('/')?.0;
    Some(&path[..layout::RUNS_DIR.len() + 1 + id.len()])
}

/// The latest state of the store a run took, and how many processes the run had
/// started when that walk began ([`supervisor::spawned`]).
///
/// A state taken at any moment before an agent starts is a sound "before" for
/// it: whatever changed after that moment is found, and only the attribution
/// widens. It would widen to another process of this run — a check stage with
/// `sandbox: off`, a verification command, another agent — so a baseline is used
/// only while the run has started no process since its walk began. In a run that
/// starts with an agent stage, the first baseline is walked while the run starts
/// up; after each attempt, the state the attempt's own check took becomes the
/// baseline of the next, so consecutive agent stages walk the store once each.
#[derive(Debug, Default)]
pub struct StoreBaseline {
    inner: Mutex<Option<Baseline>>,
}

#[derive(Debug)]
enum Baseline {
    /// Being walked, as the run starts.
    Walking(JoinHandle<Taken>),
    Ready(Taken),
}

#[derive(Debug)]
struct Taken {
    state: Arc<RunStoreState>,
    spawned: u64,
}

impl Taken {
    /// A walk of the store folder `store` now (leaving out `own`), with the number
    /// of processes the run had started when it began.
    fn now(store: &Path, own: Option<&Path>) -> Taken {
        let spawned = supervisor::spawned();
        let state = Arc::new(RunStoreState::of(store, own));
        Taken { state, spawned }
    }
}

impl StoreBaseline {
    /// Starts walking the store of the repository at `root` on a thread of its
    /// own, leaving out the run folder `own` (a resumed run's; a new run has none
    /// yet, and a run folder made later is never taken for a change).
    pub fn start(root: &Path, own: Option<PathBuf>) -> StoreBaseline {
        let store = root.join(RUN_STORE_DIR);
        let walk = std::thread::spawn(move || Taken::now(&store, own.as_deref()));
        StoreBaseline {
            inner: Mutex::new(Some(Baseline::Walking(walk))),
        }
    }

    /// The state before an attempt of the run whose folder is named `own` that is
    /// about to start its agent: the baseline while it is exact, else
    /// `walk_now`'s.
    pub(crate) fn before(
        &self,
        own: &str,
        walk_now: impl FnOnce() -> RunStoreState,
    ) -> Arc<RunStoreState> {
        let taken = match self.lock().take() {
            Some(Baseline::Walking(walk)) => walk.join().ok(),
            Some(Baseline::Ready(taken)) => Some(taken),
            None => None,
        };
        match taken {
            Some(t) if t.spawned == supervisor::spawned() => without_run(t.state, own),
            _ => Arc::new(walk_now()),
        }
    }

    /// A state taken after an attempt's agent ended, offered to the next attempt.
    fn offer(&self, taken: Taken) {
        *self.lock() = Some(Baseline::Ready(taken));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Baseline>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `state` without the files of the run folder named `own`. The first baseline
/// of a new run is walked while the run creates its folder, and may have listed
/// it; the walks after an attempt leave it out by its inode.
fn without_run(state: Arc<RunStoreState>, own: &str) -> Arc<RunStoreState> {
    let prefix = format!("{}/{own}/", layout::RUNS_DIR);
    if !state.files.keys().any(|k| k.starts_with(&prefix)) {
        return state;
    }
    let mut state = Arc::unwrap_or_clone(state);
    state.files.retain(|k, _| !k.starts_with(&prefix));
    Arc::new(state)
}

/// The run store compared around an agent attempt. Its state after the attempt is
/// taken on a thread of its own, beside the after-snapshot: both only read, and
/// both wait for the agent's process group to be gone, so the longer of the two
/// is on the stage's path instead of their sum.
pub(crate) struct StoreCheck {
    before: Arc<RunStoreState>,
    after: JoinHandle<Arc<RunStoreState>>,
}

impl StoreCheck {
    /// Starts taking the state after the attempt (its agent has ended); the state
    /// becomes `baseline`'s for the next attempt.
    pub(crate) fn start(
        root: &Path,
        run: &RunHandle,
        before: Arc<RunStoreState>,
        baseline: Arc<StoreBaseline>,
    ) -> StoreCheck {
        let store = root.join(RUN_STORE_DIR);
        let own = run.dir().to_path_buf();
        let after = std::thread::spawn(move || {
            let taken = Taken::now(&store, Some(&own));
            let after = Arc::clone(&taken.state);
            baseline.offer(taken);
            after
        });
        StoreCheck { before, after }
    }

    /// The paths the attempt changed under `.specbridge/` (waits for the walk).
    pub(crate) fn changed(self) -> Vec<String> {
        let after = self
            .after
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        after.changed_since(&self.before)
    }
}

/// A violation for each run-store path the attempt changed.
pub(crate) fn run_store_violations(store: StoreCheck) -> Vec<Violation> {
    store
        .changed()
        .into_iter()
        .map(|path| {
            Violation::new(ViolationKind::ProtectedPathChanged {
                path,
                rule: RUN_STORE_DIR.to_string(),
                reason: ProtectionReason::RunStore,
            })
        })
        .collect()
}

/// Adds the files under `dir` (whose path relative to the store is `rel`) to `out`.
fn walk(dir: &Path, rel: &mut String, own: Option<(u64, u64)>, out: &mut HashMap<String, FileId>) {
    use std::os::unix::fs::{DirEntryExt, MetadataExt};
    // Rewritten by whichever run takes the working tree, beside this one.
    let tree_lock = specbridge_engine::store::TREE_LOCK_FILE
        .strip_prefix(layout::STORE_DIR)
        .and_then(|p| p.strip_prefix('/'));
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let len = rel.len();
        if !rel.is_empty() {
            rel.push('/');
        }
        rel.push_str(&entry.file_name().to_string_lossy());
        // A symlink is recorded as the link it is, never followed.
        match entry.file_type() {
            Ok(t) if t.is_dir() => {
                let mine = own.is_some_and(|(dev, ino)| {
                    entry.ino() == ino
                        && entry
                            .metadata()
                            .is_ok_and(|m| (m.dev(), m.ino()) == (dev, ino))
                });
                if !mine {
                    walk(&entry.path(), rel, own, out);
                }
            }
            Ok(_) if tree_lock == Some(rel.as_str()) => {}
            // `DirEntry::metadata` is a `statx` relative to the listed folder that
            // does not follow a symlink.
            Ok(_) => {
                if let Ok(meta) = entry.metadata() {
                    let ns = |s: i64, ns: i64| i128::from(s) * 1_000_000_000 + i128::from(ns);
                    let id = (
                        meta.len(),
                        ns(meta.mtime(), meta.mtime_nsec()),
                        ns(meta.ctime(), meta.ctime_nsec()),
                        meta.mode(),
                    );
                    out.insert(rel.clone(), id);
                }
            }
            Err(_) => {}
        }
        rel.truncate(len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_store_changes_ignore_new_run_folders_only() {
        let state = |files: &[(&str, u64)]| RunStoreState {
            files: files
                .iter()
                .map(|(p, len)| (p.to_string(), (*len, 0, 0, 0o644)))
                .collect(),
            live: HashSet::new(),
        };
        let before = state(&[("runs/a/run.json", 1), ("config", 1)]);
        let after = state(&[
            ("runs/a/run.json", 2),
            ("runs/b/run.json", 1),
            ("notes.txt", 1),
        ]);
        assert_eq!(
            after.changed_since(&before),
            vec![
                ".specbridge/config",
                ".specbridge/notes.txt",
                ".specbridge/runs/a/run.json"
            ]
        );
    }

    fn store(root: &Path, files: &[(&str, &str)]) {
        for (path, content) in files {
            let path = root.join(RUN_STORE_DIR).join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
    }

    #[test]
    fn the_walk_finds_every_kind_of_change_and_leaves_out_the_own_run_and_the_tree_lock() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        store(
            root,
            &[
                ("runs/old/run.json", "{}"),
                ("runs/old/stages/a/stage.json", "{}"),
                ("runs/gone/run.json", "{}"),
                ("runs/mine/run.json", "{}"),
                ("worktree.lock", "run 1"),
                ("notes", "n"),
            ],
        );
        let dir = root.join(RUN_STORE_DIR);
        let own = dir.join("runs/mine");
        let before = RunStoreState::of(&dir, Some(&own));
        assert!(before.files.contains_key("runs/old/stages/a/stage.json"));
        assert!(!before.files.keys().any(|k| k.starts_with("runs/mine")));
        assert!(!before.files.contains_key("worktree.lock"));

        // In place and the same size: only the modification time tells.
        std::fs::write(dir.join("runs/old/stages/a/stage.json"), "[]").unwrap();
        std::fs::remove_dir_all(dir.join("runs/gone")).unwrap();
        std::fs::write(dir.join("runs/old/extra"), "x").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("runs/old/link")).unwrap();
        std::fs::write(dir.join("runs/mine/run.json"), "{\"changed\": true}").unwrap();
        std::fs::write(dir.join("worktree.lock"), "run 2").unwrap();
        store(root, &[("runs/new/run.json", "{}")]);
        let after = RunStoreState::of(&dir, Some(&own));
        assert_eq!(
            after.changed_since(&before),
            vec![
                ".specbridge/runs/gone/run.json",
                ".specbridge/runs/old/extra",
                ".specbridge/runs/old/link",
                ".specbridge/runs/old/stages/a/stage.json",
            ]
        );
    }

    #[test]
    fn an_edit_in_place_with_the_modification_time_put_back_is_found() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        store(root, &[("runs/old/run.json", "{\"status\": \"failed\"}")]);
        let dir = root.join(RUN_STORE_DIR);
        let record = dir.join("runs/old/run.json");
        let mtime = std::fs::metadata(&record).unwrap().modified().unwrap();
        let before = RunStoreState::of(&dir, None);
        // Ensure the change time can move on a coarse clock.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&record, "{\"status\": \"passed\"}").unwrap();
        let file = std::fs::File::options().write(true).open(&record).unwrap();
        file.set_modified(mtime).unwrap();
        drop(file);
        let meta = std::fs::metadata(&record).unwrap();
        assert_eq!(
            meta.modified().unwrap(),
            mtime,
            "the forgery put mtime back"
        );
        assert_eq!(meta.len(), "{\"status\": \"failed\"}".len() as u64);
        let after = RunStoreState::of(&dir, None);
        assert_eq!(
            after.changed_since(&before),
            vec![".specbridge/runs/old/run.json"]
        );
    }

    /// Another process holding `lock` (util-linux `flock`), until dropped.
    struct Holder(std::process::Child, PathBuf);

    fn held(lock: &Path) -> bool {
        specbridge_engine::store::is_held(lock, &specbridge_engine::store::held_flocks())
    }

    /// Waits up to 10 s for `lock` to be held (or free), as `/proc/locks` shows.
    fn wait_until_held(lock: &Path, want: bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while held(lock) != want {
            assert!(std::time::Instant::now() < deadline, "held: never {want}");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    impl Holder {
        fn hold(lock: &Path) -> Holder {
            use std::os::unix::process::CommandExt;
            let child = std::process::Command::new("flock")
                .arg(lock)
                .args(["sleep", "30"])
                .process_group(0)
                .spawn()
                .expect("util-linux flock");
            wait_until_held(lock, true);
            Holder(child, lock.to_path_buf())
        }
    }

    impl Drop for Holder {
        fn drop(&mut self) {
            // `flock` and its `sleep` share the group and the lock.
            let group = -i32::try_from(self.0.id()).unwrap();
            std::process::Command::new("kill")
                .args(["-KILL", "--", &group.to_string()])
                .status()
                .unwrap();
            let _ = self.0.wait();
            // The `sleep` is reaped by whoever adopted it: wait for the lock to go.
            wait_until_held(&self.1, false);
        }
    }

    #[test]
    fn a_run_folder_another_process_works_on_is_left_out() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        store(
            root,
            &[("runs/done/run.json", "{}"), ("runs/busy/run.json", "{}")],
        );
        let dir = root.join(RUN_STORE_DIR);
        let busy = dir.join("runs/busy");
        let holder = Holder::hold(&busy.join(layout::LOCK));
        let before = RunStoreState::of(&dir, None);
        // The other process writes its run, and is done before the "after".
        std::fs::write(busy.join("run.json"), "{\"status\": \"running\"}").unwrap();
        std::fs::write(busy.join("plan.json"), "{}").unwrap();
        drop(holder);
        std::fs::write(dir.join("runs/done/run.json"), "{\"forged\": 1}").unwrap();
        let after = RunStoreState::of(&dir, None);
        assert_eq!(
            after.changed_since(&before),
            vec![".specbridge/runs/done/run.json"]
        );
        // Once nobody holds it, a change there is found again.
        std::fs::write(busy.join("run.json"), "{}").unwrap();
        let later = RunStoreState::of(&dir, None);
        assert_eq!(
            later.changed_since(&after),
            vec![".specbridge/runs/busy/run.json"]
        );
    }

    #[test]
    fn a_held_lock_linked_into_an_earlier_run_during_the_attempt_hides_nothing() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        store(
            root,
            &[("runs/old/run.json", "{}"), ("runs/other/run.json", "{}")],
        );
        let dir = root.join(RUN_STORE_DIR);
        let other_lock = dir.join("runs/other").join(layout::LOCK);
        let _holder = Holder::hold(&other_lock);
        let before = RunStoreState::of(&dir, None);
        // The agent makes the earlier run look worked on, then edits it.
        std::fs::hard_link(&other_lock, dir.join("runs/old").join(layout::LOCK)).unwrap();
        std::fs::write(dir.join("runs/old/run.json"), "{\"forged\": 1}").unwrap();
        let after = RunStoreState::of(&dir, None);
        assert!(after.live.contains("runs/old"), "the link is held");
        assert_eq!(
            after.changed_since(&before),
            vec![
                ".specbridge/runs/old/.lock",
                ".specbridge/runs/old/run.json"
            ]
        );
    }

    #[test]
    fn a_baseline_is_used_once_and_only_while_no_process_was_started_since_its_walk() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        store(root, &[("runs/old/run.json", "{}")]);
        let dir = root.join(RUN_STORE_DIR);
        let walk_now = || RunStoreState::of(&dir, None);

        let baseline = StoreBaseline::start(root, None);
        let first = baseline.before("mine", || panic!("the baseline was exact"));
        assert_eq!(*first, walk_now());
        // Used up: the next attempt walks.
        store(root, &[("runs/old/run.json", "{\"later\": 1}")]);
        let walked = baseline.before("mine", walk_now);
        assert_ne!(*walked, *first);

        // A state walked before the run started another process is not exact.
        baseline.offer(Taken {
            state: Arc::clone(&first),
            spawned: supervisor::spawned().wrapping_sub(1),
        });
        assert_eq!(*baseline.before("mine", walk_now), walk_now());
        let offered = Arc::new(walk_now());
        baseline.offer(Taken {
            state: Arc::clone(&offered),
            spawned: supervisor::spawned(),
        });
        assert!(Arc::ptr_eq(
            &baseline.before("mine", || panic!("exact")),
            &offered
        ));
    }

    #[test]
    fn a_baseline_that_listed_the_new_run_folder_leaves_it_out() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        // The run's own folder appeared while the first baseline was walked.
        store(
            root,
            &[("runs/old/run.json", "{}"), ("runs/mine/.lock", "")],
        );
        let baseline = StoreBaseline::start(root, None);
        let before = baseline.before("mine", || panic!("the baseline was exact"));
        assert_eq!(
            before.files.keys().collect::<Vec<_>>(),
            vec!["runs/old/run.json"]
        );
    }
}
