//! Every file of the run read once: hashed against its last announcement and
//! scanned for secrets, in bounded chunks.

use std::collections::BTreeMap;
use std::path::Path;

use crate::audit::events::EventFacts;
use crate::audit::report::{Finding, FindingCode};
use crate::audit::secrets::{scan_reader, FileScan};
use crate::audit::AuditError;
use crate::store::is_safe_component;

/// The run lock: empty, and rewritten by whoever opens the run.
const LOCK_FILE: &str = crate::store::layout::LOCK;

/// Hash and scan every regular file; compare with the announcements.
/// Returns how many files were read.
pub(crate) fn check_files(
    run_dir: &Path,
    facts: &EventFacts,
    findings: &mut Vec<Finding>,
) -> Result<u64, AuditError> {
    let mut files = Vec::new();
    walk(run_dir, "", &mut files)?;
    let mut scans: BTreeMap<String, FileScan> = BTreeMap::new();
    for rel in files {
        if rel == LOCK_FILE {
            continue;
        }
        let scanned = std::fs::File::open(run_dir.join(&rel)).and_then(scan_reader);
        match scanned {
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
                scans.insert(rel, scan);
            }
            Err(e) => findings.push(
                Finding::new(FindingCode::FileUnreadable, format!("cannot be read: {e}"))
                    .file(&rel),
            ),
        }
    }

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
    Ok(scans.len() as u64)
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

/// Regular files under `dir`, relative and `/`-separated, sorted. Symlinks are not
/// followed: nothing in a run is one, and following could leave the run.
fn walk(root: &Path, rel: &str, out: &mut Vec<String>) -> Result<(), AuditError> {
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
            walk(root, &child, out)?;
        } else if kind.is_file() {
            out.push(child);
        }
    }
    Ok(())
}
