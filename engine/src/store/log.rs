//! Streamed records (the logs of a running process, JSON lines): redacted as they
//! are written, announced with their sha256 once complete.
//!
//! A log is made on the disk when it is opened, not when it is named: the
//! supervisor opens a process's logs right after the spawn and before the spawn
//! is recorded, so the folders and inodes they need are made while the process
//! starts instead of before it, and a `process-spawned` event always has its
//! attempt folder (docs/run-directory.md, "Writing rules").

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use super::batch::{enqueue, Deferred, Queue};
use super::fault::{injected_failure, Guard};
use super::publish::Publisher;
use super::run::{append_event, StoreError};
use crate::events::RunEvent;
use crate::redact::{RedactingWriter, Redactor};
use crate::supervisor::OutputSink;

/// A file of the run written as a stream. Every byte goes through the run's
/// redactor; a secret cut in two by a chunk boundary is still caught (see
/// [`RedactingWriter`]). Memory stays bounded whatever is written.
pub struct RunLog {
    rel: String,
    path: PathBuf,
    stream: Stream,
    redactor: Arc<Redactor>,
    events: Arc<Publisher>,
    guard: Arc<Guard>,
    announce: Announce,
    sha256: Option<String>,
}

/// How a complete log is announced.
pub(super) enum Announce {
    /// Its `record-written` appended at once.
    Now,
    /// Queued behind everything queued before it, for the run's next batch
    /// ([`super::RunHandle::log_behind`]).
    Queued(Arc<Mutex<Queue>>),
}

/// Where a log is: named only, open for writing, or complete.
enum Stream {
    Unopened,
    Open(RedactingWriter<Hashing>),
    Complete,
}

/// Hashes and counts what reaches the file.
struct Hashing {
    file: BufWriter<File>,
    hasher: Sha256,
    bytes: u64,
}

impl Write for Hashing {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl std::fmt::Debug for RunLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunLog").field("rel", &self.rel).finish()
    }
}

impl RunLog {
    /// A log named `rel` at `path`; nothing is made on the disk until
    /// [`RunLog::open`] (or the first write, or its completion).
    pub(super) fn new(
        rel: String,
        path: PathBuf,
        redactor: Arc<Redactor>,
        events: Arc<Publisher>,
        guard: Arc<Guard>,
        announce: Announce,
    ) -> Self {
        RunLog {
            rel,
            path,
            stream: Stream::Unopened,
            redactor,
            events,
            guard,
            announce,
            sha256: None,
        }
    }

    /// Makes the file (and its folders), empty, unless it is open or complete
    /// already. A failure is the run's failure, as any record write's is: the run
    /// folder must still be the run's own, and nothing is made again in a folder
    /// that was deleted.
    pub fn open(&mut self) -> Result<(), StoreError> {
        if !matches!(self.stream, Stream::Unopened) {
            return Ok(());
        }
        let writer = self.make().inspect_err(|e| self.guard.fail(e, false))?;
        self.stream = Stream::Open(writer);
        Ok(())
    }

    fn make(&self) -> Result<RedactingWriter<Hashing>, StoreError> {
        self.guard.check(&self.rel)?;
        let create = |source| StoreError::Create {
            path: self.path.clone(),
            source,
        };
        injected_failure().map_err(create)?;
        if let Some(dir) = self.path.parent() {
            super::private::create_private_dir(dir).map_err(create)?;
        }
        // A new file or none: the log is opened once the process has started,
        // so whatever is at its path by then (a symlink planted there, say) is
        // refused, never followed or truncated. Every attempt's logs are new.
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&self.path)
            .map_err(create)?;
        let hashing = Hashing {
            file: BufWriter::with_capacity(64 * 1024, file),
            hasher: Sha256::new(),
            bytes: 0,
        };
        Ok(RedactingWriter::new(self.redactor.clone(), hashing))
    }

    /// The path relative to the run folder.
    pub fn rel(&self) -> &str {
        &self.rel
    }

    fn writer(&mut self) -> std::io::Result<&mut RedactingWriter<Hashing>> {
        self.open().map_err(|e| as_io(&e))?;
        match &mut self.stream {
            Stream::Open(writer) => Ok(writer),
            Stream::Unopened | Stream::Complete => {
                Err(std::io::Error::other("the log is already complete"))
            }
        }
    }

    /// Bytes in any order of chunks.
    pub fn write_chunk(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let written = self.writer()?.write_chunk(bytes);
        if let Err(e) = &written {
            let err = StoreError::Read {
                path: self.path.clone(),
                message: format!("failed to write the log: {e}"),
            };
            self.guard.fail(&err, false);
        }
        written
    }

    #[cfg(test)]
    /// One JSON value as a line. Its strings are redacted before it is encoded,
    /// so a secret that JSON escapes (a quote in a password) is still found.
    pub(crate) fn write_json_line(&mut self, value: &serde_json::Value) -> std::io::Result<()> {
        let mut value = value.clone();
        self.redactor.redact_json(&mut value);
        let mut line = serde_json::to_vec(&value).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.write_chunk(&line)
    }

    /// Writes what is held, syncs the file and announces it with its sha256
    /// (or queues the announcement: [`Announce`]).
    /// An empty file has no data to sync (most commands print nothing on one of
    /// their two streams): its entry in the folder is made durable by the folder's
    /// sync when the attempt's next record (its `process.json`) is renamed beside
    /// it, as a non-empty log's entry is. A second call returns the same sha256.
    pub fn complete(&mut self) -> Result<String, StoreError> {
        if let Some(sha) = &self.sha256 {
            return Ok(sha.clone());
        }
        // A log nothing was written to is still made, and recorded empty.
        self.open()?;
        let io = |e: std::io::Error| StoreError::Read {
            path: self.path.clone(),
            message: format!("failed to complete the log: {e}"),
        };
        let Stream::Open(writer) = std::mem::replace(&mut self.stream, Stream::Complete) else {
            return Err(io(std::io::Error::other("no writer")));
        };
        let synced = writer.finish().and_then(|hashing| {
            let Hashing {
                file,
                hasher,
                bytes,
            } = hashing;
            let file = file
                .into_inner()
                .map_err(std::io::IntoInnerError::into_error)?;
            if bytes == 0 {
                return Ok(hasher);
            }
            match super::durable::off_the_worker(|| file.sync_data()) {
                Err(e) if e.raw_os_error() != Some(libc::EINVAL) => Err(e),
                _ => Ok(hasher),
            }
        });
        let hasher = synced
            .map_err(io)
            .inspect_err(|e| self.guard.fail(e, false))?;
        let sha = hex::encode(hasher.finalize());
        let written = RunEvent::record_written(&self.rel, &sha);
        match &self.announce {
            Announce::Now => {
                append_event(&self.events, &self.redactor, &self.guard, &written)?;
            }
            Announce::Queued(queue) => {
                enqueue(queue, &self.guard, Deferred::event(written))?;
            }
        }
        self.sha256 = Some(sha.clone());
        Ok(sha)
    }
}

/// A store error as the supervisor's sinks report it: with every cause.
fn as_io(e: &StoreError) -> std::io::Error {
    std::io::Error::other(crate::error_chain(e))
}

impl OutputSink for RunLog {
    fn open(&mut self) -> std::io::Result<()> {
        RunLog::open(self).map_err(|e| as_io(&e))
    }

    fn write_chunk(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        RunLog::write_chunk(self, bytes)
    }

    fn finish(&mut self) -> std::io::Result<()> {
        self.complete().map(|_| ()).map_err(|e| as_io(&e))
    }

    fn describe(&self) -> String {
        self.path.display().to_string()
    }
}
