//! The user's cache folder, where specbridge remembers what it learnt in one
//! process to spare the next: runner detection
//! (`runner/claude_code/detection_cache.rs`), whether bubblewrap confines a
//! command here (`sandbox/probe_cache.rs`) and pipelines whose structure was
//! checked (`pipeline/checked_cache.rs`). Everything in it is an optimisation:
//! a missing, unreadable or corrupt file, or one that cannot be written, is
//! ignored.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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

/// Seconds since the epoch, as a cache entry dates itself.
pub(crate) fn epoch_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Whether what a probe found at `checked_at` (epoch seconds) is still trusted
/// at `now`: younger than [`PROBE_LIFETIME`]. An entry dated after `now` (a
/// clock set back) is not.
pub(crate) fn still_fresh(checked_at: u64, now: SystemTime) -> bool {
    epoch_secs(now)
        .checked_sub(checked_at)
        .is_some_and(|age| age < PROBE_LIFETIME.as_secs())
}

/// Whether `s` is a sha256 in hex, as the cache's lists name what they vouch for.
pub(crate) fn is_digest(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The lines of the cache file at `path` below its first line, when that line
/// is `header` (which names the format and the specbridge version that wrote
/// it); none when the file is missing, unreadable or another's.
pub(crate) fn lines_under(path: &Path, header: &str) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let mut lines = text.lines();
    if lines.next() != Some(header) {
        return Vec::new();
    }
    lines.map(str::to_string).collect()
}

/// Replaces the cache file at `path` with `header` and the last `keep` of
/// `lines` (the most recent last), through [`replace_file`].
pub(crate) fn replace_lines(path: &Path, header: &str, lines: &[String], keep: usize) {
    let kept = &lines[lines.len().saturating_sub(keep)..];
    let mut text =
        String::with_capacity(header.len() + 1 + kept.iter().map(|l| l.len() + 1).sum::<usize>());
    text.push_str(header);
    text.push('\n');
    for line in kept {
        text.push_str(line);
        text.push('\n');
    }
    let _ = replace_file(path, text.as_bytes());
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
