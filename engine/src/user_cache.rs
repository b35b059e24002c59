//! The user's cache folder, where specbridge remembers what it learnt in one
//! process to spare the next: runner detection
//! (`runner/claude_code/detection_cache.rs`) and pipelines whose structure was
//! checked (`pipeline/checked_cache.rs`). Everything in it is an optimisation:
//! a missing, unreadable or corrupt file, or one that cannot be written, is
//! ignored.

use std::path::{Path, PathBuf};

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
