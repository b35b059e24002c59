//! `events.jsonl`: the append-only, hash-chained event log of a run (docs/audit.md).
//!
//! Every line is one JSON object with `seq` (from 1, contiguous), `at`, `type` and
//! `prev`: the sha256 (hex) of the previous line's bytes without its newline, or 64
//! zeros for the first line. Each line is written with a single `write`, so a crash
//! leaves at most one torn line at the end, which [`verify_chain`] tells apart from
//! tampering. Lines are synced in groups, where durability is needed
//! ([`super::durable`]), not one by one.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::store::atomic::{hash_reader, sha256_hex};
use crate::store::durable::GroupCommit;
use crate::store::publish::Redacted;

pub(crate) const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

#[derive(Debug, thiserror::Error)]
pub enum EventError {
    #[error("failed to append to {path}")]
    Append {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("event log {path} is broken at line {line}: {message}")]
    Broken {
        path: PathBuf,
        line: u64,
        message: String,
    },
}

/// Where an event landed in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::store) struct Appended {
    pub seq: u64,
    pub at: String,
}

/// The writer side of a run's event log. Private to the store: events reach it
/// only through [`crate::store::RunHandle::event`], which redacts them (a
/// [`Redacted`] event).
#[derive(Debug)]
pub(in crate::store) struct EventLog {
    path: PathBuf,
    file: File,
    next_seq: u64,
    prev: String,
    commit: Arc<GroupCommit>,
    /// The sha256 state of every byte the file holds, and their count: an
    /// existing log's bytes read once when it is continued, then each line as
    /// it is appended. What the check after an agent attempt compares the file
    /// with (`store/tamper.rs`).
    content: Sha256,
    len: u64,
}

impl EventLog {
    /// Start a new, empty log.
    pub(crate) fn create(path: &Path) -> Result<Self, EventError> {
        Self::append_to(path, true, 1, GENESIS.to_string())
    }

    /// The writer over `path` opened for appending, continuing at `next_seq`;
    /// an existing file's bytes are read for [`EventLog::content`].
    fn append_to(path: &Path, new: bool, next_seq: u64, prev: String) -> Result<Self, EventError> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = OpenOptions::new()
            .create_new(new)
            .append(true)
            .mode(0o600)
            .open(path)
            .map_err(|source| EventError::Append {
                path: path.to_path_buf(),
                source,
            })?;
        let syncer = file.try_clone().map_err(|source| EventError::Append {
            path: path.to_path_buf(),
            source,
        })?;
        let (content, len) = if new {
            (Sha256::new(), 0)
        } else {
            File::open(path)
                .and_then(|f| hash_reader(f, &mut vec![0u8; 64 * 1024]))
                .map_err(|source| EventError::Read {
                    path: path.to_path_buf(),
                    source,
                })?
        };
        Ok(EventLog {
            path: path.to_path_buf(),
            file,
            commit: Arc::new(GroupCommit::new(syncer, next_seq - 1)),
            next_seq,
            prev,
            content,
            len,
        })
    }

    /// Continue an existing log whose chain is intact. A torn last line must have
    /// been set aside first (see [`set_aside_torn_tail`]).
    pub(crate) fn open(path: &Path) -> Result<Self, EventError> {
        let check = verify_chain(path)?;
        if let Some(p) = check.problems.first() {
            return Err(EventError::Broken {
                path: path.to_path_buf(),
                line: p.line,
                message: p.message.clone(),
            });
        }
        if check.torn_tail.is_some() {
            return Err(EventError::Broken {
                path: path.to_path_buf(),
                line: check.events + 1,
                message: "the last line is incomplete".into(),
            });
        }
        Self::append_to(path, false, check.events + 1, check.last_hash)
    }

    /// Continue a log that was read whole moments ago under the run's lock (a
    /// resume's audit): its head is known, so it is not read again. A log whose
    /// length is no longer that of the lines read (changed since, or a torn tail
    /// not set aside) is refused, as [`EventLog::open`] would refuse it.
    pub(crate) fn continue_from(path: &Path, head: &ChainHead) -> Result<Self, EventError> {
        let len = std::fs::metadata(path)
            .map_err(|source| EventError::Read {
                path: path.to_path_buf(),
                source,
            })?
            .len();
        if len != head.len {
            return Err(EventError::Broken {
                path: path.to_path_buf(),
                line: head.events + 1,
                message: format!(
                    "the log is {len} bytes where the {} lines checked hold {}: it changed since it was checked",
                    head.events, head.len
                ),
            });
        }
        Self::append_to(path, false, head.events + 1, head.last_hash.clone())
    }

    /// Append one event: the envelope, its `type`, then its fields in their order.
    /// `at` is when it happened, when the caller knows (an event queued before
    /// it is written); now when not. The line is written, not synced: the
    /// run's group commit makes it durable.
    pub(in crate::store) fn append(
        &mut self,
        event: &Redacted,
        at: Option<chrono::DateTime<chrono::Utc>>,
    ) -> Result<Appended, EventError> {
        let at = crate::time::format_rfc3339(at.unwrap_or_else(chrono::Utc::now));
        let mut obj = Map::new();
        obj.insert("seq".into(), Value::from(self.next_seq));
        obj.insert("at".into(), Value::from(at.clone()));
        obj.insert("type".into(), Value::from(event.kind()));
        obj.insert("prev".into(), Value::from(self.prev.clone()));
        for (k, v) in event.fields() {
            if !matches!(k.as_str(), "seq" | "at" | "type" | "prev") {
                obj.insert(k.clone(), v.clone());
            }
        }
        let line = serde_json::to_vec(&Value::Object(obj)).expect("event serializes");
        let mut buf = line.clone();
        buf.push(b'\n');
        let err = |source| EventError::Append {
            path: self.path.clone(),
            source,
        };
        self.file.write_all(&buf).map_err(err)?;
        self.content.update(&buf);
        self.len += buf.len() as u64;
        self.prev = sha256_hex(&line);
        let seq = self.next_seq;
        self.commit.wrote(seq);
        self.next_seq += 1;
        Ok(Appended { seq, at })
    }

    /// What makes this log's lines durable; usable without the log's lock.
    pub(crate) fn commit(&self) -> Arc<GroupCommit> {
        self.commit.clone()
    }

    pub(crate) fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The length and sha256 of the bytes the file holds, as far as this
    /// writer knows: those it found and those it appended.
    pub(in crate::store) fn content(&self) -> (u64, [u8; 32]) {
        (self.len, self.content.clone().finalize().into())
    }
}

/// One problem found in a chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainProblem {
    /// 1-based line number.
    pub line: u64,
    pub message: String,
}

/// The result of reading a whole log.
#[derive(Debug, Clone, Default)]
pub struct ChainCheck {
    /// Whole lines read.
    pub events: u64,
    /// Hash of the last whole line (GENESIS when empty).
    pub last_hash: String,
    /// Bytes of the whole lines, newlines included: where a torn tail starts.
    pub len: u64,
    /// Bytes after the last newline: a line cut short by a crash.
    pub torn_tail: Option<Vec<u8>>,
    pub problems: Vec<ChainProblem>,
}

impl ChainCheck {
    pub fn is_intact(&self) -> bool {
        self.problems.is_empty()
    }

    /// Where the next event goes once a torn tail is set aside; `None` for a
    /// chain that is not intact, which nothing may continue.
    pub(crate) fn head(&self) -> Option<ChainHead> {
        self.is_intact().then(|| ChainHead {
            events: self.events,
            last_hash: self.last_hash.clone(),
            len: self.len,
        })
    }
}

/// The end of an intact log's whole lines: enough to continue it without reading
/// it again ([`EventLog::continue_from`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ChainHead {
    pub events: u64,
    pub last_hash: String,
    pub len: u64,
}

/// Read a log line by line (never whole) and check every link of the chain;
/// each line is read as every reader of the log reads it
/// ([`crate::events::line::read_with`]).
pub fn verify_chain(path: &Path) -> Result<ChainCheck, EventError> {
    crate::events::line::read_with(path, |_, _| {})
}

/// What the chain check reads of one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Envelope {
    pub seq: Option<u64>,
    pub prev: Prev,
    /// Whether `at` is a string.
    pub at: bool,
    /// Whether `type` is a string.
    pub kind: bool,
}

/// A line's `prev` against the hash of the line before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prev {
    Matches,
    Differs,
    Missing,
}

impl Prev {
    pub(crate) fn of(prev: Option<&str>, last_hash: &str) -> Prev {
        match prev {
            Some(p) if p == last_hash => Prev::Matches,
            Some(_) => Prev::Differs,
            None => Prev::Missing,
        }
    }
}

impl Envelope {
    /// The envelope of a line read as JSON (any JSON: a value that is not an
    /// object has none of the fields).
    pub(crate) fn of(line: &Value, last_hash: &str) -> Envelope {
        Envelope {
            seq: line.get("seq").and_then(Value::as_u64),
            prev: Prev::of(line.get("prev").and_then(Value::as_str), last_hash),
            at: line.get("at").and_then(Value::as_str).is_some(),
            kind: line.get("type").and_then(Value::as_str).is_some(),
        }
    }
}

/// Like [`verify_chain`], reading each line with `read` (line number, bytes
/// without the newline, hash of the line before): its envelope, or why the line
/// is not JSON. How a line is read is the caller's; what the chain requires of
/// its envelope is decided here alone.
pub(crate) fn verify_chain_with(
    path: &Path,
    mut read: impl FnMut(u64, &[u8], &str) -> Result<Envelope, String>,
) -> Result<ChainCheck, EventError> {
    let read_err = |source| EventError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut reader = BufReader::new(File::open(path).map_err(read_err)?);
    let mut check = ChainCheck {
        last_hash: GENESIS.to_string(),
        ..Default::default()
    };
    let mut buf = Vec::new();
    let mut line_no = 0u64;
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf).map_err(read_err)?;
        if n == 0 {
            break;
        }
        if buf.last() != Some(&b'\n') {
            check.torn_tail = Some(buf.clone());
            break;
        }
        buf.pop();
        line_no += 1;
        let problem = |message: String| ChainProblem {
            line: line_no,
            message,
        };
        match read(line_no, &buf, &check.last_hash) {
            Ok(envelope) => {
                if envelope.seq != Some(line_no) {
                    check.problems.push(problem(format!(
                        "seq is {} where {line_no} was expected (an event was deleted, inserted or reordered)",
                        envelope.seq.map_or("missing".to_string(), |s| s.to_string())
                    )));
                }
                match envelope.prev {
                    Prev::Matches => {}
                    Prev::Differs => check.problems.push(problem(
                        "prev does not match the hash of the line before (the chain is broken)"
                            .into(),
                    )),
                    Prev::Missing => check.problems.push(problem("prev is missing".into())),
                }
                for (field, present) in [("at", envelope.at), ("type", envelope.kind)] {
                    if !present {
                        check
                            .problems
                            .push(problem(format!("`{field}` is missing")));
                    }
                }
            }
            Err(e) => check
                .problems
                .push(problem(format!("not a JSON object: {e}"))),
        }
        check.last_hash = sha256_hex(&buf);
        check.events = line_no;
        check.len += n as u64;
    }
    Ok(check)
}

/// Move a torn last line out of the log into `events.jsonl.torn-<n>` so the chain
/// can go on from the last whole event. Returns where the bytes were kept.
pub fn set_aside_torn_tail(path: &Path) -> Result<Option<PathBuf>, EventError> {
    let io = |source| EventError::Append {
        path: path.to_path_buf(),
        source,
    };
    let tail = torn_tail(path).map_err(|source| EventError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let Some(tail) = tail else {
        return Ok(None);
    };
    let mut n = 1;
    let aside = loop {
        let p = path.with_file_name(format!("{}{n}", crate::store::layout::TORN_TAIL_PREFIX));
        if !p.exists() {
            break p;
        }
        n += 1;
    };
    crate::store::atomic::write_atomic(&aside, &tail).map_err(|e| io(e.source))?;
    let len = std::fs::metadata(path).map_err(io)?.len() - tail.len() as u64;
    let f = OpenOptions::new().write(true).open(path).map_err(io)?;
    f.set_len(len).map_err(io)?;
    f.sync_all().map_err(io)?;
    Ok(Some(aside))
}

/// The bytes after the last newline, read from the end: a resume checks for a
/// torn line without reading the whole log once more.
fn torn_tail(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = File::open(path)?;
    let len = f.metadata()?.len();
    let mut end = len;
    let mut tail: Vec<u8> = Vec::new();
    while end > 0 {
        let start = end.saturating_sub(64 * 1024);
        let mut chunk = vec![0u8; (end - start) as usize];
        f.seek(SeekFrom::Start(start))?;
        f.read_exact(&mut chunk)?;
        if let Some(nl) = chunk.iter().rposition(|&b| b == b'\n') {
            chunk.drain(..=nl);
            chunk.extend_from_slice(&tail);
            tail = chunk;
            break;
        }
        chunk.extend_from_slice(&tail);
        tail = chunk;
        end = start;
    }
    Ok((!tail.is_empty()).then_some(tail))
}

/// The lines [`EventLog`] writes for `events`, without their newlines: what the
/// crate's readers of a log are tested against.
#[cfg(test)]
pub(crate) fn written_lines(events: &[crate::events::RunEvent]) -> Vec<Vec<u8>> {
    let dir = tempfile::tempdir().expect("temporary folder");
    let path = dir.path().join(crate::store::layout::EVENTS);
    let mut log = EventLog::create(&path).expect("log created");
    let redactor = crate::redact::Redactor::default();
    for event in events {
        log.append(&Redacted::new(event, &redactor), None)
            .expect("event appended");
    }
    std::fs::read(&path)
        .expect("log read")
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{RunEvent, StageStarted};
    use crate::redact::Redactor;

    fn started(attempt: u32) -> Redacted {
        let event = RunEvent::StageStarted(StageStarted {
            stage: "s".into(),
            attempt,
        });
        Redacted::new(&event, &Redactor::default())
    }

    fn log_with(n: usize) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("events.jsonl");
        let mut log = EventLog::create(&p).unwrap();
        for i in 0..n as u32 {
            log.append(&started(i), None).unwrap();
        }
        (dir, p)
    }

    #[test]
    fn a_written_chain_verifies_and_can_be_continued() {
        let (_d, p) = log_with(3);
        let c = verify_chain(&p).unwrap();
        assert!(c.is_intact(), "{:?}", c.problems);
        assert_eq!(c.events, 3);
        let mut log = EventLog::open(&p).unwrap();
        assert_eq!(log.append(&started(9), None).unwrap().seq, 4);
        assert!(verify_chain(&p).unwrap().is_intact());
    }

    #[test]
    fn a_log_is_continued_from_the_head_its_check_found_and_only_if_unchanged() {
        let (_d, p) = log_with(3);
        let head = verify_chain(&p).unwrap().head().unwrap();
        assert_eq!(head.len, std::fs::metadata(&p).unwrap().len());
        let mut log = EventLog::continue_from(&p, &head).unwrap();
        assert_eq!(log.append(&started(9), None).unwrap().seq, 4);
        assert!(verify_chain(&p).unwrap().is_intact());

        // A line added (or a torn tail left) since the check: refused, not
        // continued from a head that is no longer the log's end.
        let head = verify_chain(&p).unwrap().head().unwrap();
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"{\"seq\":5,\"at\":\"x").unwrap();
        assert!(matches!(
            EventLog::continue_from(&p, &head),
            Err(EventError::Broken { line: 5, .. })
        ));
        // A broken chain has no head to continue from.
        let text = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, text.replacen("\"attempt\":1", "\"attempt\":7", 1)).unwrap();
        assert_eq!(verify_chain(&p).unwrap().head(), None);
    }

    #[test]
    fn edited_deleted_and_reordered_lines_are_found() {
        let (_d, p) = log_with(4);
        let text = std::fs::read_to_string(&p).unwrap();
        let lines: Vec<&str> = text.lines().collect();

        let edited = text.replacen("\"attempt\":1", "\"attempt\":9", 1);
        std::fs::write(&p, edited).unwrap();
        let c = verify_chain(&p).unwrap();
        assert_eq!(c.problems.len(), 1);
        assert_eq!(
            c.problems[0].line, 3,
            "the line after the edit has a bad prev"
        );

        let deleted = format!("{}\n{}\n{}\n", lines[0], lines[2], lines[3]);
        std::fs::write(&p, deleted).unwrap();
        let c = verify_chain(&p).unwrap();
        assert!(c
            .problems
            .iter()
            .any(|p| p.line == 2 && p.message.contains("seq")));

        let reordered = format!("{}\n{}\n{}\n{}\n", lines[0], lines[2], lines[1], lines[3]);
        std::fs::write(&p, reordered).unwrap();
        assert!(!verify_chain(&p).unwrap().is_intact());
    }

    #[test]
    fn a_torn_tail_is_told_apart_and_set_aside() {
        let (_d, p) = log_with(2);
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"{\"seq\":3,\"at\":\"x").unwrap();
        let c = verify_chain(&p).unwrap();
        assert!(c.is_intact());
        assert_eq!(c.events, 2);
        assert!(c.torn_tail.is_some());
        assert!(EventLog::open(&p).is_err());
        assert_eq!(
            torn_tail(&p).unwrap(),
            verify_chain(&p).unwrap().torn_tail,
            "read from the end, the same bytes"
        );
        let aside = set_aside_torn_tail(&p).unwrap().unwrap();
        assert_eq!(std::fs::read(&aside).unwrap(), b"{\"seq\":3,\"at\":\"x");
        let mut log = EventLog::open(&p).unwrap();
        assert_eq!(log.append(&started(9), None).unwrap().seq, 3);
        assert!(verify_chain(&p).unwrap().is_intact());
        assert_eq!(set_aside_torn_tail(&p).unwrap(), None);

        // A tail longer than one read from the end, and a log that is all tail.
        let long = vec![b'x'; 200 * 1024];
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(&long).unwrap();
        assert_eq!(torn_tail(&p).unwrap(), Some(long.clone()));
        let only = p.with_file_name("only.jsonl");
        std::fs::write(&only, &long[..10]).unwrap();
        assert_eq!(torn_tail(&only).unwrap(), Some(long[..10].to_vec()));
        std::fs::write(&only, b"").unwrap();
        assert_eq!(torn_tail(&only).unwrap(), None);
    }
}
