//! Creating and opening run folders, and writing records into them.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{json, Value};

use crate::store::atomic::{sha256_file, write_atomic, WriteError};
use crate::store::events::{EventError, EventLog};
use crate::store::lock::{LockError, RunLock};
use crate::store::records::RunRecord;
use crate::store::select::{self, is_safe_component, RunSelectError};

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
    #[error("failed to create run folder {path}: {source}")]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("refusing unsafe record path `{0}`")]
    UnsafePath(String),
}

/// `.specbridge/runs/` of one repository.
#[derive(Debug, Clone)]
pub struct RunStore {
    runs_dir: PathBuf,
}

impl RunStore {
    pub fn new(repo_root: &Path) -> Self {
        RunStore {
            runs_dir: repo_root.join(".specbridge").join("runs"),
        }
    }

    pub fn runs_dir(&self) -> &Path {
        &self.runs_dir
    }

    /// A new run folder with a fresh UUID v7 id, locked, with an empty event log.
    pub fn create(&self) -> Result<RunHandle, StoreError> {
        let id = uuid::Uuid::now_v7().to_string();
        let dir = self.runs_dir.join(&id);
        std::fs::create_dir_all(&dir).map_err(|source| StoreError::Create {
            path: dir.clone(),
            source,
        })?;
        let lock = RunLock::acquire(&dir, &id)?;
        let events = EventLog::create(&dir.join("events.jsonl"))?;
        Ok(RunHandle {
            id,
            dir,
            _lock: lock,
            events: Mutex::new(events),
        })
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
    pub fn open(&self, selector: &str) -> Result<RunHandle, StoreError> {
        let (id, dir, lock) = self.lock(selector)?;
        let events = EventLog::open(&dir.join("events.jsonl"))?;
        Ok(RunHandle {
            id,
            dir,
            _lock: lock,
            events: Mutex::new(events),
        })
    }

    /// Continue a run whose lock is already held: resume takes the lock first,
    /// audits the run and repairs a torn log before it opens the log for writing.
    pub fn open_locked(id: String, dir: PathBuf, lock: RunLock) -> Result<RunHandle, StoreError> {
        let events = EventLog::open(&dir.join("events.jsonl"))?;
        Ok(RunHandle {
            id,
            dir,
            _lock: lock,
            events: Mutex::new(events),
        })
    }

    /// Every run id, oldest first.
    pub fn run_ids(&self) -> Result<Vec<String>, StoreError> {
        Ok(select::run_ids(&self.runs_dir)?)
    }

    /// Read one run's `run.json`.
    pub fn read_run(&self, id: &str) -> Result<RunRecord, StoreError> {
        read_json(&self.runs_dir.join(id).join("run.json"))
    }
}

/// Read and parse a JSON record.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, StoreError> {
    let bytes = std::fs::read(path).map_err(|e| StoreError::Read {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    serde_json::from_slice(&bytes).map_err(|e| StoreError::Read {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// An open, locked run. Every record written through it is announced in the
/// event log with its path and sha256, which is what audit checks files against.
/// Test hook: `SPECBRIDGE_TEST_ABORT_AFTER_WRITES=N` aborts the process (SIGABRT,
/// no cleanup, as a crash) right after the N-th store write of this process — an
/// event appended or a record file renamed into place. Used by the crash-injection
/// tests (docs/testing.md); unset, it costs one relaxed atomic add per write.
fn crash_point() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static LIMIT: OnceLock<Option<u64>> = OnceLock::new();
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let limit = LIMIT.get_or_init(|| {
        std::env::var("SPECBRIDGE_TEST_ABORT_AFTER_WRITES")
            .ok()
            .and_then(|v| v.parse().ok())
    });
    if let Some(limit) = limit {
        if WRITES.fetch_add(1, Ordering::Relaxed) + 1 == *limit {
            std::process::abort();
        }
    }
}

#[derive(Debug)]
pub struct RunHandle {
    id: String,
    dir: PathBuf,
    _lock: RunLock,
    events: Mutex<EventLog>,
}

impl RunHandle {
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `stages/<stage-id>` (relative).
    pub fn stage_rel(stage_id: &str) -> String {
        format!("stages/{stage_id}")
    }

    /// `stages/<stage-id>/attempt-NNN` (relative).
    pub fn attempt_rel(stage_id: &str, attempt: u32) -> String {
        format!("stages/{stage_id}/attempt-{attempt:03}")
    }

    /// The absolute path of a relative record path, refusing anything that could
    /// leave the run folder.
    pub fn path(&self, rel: &str) -> Result<PathBuf, StoreError> {
        if rel.is_empty() || rel.split('/').any(|c| !is_safe_component(c)) {
            return Err(StoreError::UnsafePath(rel.to_string()));
        }
        Ok(self.dir.join(rel))
    }

    /// Append an event.
    pub fn event(&self, kind: &str, data: Value) -> Result<u64, StoreError> {
        let mut log = self.events.lock().expect("event log lock");
        let seq = log.append(kind, data)?;
        crash_point();
        Ok(seq)
    }

    /// Write a JSON record atomically and announce it.
    pub fn write_json<T: serde::Serialize>(
        &self,
        rel: &str,
        value: &T,
    ) -> Result<String, StoreError> {
        let mut bytes = serde_json::to_vec_pretty(value).map_err(|e| WriteError {
            path: rel.to_string(),
            source: std::io::Error::other(e),
        })?;
        bytes.push(b'\n');
        self.write_bytes(rel, &bytes)
    }

    /// Write bytes atomically and announce them.
    pub fn write_bytes(&self, rel: &str, bytes: &[u8]) -> Result<String, StoreError> {
        let path = self.path(rel)?;
        // Intent first: a crash between the rename and the `record-written` event
        // leaves a file that matches an announced intent, which recovery can tell
        // from tampering (docs/audit.md, "Crash recovery").
        let sha = crate::store::atomic::sha256_hex(bytes);
        self.event("record-intent", json!({ "path": rel, "sha256": sha }))?;
        crash_point();
        let written = write_atomic(&path, bytes)?;
        crash_point();
        self.event("record-written", json!({ "path": rel, "sha256": written }))?;
        Ok(written)
    }

    /// Announce a file that was written in place (a streamed log), after it is
    /// complete.
    pub fn announce(&self, rel: &str) -> Result<String, StoreError> {
        let path = self.path(rel)?;
        let sha = sha256_file(&path).map_err(|e| StoreError::Read {
            path: path.clone(),
            message: e.to_string(),
        })?;
        self.event("record-written", json!({ "path": rel, "sha256": sha }))?;
        Ok(sha)
    }

    /// Create a folder inside the run (for streamed logs).
    pub fn ensure_dir(&self, rel: &str) -> Result<PathBuf, StoreError> {
        let p = self.path(rel)?;
        std::fs::create_dir_all(&p).map_err(|source| StoreError::Create {
            path: p.clone(),
            source,
        })?;
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::events::verify_chain;

    #[test]
    fn records_are_announced_and_the_run_is_locked() {
        let repo = tempfile::tempdir().unwrap();
        let store = RunStore::new(repo.path());
        let run = store.create().unwrap();
        run.write_json("stages/a/stage.json", &json!({"x": 1}))
            .unwrap();
        run.write_bytes("pipeline.yaml", b"version: 1\n").unwrap();
        assert!(run.path("../escape").is_err());
        assert!(run.path("stages/../x").is_err());
        assert!(run.path("/abs").is_err());

        let err = store.open(run.id()).unwrap_err();
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
        let reopened = store.open("latest").unwrap();
        assert_eq!(reopened.id(), id);
    }
}
