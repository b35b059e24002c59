//! Finding the executable the way a shell would, without a shell.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::error::SupervisorError;

/// Resolves `program` to an executable file. A name with a `/` is a path (relative
/// to `cwd`); a bare name is looked up in `PATH` — the one in `env` if given, else
/// the inherited one — in order, relative entries taken against `cwd`.
pub fn resolve_program(
    program: &str,
    cwd: &Path,
    env: &[(String, String)],
) -> Result<PathBuf, SupervisorError> {
    let not_found = || SupervisorError::NotFound {
        program: program.to_owned(),
    };
    if program.is_empty() {
        return Err(not_found());
    }
    if program.contains('/') {
        let path = cwd.join(program);
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(not_found())
        };
    }
    let search: Option<OsString> = env
        .iter()
        .rev()
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| value.into())
        .or_else(|| std::env::var_os("PATH"));
    let search = search.ok_or_else(not_found)?;
    std::env::split_paths(&search)
        .map(|dir| cwd.join(dir).join(program))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(not_found)
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn script(dir: &Path, name: &str, mode: u32) -> PathBuf {
        let path = dir.join(name);
        fs::write(&path, "#!/bin/sh\n").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn finds_the_first_executable_in_the_given_path() {
        let root = tempfile::tempdir().unwrap();
        let (first, second) = (root.path().join("a"), root.path().join("b"));
        fs::create_dir_all(&first).unwrap();
        fs::create_dir_all(&second).unwrap();
        script(&first, "tool", 0o644);
        let wanted = script(&second, "tool", 0o755);
        let path = format!("{}:{}", first.display(), second.display());
        let found = resolve_program("tool", root.path(), &[("PATH".into(), path)]).unwrap();
        assert_eq!(found, wanted);
    }

    #[test]
    fn paths_are_taken_relative_to_cwd() {
        let root = tempfile::tempdir().unwrap();
        let wanted = script(root.path(), "run.sh", 0o755);
        assert_eq!(
            resolve_program("./run.sh", root.path(), &[]).unwrap(),
            root.path().join("./run.sh")
        );
        assert!(wanted.exists());
    }

    #[test]
    fn missing_directories_and_empty_names_are_not_found() {
        let root = tempfile::tempdir().unwrap();
        fs::create_dir(root.path().join("dir")).unwrap();
        let env = [("PATH".to_owned(), root.path().display().to_string())];
        for program in ["", "dir", "nope", "./nope"] {
            let error = resolve_program(program, root.path(), &env).unwrap_err();
            assert!(
                matches!(error, SupervisorError::NotFound { .. }),
                "{program}: {error}"
            );
        }
    }
}
