//! Whether a file the pipeline names (a prompt, a schema) lies inside the
//! repository once `..` and symlinks are resolved (docs/claude-code-runner.md "Paths"). Asked by
//! validation and again just before a stage reads the file, since an earlier stage
//! may have replaced it with a symlink.

use std::path::Path;

/// `Err` with a readable reason when `file` resolves outside `root`. A file that
/// does not exist is not judged here (validation reports it as missing).
pub fn check_inside(root: &Path, file: &Path) -> Result<(), String> {
    let Ok(resolved) = std::fs::canonicalize(file) else {
        return Ok(());
    };
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    if resolved.starts_with(&root) {
        Ok(())
    } else {
        Err(format!(
            "resolves to `{}`, outside the repository",
            resolved.display()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_through_dot_dot_or_symlinks_out_are_outside() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        std::fs::create_dir_all(root.join("prompts")).unwrap();
        std::fs::write(root.join("prompts/a.md"), "a").unwrap();
        std::fs::write(dir.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), root.join("prompts/b.md")).unwrap();
        assert!(check_inside(&root, &root.join("prompts/a.md")).is_ok());
        assert!(check_inside(&root, &root.join("prompts/../prompts/a.md")).is_ok());
        assert!(check_inside(&root, &root.join("../secret")).is_err());
        assert!(check_inside(&root, &root.join("prompts/b.md")).is_err());
        assert!(check_inside(&root, Path::new("/etc/passwd")).is_err());
        assert!(check_inside(&root, &root.join("missing.md")).is_ok());
    }
}
