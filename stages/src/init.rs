//! `specbridge init`: starter files for a new pipeline. Never overwrites: if any
//! file it would write exists, it writes nothing.

use std::path::{Path, PathBuf};

/// A starter template: relative path and content of each file.
pub struct Template {
    pub name: &'static str,
    pub files: &'static [(&'static str, &'static str)],
}

pub const TEMPLATES: &[Template] = &[Template {
    name: "spec-to-task",
    files: &[
        (
            "specbridge.yaml",
            include_str!("../templates/spec-to-task/specbridge.yaml"),
        ),
        (
            "prompts/requirements.md",
            include_str!("../templates/spec-to-task/prompts/requirements.md"),
        ),
        (
            "prompts/design.md",
            include_str!("../templates/spec-to-task/prompts/design.md"),
        ),
        (
            "prompts/tasks.md",
            include_str!("../templates/spec-to-task/prompts/tasks.md"),
        ),
        (
            "prompts/implement.md",
            include_str!("../templates/spec-to-task/prompts/implement.md"),
        ),
    ],
}];

#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error("unknown template `{name}`; available: {available}")]
    UnknownTemplate { name: String, available: String },
    #[error("refusing to overwrite existing files: {}", .0.join(", "))]
    WouldOverwrite(Vec<String>),
    #[error("failed to write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Write a template's files under `root`; returns the paths written.
pub fn init(root: &Path, template: &str) -> Result<Vec<String>, InitError> {
    let t = TEMPLATES
        .iter()
        .find(|t| t.name == template)
        .ok_or_else(|| InitError::UnknownTemplate {
            name: template.to_string(),
            available: TEMPLATES
                .iter()
                .map(|t| t.name)
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    let existing: Vec<String> = t
        .files
        .iter()
        .filter(|(rel, _)| root.join(rel).symlink_metadata().is_ok())
        .map(|(rel, _)| rel.to_string())
        .collect();
    if !existing.is_empty() {
        return Err(InitError::WouldOverwrite(existing));
    }
    let mut written = Vec::new();
    for (rel, content) in t.files {
        let path = root.join(rel);
        let write = || -> std::io::Result<()> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            // create_new: a file appearing between the check and now is not
            // overwritten either.
            use std::io::Write;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)?
                .write_all(content.as_bytes())
        };
        write().map_err(|source| InitError::Write {
            path: path.clone(),
            source,
        })?;
        written.push(rel.to_string());
    }
    // Run records hold logs of the user's tools: never committed by `git add -A`.
    let ignore = root.join(".gitignore");
    let added =
        specbridge_engine::store::add_exclude_line(&ignore).map_err(|source| InitError::Write {
            path: ignore.clone(),
            source,
        })?;
    if added {
        written.push(".gitignore".to_string());
    }
    Ok(written)
}
