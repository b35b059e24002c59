//! Remembering a runner's detection between runs, so that `run` and `resume` do not
//! spawn `--version` and `--help` before every run (docs/claude-code-runner.md).
//!
//! One file, `<cache>/specbridge/runner-detection.json` (`$XDG_CACHE_HOME`, else
//! `~/.cache`), maps each executable's canonical path to the report detection made
//! for it. An entry is used only while the file at that path still has the recorded
//! size, modification and change times and inode (a file rewritten in place with
//! its size and modification time put back has a new change time), the same
//! specbridge version wrote it, and it
//! is younger than [`PROBE_LIFETIME`](crate::user_cache::PROBE_LIFETIME) (an npm install replaces the script a
//! `node_modules/.bin` link points at, which changes the key; a wrapper script
//! that starts another program does not, which the lifetime bounds). Only usable
//! runners are remembered: a refusal is always probed afresh, so its message is
//! never stale. The cache is an optimisation only: a missing, unreadable or
//! corrupt file, or one that cannot be written, is ignored.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::doctor::{
    diagnose_with, known_report, AuthCheck, DoctorOptions, DoctorReport, DoctorStatus,
};
use super::probe::resolve_executable;
use crate::user_cache::{cache_dir, epoch_secs, still_fresh, CacheUse};

/// The cache file's name inside `<cache>/specbridge/`.
pub const CACHE_FILE: &str = "runner-detection.json";

const FORMAT: u32 = 2;

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CacheFile {
    format: u32,
    #[serde(default)]
    entries: BTreeMap<String, Entry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Key {
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    inode: u64,
    specbridge_version: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    key: Key,
    /// Seconds since the epoch.
    checked_at: u64,
    report: DoctorReport,
}

/// How a detection was answered; recorded in `run.json` (`runner.detectedBy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// A remembered probe of the same executable.
    Cache,
    /// The capabilities of a known version, read from its package (nothing spawned).
    BuiltIn,
    /// `--version` and `--help` were asked.
    Probe,
}

/// Detection for a run: the built-in capabilities when the executable is a known
/// version's (see [`super::known`]), else a remembered probe when the cache still
/// describes the same executable, else `--version` and `--help` (no `auth status`).
/// `--refresh-runner` probes whatever the version; `CacheUse::Never` probes and
/// remembers nothing.
pub async fn detect_cached(
    command: &str,
    options: &DoctorOptions,
    cache: CacheUse,
) -> (DoctorReport, Source) {
    let path_var = std::env::var_os("PATH");
    let resolved = resolve_executable(command, path_var.as_deref());
    let located = resolved
        .as_ref()
        .and_then(|p| std::fs::canonicalize(p).ok())
        .and_then(|p| key_of(&p).map(|k| (p, k)));
    if let (Some(resolved), Some((path, _)), CacheUse::Use) = (&resolved, &located, cache) {
        if let Some(caps) = super::known::detect(path) {
            return (known_report(command, resolved, caps), Source::BuiltIn);
        }
    }
    let file = cache_dir().map(|d| d.join(CACHE_FILE));
    if let (Some((path, key)), Some(file), CacheUse::Use) = (&located, &file, cache) {
        if let Some(mut report) = lookup(file, path, key, SystemTime::now()) {
            report.command = command.to_string();
            return (report, Source::Cache);
        }
    }
    let report = diagnose_with(command, options, AuthCheck::Lazy).await;
    if let (Some((path, key)), Some(file)) = (located, file) {
        if report.status == DoctorStatus::Available && cache != CacheUse::Never {
            remember(&file, &path, key, &report, SystemTime::now());
        }
    }
    (report, Source::Probe)
}

fn key_of(path: &Path) -> Option<Key> {
    let meta = std::fs::metadata(path).ok()?;
    Some(Key {
        size: meta.size(),
        mtime_ns: crate::time::mtime_ns(&meta),
        ctime_ns: crate::time::ctime_ns(&meta),
        inode: meta.ino(),
        specbridge_version: env!("CARGO_PKG_VERSION").to_string(),
    })
}

fn read(file: &Path) -> Option<CacheFile> {
    let bytes = std::fs::read(file).ok()?;
    serde_json::from_slice::<CacheFile>(&bytes)
        .ok()
        .filter(|c| c.format == FORMAT)
}

fn lookup(file: &Path, path: &Path, key: &Key, now: SystemTime) -> Option<DoctorReport> {
    let entry = read(file)?.entries.remove(&path.display().to_string())?;
    (entry.key == *key
        && still_fresh(entry.checked_at, now)
        && entry.report.status == DoctorStatus::Available)
        .then_some(entry.report)
}

fn remember(file: &Path, path: &Path, key: Key, report: &DoctorReport, now: SystemTime) {
    let mut cache = read(file).unwrap_or(CacheFile {
        format: FORMAT,
        entries: BTreeMap::new(),
    });
    // Entries no lookup would trust (the same rule) would otherwise stay
    // forever: expired ones, of executables no longer used.
    cache.entries.retain(|_, e| still_fresh(e.checked_at, now));
    cache.entries.insert(
        path.display().to_string(),
        Entry {
            key,
            checked_at: epoch_secs(now),
            report: report.clone(),
        },
    );
    if let Ok(bytes) = serde_json::to_vec(&cache) {
        let _ = crate::user_cache::replace_file(file, &bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::claude_code::doctor::AuthStatus;
    use crate::user_cache::PROBE_LIFETIME;
    use std::time::{Duration, UNIX_EPOCH};

    fn report() -> DoctorReport {
        DoctorReport {
            schema_version: 1,
            runner: "claude-code".into(),
            status: DoctorStatus::Available,
            command: "claude".into(),
            resolved_path: Some("/x/claude".into()),
            version: Some("2.1.332".into()),
            capabilities: None,
            missing: Vec::new(),
            degraded: Vec::new(),
            auth: AuthStatus::NotChecked,
            warnings: Vec::new(),
            error: None,
            sandbox: None,
        }
    }

    fn key(size: u64) -> Key {
        Key {
            size,
            mtime_ns: 7,
            ctime_ns: 8,
            inode: 3,
            specbridge_version: "0.1.0".into(),
        }
    }

    #[test]
    fn an_entry_answers_only_for_the_same_file_within_its_lifetime() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sub").join(CACHE_FILE);
        let exe = Path::new("/x/claude");
        let t0 = UNIX_EPOCH + Duration::from_secs(1_000_000);
        remember(&file, exe, key(10), &report(), t0);
        let later = |s| t0 + Duration::from_secs(s);
        assert!(lookup(&file, exe, &key(10), later(60)).is_some());
        assert!(lookup(&file, exe, &key(11), later(60)).is_none(), "size");
        assert!(lookup(&file, Path::new("/y"), &key(10), later(1)).is_none());
        let expired = later(PROBE_LIFETIME.as_secs());
        assert!(lookup(&file, exe, &key(10), expired).is_none(), "expired");
        // A clock set back is not a fresh entry either.
        assert!(lookup(&file, exe, &key(10), t0 - Duration::from_secs(1)).is_none());
    }

    #[test]
    fn a_corrupt_file_is_ignored_and_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(CACHE_FILE);
        let exe = Path::new("/x/claude");
        std::fs::write(&file, b"{\"format\": 1, \"entries\": {\"/x/claude\": 5").unwrap();
        let now = SystemTime::now();
        assert!(lookup(&file, exe, &key(1), now).is_none());
        remember(&file, exe, key(1), &report(), now);
        assert!(lookup(&file, exe, &key(1), now).is_some());
    }
}
