//! Creating and opening run folders, and writing records into them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::events::{RunEvent, Subscriber};
use crate::redact::Redactor;
use crate::runner::claude_code::stream::Progress;
use crate::store::atomic::{sha256_file, WriteError};
use crate::store::batch::{Deferred, Queue};
use crate::store::durable::{off_the_worker, GroupCommit};
use crate::store::events::{ChainHead, EventError, EventLog};
use crate::store::fault::{injected_failure, Guard, StoreFailure};
use crate::store::layout;
use crate::store::lock::{LockError, RunLock, StoreClock};
use crate::store::log::{Announce, RunLog};
use crate::store::private::{ensure_private_dir, exclude_from_git};
use crate::store::publish::Publisher;
use crate::store::reader::RunReader;
use crate::store::select::{self, is_safe_component, RunSelectError};
use crate::store::tamper::{RecordChange, RecordWatch};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Select(#[from] RunSelectError),
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error(transparent)]
    Events(#[from] EventError),
    #[error("failed to read {path}: {message}")]
    Read { path: PathBuf, message: String },
    #[error("failed to create run folder {path}")]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("refusing unsafe record path `{0}`")]
    UnsafePath(String),
    #[error("failed to read the run folder {0}: it no longer exists")]
    RunGone(PathBuf),
    #[error("failed to write to run folder {}: it no longer exists (deleted while the run went on)", path.display())]
    FolderVanished { path: PathBuf },
    #[error("failed to write {path}: the run's records stopped at an earlier failure: {first}")]
    Stopped { path: String, first: String },
}

/// `.specbridge/runs/` of one repository.
#[derive(Debug, Clone)]
pub struct RunStore {
    root: PathBuf,
    runs_dir: PathBuf,
}

impl RunStore {
    pub fn new(repo_root: &Path) -> Self {
        RunStore {
            root: repo_root.to_path_buf(),
            runs_dir: layout::runs_dir(repo_root),
        }
    }

    pub fn runs_dir(&self) -> &Path {
        &self.runs_dir
    }

    /// A new run folder with a fresh UUID v7 id, locked, with an empty event log,
    /// writing everything through `redactor` (built once per run, see
    /// [`Redactor::for_pipeline`]). The folders are the user's alone (0700), and
    /// the first run of a repository keeps `.specbridge/` out of git.
    pub fn create(&self, redactor: Redactor) -> Result<RunHandle, StoreError> {
        let id = uuid::Uuid::now_v7().to_string();
        let dir = self.runs_dir.join(&id);
        let create = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StoreError::Create { path, source }
        };
        let base = self.root.join(layout::STORE_DIR);
        // `runs/`, not `.specbridge/`: the working-tree lock of a run with execute
        // stages creates `.specbridge/` before the first run folder exists.
        let first = !self.runs_dir.exists();
        for d in [&base, &self.runs_dir, &dir] {
            ensure_private_dir(d).map_err(create(d))?;
        }
        if first {
            // Best effort: a repository whose exclude file cannot be written still
            // runs; its records stay private to the user.
            if let Err(e) = exclude_from_git(&self.root) {
                tracing::warn!("failed to add .specbridge/ to .git/info/exclude: {e}");
            }
        }
        let lock = RunLock::acquire(&dir, &id)?;
        let events = EventLog::create(&dir.join(layout::EVENTS))?;
        Ok(RunHandle::new(id, dir, lock, events, redactor))
    }

    /// Resolve a selector (id, unique prefix, `latest`) to an id and folder.
    pub fn select(&self, selector: &str) -> Result<(String, PathBuf), StoreError> {
        let id = select::select(&self.runs_dir, selector)?;
        let dir = self.runs_dir.join(&id);
        Ok((id, dir))
    }

    /// Take a run's lock without opening its event log (for read-mostly work that
    /// must not race a writer, and for crash recovery before the log is repaired).
    pub fn lock(&self, selector: &str) -> Result<(String, PathBuf, RunLock), StoreError> {
        let (id, dir) = self.select(selector)?;
        let lock = RunLock::acquire(&dir, &id)?;
        Ok((id, dir, lock))
    }

    /// Open an existing run for writing: lock it and continue its event chain.
    pub fn open(&self, selector: &str, redactor: Redactor) -> Result<RunHandle, StoreError> {
        let (id, dir, lock) = self.lock(selector)?;
        let events = EventLog::open(&dir.join(layout::EVENTS))?;
        Ok(RunHandle::new(id, dir, lock, events, redactor))
    }

    /// Continue a run whose lock is already held: resume takes the lock first,
    /// audits the run (reading the log whole, which gives its `head`) and sets a
    /// torn tail aside before it opens the log for writing.
    pub(crate) fn open_locked(
        id: String,
        dir: PathBuf,
        lock: RunLock,
        redactor: Redactor,
        head: &ChainHead,
    ) -> Result<RunHandle, StoreError> {
        let events = EventLog::continue_from(&dir.join(layout::EVENTS), head)?;
        Ok(RunHandle::new(id, dir, lock, events, redactor))
    }

    /// Every run id, oldest first.
    pub(crate) fn run_ids(&self) -> Result<Vec<String>, StoreError> {
        Ok(select::run_ids(&self.runs_dir)?)
    }

    /// A reader of the run a selector (id, unique prefix, `latest`) names.
    pub fn reader(&self, selector: &str) -> Result<RunReader, StoreError> {
        let (id, dir) = self.select(selector)?;
        Ok(RunReader::new(id, dir))
    }

    /// A reader of every run, oldest first, each with the shortest prefix of its
    /// id (at least 8 characters) that no other run shares, for display.
    pub fn readers(&self) -> Result<Vec<(RunReader, String)>, StoreError> {
        let ids = self.run_ids()?;
        let short = select::shortest_unique_prefixes(&ids, 8);
        Ok(ids
            .into_iter()
            .zip(short)
            .map(|(id, short)| {
                let dir = self.runs_dir.join(&id);
                (RunReader::new(id, dir), short)
            })
            .collect())
    }
}

/// An open, locked run, and the only writer of its records.
///
/// Every byte written through it — JSON records, byte records, events, streamed
/// logs — passes the run's [`Redactor`] first; the raw atomic writer and the event
/// log are private to the store, so no other module can write a record around it
/// (docs/run-directory.md). Every record is announced in the event log with its
/// path and sha256, which is what audit checks files against.
#[derive(Debug)]
pub struct RunHandle {
    id: String,
    dir: PathBuf,
    lock: RunLock,
    pub(super) events: Arc<Publisher>,
    pub(super) commit: Arc<GroupCommit>,
    pub(super) redactor: Arc<Redactor>,
    pub(super) guard: Arc<Guard>,
    /// Writes waiting for the next flush (`store/batch.rs`); shared with the
    /// logs announced behind the caller ([`RunHandle::log_behind`]).
    pub(super) queue: Arc<std::sync::Mutex<Queue>>,
    /// Held by the one thread writing a batch; the last ticket taken for writing.
    pub(super) written: std::sync::Mutex<u64>,
    /// A job from [`RunHandle::flush_job`] is out and has yet to take the queue
    /// (`store/batch.rs`).
    pub(super) job_waiting: std::sync::atomic::AtomicBool,
    /// What the checks of the records after agent attempts learnt so far
    /// (`store/tamper.rs`); taken with the log held.
    record_watch: std::sync::Mutex<RecordWatch>,
}

/// One append with the log already held, whatever failed before (the guard is
/// asked by the caller): a failed append stops the run's writes (see [`Guard`]).
pub(super) fn append_held(
    events: &Publisher,
    log: &mut EventLog,
    redactor: &Redactor,
    guard: &Guard,
    event: &RunEvent,
    at: Option<chrono::DateTime<chrono::Utc>>,
) -> Result<u64, StoreError> {
    let appended = injected_failure()
        .map_err(|source| {
            StoreError::Events(EventError::Append {
                path: log.path().to_path_buf(),
                source,
            })
        })
        .and_then(|()| Ok(events.append_held(log, redactor, event, at)?));
    appended.inspect_err(|e| guard.fail(e, true))
}

/// Appends one event, redacted: what the run handle and its logs share. Refused
/// once the run's records have stopped at a failure.
pub(super) fn append_event(
    events: &Publisher,
    redactor: &Redactor,
    guard: &Guard,
    event: &RunEvent,
) -> Result<u64, StoreError> {
    let mut log = events.lock();
    guard.check(layout::EVENTS)?;
    append_held(events, &mut log, redactor, guard, event, None)
}

/// Whether a record write is an ordinary one, or the one write that settles a
/// run after its records stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Gate {
    Open,
    AfterFailure,
}
impl RunHandle {
    fn new(id: String, dir: PathBuf, lock: RunLock, events: EventLog, redactor: Redactor) -> Self {
        let guard = Arc::new(Guard::new(&dir));
        RunHandle {
            id,
            dir,
            lock,
            commit: events.commit(),
            events: Arc::new(Publisher::new(events)),
            redactor: Arc::new(redactor),
            guard,
            queue: Arc::new(std::sync::Mutex::new(Queue::default())),
            written: std::sync::Mutex::new(0),
            job_waiting: std::sync::atomic::AtomicBool::new(false),
            record_watch: std::sync::Mutex::new(RecordWatch::default()),
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The run store's clock now (`RunLock::store_clock`), for telling what
    /// changed under `.specbridge/` after this moment.
    pub fn store_clock(&self) -> std::io::Result<i128> {
        self.lock.store_clock()
    }

    /// The same clock, to be read on another thread (`RunLock::clock`).
    pub fn clock(&self) -> std::io::Result<StoreClock> {
        self.lock.clock()
    }

    /// The run's redactor, for text that leaves specbridge another way (the
    /// terminal) or must be checked for secrets (a document, a change).
    pub fn redactor(&self) -> &Arc<Redactor> {
        &self.redactor
    }

    /// The absolute path of a relative record path, refusing anything that could
    /// leave the run folder. For reading: writing goes through the methods below.
    pub fn path(&self, rel: &str) -> Result<PathBuf, StoreError> {
        if rel.is_empty() || rel.split('/').any(|c| !is_safe_component(c)) {
            return Err(StoreError::UnsafePath(rel.to_string()));
        }
        Ok(self.dir.join(rel))
    }

    /// Append an event, its strings redacted, and hand it to the subscribers;
    /// after every write queued before it (`store/batch.rs`).
    pub fn event(&self, event: RunEvent) -> Result<(), StoreError> {
        let ticket = self.enqueue(Deferred::event(event))?;
        self.flush_through(ticket)
    }

    /// From now on, hand every event appended (and live agent progress) to
    /// `subscriber` too: the live display is a consumer of the event stream.
    pub fn subscribe(&self, subscriber: Subscriber) {
        self.events.subscribe(subscriber);
    }

    /// Live progress of a running agent, for the subscribers only: not recorded.
    pub fn live_progress(&self, stage: &str, progress: &Progress) {
        self.events.live(&self.redactor, stage, progress);
    }

    /// Write a JSON record atomically, its strings (and keys) redacted, and
    /// announce it. Returns the sha256 of the bytes written.
    pub fn write_json<T: serde::Serialize>(
        &self,
        rel: &str,
        value: &T,
    ) -> Result<String, StoreError> {
        let (path, bytes) = self.json_record(rel, value)?;
        self.put(rel, path, bytes)
    }

    /// Write bytes atomically, redacted, and announce them.
    pub fn write_bytes(&self, rel: &str, bytes: &[u8]) -> Result<String, StoreError> {
        let path = self.path(rel)?;
        self.put(rel, path, self.redactor.redact_bytes(bytes))
    }

    /// Intent first: a crash between the rename and the `record-written` event
    /// leaves a file that matches an announced intent, which recovery can tell from
    /// tampering (docs/audit.md, "Crash recovery"). So the intent is on disk before
    /// the rename, and the rename (file and folder synced) before the
    /// announcement is written; the announcement itself is made durable by the
    /// next group commit. The write goes through the run's queue, with whatever
    /// was queued before it (`store/batch.rs`).
    fn put(&self, rel: &str, path: PathBuf, redacted: Vec<u8>) -> Result<String, StoreError> {
        let (sha, ticket) = self.enqueue_record(rel, path, redacted)?;
        self.flush_through(ticket)?;
        Ok(sha)
    }

    pub(super) fn sync_through(&self, seq: u64) -> Result<(), StoreError> {
        self.commit.sync_through(seq).map_err(|source| {
            let e = StoreError::from(EventError::Append {
                path: self.dir.join(layout::EVENTS),
                source,
            });
            // After a failed sync nothing says which lines reached the disk.
            self.guard.fail(&e, true);
            e
        })?;
        Ok(())
    }

    /// Make every event appended so far durable (one `fdatasync`, shared with any
    /// other thread syncing at the same time; none if nothing new was appended).
    pub fn sync(&self) -> Result<(), StoreError> {
        self.flush()?;
        let seq = self.events.lock().last_seq();
        self.sync_through(seq)
    }

    /// The one write after the records stopped (see [`StoreFailure`]): `run.json`
    /// settled as failed, then its `run-finished` event, so that the run does not
    /// stay `running`. Not tried when the folder is gone, nor after a failed event
    /// append (the log may end in a torn line, which only a resume sets aside);
    /// it fails like any write while the disk stays full. Then `run.json` keeps
    /// saying `running`, and resume treats the run as interrupted.
    pub(crate) fn settle_after_failure<T: serde::Serialize>(
        &self,
        run_json: &T,
        finished: RunEvent,
    ) -> Result<(), StoreError> {
        let Some(first) = self.guard.failure() else {
            self.write_json(layout::RUN, run_json)?;
            self.event(finished)?;
            return Ok(());
        };
        if first.vanished || first.in_event_log {
            return Err(StoreError::Stopped {
                path: layout::RUN.into(),
                first: first.message,
            });
        }
        let (path, bytes) = self.json_record(layout::RUN, run_json)?;
        // What was queued before the failure is not written: the failed write
        // was the last of the run's own.
        let _writer = self.written.lock().expect("writer lock");
        let sha = crate::store::sha256_hex(&bytes);
        let settle = vec![
            Deferred::Record {
                rel: layout::RUN.to_string(),
                path,
                bytes,
                sha,
            },
            Deferred::event(finished),
        ];
        off_the_worker(|| self.write_batch(settle, Gate::AfterFailure))
    }

    /// Why the run's records stopped being written, once they have: the run must
    /// end (the scheduler starts nothing more).
    pub fn failure(&self) -> Option<StoreFailure> {
        self.guard.failure()
    }

    /// Fails, as any later write would, once the run's records have stopped
    /// being written ([`Self::failure`]).
    pub fn records_ok(&self) -> Result<(), StoreError> {
        self.guard.stopped("")
    }

    /// Check now that the run folder is still there (while nothing is written).
    pub(crate) fn watch(&self) -> Option<StoreFailure> {
        self.guard.watch()
    }

    /// A record written as a stream (a process's output, JSON lines), redacted as
    /// it is written and announced by [`RunLog::complete`]. The file is made when
    /// the log is opened ([`RunLog::open`]); a run whose records stopped, or whose
    /// folder is gone, is refused here already.
    pub fn log(&self, rel: &str) -> Result<RunLog, StoreError> {
        self.new_log(rel, Announce::Now)
    }

    /// A log announced behind the caller: its completion queues the
    /// announcement after everything queued before it (the command's
    /// `process-spawned` event, [`RunHandle::record_behind`]), for the next
    /// batch to append in order, instead of appending it at once. For the
    /// commands specbridge runs itself: their stage goes on without waiting
    /// for a batch on its way to the disk (docs/run-directory.md).
    pub fn log_behind(&self, rel: &str) -> Result<RunLog, StoreError> {
        self.new_log(rel, Announce::Queued(self.queue.clone()))
    }

    fn new_log(&self, rel: &str, announce: Announce) -> Result<RunLog, StoreError> {
        let path = self.path(rel)?;
        self.guard.check(rel)?;
        Ok(RunLog::new(
            rel.to_string(),
            path,
            self.redactor.clone(),
            self.events.clone(),
            self.guard.clone(),
            announce,
        ))
    }

    /// Announce a streamed file as it was left by a process that died (resume).
    pub(crate) fn announce(&self, rel: &str) -> Result<String, StoreError> {
        let path = self.path(rel)?;
        let sha = sha256_file(&path).map_err(|e| StoreError::Read {
            path: path.clone(),
            message: e.to_string(),
        })?;
        self.event(RunEvent::record_written(rel, &sha))?;
        Ok(sha)
    }

    /// Every record of the run that is no longer what was announced, and the event
    /// log if it is not exactly what this process appended.
    pub(crate) fn changed_records(&self) -> Vec<RecordChange> {
        let log = self.events.lock();
        let mut watch = self.record_watch.lock().expect("record watch lock");
        crate::store::tamper::changed_records(&self.dir, &log, &mut watch)
    }

    /// The checks of the records trust a record's stat data once its change
    /// time is `settle` old, whatever its precision (outside tests, 100 ms for
    /// a change time finer than a millisecond, else five seconds).
    #[cfg(test)]
    pub(crate) fn settle_records_after(&self, settle: std::time::Duration) {
        *self.record_watch.lock().expect("record watch lock") =
            RecordWatch::with_settle(crate::store::tamper::Settle::always(settle));
    }
}

impl Drop for RunHandle {
    /// The tail of the log (the last announcements and events) is made durable
    /// when the run is closed, whatever path closes it.
    fn drop(&mut self) {
        // After a failure nothing more is written, not even what was queued;
        // what was appended before it is still made durable.
        if self.failure().is_some() {
            let seq = self.events.lock().last_seq();
            let _ = self.sync_through(seq);
            return;
        }
        if let Err(e) = self.sync() {
            tracing::warn!("failed to sync the event log: {}", crate::error_chain(&e));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::events::verify_chain;
    use serde_json::json;

    #[test]
    fn records_are_announced_and_the_run_is_locked() {
        let repo = tempfile::tempdir().unwrap();
        let store = RunStore::new(repo.path());
        let run = store.create(Redactor::default()).unwrap();
        run.write_json("stages/a/stage.json", &json!({"x": 1}))
            .unwrap();
        run.write_bytes("pipeline.yaml", b"version: 1\n").unwrap();
        assert!(run.path("../escape").is_err());
        assert!(run.path("stages/../x").is_err());
        assert!(run.path("/abs").is_err());

        let err = store.open(run.id(), Redactor::default()).unwrap_err();
        assert!(err.to_string().contains("is in use"), "{err}");

        let check = verify_chain(&run.dir().join("events.jsonl")).unwrap();
        assert!(check.is_intact());
        // Each write: its intent, then its confirmation.
        assert_eq!(check.events, 4);
        let log = std::fs::read_to_string(run.dir().join("events.jsonl")).unwrap();
        let types: Vec<&str> = log
            .lines()
            .map(|l| {
                let start = l.find("\"type\":\"").unwrap() + 8;
                &l[start..start + l[start..].find('"').unwrap()]
            })
            .collect();
        assert_eq!(
            types,
            [
                "record-intent",
                "record-written",
                "record-intent",
                "record-written"
            ]
        );
        let id = run.id().to_string();
        drop(run);
        let reopened = store.open("latest", Redactor::default()).unwrap();
        assert_eq!(reopened.id(), id);
    }

    #[test]
    fn a_record_costs_one_log_sync_for_its_intent_and_the_tail_is_synced_on_close() {
        let repo = tempfile::tempdir().unwrap();
        let store = RunStore::new(repo.path());
        let run = store.create(Redactor::default()).unwrap();
        let durable = |run: &RunHandle| run.commit.state_for_test();
        run.event(RunEvent::record_written("a", &"0".repeat(64)))
            .unwrap();
        run.event(RunEvent::record_written("b", &"0".repeat(64)))
            .unwrap();
        assert_eq!(
            durable(&run),
            (0, 0),
            "plain events are written, not synced"
        );
        run.write_json("stages/s/stage.json", &json!({"x": 1}))
            .unwrap();
        // Events 1-2, the intent (3) synced before the rename; the announcement
        // (4) is written after the rename and waits for the next commit.
        assert_eq!(durable(&run), (3, 1));
        run.write_json("stages/s/stage.json", &json!({"x": 2}))
            .unwrap();
        assert_eq!(durable(&run), (5, 2));
        run.sync().unwrap();
        assert_eq!(durable(&run), (6, 3));
        run.sync().unwrap();
        assert_eq!(durable(&run), (6, 3), "nothing new, no sync");
        run.event(RunEvent::record_written("c", &"0".repeat(64)))
            .unwrap();
        let commit = run.commit.clone();
        drop(run);
        assert_eq!(commit.state_for_test(), (7, 4), "closing syncs the tail");
    }

    #[test]
    fn every_way_of_writing_redacts_and_files_are_private() {
        use std::os::unix::fs::PermissionsExt;
        const CANARY: &str = "canary-store-0a1b2c3d";
        let repo = tempfile::tempdir().unwrap();
        let store = RunStore::new(repo.path());
        let run = store
            .create(Redactor::from_pairs([("MY_TOKEN", CANARY)]))
            .unwrap();
        run.write_json("a.json", &json!({ CANARY: [format!("x {CANARY}")] }))
            .unwrap();
        run.write_bytes("b.txt", format!("y {CANARY}\n").as_bytes())
            .unwrap();
        run.event(RunEvent::CrashRepaired(crate::events::CrashRepaired {
            repaired: vec![format!("confirmed {CANARY}")],
        }))
        .unwrap();
        let mut log = run.log("stages/s/attempt-001/raw-stdout.log").unwrap();
        // Cut inside the secret, at a 64 KiB read boundary.
        let text = format!("{} {CANARY} end\n", "z".repeat(65536 - 8));
        let (first, second) = text.as_bytes().split_at(65536);
        log.write_chunk(first).unwrap();
        log.write_chunk(second).unwrap();
        log.write_json_line(&json!({ "input": format!("\"{CANARY}\"") }))
            .unwrap();
        let sha = log.complete().unwrap();
        assert_eq!(log.complete().unwrap(), sha, "completing twice is harmless");

        let mut files = Vec::new();
        let mut dirs = vec![repo.path().join(".specbridge")];
        while let Some(dir) = dirs.pop() {
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", dir.display());
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                } else {
                    files.push(p);
                }
            }
        }
        assert!(files.len() >= 5);
        for f in files {
            let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", f.display());
            let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap()).into_owned();
            assert!(!text.contains(CANARY), "{}: {text}", f.display());
        }
        let log_text =
            std::fs::read_to_string(run.dir().join("stages/s/attempt-001/raw-stdout.log")).unwrap();
        assert!(
            log_text.ends_with("z <redacted> end\n{\"input\":\"\\\"<redacted>\\\"\"}\n"),
            "{}",
            &log_text[65000..]
        );
        assert_eq!(sha, crate::store::sha256_hex(log_text.as_bytes()));
        let events = std::fs::read_to_string(run.dir().join("events.jsonl")).unwrap();
        assert!(
            events.contains(&sha),
            "the log is announced with its sha256"
        );
    }

    /// A new run in a new repository, with nothing to redact.
    fn run_without_secrets() -> (tempfile::TempDir, RunHandle) {
        let repo = tempfile::tempdir().unwrap();
        let run = RunStore::new(repo.path())
            .create(Redactor::from_pairs(Vec::<(String, String)>::new()))
            .unwrap();
        (repo, run)
    }

    /// A log is named before its process starts and made once it has: nothing
    /// on the disk until it is opened, then an empty file in new private
    /// folders; one never written to is still made and announced when it is
    /// completed; and one whose run folder was deleted is not made again.
    #[test]
    fn a_log_is_made_when_opened_and_never_in_a_deleted_run_folder() {
        use std::os::unix::fs::PermissionsExt;
        let (_repo, run) = run_without_secrets();
        let mut opened = run.log("stages/s/attempt-001/raw-stdout.log").unwrap();
        let mut unopened = run.log("stages/s/attempt-001/raw-stderr.log").unwrap();
        assert!(!run.dir().join("stages").exists(), "named, not made");
        opened.open().unwrap();
        let attempt = run.dir().join("stages/s/attempt-001");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&attempt), 0o700);
        assert_eq!(mode(&attempt.join("raw-stdout.log")), 0o600);
        assert!(!attempt.join("raw-stderr.log").exists());
        opened.open().unwrap();
        opened.write_chunk(b"x\n").unwrap();
        opened.complete().unwrap();
        let empty = unopened.complete().unwrap();
        assert_eq!(empty, crate::store::sha256_hex(b""));
        assert_eq!(std::fs::read(attempt.join("raw-stderr.log")).unwrap(), b"");
        let events = std::fs::read_to_string(run.dir().join("events.jsonl")).unwrap();
        assert!(
            events.contains(&empty),
            "the empty log is announced: {events}"
        );

        let mut late = run.log("stages/t/attempt-001/raw-stdout.log").unwrap();
        std::fs::remove_dir_all(run.dir()).unwrap();
        let err = late.open().unwrap_err();
        assert!(matches!(err, StoreError::FolderVanished { .. }), "{err}");
        assert!(!run.dir().exists(), "the deleted run folder was made again");
        assert!(run.failure().is_some_and(|f| f.vanished));
    }

    /// A log is opened once its process has started, so whatever that process
    /// put at the log's path in between (a symlink to a file of the user's) is
    /// neither followed nor truncated: the open fails, and the run with it.
    #[test]
    fn a_log_opens_only_a_new_file_never_what_was_put_at_its_path() {
        let (repo, run) = run_without_secrets();
        let outside = repo.path().join("outside.txt");
        std::fs::write(&outside, "keep me\n").unwrap();
        let mut log = run.log("stages/u/attempt-001/raw-stdout.log").unwrap();
        let attempt = run.dir().join("stages/u/attempt-001");
        std::fs::create_dir_all(&attempt).unwrap();
        std::os::unix::fs::symlink(&outside, attempt.join("raw-stdout.log")).unwrap();
        let err = log.open().unwrap_err();
        assert!(matches!(err, StoreError::Create { .. }), "{err}");
        assert!(
            log.write_chunk(b"secret\n").is_err(),
            "nothing is written after it"
        );
        assert!(log.complete().is_err());
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me\n");
        let failure = run.failure().expect("the failed open is the run's failure");
        assert!(failure.message.contains("raw-stdout.log"), "{failure:?}");
    }

    #[test]
    fn subscribers_see_each_event_as_written_in_order_and_live_progress_unwritten() {
        use crate::events::{CrashRepaired, Observed};
        const CANARY: &str = "canary-subscriber-9f8e7d6c";
        let repo = tempfile::tempdir().unwrap();
        let run = RunStore::new(repo.path())
            .create(Redactor::from_pairs([("MY_TOKEN", CANARY)]))
            .unwrap();
        let seen: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
        let sink = seen.clone();
        run.subscribe(Arc::new(move |o: &Observed<'_>| {
            let text = match o {
                Observed::Recorded(line) => format!(
                    "{} {} {}",
                    line.seq,
                    line.event.kind(),
                    serde_json::to_string(&line.event).unwrap()
                ),
                Observed::AgentProgress { stage, progress } => {
                    format!("live {stage} {:?}", progress.last_tool)
                }
            };
            sink.lock().unwrap().push(text);
        }));
        run.write_json("a.json", &json!({ "x": 1 })).unwrap();
        run.event(RunEvent::CrashRepaired(CrashRepaired {
            repaired: vec![format!("confirmed {CANARY}")],
        }))
        .unwrap();
        let progress = Progress {
            turns: 2,
            last_tool: Some(format!("Bash {CANARY}")),
            ..Default::default()
        };
        run.live_progress("spec", &progress);
        let mut log = run.log("b.log").unwrap();
        log.write_chunk(b"x\n").unwrap();
        log.complete().unwrap();

        let seen = seen.lock().unwrap().clone();
        let kinds: Vec<&str> = seen
            .iter()
            .map(|s| s.split(' ').take(2).last().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "record-intent",
                "record-written",
                "crash-repaired",
                "spec",
                "record-written"
            ],
            "{seen:#?}"
        );
        let seqs: Vec<&str> = seen.iter().map(|s| s.split(' ').next().unwrap()).collect();
        assert_eq!(seqs, ["1", "2", "3", "live", "4"]);
        assert!(seen.iter().all(|s| !s.contains(CANARY)), "{seen:#?}");
        assert!(seen[2].contains("<redacted>"), "{seen:#?}");
        assert!(seen[3].contains("<redacted>"), "{seen:#?}");
        let log = std::fs::read_to_string(run.dir().join("events.jsonl")).unwrap();
        assert_eq!(log.lines().count(), 4, "live progress is not written");
    }
}
