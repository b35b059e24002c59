//! The user's cache folder, where specbridge remembers what it learnt in one
//! process to spare the next: runner detection
//! (`runner/claude_code/detection_cache.rs`), whether bubblewrap confines a
//! command here (`sandbox/probe_cache.rs`) and pipelines whose structure was
//! checked (`pipeline/checked_cache.rs`). Everything in it is an optimisation:
//! a missing, unreadable or corrupt file, or one that cannot be written, is
//! ignored.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long what a probe of an executable found is trusted: long enough to
/// spare a burst of runs, short enough to bound what its key cannot see (a
/// wrapper script that starts another program, a security policy reloaded).
pub(crate) const PROBE_LIFETIME: Duration = Duration::from_secs(15 * 60);

/// Whether a run may answer from what an earlier probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheUse {
    /// Use a valid entry; probe and remember otherwise.
    Use,
    /// `--refresh-runner`: probe, and remember the new result.
    Refresh,
    /// Probe, and leave the cache as it is (`runner doctor`, tests).
    Never,
}

/// The cache folder: `$XDG_CACHE_HOME/specbridge` or `~/.cache/specbridge`.
pub(crate) fn cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| Path::new(v).is_absolute())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(base.join("specbridge"))
}

/// Replaces the cache file at `path` with `bytes`, whole or not at all: written
/// to a temporary file beside it, under a name no other writer shares (the
/// process and the call), then renamed over it, so that a concurrent reader
/// sees the old file or the new one. Not synced: a file lost in a crash costs
/// one probe or one check, never a wrong answer. Writers racing each other
/// may lose an entry (the last rename wins), never corrupt the file.
pub(crate) fn replace_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::sync::atomic::{AtomicU64, Ordering};
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let n = WRITES.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
    let written = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::File::create(&tmp))
        .and_then(|mut f| f.write_all(bytes))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}
