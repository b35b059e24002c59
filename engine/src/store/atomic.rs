//! Atomic file writes: a temporary file in the same folder, fsync, rename, then an
//! fsync of the folder so the rename itself survives a crash.
//!
//! The raw writer is private to the store: run records are written only through
//! [`crate::store::RunHandle`], which redacts them first. A report derived from
//! the records goes through [`write_report`], which redacts too and refuses a run
//! folder. Documents are written by `store::confined` (no symlink followed).

use std::io::Write;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::private::create_private_dir;

/// Why a record could not be written.
#[derive(Debug, thiserror::Error)]
#[error("failed to write {path}")]
pub struct WriteError {
    pub path: String,
    #[source]
    pub source: std::io::Error,
}

/// Write `bytes` to `path` so that readers see either the old file or the new one,
/// never a torn one. The file is private to the user (0600), and so are the folders
/// created for it (0700). Returns the sha256 (hex) of what was written.
pub(super) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<String, WriteError> {
    let staged = stage_atomic(path, bytes)?;
    staged.sync()?;
    staged.commit()
}

/// The first half of [`write_atomic`]: the bytes in a temporary file beside
/// `path`, not yet visible nor synced. A batch makes and syncs each on a kept
/// sync thread ([`Staged::sync`]) while it makes the records' `record-intent`s
/// durable: the syncs do not depend on each other, and flushes in flight at
/// once cost the disk about one.
pub(super) fn stage_atomic(path: &Path, bytes: &[u8]) -> Result<Staged, WriteError> {
    let err = |source| WriteError {
        path: path.display().to_string(),
        source,
    };
    let dir = path
        .parent()
        .ok_or_else(|| err(std::io::Error::other("no parent folder")))?;
    create_private_dir(dir).map_err(err)?;
    let tmp = stage_in(dir, bytes).map_err(err)?;
    Ok(Staged {
        tmp,
        path: path.to_path_buf(),
        sha256: sha256_hex(bytes),
    })
}

/// Bytes in a temporary file, waiting to be synced and renamed into place.
pub(super) struct Staged {
    tmp: tempfile::NamedTempFile,
    path: std::path::PathBuf,
    sha256: String,
}

impl Staged {
    /// Makes the bytes durable; must return before [`Staged::commit`].
    pub(super) fn sync(&self) -> Result<(), WriteError> {
        super::fault::slow_disk();
        self.tmp.as_file().sync_all().map_err(|source| WriteError {
            path: self.path.display().to_string(),
            source,
        })
    }

    /// Rename into place, then sync the folder so the rename itself survives a
    /// crash (what is announced after this is on disk before its announcement).
    fn commit(self) -> Result<String, WriteError> {
        let dir = self.path.parent().map(Path::to_path_buf);
        let sha = self.rename()?;
        if let Some(dir) = dir {
            if let Ok(d) = std::fs::File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(sha)
    }

    /// Rename into place; the folder is the caller's to sync (a batch syncs
    /// each of its folders once).
    pub(super) fn rename(self) -> Result<String, WriteError> {
        self.tmp.persist(&self.path).map_err(|e| WriteError {
            path: self.path.display().to_string(),
            source: e.error,
        })?;
        Ok(self.sha256)
    }
}

/// Temporary files are created 0600 by `tempfile`. Not synced yet.
fn stage_in(dir: &Path, bytes: &[u8]) -> std::io::Result<tempfile::NamedTempFile> {
    let mut tmp = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    Ok(tmp)
}

fn persist(path: &Path, dir: &Path, bytes: &[u8]) -> std::io::Result<String> {
    let tmp = stage_in(dir, bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(sha256_hex(bytes))
}

/// Write a file derived from run records (an HTML report), redacted like every
/// record and private to the user (0600, from the temporary file). Run folders
/// themselves are written only by `RunHandle`, so a path inside one is refused.
pub fn write_report(
    path: &Path,
    bytes: &[u8],
    redactor: &crate::redact::Redactor,
) -> Result<String, WriteError> {
    let err = |source| WriteError {
        path: path.display().to_string(),
        source,
    };
    if crate::store::layout::may_be_in_run_store(path) {
        return Err(err(std::io::Error::other(
            "run folders are written only through the run's redacting writer",
        )));
    }
    let dir = path
        .parent()
        .ok_or_else(|| err(std::io::Error::other("no parent folder")))?;
    fs_err::create_dir_all(dir).map_err(err)?;
    persist(path, dir, &redactor.redact_bytes(bytes)).map_err(err)
}

/// Pretty JSON with a trailing newline.
pub(super) fn json_bytes<T: serde::Serialize>(
    path: &Path,
    value: &T,
) -> Result<Vec<u8>, WriteError> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|e| WriteError {
        path: path.display().to_string(),
        source: std::io::Error::other(e),
    })?;
    bytes.push(b'\n');
    Ok(bytes)
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// sha256 of a file, read in chunks so large logs never sit in memory whole.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let f = fs_err::File::open(path)?;
    let (h, _) = hash_reader(f, &mut vec![0u8; 64 * 1024])?;
    Ok(hex::encode(h.finalize()))
}

/// The sha256 state of everything `from` yields and its length, read in
/// chunks of `buf` (reused by callers that hash many files).
pub(crate) fn hash_reader(
    mut from: impl std::io::Read,
    buf: &mut [u8],
) -> std::io::Result<(Sha256, u64)> {
    let mut h = Sha256::new();
    let mut len = 0u64;
    loop {
        let n = match from.read(buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok((h, len));
        }
        h.update(&buf[..n]);
        len += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn replaces_content_privately_and_leaves_no_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a/b/record.json");
        write_atomic(&p, b"one").unwrap();
        let sha = write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(sha, sha256_hex(b"two"));
        assert_eq!(sha256_file(&p).unwrap(), sha);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&p), 0o600);
        assert_eq!(mode(p.parent().unwrap()), 0o700);
        assert_eq!(mode(&dir.path().join("a")), 0o700);
        let names: Vec<_> = std::fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("record.json")]);
    }

    #[test]
    fn reports_are_redacted_private_and_never_land_in_a_run_folder() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let redactor = crate::redact::Redactor::from_pairs([("MY_TOKEN", "canary-report-0a1b")]);
        let report = dir.path().join(".specbridge/reports/r.html");
        write_report(&report, b"<p>canary-report-0a1b</p>", &redactor).unwrap();
        assert_eq!(std::fs::read(&report).unwrap(), b"<p><redacted></p>");
        let mode = std::fs::metadata(&report).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let record = dir.path().join(".specbridge/runs/x/raw-stdout.log");
        assert!(write_report(&record, b"secret", &redactor).is_err());
        assert!(!record.exists());
    }
}
