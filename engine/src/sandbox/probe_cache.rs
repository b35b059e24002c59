//! Remembering that bubblewrap confined a command here, so that a run does not
//! wait for the probe (`true` in a sandbox: about 6 ms here, most of it spent
//! making and tearing down the namespaces) before its first confined command
//! (docs/claude-code-runner.md, "Shell inside the sandbox").
//!
//! What the probe finds depends on the executable and on what this process may
//! do: the kernel and its boot, its settings for user namespaces, the
//! namespaces, credentials, capabilities, seccomp filters and security label the
//! process runs with. A pass is remembered under a digest of all of them
//! ([`environment_digest`]), in `<cache>/specbridge/bubblewrap-probes`, for
//! [`PROBE_LIFETIME`] (what the key cannot see, such as a security profile
//! loaded for `bwrap` meanwhile). Only a pass: a failure is probed afresh every
//! time, so its message is never stale. A pass that has gone stale costs no
//! safety: a command is still wrapped in bubblewrap, which fails closed, and
//! the CLI's sandbox is asked with `failIfUnavailable`; the failure is then
//! reported by the stage that ran into it instead of before the run.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use crate::user_cache::{self, cache_dir, CacheUse, PROBE_LIFETIME};

/// The file's name inside `<cache>/specbridge/`.
pub const CACHE_FILE: &str = "bubblewrap-probes";

/// How many passes are kept (the most recent): one per executable and
/// environment a user runs specbridge in.
const KEEP: usize = 16;

/// The first line: the format and the specbridge version (whose probe argv the
/// passes answered).
fn header() -> String {
    format!(
        "specbridge-bubblewrap-probes 1 {}",
        env!("CARGO_PKG_VERSION")
    )
}

/// The namespaces a probe's answer depends on (`/proc/self/ns/<name>`).
const NAMESPACES: [&str; 7] = ["user", "mnt", "pid", "net", "ipc", "uts", "cgroup"];

/// The lines of `/proc/self/status` that say what the process may do: its
/// credentials, capabilities and seccomp filters. Never a line that changes
/// from one process to the next (its pid, its memory).
const STATUS_LINES: [&str; 7] = [
    "Uid:",
    "Gid:",
    "CapEff:",
    "CapBnd:",
    "NoNewPrivs:",
    "Seccomp:",
    "Seccomp_filters:",
];

/// The kernel's settings that allow or refuse unprivileged namespaces, under
/// `/proc/sys/`. A distribution has some of them; a missing one counts as
/// missing, which is part of the key too.
const SETTINGS: [&str; 7] = [
    "kernel/unprivileged_userns_clone",
    "kernel/apparmor_restrict_unprivileged_userns",
    "kernel/apparmor_restrict_unprivileged_unconfined",
    "user/max_user_namespaces",
    "user/max_mnt_namespaces",
    "user/max_pid_namespaces",
    "user/max_net_namespaces",
];

/// The probe's answer for `bwrap`: a pass remembered for this environment, else
/// `probe`'s, remembered when it passes. `Refresh` always probes; `Never`
/// always probes and remembers nothing.
pub(crate) fn probe_remembered(
    bwrap: &Path,
    cache: CacheUse,
    probe: impl FnOnce() -> Result<(), String>,
) -> Result<(), String> {
    // Read before the probe: what it then finds is what this environment gave.
    let key = environment_digest(Path::new("/proc"), bwrap);
    let file = cache_dir().map(|d| d.join(CACHE_FILE));
    answer(
        file.as_deref(),
        key.as_deref(),
        cache,
        SystemTime::now(),
        probe,
    )
}

/// [`probe_remembered`] with the cache file, the key and the clock given.
fn answer(
    file: Option<&Path>,
    key: Option<&str>,
    cache: CacheUse,
    now: SystemTime,
    probe: impl FnOnce() -> Result<(), String>,
) -> Result<(), String> {
    let (Some(file), Some(key), false) = (file, key, cache == CacheUse::Never) else {
        return probe();
    };
    if cache == CacheUse::Use && passed(file, key, now) {
        return Ok(());
    }
    let answer = probe();
    if answer.is_ok() {
        remember(file, key, now);
    }
    answer
}

/// A digest of everything the probe's answer depends on, read under `proc` (a
/// parameter for the tests), or `None` when any of it cannot be read: then
/// nothing is remembered and the probe always runs.
pub(crate) fn environment_digest(proc: &Path, bwrap: &Path) -> Option<String> {
    let mut hash = Sha256::new();
    let mut put = |label: &str, value: &[u8]| {
        hash.update(label.as_bytes());
        hash.update((value.len() as u64).to_le_bytes());
        hash.update(value);
    };
    // The executable itself, links followed: an upgrade or a setuid bit changed
    // is another bubblewrap, and so is one rewritten in place with its size and
    // modification time put back (its change time cannot be).
    let exe = std::fs::canonicalize(bwrap).ok()?;
    let meta = std::fs::metadata(&exe).ok()?;
    put("exe", exe.as_os_str().as_bytes());
    let identity = format!(
        "{} {} {} {} {} {:o} {}",
        meta.dev(),
        meta.ino(),
        meta.size(),
        crate::time::mtime_ns(&meta),
        crate::time::ctime_ns(&meta),
        meta.mode(),
        meta.uid()
    );
    put("file", identity.as_bytes());
    // A reboot (another kernel, settings back to their defaults) is another machine.
    put(
        "boot",
        &std::fs::read(proc.join("sys/kernel/random/boot_id")).ok()?,
    );
    for ns in NAMESPACES {
        let link = std::fs::read_link(proc.join("self/ns").join(ns)).ok()?;
        put(ns, link.as_os_str().as_bytes());
    }
    let status = std::fs::read_to_string(proc.join("self/status")).ok()?;
    for prefix in STATUS_LINES {
        let line = status.lines().find(|l| l.starts_with(prefix)).unwrap_or("");
        put(prefix, line.as_bytes());
    }
    for setting in SETTINGS {
        match std::fs::read(proc.join("sys").join(setting)) {
            Ok(value) => put(setting, &value),
            Err(_) => put(setting, b"(missing)"),
        }
    }
    // The security label the process runs under (AppArmor, SELinux), if any.
    put(
        "label",
        &std::fs::read(proc.join("self/attr/current")).unwrap_or_default(),
    );
    Some(hex::encode(hash.finalize()))
}

/// The passes the file lists under this build's header, as (digest, seconds).
fn listed(path: &Path) -> Vec<(String, u64)> {
    user_cache::lines_under(path, &header())
        .iter()
        .filter_map(|l| {
            let (digest, at) = l.split_once(' ')?;
            user_cache::is_digest(digest).then_some(())?;
            Some((digest.to_string(), at.parse().ok()?))
        })
        .collect()
}

/// Whether the file holds a pass for `key` still fresh at `now`.
fn passed(path: &Path, key: &str, now: SystemTime) -> bool {
    listed(path)
        .iter()
        .any(|(digest, at)| digest == key && user_cache::still_fresh(*at, now))
}

fn remember(path: &Path, key: &str, now: SystemTime) {
    let now = user_cache::epoch_secs(now);
    let mut passes = listed(path);
    passes
        .retain(|(digest, at)| digest != key && now.saturating_sub(*at) < PROBE_LIFETIME.as_secs());
    passes.push((key.to_string(), now));
    let lines: Vec<String> = passes.iter().map(|(d, at)| format!("{d} {at}")).collect();
    // Not synced: a list lost in a crash costs one probe.
    user_cache::replace_lines(path, &header(), &lines, KEEP);
}

#[cfg(test)]
#[path = "probe_cache_tests.rs"]
mod tests;
