//! Every file of the run read once: hashed against its last announcement and
//! scanned for secrets, in bounded chunks. The walk and the small records read
//! there are kept ([`RunFiles`]) for the checks that look into records, so that a
//! run's folders are listed once and its records read once.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use crate::audit::events::EventFacts;
use crate::audit::report::{Finding, FindingCode};
use crate::audit::secrets::FileScan;
use crate::store::{is_safe_component, layout};

mod scan;

pub(crate) use scan::scan_files;

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

    /// The numbers of `stage`'s attempt folders, in order, as the walk found
    /// them (none when it found no stage folder); `None` when something other
    /// than a folder stands there, or outside the folders walked, which only
    /// the disk can answer.
    pub(crate) fn attempt_numbers(&self, stage: &str) -> Option<Vec<u32>> {
        let rel = layout::stage_rel(stage);
        let walked =
            self.dirs.contains(&rel) || self.dirs.contains(parent(&rel)) && !self.exists(&rel);
        if !walked {
            return None;
        }
        let mut numbers: Vec<u32> = self
            .subdirs(&rel)
            .iter()
            .filter_map(|name| layout::attempt_number(name))
            .collect();
        numbers.sort_unstable();
        Some(numbers)
    }

    /// The walk alone: the records' bytes, kept for the checks, go.
    pub(crate) fn forget_bytes(&mut self) {
        self.kept = HashMap::new();
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

#[cfg(test)]
mod tests {
    use super::scan::KEEP_RECORD;
    use super::*;
    use crate::audit::report::FindingCode;

    pub(super) const ANT: &str = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";

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

    /// The walk answers for attempt folders as the disk does (the store's
    /// reader), and leaves to the disk what it did not list as a folder.
    #[test]
    fn attempt_numbers_from_the_walk_are_the_readers() {
        use crate::store::RunReader;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for folder in [
            "stages/many/attempt-001",
            "stages/many/attempt-010",
            "stages/many/attempt-002",
            "stages/many/logs",
            "stages/none",
            "elsewhere/attempt-001",
        ] {
            std::fs::create_dir_all(root.join(folder)).unwrap();
        }
        std::fs::write(root.join("stages/many/attempt-003"), "a file").unwrap();
        std::fs::write(root.join("stages/file"), "not a folder").unwrap();
        std::os::unix::fs::symlink(root.join("elsewhere"), root.join("stages/linked")).unwrap();
        let scanned = scan_files(root).unwrap();
        let (_, run) = compare(scanned, root, &EventFacts::default(), &mut Vec::new());
        let reader = RunReader::at(root);
        for stage in ["many", "none", "absent"] {
            assert_eq!(
                run.attempt_numbers(stage),
                Some(reader.attempt_numbers(stage).unwrap()),
                "{stage}"
            );
        }
        assert_eq!(run.attempt_numbers("many"), Some(vec![1, 2, 10]));
        // Not a folder the walk went into: the disk answers (the reader follows
        // the link, and cannot list a file).
        assert_eq!(run.attempt_numbers("linked"), None);
        assert_eq!(reader.attempt_numbers("linked").unwrap(), [1]);
        assert_eq!(run.attempt_numbers("file"), None);
        assert!(reader.attempt_numbers("file").is_err());
    }
}
