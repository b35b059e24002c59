//! Pipelines whose structure was checked before (docs/pipeline-format.md, "Validation";
//! docs/performance.md). The structural check compiles the pipeline's JSON
//! Schema and its meta-schema and validates the document against it: about
//! 3 ms of CPU, more than the rest of loading a small pipeline, paid again by
//! every `validate`, `run` and `graph` of a file that has not changed.
//!
//! The check depends only on the file's bytes and the schema, so its verdict
//! on bytes it passed once holds for as long as the schema is the same. One
//! file, `<cache>/specbridge/checked-pipelines`, lists the sha256 of the last
//! [`KEEP`] pipeline files that passed it, under a first line that names the
//! specbridge version and the schema's digest: a list written under any other
//! schema is ignored. Only a pass is remembered, so every problem is always
//! reported afresh, and everything else about a pipeline (its semantic checks,
//! the safety scan, the typed reading) is checked on every load whatever the
//! list says. Like the detection cache, the file is an optimisation: missing,
//! unreadable, corrupt or unwritable, it is ignored.

use std::path::Path;
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use crate::pipeline::schema::COMMITTED;
use crate::user_cache;

/// The file's name inside `<cache>/specbridge/`.
pub const CACHE_FILE: &str = "checked-pipelines";

/// How many pipeline files are remembered (the most recently checked).
pub(crate) const KEEP: usize = 64;

/// The first line: the format, the specbridge version and the schema's digest.
fn header() -> &'static str {
    static HEADER: OnceLock<String> = OnceLock::new();
    HEADER.get_or_init(|| {
        format!(
            "specbridge-checked-pipelines 1 {} {}",
            env!("CARGO_PKG_VERSION"),
            hex::encode(Sha256::digest(COMMITTED.as_bytes()))
        )
    })
}

/// Whether the structural check passed before for a file with this sha256.
pub(crate) fn vouches_for(sha256: &str) -> bool {
    user_cache::cache_dir()
        .is_some_and(|dir| listed(&dir.join(CACHE_FILE)).iter().any(|s| s == sha256))
}

/// Remember that the structural check passed for a file with this sha256.
pub(crate) fn remember(sha256: &str) {
    if let Some(dir) = user_cache::cache_dir() {
        remember_in(&dir, sha256);
    }
}

/// The digests the file at `path` lists under this build's header.
fn listed(path: &Path) -> Vec<String> {
    let mut digests = user_cache::lines_under(path, header());
    digests.retain(|l| user_cache::is_digest(l));
    digests
}

fn remember_in(dir: &Path, sha256: &str) {
    let path = dir.join(CACHE_FILE);
    let mut digests = listed(&path);
    digests.retain(|d| d != sha256);
    digests.push(sha256.to_string());
    // Not synced: a list lost in a crash costs one check.
    user_cache::replace_lines(&path, header(), &digests, KEEP);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(i: usize) -> String {
        hex::encode(Sha256::digest(i.to_string().as_bytes()))
    }

    #[test]
    fn a_remembered_pass_is_listed_and_the_oldest_leave_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("specbridge").join(CACHE_FILE);
        assert!(listed(&path).is_empty(), "no file: nothing vouched for");
        for i in 0..KEEP + 2 {
            remember_in(&dir.path().join("specbridge"), &digest(i));
        }
        let now = listed(&path);
        assert_eq!(now.len(), KEEP);
        assert!(!now.contains(&digest(0)) && !now.contains(&digest(1)));
        assert_eq!(now.last(), Some(&digest(KEEP + 1)));
        // Remembered again: moved to the end, not listed twice.
        remember_in(&dir.path().join("specbridge"), &digest(5));
        let again = listed(&path);
        assert_eq!(again.len(), KEEP);
        assert_eq!(again.last(), Some(&digest(5)));
        assert_eq!(again.iter().filter(|d| **d == digest(5)).count(), 1);
    }

    #[test]
    fn a_list_written_under_another_schema_or_garbled_vouches_for_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(CACHE_FILE);
        let sha = digest(1);
        std::fs::write(&path, format!("{}\n{sha}\n", header())).unwrap();
        assert_eq!(listed(&path), vec![sha.clone()]);
        let other = header().rsplit_once(' ').unwrap().0.to_string() + " 00";
        std::fs::write(&path, format!("{other}\n{sha}\n")).unwrap();
        assert!(
            listed(&path).is_empty(),
            "another schema's passes are not ours"
        );
        std::fs::write(&path, format!("{}\nnot-a-digest\n{sha}x\n", header())).unwrap();
        assert!(listed(&path).is_empty());
        std::fs::write(&path, [0xff, 0xfe]).unwrap();
        assert!(listed(&path).is_empty(), "unreadable as text: ignored");
    }

    /// Writers racing each other may lose an entry (the last rename wins), never
    /// list a digest nobody remembered or leave a file that is not a list.
    #[test]
    fn racing_writers_leave_a_whole_list() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("specbridge");
        std::thread::scope(|scope| {
            for t in 0..8 {
                let folder = &folder;
                scope.spawn(move || {
                    for i in 0..20 {
                        remember_in(folder, &digest(t * 100 + i));
                    }
                });
            }
        });
        let text = std::fs::read_to_string(folder.join(CACHE_FILE)).unwrap();
        assert_eq!(text.lines().next(), Some(header()));
        let listed = listed(&folder.join(CACHE_FILE));
        assert!(!listed.is_empty());
        assert_eq!(listed.len(), text.lines().count() - 1, "{text}");
        let remembered: Vec<String> = (0..8)
            .flat_map(|t| (0..20).map(move |i| digest(t * 100 + i)))
            .collect();
        assert!(listed.iter().all(|d| remembered.contains(d)));
        let left: Vec<_> = std::fs::read_dir(&folder).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file is left behind");
    }

    #[test]
    fn the_committed_schema_is_the_generated_one() {
        // The check compiles the committed file, and the header names it by its
        // digest: it must be the schema generated from the model.
        let committed: serde_json::Value = serde_json::from_str(COMMITTED).unwrap();
        assert_eq!(committed, super::super::schema::pipeline_schema());
        assert_eq!(&committed, super::super::schema::cached());
    }
}
