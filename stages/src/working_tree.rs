//! The working tree as the stage kinds see it (docs/evidence.md): the glue between
//! the engine's evidence layer and the stages — snapshots written as attempt records, the
//! run's protected paths, and the ledger of what earlier stages of this run changed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::thread::JoinHandle;

use specbridge_engine::evidence::{
    git_command, normalize_rel_path, ChangedFiles, EntryKind, EvidenceError, GitSnapshot, OwnWrite,
    PatchAhead, PathState, ProtectedPaths, DEFAULT_DIFF_MAX_BYTES,
};
use specbridge_engine::store::layout::{self, attempt as file};
use specbridge_engine::store::{RunHandle, RunReader, StageRecord};

use crate::context::RunContext;
use crate::error::StageError;
use crate::partial_work::PartialWork;
use crate::prompt::PromptSource;
use crate::snapshot_ahead::SnapshotAhead;

/// What this run itself changed in the working tree, as last recorded: documents
/// specbridge wrote, and the paths execute stages changed. A later execute stage
/// starts from a tree these make dirty; knowing their exact content tells them apart
/// from the user's own uncommitted changes.
#[derive(Debug, Default)]
pub struct TreeLedger {
    inner: Mutex<LedgerState>,
}

#[derive(Debug, Default)]
struct LedgerState {
    /// Documents by path, with the sha256 specbridge wrote.
    documents: BTreeMap<String, String>,
    /// Paths changed by earlier execute stages, in their state after that stage.
    changed: BTreeMap<String, PathState>,
}

impl TreeLedger {
    /// Called before the document is written, so that a generate stage whose
    /// snapshots straddle the write finds it already known.
    pub fn document(&self, path: &str, sha256: &str) {
        let mut state = self.inner.lock().expect("ledger lock");
        let path = normalize_rel_path(path);
        state.changed.remove(&path);
        state.documents.insert(path, sha256.to_string());
    }

    /// specbridge's own writes, for attribution.
    pub(crate) fn own_writes(&self) -> Vec<OwnWrite> {
        let state = self.inner.lock().expect("ledger lock");
        state
            .documents
            .iter()
            .map(|(path, sha)| OwnWrite::new(path, Some(sha.clone())))
            .collect()
    }

    /// Whether `path` is in the state this run last left it in.
    pub(crate) fn made_by_run(&self, path: &str, now: &PathState) -> bool {
        let state = self.inner.lock().expect("ledger lock");
        if let Some(sha) = state.documents.get(path) {
            return now.kind == EntryKind::File && now.sha256.as_ref() == Some(sha);
        }
        state.changed.get(path).is_some_and(|s| s.same_content(now))
    }

    /// Learn what an earlier process of this run changed (resume): the documents
    /// its stages wrote, and what each execute attempt changed, oldest first.
    pub(crate) fn seed_from_run(&self, run_dir: &Path) {
        let run = RunReader::at(run_dir);
        let Ok(stages) = run.stage_ids() else {
            return;
        };
        let records: Vec<(String, Option<StageRecord>)> = stages
            .into_iter()
            .map(|id| {
                let record = run.stage(&id).ok().flatten();
                (id, record)
            })
            .collect();
        self.seed_from_records(
            run_dir,
            records.iter().map(|(id, r)| (id.as_str(), r.as_ref())),
        );
    }

    /// [`TreeLedger::seed_from_run`] from the stage records already read: each
    /// stage folder with its record (`None` when it has no readable one).
    pub(crate) fn seed_from_records<'a>(
        &self,
        run_dir: &Path,
        records: impl IntoIterator<Item = (&'a str, Option<&'a StageRecord>)>,
    ) {
        let mut changes: Vec<(String, ChangedFiles, GitSnapshot)> = Vec::new();
        let run = RunReader::at(run_dir);
        for (stage, record) in records {
            if let Some(doc) = record.as_ref().and_then(|r| r.document.as_ref()) {
                self.document(&doc.path, &doc.sha256);
            }
            // A check records no change of the tree: its attempts hold none.
            if record.as_ref().is_some_and(|r| !r.kind.is_agent()) {
                continue;
            }
            for attempt in run.attempts(stage).unwrap_or_default() {
                let (Some(changed), Some(after)) = (
                    attempt.json_opt::<ChangedFiles>(file::CHANGED_FILES),
                    attempt.json_opt::<GitSnapshot>(file::GIT_AFTER),
                ) else {
                    continue;
                };
                changes.push((after.taken_at.clone(), changed, after));
            }
        }
        changes.sort_by(|a, b| a.0.cmp(&b.0));
        for (_, changed, after) in changes {
            self.record(&changed, &after);
        }
    }

    /// Remember what an execute attempt changed, as it left it.
    pub fn record(&self, changed: &ChangedFiles, after: &GitSnapshot) {
        let mut state = self.inner.lock().expect("ledger lock");
        for path in changed.attributed() {
            let now = after.entries.get(path).cloned().unwrap_or(PathState {
                // Back to HEAD's content: nothing left to tell apart.
                status: specbridge_engine::evidence::PathStatus::Modified,
                kind: EntryKind::Missing,
                sha256: None,
                executable: false,
            });
            if after.entries.contains_key(path) {
                state.documents.remove(path);
                state.changed.insert(path.clone(), now);
            } else {
                state.changed.remove(path);
            }
        }
    }
}

/// The paths dirty in `before` that this run did not make: the user's own
/// uncommitted changes (or someone else's, made while the run went on).
pub(crate) fn foreign_changes(before: &GitSnapshot, ledger: &TreeLedger) -> Vec<String> {
    before
        .entries
        .iter()
        .filter(|(path, state)| !ledger.made_by_run(path, state))
        .map(|(path, _)| path.clone())
        .collect()
}

/// A path dirty before the attempt and changed again is ambiguous only when the
/// earlier change was not this run's: a change from a state the run recorded is
/// the attempt's, and is attributed like any other.
pub(crate) fn attribute_run_made(
    changed: &mut ChangedFiles,
    before: &GitSnapshot,
    ledger: &TreeLedger,
) {
    let ambiguous = std::mem::take(&mut changed.ambiguous);
    for path in ambiguous {
        let made = before
            .entries
            .get(&path)
            .is_some_and(|state| ledger.made_by_run(&path, state));
        if !made {
            changed.ambiguous.push(path);
            continue;
        }
        changed.modified.push(path);
    }
    changed.modified.sort();
}

/// Take a snapshot of the repository.
pub fn snapshot(root: &Path) -> Result<GitSnapshot, StageError> {
    GitSnapshot::take(root).map_err(StageError::Snapshot)
}

/// Starts taking the snapshot of `root` on a thread named `name`; `None` where no
/// thread can be had (the caller then takes it itself when it needs it).
pub(crate) fn snapshot_on_thread(
    root: &Path,
    name: &str,
) -> Option<JoinHandle<Result<GitSnapshot, EvidenceError>>> {
    snapshot_on_thread_then(root, name, |_, snapshot| snapshot)
}

/// [`snapshot_on_thread`], the same thread going on with `then` once the
/// snapshot is taken.
fn snapshot_on_thread_then<T: Send + 'static>(
    root: &Path,
    name: &str,
    then: impl FnOnce(&Path, GitSnapshot) -> T + Send + 'static,
) -> Option<JoinHandle<Result<T, EvidenceError>>> {
    let root = root.to_path_buf();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || GitSnapshot::take(&root).map(|snapshot| then(&root, snapshot)))
        .ok()
}

/// A snapshot of the working tree being taken on a thread, or taken.
#[derive(Debug)]
pub(crate) enum Taking {
    Thread(JoinHandle<Result<GitSnapshot, EvidenceError>>),
    Taken(GitSnapshot),
}

impl Taking {
    /// Starts taking a snapshot of `root` on a thread; where none can be had,
    /// it is taken when waited for.
    pub(crate) fn start(root: &Path) -> Option<Taking> {
        snapshot_on_thread(root, "specbridge-before").map(Taking::Thread)
    }

    /// The snapshot. One that failed on its thread is taken again here, and
    /// what that meets is the error: the thread's may have been passing.
    pub(crate) fn wait(self, root: &Path) -> Result<GitSnapshot, StageError> {
        match self {
            Taking::Taken(taken) => Ok(taken),
            Taking::Thread(thread) => match thread
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            {
                Ok(taken) => Ok(taken),
                Err(_) => snapshot(root),
            },
        }
    }
}

/// The working tree after an agent, read from the moment no member of the
/// agent's process group can act any more (the invocation's `on_exit`), on a
/// thread beside the writing
/// of the invocation's records, which are all under `.specbridge/` and so never
/// in a snapshot. Not started (nothing spawned, or a playback, which changes
/// the tree itself), it is taken when asked for.
///
/// Given the before-snapshot before it starts ([`AfterSnapshot::set_before`]:
/// before the spawn or at the prompt, once the kind's check passed), the same
/// thread goes on to take the attempt's patch ahead ([`PatchAhead`]), while
/// the kernel still tears the agent down: the 20 ms or so that the reap waits
/// for the CLI's memory to be given back.
#[derive(Debug)]
pub(crate) struct AfterSnapshot {
    root: PathBuf,
    before: OnceLock<TreeBefore>,
    taking: Mutex<Option<JoinHandle<Result<AfterTree, EvidenceError>>>>,
}

/// The working tree an attempt's agent starts from, once its kind's check
/// passed: the before-snapshot, and the tree the attempt's patch is taken
/// against when not HEAD (an execute attempt that starts from an earlier
/// stage's changes).
#[derive(Debug, Clone)]
pub(crate) struct TreeBefore {
    pub(crate) snapshot: GitSnapshot,
    pub(crate) patch_head: Option<String>,
}

/// The after-snapshot, and the patch taken ahead from it when it was.
pub(crate) type AfterTree = (GitSnapshot, Option<PatchAhead>);

impl AfterSnapshot {
    pub(crate) fn new(root: &Path) -> Self {
        AfterSnapshot {
            root: root.to_path_buf(),
            before: OnceLock::new(),
            taking: Mutex::default(),
        }
    }

    /// What the patch taken ahead starts from, once; given after the snapshot
    /// started, it is not used (the patch is then taken after the reap).
    pub(crate) fn set_before(&self, before: TreeBefore) {
        let _ = self.before.set(before);
    }

    /// Starts taking the snapshot, once. Where no thread can be had, it is taken
    /// when asked for.
    pub(crate) fn start(&self) {
        let mut taking = self.taking.lock().unwrap_or_else(PoisonError::into_inner);
        if taking.is_none() {
            let before = self.before.get().cloned();
            *taking = snapshot_on_thread_then(&self.root, "specbridge-after", |root, after| {
                let ahead = before.map(|b| {
                    PatchAhead::take(
                        root,
                        &b.snapshot,
                        &after,
                        b.patch_head.as_deref(),
                        DEFAULT_DIFF_MAX_BYTES,
                    )
                });
                (after, ahead)
            });
        }
    }

    /// The snapshot: the one started (with its patch taken ahead), or one
    /// taken now.
    pub(crate) fn take(self) -> Result<AfterTree, StageError> {
        let taking = self
            .taking
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        match taking {
            Some(thread) => thread
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                .map_err(StageError::Snapshot),
            None => Ok((snapshot(&self.root)?, None)),
        }
    }
}

/// Queue a snapshot as `git-before.json` / `git-after.json`: it is written in
/// one batch with the attempt's next direct write (`request.json` before the
/// agent starts, `evidence.json` after it), see `store/batch.rs`.
pub(crate) fn write_snapshot(
    run: &RunHandle,
    attempt_rel: &str,
    name: &str,
    snap: &GitSnapshot,
) -> Result<(), StageError> {
    run.defer_json(&layout::in_attempt(attempt_rel, name), snap)
        .map(|_| ())
        .map_err(StageError::record(name))
}

/// Every protected path of the run: `.git/`, `.specbridge/`, the pipeline file, the
/// prompt and schema files it names, every document its generate stages write, and
/// `protectedPaths`.
pub(crate) fn protected_paths(ctx: &RunContext) -> ProtectedPaths {
    let mut referenced = Vec::new();
    let mut documents = Vec::new();
    for stage in &ctx.pipeline.stages {
        if let Some(PromptSource::File(path)) = stage
            .prompt
            .as_deref()
            .map(|p| PromptSource::from_value(p, &ctx.pipeline_dir))
        {
            referenced.extend(repo_relative(&ctx.root, &path));
        }
        if let Some(output) = &stage.output {
            if !output
                .schema
                .starts_with(specbridge_engine::builtin_schemas::PREFIX)
            {
                referenced.extend(repo_relative(
                    &ctx.root,
                    &ctx.pipeline_dir.join(&output.schema),
                ));
            }
            documents.extend(output.document.clone());
        }
    }
    ProtectedPaths::new(
        &ctx.pipeline_file,
        referenced,
        documents,
        &ctx.pipeline.protected_paths,
    )
}

fn repo_relative(root: &Path, path: &Path) -> Option<String> {
    let rel = match path.strip_prefix(root) {
        Ok(rel) => rel.to_path_buf(),
        Err(_) => {
            let root = std::fs::canonicalize(root).ok()?;
            std::fs::canonicalize(path)
                .ok()?
                .strip_prefix(root)
                .ok()?
                .to_path_buf()
        }
    };
    Some(rel.to_string_lossy().into_owned())
}

/// A tree object of the working tree as it is now, in a private index: the base
/// of an attempt's `diff.patch` when the attempt starts from changes an earlier
/// stage made, so the patch shows this attempt's change alone. Only objects are
/// written; refs, the user's index and the working tree are untouched.
pub(crate) fn working_tree_object(root: &Path, before: &GitSnapshot) -> Option<String> {
    let tmp = tempfile::tempdir().ok()?;
    let index = tmp.path().join("index");
    let git = |args: &[&str]| {
        let out = git_command(root, Some(&index), args).output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    // A copy of the user's index keeps git's stat cache: only changed files are hashed.
    let real = &specbridge_engine::evidence::repository_paths(root)
        .ok()?
        .index_file;
    if real.exists() {
        std::fs::copy(real, &index).ok()?;
    }
    // Only the paths that differ from HEAD: the run store stays out (an ignored
    // folder named in a pathspec, even to exclude it, fails `git add`).
    let paths: Vec<&str> = before.entries.keys().map(String::as_str).collect();
    for chunk in paths.chunks(500) {
        let mut args = vec!["--literal-pathspecs", "add", "-A", "--"];
        args.extend(chunk);
        git(&args)?;
    }
    git(&["write-tree"])
}

/// Agent stages need the repository root to be the top level of a git repository:
/// git reports paths from the top level, and evidence must see every path the agent
/// could change. Checked before a run with agent stages starts anything.
pub(crate) fn require_repository_root(root: &Path) -> Result<(), String> {
    use specbridge_engine::evidence::{repository_paths, EvidenceError};
    let paths = match repository_paths(root) {
        Ok(paths) => paths,
        Err(EvidenceError::GitSpawn { source, .. }) => {
            return Err(format!(
                "agent stages need git for their evidence: failed to run git: {source}"
            ))
        }
        Err(_) => return Err(format!(
            "agent stages need a git repository for their evidence, and {} is not in one (run `git init` there, or use `specbridge run --scaffold DIR`)",
            root.display()
        )),
    };
    let top = paths.top.display().to_string();
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    if canon(Path::new(&top)) != canon(root) {
        return Err(format!(
            "agent stages need the repository root: {} is inside the git repository {top}; run with `-C {top}`, or copy the folder into its own repository with `specbridge run --scaffold {}`",
            root.display(),
            root.display()
        ));
    }
    Ok(())
}

/// Before a run or a resume with execute stages starts anything (docs/evidence.md): the
/// working tree must hold no change but the run's own (`run_dir`, resume) unless
/// `--allow-dirty`, since other uncommitted changes could not be told apart from
/// the agent's.
///
/// Under resume, what an execute attempt cut off by a crash left changed is that
/// attempt's partial work, not a foreign change ([`crate::partial_work`]): returned,
/// so that the resume can say what it kept.
pub(crate) fn require_clean_start(
    root: &Path,
    allow_dirty: bool,
    run_dir: Option<&Path>,
    ahead: &SnapshotAhead,
) -> Result<Vec<PartialWork>, String> {
    if allow_dirty {
        return Ok(Vec::new());
    }
    let taken = ahead.peek().map_or_else(|| GitSnapshot::take(root), Ok);
    let snap = taken.map_err(|e| {
        format!(
            "execute stages need a git repository for their evidence: {}",
            crate::error_chain(&e)
        )
    })?;
    let Some(run_dir) = run_dir else {
        return specbridge_engine::evidence::require_clean_start(&snap, false)
            .map(|()| Vec::new())
            .map_err(|e| e.to_string());
    };
    let ledger = TreeLedger::default();
    ledger.seed_from_run(run_dir);
    let partial = crate::partial_work::cut_off_attempts(run_dir, &snap);
    let paths: Vec<String> = foreign_changes(&snap, &ledger)
        .into_iter()
        .filter(|p| !partial.iter().any(|w| w.paths.contains(p)))
        .collect();
    if paths.is_empty() {
        Ok(partial)
    } else {
        Err(specbridge_engine::evidence::EvidenceError::DirtyTree { paths }.to_string())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::process::Command;

    use super::*;

    fn git(root: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(root)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A repository with one committed file, `f`.
    pub(crate) fn committed_repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        git(root, &["init", "-q"]);
        std::fs::write(root.join("f"), "a\n").unwrap();
        git(root, &["add", "f"]);
        git(root, &["commit", "-qm", "i"]);
        dir
    }

    #[test]
    fn the_working_tree_object_holds_uncommitted_changes_and_leaves_the_index_alone() {
        let dir = committed_repo();
        let root = dir.path();
        std::fs::write(root.join("f"), "a\nb\n").unwrap();
        std::fs::write(root.join("new"), "n\n").unwrap();
        std::fs::write(root.join(".gitignore"), ".specbridge/\n").unwrap();
        std::fs::create_dir_all(root.join(".specbridge/runs")).unwrap();
        std::fs::write(root.join(".specbridge/runs/log"), "x").unwrap();
        let status = git(root, &["status", "--porcelain"]);
        let before = GitSnapshot::take(root).unwrap();
        let tree = working_tree_object(root, &before).expect("a tree");
        assert_eq!(git(root, &["show", &format!("{tree}:f")]), "a\nb\n");
        assert_eq!(git(root, &["show", &format!("{tree}:new")]), "n\n");
        assert!(!git(root, &["ls-tree", "-r", "--name-only", &tree]).contains(".specbridge"));
        assert_eq!(git(root, &["status", "--porcelain"]), status);
    }

    /// Started (once, however often asked), the after-snapshot is taken on its
    /// thread; never started, it is taken when asked for.
    #[test]
    fn the_after_snapshot_is_taken_when_started_or_when_asked() {
        let dir = committed_repo();
        let root = dir.path();
        std::fs::write(root.join("made"), "by the agent\n").unwrap();
        let started = AfterSnapshot::new(root);
        started.start();
        started.start();
        let (taken, ahead) = started.take().unwrap();
        assert!(ahead.is_none());
        let paths = |s: &GitSnapshot| s.entries.keys().cloned().collect::<Vec<_>>();
        assert_eq!(paths(&taken), ["made"]);
        std::fs::write(root.join("later"), "x\n").unwrap();
        let (asked, _) = AfterSnapshot::new(root).take().unwrap();
        assert_eq!(paths(&asked), ["later", "made"]);
    }

    /// Given the before-snapshot, the after-snapshot's thread takes the
    /// attempt's patch too, of the tree as that snapshot saw it.
    #[test]
    fn the_after_snapshots_thread_takes_the_patch_ahead() {
        use specbridge_engine::evidence::{attempt_diff, attribute};
        let dir = committed_repo();
        let root = dir.path();
        let before = GitSnapshot::take(root).unwrap();
        std::fs::write(root.join("f"), "a\nby the agent\n").unwrap();
        let after = AfterSnapshot::new(root);
        after.set_before(TreeBefore {
            snapshot: before.clone(),
            patch_head: None,
        });
        after.start();
        let (after, ahead) = after.take().unwrap();
        std::fs::write(root.join("f"), "a\nlater\n").unwrap();
        let changed = attribute(&before, &after, &[]);
        let diff =
            |ahead| attempt_diff(ahead, root, &changed, &after, None, DEFAULT_DIFF_MAX_BYTES);
        let patch = String::from_utf8(diff(ahead).unwrap().patch).unwrap();
        assert!(patch.contains("+by the agent"), "{patch}");
        let now = String::from_utf8(diff(None).unwrap().patch).unwrap();
        assert!(now.contains("+later"), "{now}");
    }
}
