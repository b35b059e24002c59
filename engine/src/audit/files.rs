//! Every file of the run read once: hashed against its last announcement and
//! scanned for secrets, in bounded chunks. The walk and the small records read
//! there are kept ([`RunFiles`]) for the checks that look into records, so that a
//! run's folders are listed once and its records read once.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::audit::events::EventFacts;
use crate::audit::report::{Finding, FindingCode};
use crate::audit::secrets::{FileScan, Scanner};
use crate::audit::AuditError;
use crate::store::is_safe_component;

/// The run lock: empty, and rewritten by whoever opens the run.
const LOCK_FILE: &str = crate::store::layout::LOCK;

/// A JSON record up to this size is kept in memory when it is read for its hash,
/// for the checks that look into it (records are a few KiB).
const KEEP_RECORD: u64 = 256 * 1024;
/// At most this much of a run's records is kept; the rest is read again.
const KEEP_TOTAL: usize = 8 * 1024 * 1024;

/// The run folder as the one walk found it: its folders, its regular files, the
/// other entries (symlinks, …), and the bytes of the JSON records read for their
/// hash — exactly the bytes hashed, so a record is judged as it was hashed.
#[derive(Debug, Default)]
pub(crate) struct RunFiles {
    root: PathBuf,
    dirs: BTreeSet<String>,
    files: BTreeSet<String>,
    others: BTreeSet<String>,
    kept: HashMap<String, Vec<u8>>,
}

impl RunFiles {
    /// The bytes of `rel` (relative to the run folder). `None` when the walk found
    /// nothing there, or it cannot be read; a record not kept, and an entry that
    /// is not a regular file, is read from the disk as it is now.
    pub(crate) fn bytes(&self, rel: &str) -> Option<std::borrow::Cow<'_, [u8]>> {
        if let Some(b) = self.kept.get(rel) {
            return Some(std::borrow::Cow::Borrowed(b));
        }
        let walked = self.dirs.contains(parent(rel));
        if walked && !self.files.contains(rel) && !self.others.contains(rel) {
            return None;
        }
        std::fs::read(self.root.join(rel))
            .ok()
            .map(std::borrow::Cow::Owned)
    }

    /// The bytes of record `rel` as they were hashed, when they were kept.
    pub(crate) fn kept(&self, rel: &str) -> Option<&[u8]> {
        self.kept.get(rel).map(Vec::as_slice)
    }

    /// Whether `rel` is a regular file, as the walk found it (or, outside the
    /// folders walked, as it is now).
    pub(crate) fn is_file(&self, rel: &str) -> bool {
        if self.dirs.contains(parent(rel)) {
            self.files.contains(rel) || self.root.join(rel).is_file() && self.others.contains(rel)
        } else {
            self.root.join(rel).is_file()
        }
    }

    /// Whether anything is at `rel`.
    pub(crate) fn exists(&self, rel: &str) -> bool {
        if self.dirs.contains(parent(rel)) {
            self.files.contains(rel) || self.dirs.contains(rel) || self.others.contains(rel)
        } else {
            self.root.join(rel).exists()
        }
    }

    /// Names of the folders in folder `rel`, sorted; none when it is not one.
    pub(crate) fn subdirs(&self, rel: &str) -> Vec<String> {
        let prefix = format!("{rel}/");
        self.dirs
            .range(prefix.clone()..)
            .take_while(|d| d.starts_with(&prefix))
            .filter_map(|d| d.get(prefix.len()..))
            .filter(|name| !name.contains('/'))
            .map(str::to_string)
            .collect()
    }
}

/// Up to `limit + 1` bytes of `file`, read through `buf`, which is kept from one
/// file to the next (a generic `read_to_end` probes with extra small reads).
fn read_head(mut file: &std::fs::File, buf: &mut [u8], limit: u64) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::new();
    while head.len() as u64 <= limit {
        let want = buf.len().min((limit + 1) as usize - head.len());
        let n = match file.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        head.extend_from_slice(&buf[..n]);
    }
    Ok(head)
}

/// The folder of a relative path (`""` for the run folder itself).
fn parent(rel: &str) -> &str {
    rel.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// Every regular file of a run hashed and scanned, before any comparison with
/// the event log: what [`compare`] needs, read without the log, so that the two
/// can be read at once.
pub(crate) struct FileScans {
    run: RunFiles,
    scans: BTreeMap<String, FileScan>,
    /// Secrets found and files that could not be read, in the walk's order.
    findings: Vec<Finding>,
}

/// Below this many files one thread scans them all: a second one would cost
/// more to start than it saves.
const SHARED_FROM: usize = 64;

/// Hash and scan every regular file of the run in `run_dir`.
pub(crate) fn scan_files(run_dir: &Path) -> Result<FileScans, AuditError> {
    let mut findings = Vec::new();
    let mut run = RunFiles {
        root: run_dir.to_path_buf(),
        ..Default::default()
    };
    run.dirs.insert(String::new());
    let mut files = Vec::new();
    walk(run_dir, "", &mut files, &mut run)?;
    // Two threads take the files one at a time from a shared cursor (hashing
    // and the secret pattern are most of an audit's time; the event log's
    // reading beside it ends sooner), and the results are taken in the walk's
    // order, so that findings come out as from one thread.
    let shared = Shared {
        run_dir,
        files: &files,
        next: AtomicUsize::new(0),
        kept_total: AtomicUsize::new(0),
    };
    let mut read = if files.len() >= SHARED_FROM {
        let (mut mine, theirs) = crate::beside::beside(|| shared.scan(), || shared.scan());
        mine.extend(theirs);
        mine
    } else {
        shared.scan()
    };
    read.sort_unstable_by_key(|r| r.index);
    let mut scans: BTreeMap<String, FileScan> = BTreeMap::new();
    for FileRead { index, scan, head } in read {
        let rel = &files[index];
        match scan {
            Ok(scan) => {
                for hit in &scan.secrets {
                    let times = match hit.count {
                        1 => String::new(),
                        n => format!(" ({n} occurrences)"),
                    };
                    findings.push(
                        Finding::new(
                            FindingCode::SecretInFile,
                            format!(
                                "holds {} at line {}{times}: redaction missed it",
                                hit.label, hit.first_line
                            ),
                        )
                        .file(rel),
                    );
                }
                if let Some(head) = head {
                    run.kept.insert(rel.clone(), head);
                }
                scans.insert(rel.clone(), scan);
            }
            Err(e) => findings.push(
                Finding::new(FindingCode::FileUnreadable, format!("cannot be read: {e}")).file(rel),
            ),
        }
    }

    Ok(FileScans {
        run,
        scans,
        findings,
    })
}

/// The walk's files, handed out one at a time to the threads that scan them.
struct Shared<'a> {
    run_dir: &'a Path,
    files: &'a [String],
    next: AtomicUsize,
    /// Bytes of records kept so far, against [`KEEP_TOTAL`].
    kept_total: AtomicUsize,
}

/// One file as a scanning thread read it: its scan, and its bytes where the
/// record is kept.
struct FileRead {
    index: usize,
    scan: std::io::Result<FileScan>,
    head: Option<Vec<u8>>,
}

impl Shared<'_> {
    /// Scans files until none is left, with buffers of its own.
    fn scan(&self) -> Vec<FileRead> {
        let mut scanner = Scanner::default();
        let mut buf = vec![0u8; 64 * 1024];
        let mut read = Vec::new();
        loop {
            let index = self.next.fetch_add(1, Ordering::Relaxed);
            let Some(rel) = self.files.get(index) else {
                return read;
            };
            if rel == LOCK_FILE {
                continue;
            }
            let keep =
                rel.ends_with(".json") && self.kept_total.load(Ordering::Relaxed) < KEEP_TOTAL;
            let mut head = None;
            let scan = std::fs::File::open(self.run_dir.join(rel)).and_then(|f| {
                if !keep {
                    return scanner.scan(f);
                }
                let bytes = read_head(&f, &mut buf, KEEP_RECORD)?;
                if bytes.len() as u64 > KEEP_RECORD {
                    return scanner.scan(bytes.as_slice().chain(f));
                }
                let scan = scanner.scan(bytes.as_slice())?;
                self.kept_total.fetch_add(bytes.len(), Ordering::Relaxed);
                head = Some(bytes);
                Ok(scan)
            });
            read.push(FileRead { index, scan, head });
        }
    }
}

/// Compare the files scanned with the announcements of the event log. Returns
/// how many files were read, and what the walk found.
pub(crate) fn compare(
    scanned: FileScans,
    run_dir: &Path,
    facts: &EventFacts,
    findings: &mut Vec<Finding>,
) -> (u64, RunFiles) {
    let FileScans {
        run,
        scans,
        findings: found,
    } = scanned;
    findings.extend(found);
    for (rel, ann) in &facts.announced {
        if rel.is_empty() || rel.split('/').any(|c| !is_safe_component(c)) {
            findings.push(Finding::new(
                FindingCode::AnnouncedPathUnsafe,
                format!(
                    "events.jsonl line {} announces `{rel}`, which is not a plain path inside the run",
                    ann.line
                ),
            ));
            continue;
        }
        match scans.get(rel) {
            Some(scan) if scan.sha256 == ann.sha256 => {}
            Some(scan) if unconfirmed(facts, rel, &scan.sha256) => {
                findings.push(unconfirmed_finding(rel));
            }
            Some(scan) => findings.push(
                Finding::new(
                    FindingCode::FileHashMismatch,
                    format!(
                        "sha256 is {} but events.jsonl line {} announced {}: the file changed after it was written",
                        short(&scan.sha256),
                        ann.line,
                        short(&ann.sha256)
                    ),
                )
                .file(rel),
            ),
            None => {
                let what = if run_dir.join(rel).exists() {
                    "is not a regular file"
                } else {
                    "is missing"
                };
                findings.push(
                    Finding::new(
                        FindingCode::AnnouncedFileMissing,
                        format!("{what}, though events.jsonl line {} announced it", ann.line),
                    )
                    .file(rel),
                );
            }
        }
    }

    for rel in scans.keys() {
        let hidden = rel.split('/').any(|c| c.starts_with('.'));
        if rel.ends_with(".json") && !hidden && !facts.announced.contains_key(rel) {
            if unconfirmed(facts, rel, &scans[rel].sha256) {
                findings.push(unconfirmed_finding(rel));
                continue;
            }
            findings.push(
                Finding::new(
                    FindingCode::UnannouncedRecord,
                    "is a JSON record that no record-written event announced",
                )
                .file(rel),
            );
        }
    }
    (scans.len() as u64, run)
}

/// Whether `rel` holds exactly what a pending `record-intent` announced.
fn unconfirmed(facts: &EventFacts, rel: &str, sha256: &str) -> bool {
    facts.intents.get(rel).is_some_and(|i| i.sha256 == sha256)
}

fn unconfirmed_finding(rel: &str) -> Finding {
    Finding::new(
        FindingCode::WriteUnconfirmed,
        "matches a record-intent event that no record-written confirmed: specbridge stopped between writing it and logging it; resuming the run confirms it",
    )
    .file(rel)
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// Regular files under `dir`, relative and `/`-separated, sorted; every folder
/// and other entry noted in `run`. Symlinks are not followed: nothing in a run is
/// one, and following could leave the run.
fn walk(
    root: &Path,
    rel: &str,
    out: &mut Vec<String>,
    run: &mut RunFiles,
) -> Result<(), AuditError> {
    let dir = if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    };
    let read = |source| AuditError::Read {
        path: dir.clone(),
        source,
    };
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .map_err(read)?
        .collect::<Result<_, _>>()
        .map_err(read)?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let child = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        let kind = entry.file_type().map_err(read)?;
        if kind.is_dir() {
            run.dirs.insert(child.clone());
            walk(root, &child, out, run)?;
        } else if kind.is_file() {
            run.files.insert(child.clone());
            out.push(child);
        } else {
            run.others.insert(child);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::report::FindingCode;

    const ANT: &str = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";

    /// A record too large to keep is hashed and scanned whole all the same (the
    /// part read to decide is chained before the rest), and read again when a
    /// check looks into it; a kept one is served as it was hashed.
    #[test]
    fn kept_and_streamed_records_are_hashed_scanned_and_served_whole() {
        let dir = tempfile::tempdir().unwrap();
        let big = format!(
            "{{\"pad\": \"{}\", \"key\": \"{ANT}\"}}",
            "x".repeat(KEEP_RECORD as usize)
        );
        std::fs::create_dir_all(dir.path().join("stages/a")).unwrap();
        std::fs::write(dir.path().join("stages/a/big.json"), &big).unwrap();
        std::fs::write(dir.path().join("stages/a/small.json"), "{\"k\": 1}").unwrap();
        let mut findings = Vec::new();
        let scanned = scan_files(dir.path()).unwrap();
        let (count, run) = compare(scanned, dir.path(), &EventFacts::default(), &mut findings);
        assert_eq!(count, 2);
        let secrets: Vec<_> = findings
            .iter()
            .filter(|f| f.code == FindingCode::SecretInFile)
            .map(|f| f.file.clone())
            .collect();
        assert_eq!(secrets, [Some("stages/a/big.json".to_string())]);
        assert!(!run.kept.contains_key("stages/a/big.json"));
        assert_eq!(
            run.bytes("stages/a/big.json").unwrap().as_ref(),
            big.as_bytes()
        );
        assert_eq!(
            run.bytes("stages/a/small.json").unwrap().as_ref(),
            b"{\"k\": 1}"
        );
        // Changed after the hash: still judged by the bytes that were hashed.
        std::fs::write(dir.path().join("stages/a/small.json"), "{}").unwrap();
        assert_eq!(
            run.bytes("stages/a/small.json").unwrap().as_ref(),
            b"{\"k\": 1}"
        );
        assert!(run.bytes("stages/a/none.json").is_none());
        assert_eq!(run.subdirs("stages"), ["a"]);
        assert!(run.subdirs("stages/a").is_empty());
    }

    /// Past [`SHARED_FROM`] files two threads scan them; what they find comes out
    /// in the walk's order, every file is hashed once, and every record is kept.
    #[test]
    fn files_shared_by_two_threads_are_reported_in_the_walks_order() {
        let dir = tempfile::tempdir().unwrap();
        let n = 3 * SHARED_FROM;
        std::fs::create_dir_all(dir.path().join("stages/a")).unwrap();
        let mut expected = Vec::new();
        for i in 0..n {
            let rel = format!("stages/a/r{i:04}.json");
            let body = if i % 7 == 3 {
                expected.push(rel.clone());
                format!("{{\"key\": \"{ANT}\"}}")
            } else {
                format!("{{\"i\": {i}}}")
            };
            std::fs::write(dir.path().join(&rel), body).unwrap();
        }
        let scanned = scan_files(dir.path()).unwrap();
        let secrets: Vec<_> = scanned
            .findings
            .iter()
            .filter(|f| f.code == FindingCode::SecretInFile)
            .filter_map(|f| f.file.clone())
            .collect();
        assert_eq!(secrets, expected);
        assert_eq!(scanned.scans.len(), n);
        assert_eq!(scanned.run.kept.len(), n);
        assert_eq!(
            scanned.run.kept("stages/a/r0011.json"),
            Some(&b"{\"i\": 11}"[..])
        );
    }
}
