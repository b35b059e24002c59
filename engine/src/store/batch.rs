//! Writes queued in order and made durable together (group commit for records).
//!
//! Every write of a run — a record file or an event — goes into the run's queue,
//! in order, and is written by whichever thread flushes the queue next, together
//! with everything queued before it. A lone write costs what it always did: its
//! `record-intent`, then the temporary file and the intent synced at once, the
//! rename, the folder synced, and its `record-written` line. A batch of several
//! records shares those waits: every intent is appended first, every temporary
//! file and the log are synced at once, every file is renamed, every folder synced
//! at once, and only then are the announcements (and the batch's other events)
//! appended, in the order they were queued. So the order on disk is the one a
//! crash at any point can leave for a single record, for each record of the batch
//! (docs/audit.md, "Crash recovery"), and a batch of N records waits for the disk
//! twice instead of 2·N times.
//!
//! The scheduler queues the records that end one stage and start the next
//! ([`RunHandle::defer_json`], [`RunHandle::defer_event`]). A stage that reads
//! records at its start has them flushed first, so it starts only once what it
//! needs is recorded; the rest the scheduler writes behind it, on a blocking
//! thread ([`RunHandle::flush_job`]), while it waits for the next stage to end.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::events::RunEvent;
use crate::store::atomic::{json_bytes, sha256_hex, stage_atomic, Staged, WriteError};
use crate::store::durable::off_the_worker;
use crate::store::fault::{crash_point, injected_failure, Guard};
use crate::store::layout;
use crate::store::run::{append_held, Gate, RunHandle, StoreError};
use crate::store::sync_pool;

/// One queued write, its bytes already redacted — or, for [`Deferred::Json`],
/// made and redacted by the thread that writes the batch.
#[derive(Debug)]
pub(in crate::store) enum Deferred {
    Record {
        rel: String,
        path: PathBuf,
        bytes: Vec<u8>,
        sha: String,
    },
    /// A JSON record whose bytes [`RunHandle::defer_json_behind`] left to the
    /// writer: a [`Deferred::Record`] once the batch holding it starts.
    Json {
        rel: String,
        path: PathBuf,
        make: MakeBytes,
    },
    /// An event, with the time it was queued ([`enqueue`] sets it): what it
    /// says happened then, however long its batch waits for the ones before
    /// it. (The `record-intent` and `record-written` lines a batch adds for its
    /// records are timed when they are written: that is their event.)
    Event {
        event: RunEvent,
        at: Option<chrono::DateTime<chrono::Utc>>,
    },
    /// An event appended only once `folder` — outside the run, its entries
    /// changed by the caller (a document's) — is synced with the batch's own
    /// folders.
    AfterSync {
        event: RunEvent,
        at: Option<chrono::DateTime<chrono::Utc>>,
        folder: OwnedFd,
    },
}

impl Deferred {
    /// An event to queue (its time is taken when it is).
    pub(in crate::store) fn event(event: RunEvent) -> Self {
        Deferred::Event { event, at: None }
    }
}

/// A record's redacted bytes, made when its batch is written.
pub(in crate::store) struct MakeBytes(Box<dyn FnOnce() -> Result<Vec<u8>, WriteError> + Send>);

impl std::fmt::Debug for MakeBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MakeBytes")
    }
}

/// `value` as a record's bytes: JSON, pretty, its strings (and keys) redacted.
/// The one way a JSON record is made, at once or behind the caller.
fn redacted_json<T: serde::Serialize>(
    redactor: &crate::redact::Redactor,
    path: &Path,
    value: &T,
) -> Result<Vec<u8>, WriteError> {
    let mut value = serde_json::to_value(value).map_err(|e| WriteError {
        path: path.display().to_string(),
        source: std::io::Error::other(e),
    })?;
    redactor.redact_json(&mut value);
    json_bytes(path, &value)
}

/// Writes queued and not yet written, and how many were ever queued (tickets).
#[derive(Debug, Default)]
pub(in crate::store) struct Queue {
    items: Vec<Deferred>,
    queued: u64,
}

impl RunHandle {
    /// Queue a JSON record, its strings (and keys) redacted; written, in order,
    /// at the next flush. Returns the sha256 of the bytes it will have.
    pub fn defer_json<T: serde::Serialize>(
        &self,
        rel: &str,
        value: &T,
    ) -> Result<String, StoreError> {
        let (path, bytes) = self.json_record(rel, value)?;
        Ok(self.enqueue_record(rel, path, bytes)?.0)
    }

    /// A JSON record's path and bytes: pretty, with its strings (and keys)
    /// redacted.
    pub(in crate::store) fn json_record<T: serde::Serialize>(
        &self,
        rel: &str,
        value: &T,
    ) -> Result<(PathBuf, Vec<u8>), StoreError> {
        let path = self.path(rel)?;
        let bytes = redacted_json(self.redactor(), &path, value)?;
        Ok((path, bytes))
    }

    /// [`defer_json`](Self::defer_json), its bytes made (serialized, redacted)
    /// by the thread that writes the batch instead of the caller's: for the
    /// records that end a stage, which a chain's next stage would otherwise
    /// wait for (about 0.1 ms a check stage). In the queue it keeps its place,
    /// so the log reads as it would have; a value that cannot be serialized
    /// fails that batch, and with it the run's writes.
    pub fn defer_json_behind<T: serde::Serialize + Send + 'static>(
        &self,
        rel: &str,
        value: T,
    ) -> Result<(), StoreError> {
        let path = self.path(rel)?;
        let (redactor, at) = (Arc::clone(self.redactor()), path.clone());
        let make = MakeBytes(Box::new(move || redacted_json(&redactor, &at, &value)));
        self.enqueue(Deferred::Json {
            rel: rel.to_string(),
            path,
            make,
        })?;
        Ok(())
    }

    /// Queue bytes, redacted; written, in order, at the next flush.
    pub fn defer_bytes(&self, rel: &str, bytes: &[u8]) -> Result<String, StoreError> {
        let path = self.path(rel)?;
        let redacted = self.redactor().redact_bytes(bytes);
        Ok(self.enqueue_record(rel, path, redacted)?.0)
    }

    /// Queue an event; appended, in order, at the next flush.
    pub fn defer_event(&self, event: RunEvent) -> Result<(), StoreError> {
        self.enqueue(Deferred::event(event))?;
        Ok(())
    }

    /// Queue an event announcing a change outside the run, in `folder` (a
    /// document renamed into place): appended, in order, at the next flush,
    /// once that folder is synced with the batch's own, so what the event
    /// announces is on disk before the event is.
    pub fn defer_event_after_sync(
        &self,
        event: RunEvent,
        folder: OwnedFd,
    ) -> Result<(), StoreError> {
        self.enqueue(Deferred::AfterSync {
            event,
            at: None,
            folder,
        })?;
        Ok(())
    }

    /// Write everything queued so far (see the module's doc).
    pub fn flush(&self) -> Result<(), StoreError> {
        let ticket = self.queue.lock().expect("write queue lock").queued;
        self.flush_through(ticket)
    }

    /// [`flush`](Self::flush) when a record is queued; events alone wait for
    /// the next flush. For a reader of records, which needs only those written:
    /// a resume deciding stage after stage queues one event a decision, and
    /// they go to the log together instead of one by one.
    pub fn flush_records(&self) -> Result<(), StoreError> {
        let record_queued = self
            .queue
            .lock()
            .expect("write queue lock")
            .items
            .iter()
            .any(|i| matches!(i, Deferred::Record { .. } | Deferred::Json { .. }));
        if record_queued {
            self.flush()
        } else {
            self.records_ok()
        }
    }

    pub(in crate::store) fn enqueue_record(
        &self,
        rel: &str,
        path: PathBuf,
        bytes: Vec<u8>,
    ) -> Result<(String, u64), StoreError> {
        let sha = sha256_hex(&bytes);
        let ticket = self.enqueue(Deferred::Record {
            rel: rel.to_string(),
            path,
            bytes,
            sha: sha.clone(),
        })?;
        Ok((sha, ticket))
    }

    /// Refused once the records have stopped: nothing is queued after a failure.
    pub(in crate::store) fn enqueue(&self, item: Deferred) -> Result<u64, StoreError> {
        enqueue(&self.queue, &self.guard, item)
    }

    /// Queue `event` and have it written behind the caller, with whatever is
    /// queued before it, by a batch on a blocking thread (or by the job already
    /// waiting to take the queue): the caller does not wait for the batch
    /// being written, nor for the disk. Outside a runtime it is written now.
    /// A batch that fails is the run's failure, which the scheduler sees at
    /// its next turn, as for its own batches (`scheduler/behind.rs`).
    pub fn record_behind(self: &Arc<Self>, event: RunEvent) -> Result<(), StoreError> {
        self.defer_event(event)?;
        if let Some(job) = self.flush_job() {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn_blocking(job)),
                Err(_) => job()?,
            }
        }
        Ok(())
    }

    /// Returns once the write with `ticket` (and every one before it) has been
    /// written, by this thread or by another that flushed first. One thread writes
    /// at a time; a thread that waited finds its write done by the one before it
    /// whenever that one took the queue after the write was queued.
    pub(in crate::store) fn flush_through(&self, ticket: u64) -> Result<(), StoreError> {
        // Waiting for another thread's batch means waiting for the disk: on a
        // runtime worker, that worker is handed to the other tasks meanwhile.
        let written = match self.written.try_lock() {
            Ok(w) => w,
            Err(std::sync::TryLockError::WouldBlock) => {
                off_the_worker(|| self.written.lock().expect("writer lock"))
            }
            Err(std::sync::TryLockError::Poisoned(e)) => panic!("writer lock: {e}"),
        };
        self.write_through(written, ticket)
    }

    /// A flush for a thread that may wait for the disk while its caller goes
    /// on: the scheduler runs it on the runtime's blocking threads and watches
    /// for new ends meanwhile, so a stage that ends while a batch is written
    /// has its slot filled at once rather than after the disk's waits. The
    /// job writes everything queued by the time it holds the writer, in order,
    /// as [`flush`](Self::flush) would. None while a job handed out before has
    /// yet to take the queue: that one will take what is queued now.
    pub fn flush_job(
        self: &Arc<Self>,
    ) -> Option<impl FnOnce() -> Result<(), StoreError> + Send + 'static> {
        if self.job_waiting.swap(true, Ordering::SeqCst) {
            return None;
        }
        let run = Arc::clone(self);
        Some(move || {
            let written = run.written.lock().expect("writer lock");
            // Cleared before the queue is read: a write queued after the read
            // finds the flag clear, and its caller asks for another job.
            run.job_waiting.store(false, Ordering::SeqCst);
            let ticket = run.queue.lock().expect("write queue lock").queued;
            run.write_through(written, ticket)
        })
    }

    /// Writes everything queued through `ticket` unless the batch holding it
    /// is written already, with the writer held.
    fn write_through(
        &self,
        mut written: MutexGuard<'_, u64>,
        ticket: u64,
    ) -> Result<(), StoreError> {
        if *written < ticket {
            let (items, last) = {
                let mut queue = self.queue.lock().expect("write queue lock");
                (std::mem::take(&mut queue.items), queue.queued)
            };
            *written = last;
            // A failure is also the guard's: every later write is refused.
            let has_records = items.iter().any(|i| {
                matches!(
                    i,
                    Deferred::Record { .. } | Deferred::Json { .. } | Deferred::AfterSync { .. }
                )
            });
            let write = || self.write_batch(items, Gate::Open);
            return if has_records {
                off_the_worker(write)
            } else {
                write()
            };
        }
        drop(written);
        // Written by another thread: whether that batch, or one since, failed.
        self.guard.stopped(layout::EVENTS)
    }

    /// The batch protocol (module doc). Every counted write (an event appended, a
    /// temporary file made, a file renamed) is done by this one thread in a fixed
    /// order, so the test hooks' "N-th write" is the same write in every run of
    /// the same pipeline.
    pub(in crate::store) fn write_batch(
        &self,
        items: Vec<Deferred>,
        gate: Gate,
    ) -> Result<(), StoreError> {
        let items = self.made(items)?;
        let records: Vec<(&str, &Path, &[u8], &str)> = items
            .iter()
            .filter_map(|item| match item {
                Deferred::Record {
                    rel,
                    path,
                    bytes,
                    sha,
                } => Some((rel.as_str(), path.as_path(), bytes.as_slice(), sha.as_str())),
                Deferred::Json { .. } | Deferred::Event { .. } | Deferred::AfterSync { .. } => None,
            })
            .collect();
        // Intents, temporary files and their syncs first: all before any rename.
        let staged = if records.is_empty() {
            Vec::new()
        } else {
            let mut last_intent = 0;
            {
                let mut log = self.events.lock();
                match gate {
                    Gate::Open => self.guard.check(records[0].0)?,
                    Gate::AfterFailure => self.guard.check_folder()?,
                }
                for &(rel, _, _, sha) in &records {
                    let intent = RunEvent::record_intent(rel, sha);
                    last_intent = append_held(
                        &self.events,
                        &mut log,
                        &self.redactor,
                        &self.guard,
                        &intent,
                        None,
                    )?;
                    crash_point();
                }
            }
            self.stage_and_sync(&records, last_intent)?
        };
        // The log is held from the first rename to the last announcement, so
        // that a check of the records never sees a file between the two.
        let mut log = self.events.lock();
        if records.is_empty() && gate == Gate::Open {
            self.guard.check(layout::EVENTS)?;
        }
        let mut folders: Vec<&Path> = Vec::new();
        for dir in records.iter().filter_map(|r| r.1.parent()) {
            if !folders.contains(&dir) {
                folders.push(dir);
            }
        }
        let outside: Vec<&OwnedFd> = items
            .iter()
            .filter_map(|item| match item {
                Deferred::AfterSync { folder, .. } => Some(folder),
                _ => None,
            })
            .collect();
        for s in staged {
            s.rename().map_err(|e| self.failed(e))?;
            crash_point();
        }
        sync_folders(&folders, &outside);
        for item in &items {
            let written;
            let (event, at) = match item {
                Deferred::Record { rel, sha, .. } => {
                    written = RunEvent::record_written(rel, sha);
                    (&written, None)
                }
                Deferred::Event { event, at } | Deferred::AfterSync { event, at, .. } => {
                    (event, *at)
                }
                Deferred::Json { .. } => unreachable!("made before the batch is written"),
            };
            append_held(
                &self.events,
                &mut log,
                &self.redactor,
                &self.guard,
                event,
                at,
            )?;
            crash_point();
        }
        Ok(())
    }

    /// `items` with every record's bytes made, in order: what a batch writes.
    /// The first that cannot be made fails the batch before anything of it is
    /// written, and stops the run's writes as a failed write does.
    fn made(&self, items: Vec<Deferred>) -> Result<Vec<Deferred>, StoreError> {
        items
            .into_iter()
            .map(|item| match item {
                Deferred::Json { rel, path, make } => {
                    let bytes = (make.0)().map_err(|e| self.failed(e))?;
                    let sha = sha256_hex(&bytes);
                    Ok(Deferred::Record {
                        rel,
                        path,
                        bytes,
                        sha,
                    })
                }
                other => Ok(other),
            })
            .collect()
    }

    /// Each record's bytes in a temporary file beside it, made and synced on
    /// the kept sync threads while this one syncs the log through the last
    /// intent: none needs another, only the renames need them all. Made one
    /// after the other on this thread, the new inodes of a batch of eleven
    /// took about 2 ms before the first sync started.
    fn stage_and_sync(
        &self,
        records: &[(&str, &Path, &[u8], &str)],
        last_intent: u64,
    ) -> Result<Vec<Staged>, StoreError> {
        // The injected failures are asked here, in the records' order, so the
        // test hooks' N-th write is the same one in every run.
        for &(_, path, _, _) in records {
            injected_failure().map_err(|source| {
                self.failed(WriteError {
                    path: path.display().to_string(),
                    source,
                })
            })?;
        }
        let files: Vec<_> = records
            .iter()
            .map(|&(_, path, bytes, _)| {
                let (path, bytes) = (path.to_path_buf(), bytes.to_vec());
                let job = move || {
                    let staged = stage_atomic(&path, &bytes)?;
                    staged.sync()?;
                    Ok(staged)
                };
                sync_pool::start(job)
            })
            .collect();
        let intents = self.sync_through(last_intent);
        let mut staged = Vec::with_capacity(files.len());
        let mut failed = None;
        for (pending, &(_, path, _, _)) in files.into_iter().zip(records) {
            match pending.wait() {
                Some(Ok(file)) => staged.push(file),
                Some(Err(e)) => drop(failed.get_or_insert(e)),
                None => drop(failed.get_or_insert(WriteError {
                    path: path.display().to_string(),
                    source: std::io::Error::other("the thread writing it panicked"),
                })),
            }
        }
        // The first file that failed, in the records' order, is the batch's
        // failure; the files made are removed as they are dropped.
        if let Some(e) = failed {
            return Err(self.failed(e));
        }
        intents?;
        Ok(staged)
    }

    fn failed(&self, e: WriteError) -> StoreError {
        let e = StoreError::from(e);
        self.guard.fail(&e, false);
        e
    }
}

/// Queue `item` after everything queued before it; refused once the records
/// have stopped. The one way into the queue, for the run handle and for the
/// logs announced behind it.
pub(in crate::store) fn enqueue(
    queue: &Mutex<Queue>,
    guard: &Guard,
    mut item: Deferred,
) -> Result<u64, StoreError> {
    guard.stopped(match &item {
        Deferred::Record { rel, .. } | Deferred::Json { rel, .. } => rel,
        Deferred::Event { .. } | Deferred::AfterSync { .. } => layout::EVENTS,
    })?;
    let mut queue = queue.lock().expect("write queue lock");
    // Timed in the queue's order: the log's times never go back between
    // two queued events.
    if let Deferred::Event { at, .. } | Deferred::AfterSync { at, .. } = &mut item {
        *at = Some(chrono::Utc::now());
    }
    queue.items.push(item);
    queue.queued += 1;
    Ok(queue.queued)
}

/// The folders whose entries changed — the run's, by path, and `outside` ones
/// already open — synced at once so that each rename is on disk before its
/// announcement is written. Best effort, as before: a folder that cannot be
/// opened or synced does not fail the write.
fn sync_folders(folders: &[&Path], outside: &[&OwnedFd]) {
    fn sync(dir: &Path) {
        crate::store::fault::slow_disk();
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    // The others on the kept sync threads, the first here.
    let mut pending = Vec::new();
    for fd in outside {
        if let Ok(fd) = fd.try_clone() {
            pending.push(sync_pool::start(move || {
                let _ = nix::unistd::fsync(fd.as_raw_fd());
            }));
        }
    }
    if let Some((first, rest)) = folders.split_first() {
        for dir in rest {
            let dir = dir.to_path_buf();
            pending.push(sync_pool::start(move || sync(&dir)));
        }
        sync(first);
    }
    for p in pending {
        p.wait();
    }
}

/// Each line of a run's log as "type path", the path where it has one: what
/// the batch tests compare.
#[cfg(test)]
fn logged(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join(layout::EVENTS))
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let what = v["path"].as_str().unwrap_or_default();
            format!("{} {what}", v["type"].as_str().unwrap())
                .trim()
                .to_string()
        })
        .collect()
}

#[cfg(test)]
mod behind_tests;
#[cfg(test)]
mod flush_job_tests;
#[cfg(test)]
mod json_behind_tests;

#[cfg(test)]
mod tests {
    use crate::events::{CrashRepaired, RunEvent};
    use crate::redact::Redactor;
    use crate::store::events::verify_chain;
    use crate::store::{RunStore, StoreError};
    use serde_json::json;

    use super::logged;

    /// A run of its own in a new folder, with no secret to redact.
    fn new_run() -> (tempfile::TempDir, crate::store::RunHandle) {
        let base = tempfile::tempdir().unwrap();
        let run = RunStore::new(base.path())
            .create(Redactor::default())
            .unwrap();
        (base, run)
    }

    fn repaired(what: &str) -> RunEvent {
        RunEvent::CrashRepaired(CrashRepaired {
            repaired: vec![what.to_string()],
        })
    }

    #[test]
    fn a_batch_writes_every_intent_before_any_rename_and_shares_one_log_sync() {
        let repo = tempfile::tempdir().unwrap();
        let run = RunStore::new(repo.path())
            .create(Redactor::from_pairs([("MY_TOKEN", "canary-batch-5e6f")]))
            .unwrap();
        let a = run
            .defer_json("stages/a/stage.json", &json!({"x": "canary-batch-5e6f"}))
            .unwrap();
        run.defer_event(repaired("after a")).unwrap();
        run.defer_bytes("stages/b/attempt-001/process.json", b"{}\n")
            .unwrap();
        // Queued, not written: nothing is on disk or in the log yet.
        assert!(!run.dir().join("stages/a/stage.json").exists());
        assert_eq!(logged(run.dir()), Vec::<String>::new());
        assert_eq!(run.commit.state_for_test(), (0, 0));

        run.flush().unwrap();
        assert_eq!(
            logged(run.dir()),
            [
                "record-intent stages/a/stage.json",
                "record-intent stages/b/attempt-001/process.json",
                "record-written stages/a/stage.json",
                "crash-repaired",
                "record-written stages/b/attempt-001/process.json",
            ]
        );
        // One log sync for both intents (made before the renames); the
        // announcements wait for the next commit.
        assert_eq!(run.commit.state_for_test(), (2, 1));
        let written = std::fs::read(run.dir().join("stages/a/stage.json")).unwrap();
        assert_eq!(crate::store::sha256_hex(&written), a, "the sha handed out");
        assert!(String::from_utf8_lossy(&written).contains("<redacted>"));
        assert!(verify_chain(&run.dir().join("events.jsonl"))
            .unwrap()
            .is_intact());
        assert_eq!(run.changed_records(), [], "every file as announced");
        run.flush().unwrap();
        assert_eq!(logged(run.dir()).len(), 5, "a second flush writes nothing");
    }

    #[test]
    fn an_event_after_a_folder_sync_keeps_its_place_in_a_batch_and_alone() {
        let (_base, run) = new_run();
        let outside = tempfile::tempdir().unwrap();
        let folder = || std::fs::File::open(outside.path()).unwrap().into();
        run.defer_json("a.json", &json!(1)).unwrap();
        run.defer_event_after_sync(repaired("document"), folder())
            .unwrap();
        run.defer_event(repaired("after")).unwrap();
        assert_eq!(
            logged(run.dir()),
            Vec::<String>::new(),
            "queued, not written"
        );
        run.flush().unwrap();
        // An events-only batch: the folder is synced, the event appended.
        run.defer_event_after_sync(repaired("alone"), folder())
            .unwrap();
        run.flush().unwrap();
        let log = std::fs::read_to_string(run.dir().join("events.jsonl")).unwrap();
        assert_eq!(
            logged(run.dir()),
            [
                "record-intent a.json",
                "record-written a.json",
                "crash-repaired",
                "crash-repaired",
                "crash-repaired",
            ]
        );
        let at = |w: &str| log.find(&format!("\"{w}\"")).unwrap();
        assert!(at("document") < at("after") && at("after") < at("alone"));
    }

    #[test]
    fn a_direct_write_comes_after_what_was_queued_before_it() {
        let (_repo, run) = new_run();
        run.defer_json("a.json", &json!(1)).unwrap();
        run.event(repaired("direct")).unwrap();
        run.write_json("b.json", &json!(2)).unwrap();
        assert_eq!(
            logged(run.dir()),
            [
                "record-intent a.json",
                "record-written a.json",
                "crash-repaired",
                "record-intent b.json",
                "record-written b.json",
            ]
        );
    }

    #[test]
    fn a_failed_batch_writes_nothing_and_nothing_is_queued_after_it() {
        let (_base, run) = new_run();
        run.defer_json("a.json", &json!(1)).unwrap();
        let dir = run.dir().to_path_buf();
        std::fs::remove_dir_all(&dir).unwrap();
        let err = run.flush().unwrap_err();
        assert!(matches!(err, StoreError::FolderVanished { .. }), "{err}");
        let later = run.defer_json("b.json", &json!(2)).unwrap_err();
        assert!(matches!(later, StoreError::Stopped { .. }), "{later}");
        assert!(run.event(repaired("x")).is_err());
        assert!(!dir.exists(), "the vanished folder was not made again");
    }

    #[test]
    fn a_batch_whose_files_cannot_all_be_made_renames_none_and_names_the_first_in_order() {
        let (_base, run) = new_run();
        // Files where the second and third records' folders would be: their
        // temporary files cannot be made, on whichever sync threads take them.
        std::fs::write(run.dir().join("b"), "not a folder").unwrap();
        std::fs::write(run.dir().join("c"), "not a folder").unwrap();
        run.defer_json("a/first.json", &json!(1)).unwrap();
        run.defer_json("b/second.json", &json!(2)).unwrap();
        run.defer_json("c/third.json", &json!(3)).unwrap();
        let err = run.flush().unwrap_err().to_string();
        assert!(err.contains("b/second.json"), "{err}");
        // Nothing renamed, and the temporary file made for the first record
        // removed: its folder is empty.
        let left: Vec<_> = std::fs::read_dir(run.dir().join("a"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, Vec::<std::ffi::OsString>::new());
        assert_eq!(
            logged(run.dir()),
            [
                "record-intent a/first.json",
                "record-intent b/second.json",
                "record-intent c/third.json",
            ],
            "intents only: a crash's leftovers, which resume understands"
        );
        let later = run.defer_json("d.json", &json!(4)).unwrap_err();
        assert!(matches!(later, StoreError::Stopped { .. }), "{later}");
    }

    #[test]
    fn concurrent_writers_share_batches_and_every_record_keeps_its_order() {
        let repo = tempfile::tempdir().unwrap();
        let run = std::sync::Arc::new(
            RunStore::new(repo.path())
                .create(Redactor::default())
                .unwrap(),
        );
        std::thread::scope(|s| {
            for t in 0..6 {
                let run = run.clone();
                s.spawn(move || {
                    for i in 0..10 {
                        let rel = format!("stages/t{t}/r{i}.json");
                        run.write_json(&rel, &json!({ "t": t, "i": i })).unwrap();
                        run.event(repaired(&format!("{t}.{i}"))).unwrap();
                    }
                });
            }
        });
        let lines = logged(run.dir());
        assert_eq!(lines.len(), 6 * 10 * 3);
        for t in 0..6 {
            for i in 0..10 {
                let rel = format!("stages/t{t}/r{i}.json");
                let at = |kind: &str| {
                    lines
                        .iter()
                        .position(|l| *l == format!("{kind} {rel}"))
                        .unwrap_or_else(|| panic!("{kind} {rel}: {lines:#?}"))
                };
                assert!(at("record-intent") < at("record-written"), "{rel}");
            }
        }
        assert!(verify_chain(&run.dir().join("events.jsonl"))
            .unwrap()
            .is_intact());
        assert_eq!(run.changed_records(), []);
        let (_, syncs) = run.commit.state_for_test();
        assert!(syncs <= 60, "at most one log sync a record: {syncs}");
    }
}
