//! The run store's comparison, walked exactly and beside an agent.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use specbridge_engine::store::{layout, RunHandle, RunStore};
use specbridge_engine::supervisor;

use super::state::Beside;
use super::walk::RUNS_A_THREAD;
use super::*;

#[test]
fn run_store_changes_ignore_new_run_folders_only() {
    let state = |files: &[(&str, u64)]| RunStoreState {
        files: files
            .iter()
            .map(|(p, len)| (p.to_string(), (*len, 0, 0, 0o644)))
            .collect(),
        ..RunStoreState::default()
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

/// The store's clock, read as `RunHandle::store_clock` reads it: the change time
/// the kernel gives a file written now, beside the store.
fn clock(root: &Path) -> i128 {
    let file = root.join("clock");
    std::fs::write(&file, "tick").unwrap();
    specbridge_engine::time::ctime_ns(&std::fs::metadata(file).unwrap())
}

/// A walk of the store with its clock read first, as an attempt's "before" is
/// when no baseline is exact.
fn walked(root: &Path, own: Option<&Path>) -> RunStoreState {
    RunStoreState::exact(&root.join(RUN_STORE_DIR), own, Some(clock(root)), None)
}

/// A walk as the one after an attempt: it takes `before`'s listings where they
/// still hold, and must find what a walk that lists every folder finds.
fn walked_after(root: &Path, own: Option<&Path>, before: &RunStoreState) -> RunStoreState {
    let dir = root.join(RUN_STORE_DIR);
    let state = RunStoreState::exact(&dir, own, Some(clock(root)), Some(before));
    let listed = RunStoreState::exact(&dir, own, None, None);
    let ctimes = |s: &RunStoreState| -> BTreeMap<String, i128> {
        s.dirs.iter().map(|(k, d)| (k.clone(), d.ctime)).collect()
    };
    assert_eq!(state.files, listed.files, "the files a full listing finds");
    assert_eq!(
        ctimes(&state),
        ctimes(&listed),
        "the folders a full listing finds"
    );
    assert_eq!(state.live, listed.live);
    state
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
    let before = walked(root, Some(&own));
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
    let after = walked_after(root, Some(&own), &before);
    assert_eq!(
        after.changed_since(&before),
        vec![
            ".specbridge/runs/gone",
            ".specbridge/runs/gone/run.json",
            ".specbridge/runs/old/extra",
            ".specbridge/runs/old/link",
            ".specbridge/runs/old/stages/a/stage.json",
        ]
    );
}

/// Rewrites `record` with `content` and puts its modification time back, as a
/// forger hiding an edit would.
fn forge_in_place(record: &Path, content: &str) {
    let mtime = std::fs::metadata(record).unwrap().modified().unwrap();
    std::fs::write(record, content).unwrap();
    let file = std::fs::File::options().write(true).open(record).unwrap();
    file.set_modified(mtime).unwrap();
}

#[test]
fn an_edit_in_place_with_the_modification_time_put_back_is_found() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    store(root, &[("runs/old/run.json", "{\"status\": \"failed\"}")]);
    let dir = root.join(RUN_STORE_DIR);
    let record = dir.join("runs/old/run.json");
    let mtime = std::fs::metadata(&record).unwrap().modified().unwrap();
    let before = walked(root, None);
    // Ensure the change time can move on a coarse clock.
    std::thread::sleep(std::time::Duration::from_millis(20));
    forge_in_place(&record, "{\"status\": \"passed\"}");
    let meta = std::fs::metadata(&record).unwrap();
    assert_eq!(
        meta.modified().unwrap(),
        mtime,
        "the forgery put mtime back"
    );
    assert_eq!(meta.len(), "{\"status\": \"failed\"}".len() as u64);
    let after = walked_after(root, None, &before);
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
    let before = walked(root, None);
    // The other process writes its run, and is done before the "after".
    std::fs::write(busy.join("run.json"), "{\"status\": \"running\"}").unwrap();
    std::fs::write(busy.join("plan.json"), "{}").unwrap();
    drop(holder);
    std::fs::write(dir.join("runs/done/run.json"), "{\"forged\": 1}").unwrap();
    let after = walked_after(root, None, &before);
    assert_eq!(
        after.changed_since(&before),
        vec![".specbridge/runs/done/run.json"]
    );
    // Once nobody holds it, a change there is found again.
    std::fs::write(busy.join("run.json"), "{}").unwrap();
    let later = walked_after(root, None, &after);
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
    let before = walked(root, None);
    // The agent makes the earlier run look worked on, then edits it.
    std::fs::hard_link(&other_lock, dir.join("runs/old").join(layout::LOCK)).unwrap();
    std::fs::write(dir.join("runs/old/run.json"), "{\"forged\": 1}").unwrap();
    let after = walked_after(root, None, &before);
    assert!(after.live.get().contains("runs/old"), "the link is held");
    assert_eq!(
        after.changed_since(&before),
        vec![
            ".specbridge/runs/old/.lock",
            ".specbridge/runs/old/run.json"
        ]
    );
}

/// A run of its own in the repository at `root`, as the agent's attempt has.
fn own_run(root: &Path) -> RunHandle {
    RunStore::new(root).create(Default::default()).unwrap()
}

/// What `StoreBaseline::before` reads before the spawn, and then a walk beside
/// the agent taken after `agent` acted: as if the agent had got to every change
/// before the walk reached it.
fn walked_after_the_agent(root: &Path, run: &RunHandle, agent: impl FnOnce()) -> RunStoreState {
    let BeforeAgent::Read {
        store,
        live,
        listed,
    } = StoreBaseline::default().before(root, run)
    else {
        panic!("no baseline was offered")
    };
    let since = run.store_clock().unwrap();
    agent();
    RunStoreState::beside_agent(&store, Some(run.dir()), live, Beside { since, listed })
}

#[test]
fn what_the_agent_changed_before_the_walk_beside_it_got_there_is_found() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    store(
        root,
        &[
            ("runs/old/run.json", "{\"status\": \"failed\"}"),
            ("runs/old/stages/a/stage.json", "{}"),
            ("runs/gone/run.json", "{}"),
            ("runs/emptied/stages/a/stage.json", "{}"),
            ("notes", "n"),
        ],
    );
    let run = own_run(root);
    let dir = root.join(RUN_STORE_DIR);
    let before = walked_after_the_agent(root, &run, || {
        // In place, the same size, the modification time put back: the walk
        // sees the forged file, and nothing differs after the attempt.
        forge_in_place(&dir.join("runs/old/run.json"), "{\"status\": \"passed\"}");
        // Gone before the walk listed them: neither walk sees them.
        std::fs::remove_dir_all(dir.join("runs/gone")).unwrap();
        std::fs::remove_file(dir.join("runs/emptied/stages/a/stage.json")).unwrap();
        std::fs::write(dir.join("runs/old/extra"), "x").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.join("notes"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
    });
    assert!(before.files.contains_key("runs/old/run.json"));
    assert!(!before
        .files
        .keys()
        .any(|k| k.starts_with(&format!("runs/{}", run.id()))));
    let after = walked_after(root, Some(run.dir()), &before);
    assert_eq!(
        after.changed_since(&before),
        vec![
            ".specbridge/notes",
            ".specbridge/runs/emptied/stages/a",
            ".specbridge/runs/gone",
            ".specbridge/runs/old",
            ".specbridge/runs/old/extra",
            ".specbridge/runs/old/run.json",
        ]
    );
}

#[test]
fn beside_the_agent_what_others_did_before_it_started_and_a_new_run_are_not_blamed() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    store(root, &[("runs/old/run.json", "{}"), ("notes", "n")]);
    let run = own_run(root);
    let dir = root.join(RUN_STORE_DIR);
    // Another run ends just before the agent starts (a coarse clock is given a
    // tick to move on).
    std::fs::write(dir.join("runs/old/run.json"), "{\"status\": \"done\"}").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let before = walked_after_the_agent(root, &run, || {
        // A run another process starts while the agent works.
        store(
            root,
            &[
                ("runs/new/run.json", "{}"),
                ("runs/new/stages/a/stage.json", "{}"),
            ],
        );
        std::fs::write(run.dir().join("own-record"), "written by this run").unwrap();
    });
    let after = walked_after(root, Some(run.dir()), &before);
    assert_eq!(after.changed_since(&before), Vec::<String>::new());
}

#[test]
fn a_baseline_is_used_once_and_only_while_no_process_was_started_since_its_walk() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    store(root, &[("runs/old/run.json", "{}")]);
    let run = own_run(root);
    let dir = root.join(RUN_STORE_DIR);
    let baseline = StoreBaseline::default();
    // Nothing taken yet: the first attempt walks beside its agent, once the
    // agent is spawned.
    let first = baseline.before(root, &run).at_spawn(&run);
    assert!(matches!(first, Before::Ready(_)));
    let first = first.walk_beside();
    assert!(matches!(first, Before::Walking(_)));
    let first = first.state();
    assert!(first.beside.is_some());
    assert_eq!(
        first.files,
        RunStoreState::exact(&dir, Some(run.dir()), None, None).files
    );

    let offered = Arc::new(RunStoreState::exact(&dir, Some(run.dir()), None, None));
    baseline.offer(Taken {
        state: Arc::clone(&offered),
        spawned: supervisor::spawned(),
    });
    match baseline.before(root, &run).at_spawn(&run) {
        Before::Exact(state) => assert!(Arc::ptr_eq(&state, &offered)),
        Before::Walking(_) | Before::Ready(_) => panic!("the baseline was exact"),
    }
    // Used up: the next attempt walks.
    assert!(matches!(
        baseline.before(root, &run).at_spawn(&run),
        Before::Ready(_)
    ));
    // A state walked before the run started another process is not exact.
    baseline.offer(Taken {
        state: offered,
        spawned: supervisor::spawned().wrapping_sub(1),
    });
    assert!(matches!(
        baseline.before(root, &run).at_spawn(&run),
        Before::Ready(_)
    ));
}

/// The run folders another process holds are asked before the agent starts, by
/// trying each one's lock: held while a holder has it, free once it is gone,
/// and never held for a lock of this process's own linked there.
#[test]
fn the_folders_held_before_an_attempt_are_those_another_process_locks() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    store(
        root,
        &[
            ("runs/old/run.json", "{}"),
            ("runs/old/.lock", ""),
            ("runs/linked/run.json", "{}"),
        ],
    );
    let run = own_run(root);
    // The agent of an earlier attempt linked the run's own lock, which this
    // process holds, into an earlier run: that run is not worked on by anyone.
    std::fs::hard_link(
        run.dir().join(layout::LOCK),
        root.join(RUN_STORE_DIR)
            .join("runs/linked")
            .join(layout::LOCK),
    )
    .unwrap();
    let live = |baseline: &StoreBaseline| match baseline.before(root, &run) {
        BeforeAgent::Read { live, .. } => live,
        BeforeAgent::Exact(_) => panic!("no state was offered"),
    };
    let baseline = StoreBaseline::default();
    let lock = root.join(RUN_STORE_DIR).join("runs/old").join(layout::LOCK);
    let holder = Holder::hold(&lock);
    assert_eq!(live(&baseline), HashSet::from(["runs/old".to_string()]));
    drop(holder);
    assert!(live(&baseline).is_empty(), "nobody holds it now");
}

#[test]
fn a_long_history_walked_on_several_threads_is_the_same_state() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let files: Vec<(String, &str)> = (0..4 * RUNS_A_THREAD)
        .flat_map(|i| {
            [
                (format!("runs/r{i:03}/run.json"), "{}"),
                (
                    format!("runs/r{i:03}/stages/a/attempt-001/result.json"),
                    "{}",
                ),
            ]
        })
        .collect();
    let refs: Vec<(&str, &str)> = files.iter().map(|(p, c)| (p.as_str(), *c)).collect();
    store(root, &refs);
    let dir = root.join(RUN_STORE_DIR);
    let before = walked(root, None);
    assert_eq!(before.files.len(), files.len());
    assert!(before.dirs.contains_key("runs/r077/stages/a/attempt-001"));
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(dir.join("runs/r077/stages/a/attempt-001/result.json"), "[]").unwrap();
    std::fs::remove_dir_all(dir.join("runs/r100/stages")).unwrap();
    let after = walked_after(root, None, &before);
    assert_eq!(
        after.changed_since(&before),
        vec![
            ".specbridge/runs/r077/stages/a/attempt-001/result.json",
            ".specbridge/runs/r100/stages",
            ".specbridge/runs/r100/stages/a",
            ".specbridge/runs/r100/stages/a/attempt-001",
            ".specbridge/runs/r100/stages/a/attempt-001/result.json",
        ]
    );
}

/// A repository whose store holds run folders of the kind a long history
/// holds, each with its own files.
fn history() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    store(
        root.path(),
        &[
            ("runs/old/run.json", "{}"),
            ("runs/old/stages/a/one.json", "{}"),
            ("runs/old/stages/b/two.json", "{}"),
            ("runs/old/stages/b/deep/three.json", "{}"),
            ("runs/kept/run.json", "{}"),
            ("notes", "n"),
        ],
    );
    root
}

#[test]
fn a_walk_taking_earlier_listings_finds_what_changed_right_after_the_earlier_walk() {
    let root = history();
    let root = root.path();
    let dir = root.join(RUN_STORE_DIR);
    let before = walked(root, None);
    // At once, so that on a coarse clock the folders' change times may be the
    // ones their earlier listings were recorded with.
    let old = dir.join("runs/old");
    std::fs::write(old.join("stages/b/deep/four.json"), "{}").unwrap();
    std::fs::remove_file(old.join("stages/a/one.json")).unwrap();
    // Two folders swap names: each keeps its own inode.
    std::fs::rename(old.join("stages/a"), old.join("stages/swap")).unwrap();
    std::fs::rename(old.join("stages/b"), old.join("stages/a")).unwrap();
    std::fs::rename(old.join("stages/swap"), old.join("stages/b")).unwrap();
    std::fs::write(dir.join("notes"), "m").unwrap();
    let after = walked_after(root, None, &before);
    assert_eq!(
        after.changed_since(&before),
        vec![
            ".specbridge/notes",
            ".specbridge/runs/old/stages/a/deep",
            ".specbridge/runs/old/stages/a/deep/four.json",
            ".specbridge/runs/old/stages/a/deep/three.json",
            ".specbridge/runs/old/stages/a/one.json",
            ".specbridge/runs/old/stages/a/two.json",
            // `b` is now the emptied folder that was `a`.
            ".specbridge/runs/old/stages/b/deep",
            ".specbridge/runs/old/stages/b/deep/three.json",
            ".specbridge/runs/old/stages/b/two.json",
        ]
    );
    // Nothing changed since `after`: the next walk takes every listing and
    // finds nothing.
    let again = walked_after(root, None, &after);
    assert_eq!(again.changed_since(&after), Vec::<String>::new());
}

/// `known` with its listing of `folder` made stale: `name` left out, as if it
/// had been added in the same clock tick as the listing's change time (which
/// the folder's change time now is), and the walk's clock at `clock`.
fn stale(
    known: &RunStoreState,
    dir: &Path,
    folder: &str,
    name: &str,
    clock: i128,
) -> RunStoreState {
    let mut known = known.clone();
    let now = std::fs::symlink_metadata(dir.join(folder)).unwrap();
    let record = known.dirs.get_mut(folder).unwrap();
    record.ctime = specbridge_engine::time::ctime_ns(&now);
    let children: Vec<_> = record
        .children
        .as_deref()
        .unwrap()
        .iter()
        .filter(|c| *c.name != *std::ffi::OsStr::new(name))
        .cloned()
        .collect();
    record.children = Some(children.into());
    known.clock = Some(clock);
    known
}

#[test]
fn a_listing_is_taken_only_from_a_folder_unchanged_since_before_the_walk_that_listed_it() {
    let root = history();
    let root = root.path();
    let dir = root.join(RUN_STORE_DIR);
    let known = walked(root, None);
    std::fs::write(dir.join("runs/old/stages/a/added.json"), "{}").unwrap();
    let store = |known: &RunStoreState| RunStoreState::exact(&dir, None, None, Some(known));
    let folder = "runs/old/stages/a";
    let ctime = specbridge_engine::time::ctime_ns(&std::fs::metadata(dir.join(folder)).unwrap());
    // Changed in the tick the walk's clock was read in: listed again.
    let same_tick = stale(&known, &dir, folder, "added.json", ctime);
    assert!(store(&same_tick)
        .files
        .contains_key("runs/old/stages/a/added.json"));
    // Changed strictly before the clock: the listing is taken as it is (which
    // is what makes the rule above the one that finds the file).
    let earlier = stale(&known, &dir, folder, "added.json", ctime + 1);
    assert!(!store(&earlier)
        .files
        .contains_key("runs/old/stages/a/added.json"));
    // Another folder in its place: listed again, whatever its change time.
    let mut elsewhere = earlier.clone();
    elsewhere.dirs.get_mut(folder).unwrap().ino ^= 1;
    assert!(store(&elsewhere)
        .files
        .contains_key("runs/old/stages/a/added.json"));
    // No clock read before the earlier walk: nothing is taken from it.
    let mut unclocked = earlier;
    unclocked.clock = None;
    assert!(store(&unclocked)
        .files
        .contains_key("runs/old/stages/a/added.json"));
}

/// The check of one attempt whose agent added a file, with the "before" either
/// complete when the check starts or still being walked: the same change is
/// found either way, and a "before" still being walked is not waited for by the
/// walk after the attempt, which lists everything itself.
#[test]
fn the_walk_after_an_attempt_takes_listings_from_a_complete_before_and_never_waits_for_one() {
    let root = history();
    let root = root.path();
    let run = own_run(root);
    let dir = root.join(RUN_STORE_DIR);
    let since = run.store_clock().unwrap();
    let before = RunStoreState::exact(&dir, Some(run.dir()), Some(since), None);
    std::fs::write(dir.join("runs/old/stages/a/added.json"), "{}").unwrap();
    let expected = vec![".specbridge/runs/old/stages/a/added.json"];

    let baseline = Arc::new(StoreBaseline::default());
    let complete = Before::Exact(Arc::new(before.clone()));
    let check = StoreCheck::start(root, &run, complete, Arc::clone(&baseline));
    assert_eq!(check.changed(), expected);

    let (release, held) = std::sync::mpsc::channel::<()>();
    let walking = Before::Walking(std::thread::spawn(move || {
        let _ = held.recv();
        before
    }));
    let baseline = Arc::new(StoreBaseline::default());
    let check = StoreCheck::start(root, &run, walking, Arc::clone(&baseline));
    // The walk after the attempt ends (and offers its state) while the one
    // before it is still held.
    let offered = offered(
        &baseline,
        "the walk after the attempt waited for the walk before it",
    );
    assert_eq!(
        offered.files,
        RunStoreState::exact(&dir, Some(run.dir()), None, None).files
    );
    release.send(()).unwrap();
    assert_eq!(check.changed(), expected);
}

/// The state offered to the next attempt, waited for up to 30 s (`never` says
/// what it means that none came).
fn offered(baseline: &StoreBaseline, never: &str) -> Arc<RunStoreState> {
    let waited = std::time::Instant::now();
    loop {
        if let Some(taken) = baseline.lock().as_ref() {
            return Arc::clone(&taken.state);
        }
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(30),
            "{never}"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// The stage has the comparison before the held run folders are read; the state
/// offered to the next attempt has them all the same, so that a run another
/// process works on is not blamed on the next agent either.
#[test]
fn the_state_offered_after_an_attempt_knows_which_runs_another_process_holds() {
    let root = history();
    let root = root.path();
    let run = own_run(root);
    let dir = root.join(RUN_STORE_DIR);
    let holder = Holder::hold(&dir.join("runs/kept").join(layout::LOCK));
    let since = run.store_clock().unwrap();
    let before = RunStoreState::exact(&dir, Some(run.dir()), Some(since), None);
    std::fs::write(dir.join("runs/old/run.json"), "{\"forged\": 1}").unwrap();

    let baseline = Arc::new(StoreBaseline::default());
    let complete = Before::Exact(Arc::new(before));
    let check = StoreCheck::start(root, &run, complete, Arc::clone(&baseline));
    assert_eq!(check.changed(), vec![".specbridge/runs/old/run.json"]);
    let offered = offered(&baseline, "no state was offered");
    assert_eq!(
        *offered.live.get(),
        HashSet::from(["runs/kept".to_string()])
    );
    // The other process writes its run during the next attempt: not the agent's.
    std::fs::write(dir.join("runs/kept/run.json"), "{\"status\": 1}").unwrap();
    drop(holder);
    let next = RunStoreState::exact(&dir, Some(run.dir()), None, None);
    assert!(next.changed_since(&offered).is_empty());
}

/// What may be done to the store between two walks, on paths drawn from a small
/// set so that operations meet: files and folders added, removed, rewritten in
/// place, renamed over each other.
#[derive(Debug, Clone)]
enum Change {
    Write(String),
    Remove(String),
    Rename(String, String),
}

fn change() -> impl proptest::strategy::Strategy<Value = Change> {
    use proptest::prelude::*;
    let path = (0..3usize, 0..3usize, 0..3usize, 0..4usize).prop_map(|(r, s, d, f)| {
        let deep = ["", "/x", "/x/y"][d];
        match f {
            0 => format!("runs/r{r}/stages/s{s}{deep}"),
            f => format!("runs/r{r}/stages/s{s}{deep}/f{f}.json"),
        }
    });
    prop_oneof![
        path.clone().prop_map(Change::Write),
        path.clone().prop_map(Change::Remove),
        (path.clone(), path).prop_map(|(a, b)| Change::Rename(a, b)),
    ]
}

/// Applies `change` under `dir`, if it can be: a change the file system refuses
/// (a file's parent that is a file, a folder renamed into itself) is skipped.
fn apply(dir: &Path, change: &Change) {
    let _ = match change {
        Change::Write(path) => {
            let path = dir.join(path);
            let _ = std::fs::create_dir_all(path.parent().unwrap());
            match path.is_dir() {
                true => std::fs::write(path.join("in.json"), "i"),
                false => std::fs::write(&path, format!("{}", path.exists())),
            }
        }
        Change::Remove(path) => {
            let path = dir.join(path);
            match path.is_dir() {
                true => std::fs::remove_dir_all(path),
                false => std::fs::remove_file(path),
            }
        }
        Change::Rename(from, to) => {
            let to = dir.join(to);
            let _ = std::fs::create_dir_all(to.parent().unwrap());
            std::fs::rename(dir.join(from), to)
        }
    };
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// Model against implementation: after any changes made right after a walk
    /// (in the same clock tick, on a coarse clock), a walk taking that walk's
    /// listings finds the same files and folders as one that lists every folder
    /// (`walked_after` asserts it), and so the same changes; and again for a
    /// third walk taking the second's.
    #[test]
    fn a_walk_taking_listings_finds_what_a_full_listing_finds(
        first in proptest::collection::vec(change(), 0..12),
        second in proptest::collection::vec(change(), 0..12),
    ) {
        let root = history();
        let root = root.path();
        let dir = root.join(RUN_STORE_DIR);
        for (r, s) in [(0, 0), (1, 2), (2, 1)] {
            apply(&dir, &Change::Write(format!("runs/r{r}/stages/s{s}/x/f1.json")));
        }
        let mut before = walked(root, None);
        for changes in [first, second] {
            for change in &changes {
                apply(&dir, change);
            }
            let after = walked_after(root, None, &before);
            let listed = RunStoreState::exact(&dir, None, None, None);
            proptest::prop_assert_eq!(after.changed_since(&before), listed.changed_since(&before));
            before = after;
        }
    }
}
