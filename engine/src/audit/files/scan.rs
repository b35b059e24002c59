//! The file pass of an audit: the run folder listed and every regular file in it
//! hashed and scanned for secrets, the listing and the reading shared by two
//! threads (docs/performance.md), what they find put back in the walk's order.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{FileScans, RunFiles};
use crate::audit::report::{Finding, FindingCode};
use crate::audit::secrets::{FileScan, Scanner};
use crate::audit::AuditError;

/// The run lock: empty, and rewritten by whoever opens the run.
const LOCK_FILE: &str = crate::store::layout::LOCK;

/// A JSON record up to this size is kept in memory when it is read for its hash,
/// for the checks that look into it (records are a few KiB).
pub(super) const KEEP_RECORD: u64 = 256 * 1024;
/// At most this much of a run's records is kept; the rest is read again.
const KEEP_TOTAL: usize = 8 * 1024 * 1024;

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

/// Below this many pieces (a piece is a file of the top two levels, or one
/// folder's tree below them: a stage's) one thread reads them all: a second
/// would cost more to start than it saves.
const SHARED_FROM: usize = 16;

/// Hash and scan every regular file of the run in `run_dir`.
///
/// The top two levels are listed here; below them a run folder holds one tree
/// per stage, and two threads each take the next piece — a file to read, or a
/// tree to list and read — so that the listing is shared as well as the reading.
/// What they find is put back in the walk's order, so that findings come out as
/// from one thread, in the order of a walk that lists each folder's entries by
/// name.
pub(crate) fn scan_files(run_dir: &Path) -> Result<FileScans, AuditError> {
    let mut run = RunFiles {
        root: run_dir.to_path_buf(),
        ..Default::default()
    };
    run.dirs.insert(String::new());
    let pieces = pieces(run_dir, &mut run)?;
    let shared = Shared {
        run_dir,
        pieces: &pieces,
        next: AtomicUsize::new(0),
        kept_total: AtomicUsize::new(0),
    };
    let mut found = if pieces.len() >= SHARED_FROM {
        let (mut mine, theirs) = crate::beside::beside(|| shared.take(), || shared.take());
        mine.extend(theirs);
        mine
    } else {
        shared.take()
    };
    found.sort_unstable_by_key(|(index, _)| *index);
    let mut findings = Vec::new();
    let mut scans: BTreeMap<String, FileScan> = BTreeMap::new();
    for (_, piece) in found {
        if let Some(e) = piece.error {
            return Err(e);
        }
        run.dirs.extend(piece.dirs);
        run.others.extend(piece.others);
        for (rel, read) in piece.files {
            run.files.insert(rel.clone());
            let Some(FileRead { scan, head }) = read else {
                continue;
            };
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
                            .file(&rel),
                        );
                    }
                    if let Some(head) = head {
                        run.kept.insert(rel.clone(), head);
                    }
                    scans.insert(rel, scan);
                }
                Err(e) => findings.push(
                    Finding::new(FindingCode::FileUnreadable, format!("cannot be read: {e}"))
                        .file(&rel),
                ),
            }
        }
    }
    Ok(FileScans {
        run,
        scans,
        findings,
    })
}

/// A part of the run folder that one thread reads whole.
enum Piece {
    File(String),
    /// A folder below the top two levels, with everything under it.
    Tree(String),
}

/// The files of the top two levels and the trees below them, in the walk's
/// order; the two levels' folders and other entries are noted in `run`.
fn pieces(run_dir: &Path, run: &mut RunFiles) -> Result<Vec<Piece>, AuditError> {
    let mut pieces = Vec::new();
    for (name, kind) in list(run_dir, "")? {
        match kind {
            Kind::File => pieces.push(Piece::File(name)),
            Kind::Other => {
                run.others.insert(name);
            }
            Kind::Dir => {
                for (child, kind) in list(run_dir, &name)? {
                    match kind {
                        Kind::File => pieces.push(Piece::File(child)),
                        Kind::Dir => pieces.push(Piece::Tree(child)),
                        Kind::Other => {
                            run.others.insert(child);
                        }
                    }
                }
                run.dirs.insert(name);
            }
        }
    }
    Ok(pieces)
}

/// The pieces, handed out one at a time to the threads that read them.
struct Shared<'a> {
    run_dir: &'a Path,
    pieces: &'a [Piece],
    next: AtomicUsize,
    /// Bytes of records kept so far, against [`KEEP_TOTAL`].
    kept_total: AtomicUsize,
}

/// What one piece held, in the walk's order: its folders, its regular files
/// each as read (`None` for the run lock, which is not read), its other
/// entries, and the listing error that cut it short.
#[derive(Default)]
struct PieceFound {
    dirs: Vec<String>,
    files: Vec<(String, Option<FileRead>)>,
    others: Vec<String>,
    error: Option<AuditError>,
}

/// One file as a scanning thread read it: its scan, and its bytes where the
/// record is kept.
struct FileRead {
    scan: std::io::Result<FileScan>,
    head: Option<Vec<u8>>,
}

/// A thread's buffers, kept from one file to the next.
struct Buffers {
    scanner: Scanner,
    chunk: Vec<u8>,
}

impl Shared<'_> {
    /// Takes pieces until none is left, with buffers of its own.
    fn take(&self) -> Vec<(usize, PieceFound)> {
        let mut buffers = Buffers {
            scanner: Scanner::default(),
            chunk: vec![0u8; 64 * 1024],
        };
        let mut taken = Vec::new();
        loop {
            let index = self.next.fetch_add(1, Ordering::Relaxed);
            let Some(piece) = self.pieces.get(index) else {
                return taken;
            };
            let mut found = PieceFound::default();
            match piece {
                Piece::File(rel) => {
                    let read = self.read(rel, &mut buffers);
                    found.files.push((rel.clone(), read));
                }
                Piece::Tree(rel) => {
                    found.dirs.push(rel.clone());
                    if let Err(e) = self.walk(rel, &mut found, &mut buffers) {
                        found.error = Some(e);
                    }
                }
            }
            taken.push((index, found));
        }
    }

    /// Everything under folder `rel`, each file read as it is listed.
    /// Symlinks are not followed: nothing in a run is one, and following could
    /// leave the run.
    fn walk(
        &self,
        rel: &str,
        found: &mut PieceFound,
        buffers: &mut Buffers,
    ) -> Result<(), AuditError> {
        for (child, kind) in list(self.run_dir, rel)? {
            match kind {
                Kind::Dir => {
                    found.dirs.push(child.clone());
                    self.walk(&child, found, buffers)?;
                }
                Kind::File => {
                    let read = self.read(&child, buffers);
                    found.files.push((child, read));
                }
                Kind::Other => found.others.push(child),
            }
        }
        Ok(())
    }

    /// Hashes and scans one file, keeping its bytes if it is a record small
    /// enough; the run lock is not read.
    fn read(&self, rel: &str, buffers: &mut Buffers) -> Option<FileRead> {
        if rel == LOCK_FILE {
            return None;
        }
        let keep = rel.ends_with(".json") && self.kept_total.load(Ordering::Relaxed) < KEEP_TOTAL;
        let mut head = None;
        let scanner = &mut buffers.scanner;
        let scan = std::fs::File::open(self.run_dir.join(rel)).and_then(|f| {
            if !keep {
                return scanner.scan(f);
            }
            let bytes = read_head(&f, &mut buffers.chunk, KEEP_RECORD)?;
            if bytes.len() as u64 > KEEP_RECORD {
                return scanner.scan(bytes.as_slice().chain(f));
            }
            let scan = scanner.scan(bytes.as_slice())?;
            self.kept_total.fetch_add(bytes.len(), Ordering::Relaxed);
            head = Some(bytes);
            Ok(scan)
        });
        Some(FileRead { scan, head })
    }
}

/// What a folder entry is, as its listing says (symlinks are not followed).
#[derive(Clone, Copy)]
enum Kind {
    Dir,
    File,
    Other,
}

/// The entries of folder `rel`, relative to `root` and `/`-separated, sorted by
/// name; names that are not UTF-8 are left out.
fn list(root: &Path, rel: &str) -> Result<Vec<(String, Kind)>, AuditError> {
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
    let mut listed = Vec::with_capacity(entries.len());
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
        let kind = if kind.is_dir() {
            Kind::Dir
        } else if kind.is_file() {
            Kind::File
        } else {
            Kind::Other
        };
        listed.push((child, kind));
    }
    Ok(listed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::files::tests::ANT;

    /// Past [`SHARED_FROM`] pieces two threads list and read them; what they
    /// find comes out as from a one-thread walk that lists each folder by name:
    /// the same folders, files and other entries, the findings in its order,
    /// every file but the lock hashed once, every record kept.
    #[test]
    fn a_run_read_by_two_threads_is_reported_in_the_walks_order() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("run.json"), "{}").unwrap();
        std::fs::write(root.join(LOCK_FILE), "").unwrap();
        std::os::unix::fs::symlink("/etc", root.join("elsewhere")).unwrap();
        let n = 3 * SHARED_FROM;
        let mut expected = Vec::new();
        for i in 0..n {
            let stage = format!("stages/s{i:03}");
            std::fs::create_dir_all(root.join(&stage).join("attempt-001/deeper")).unwrap();
            let process = format!("{stage}/attempt-001/process.json");
            let body = if i % 7 == 3 {
                expected.push(process.clone());
                format!("{{\"key\": \"{ANT}\"}}")
            } else {
                format!("{{\"i\": {i}}}")
            };
            std::fs::write(root.join(&process), body).unwrap();
            std::fs::write(root.join(&stage).join("attempt-001/raw.log"), "").unwrap();
            std::fs::write(root.join(&stage).join("attempt-001/deeper/x.json"), "[]").unwrap();
            std::fs::write(root.join(&stage).join("stage.json"), "{}").unwrap();
        }
        std::os::unix::fs::symlink("../s000", root.join("stages/s005/link")).unwrap();

        let scanned = scan_files(root).unwrap();

        let mut walked = RunFiles::default();
        walked.dirs.insert(String::new());
        one_thread_walk(root, "", &mut walked);
        assert_eq!(scanned.run.dirs, walked.dirs);
        assert_eq!(scanned.run.files, walked.files);
        assert_eq!(scanned.run.others, walked.others);
        assert_eq!(walked.others.len(), 2);
        let secrets: Vec<_> = scanned
            .findings
            .iter()
            .filter(|f| f.code == FindingCode::SecretInFile)
            .filter_map(|f| f.file.clone())
            .collect();
        assert_eq!(secrets, expected);
        assert_eq!(scanned.scans.len(), walked.files.len() - 1);
        assert_eq!(scanned.run.kept.len(), 3 * n + 1);
        assert_eq!(
            scanned.run.kept("stages/s011/attempt-001/process.json"),
            Some(&b"{\"i\": 11}"[..])
        );
    }

    /// The model: one thread, each folder listed by name, symlinks not followed.
    fn one_thread_walk(root: &Path, rel: &str, run: &mut RunFiles) {
        let mut names: Vec<String> = std::fs::read_dir(root.join(rel))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        for name in names {
            let child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let meta = std::fs::symlink_metadata(root.join(&child)).unwrap();
            if meta.is_dir() {
                run.dirs.insert(child.clone());
                one_thread_walk(root, &child, run);
            } else if meta.is_file() {
                run.files.insert(child);
            } else {
                run.others.insert(child);
            }
        }
    }
}
