//! Atomic file writes: a temporary file in the same folder, fsync, rename, then an
//! fsync of the folder so the rename itself survives a crash.

use std::io::Write;
use std::path::Path;

use sha2::{Digest, Sha256};

/// Why a record could not be written.
#[derive(Debug, thiserror::Error)]
#[error("failed to write {path}: {source}")]
pub struct WriteError {
    pub path: String,
    #[source]
    pub source: std::io::Error,
}

/// Write `bytes` to `path` so that readers see either the old file or the new one,
/// never a torn one. Returns the sha256 (hex) of what was written.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<String, WriteError> {
    let err = |source| WriteError {
        path: path.display().to_string(),
        source,
    };
    let dir = path
        .parent()
        .ok_or_else(|| err(std::io::Error::other("no parent folder")))?;
    fs_err::create_dir_all(dir).map_err(err)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(dir)
        .map_err(err)?;
    tmp.write_all(bytes).map_err(err)?;
    tmp.as_file().sync_all().map_err(err)?;
    tmp.persist(path).map_err(|e| err(e.error))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(sha256_hex(bytes))
}

/// Pretty JSON with a trailing newline, written atomically.
pub fn write_json_atomic<T: serde::Serialize>(
    path: &Path,
    value: &T,
) -> Result<String, WriteError> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|e| WriteError {
        path: path.display().to_string(),
        source: std::io::Error::other(e),
    })?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// sha256 of a file, read in chunks so large logs never sit in memory whole.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut f = fs_err::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_content_and_leaves_no_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a/b/record.json");
        write_atomic(&p, b"one").unwrap();
        let sha = write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(sha, sha256_hex(b"two"));
        assert_eq!(sha256_file(&p).unwrap(), sha);
        let names: Vec<_> = std::fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("record.json")]);
    }
}
