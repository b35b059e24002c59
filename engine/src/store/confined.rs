//! Writing a file of the repository that specbridge itself produces (a generate
//! stage's document) so that it lands at that path inside the repository and
//! nowhere else (docs/stage-kinds.md, docs/claude-code-runner.md "Paths").
//!
//! An earlier stage can leave `notes -> .git` or `notes -> /tmp/x` in the tree, and
//! an agent still running (or a concurrent process) could swap a folder for a
//! symlink between a check and a write. So every component is opened relative to
//! the folder opened before it, with `O_NOFOLLOW`: a symlink anywhere fails the
//! open itself, with no window between checking and using a path. The file is
//! written under a temporary name in the final folder (through its descriptor),
//! synced, and renamed into place within that same folder.

use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Component, Path};

use nix::errno::Errno;
use nix::fcntl::{openat, renameat, AtFlags, OFlag};
use nix::sys::stat::{fstatat, mkdirat, Mode, SFlag};
use sha2::{Digest, Sha256};

/// Folders no document may be written into, whatever validation said: git's own
/// (a written `config` can run commands on the next `git status`), the run store,
/// and the CLI's project settings.
pub(crate) const FORBIDDEN_FOLDERS: &[&str] = &[".git", ".specbridge", ".claude"];

#[derive(Debug, thiserror::Error)]
pub enum ConfinedWriteError {
    #[error("refusing to write `{path}`: it is not a plain relative path inside the repository")]
    NotInside { path: String },
    #[error("refusing to write `{path}`: its component `{component}` is a symbolic link, which could lead outside the repository or into .git")]
    Symlink { path: String, component: String },
    #[error("refusing to write `{path}`: `{component}` is specbridge's or git's own folder")]
    Forbidden { path: String, component: String },
    #[error("refusing to write `{path}`: `{component}` exists and is not a regular file")]
    NotAFile { path: String, component: String },
    #[error("refusing to write `{path}`: `{component}` is not a folder")]
    NotAFolder { path: String, component: String },
    #[error("failed to write `{path}` at `{component}`")]
    Io {
        path: String,
        component: String,
        #[source]
        source: std::io::Error,
    },
}

/// Writes `bytes` to `root/rel` atomically, creating missing folders, refusing any
/// symlink on the way and the forbidden folders. Returns the sha256 of the bytes.
pub fn write_confined(root: &Path, rel: &str, bytes: &[u8]) -> Result<String, ConfinedWriteError> {
    let target = Target::open(root, rel)?;
    target.write(bytes)?;
    Ok(hex::encode(Sha256::digest(bytes)))
}

/// Where a document goes: its folder, opened component by component without
/// following a symlink (created where missing), and its name in that folder,
/// which is a regular file or nothing.
pub(crate) struct Target<'a> {
    pub(crate) dir: OwnedFd,
    pub(crate) file_name: &'a str,
    /// `rel` as walked, for messages.
    final_rel: String,
    rel: &'a str,
}

impl<'a> Target<'a> {
    pub(crate) fn open(root: &Path, rel: &'a str) -> Result<Target<'a>, ConfinedWriteError> {
        let names = plain_components(rel)?;
        let (file_name, folders) = names.split_last().expect("at least one component");
        crate::evidence::note_own_write();
        // The root is the user's choice (`-C`) and may itself be reached by a symlink.
        let mut dir = open_dir(None, root, OFlag::empty())
            .map_err(|e| io(rel, &root.display().to_string(), e.into()))?;
        let mut walked = String::new();
        for name in folders {
            if !walked.is_empty() {
                walked.push('/');
            }
            walked.push_str(name);
            dir = open_child_dir(&dir, name, rel, &walked)?;
        }
        let final_rel = if walked.is_empty() {
            file_name.to_string()
        } else {
            format!("{walked}/{file_name}")
        };
        match fstatat(
            Some(dir.as_raw_fd()),
            *file_name,
            AtFlags::AT_SYMLINK_NOFOLLOW,
        ) {
            Ok(stat) => match SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT {
                SFlag::S_IFLNK => {
                    return Err(ConfinedWriteError::Symlink {
                        path: rel.to_owned(),
                        component: final_rel,
                    })
                }
                SFlag::S_IFREG => {}
                _ => {
                    return Err(ConfinedWriteError::NotAFile {
                        path: rel.to_owned(),
                        component: final_rel,
                    })
                }
            },
            Err(Errno::ENOENT) => {}
            Err(e) => return Err(io(rel, &final_rel, e.into())),
        }
        Ok(Target {
            dir,
            file_name,
            final_rel,
            rel,
        })
    }

    /// An I/O failure at the file itself.
    pub(crate) fn failed(&self, e: std::io::Error) -> ConfinedWriteError {
        io(self.rel, &self.final_rel, e)
    }

    /// `bytes` under a temporary name in the target's folder, synced, renamed
    /// into place, and the folder synced.
    pub(crate) fn write(&self, bytes: &[u8]) -> Result<(), ConfinedWriteError> {
        let tmp_name = temporary_name(".sb-tmp-");
        let mut file = create_new(&self.dir, &tmp_name).map_err(|e| self.failed(e))?;
        let written = file
            .write_all(bytes)
            .and_then(|()| file.sync_all())
            .and_then(|()| {
                renameat(
                    Some(self.dir.as_raw_fd()),
                    tmp_name.as_str(),
                    Some(self.dir.as_raw_fd()),
                    self.file_name,
                )
                .map_err(std::io::Error::from)
            })
            .map_err(|e| self.failed(e));
        if written.is_err() {
            let _ = nix::unistd::unlinkat(
                Some(self.dir.as_raw_fd()),
                tmp_name.as_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            );
        }
        written?;
        self.sync_folder();
        Ok(())
    }

    /// Best effort, as for the run's records: the rename is done either way.
    fn sync_folder(&self) {
        let _ = nix::unistd::fsync(self.dir.as_raw_fd());
    }
}

/// A hidden name that no file of the folder has yet: `prefix` and 12 hex digits,
/// short so that a long document name never makes it too long.
pub(crate) fn temporary_name(prefix: &str) -> String {
    format!(
        "{prefix}{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

/// A new file `name` in `dir` (never an existing one, never through a symlink),
/// readable by all as a document in the repository is.
pub(crate) fn create_new(dir: &OwnedFd, name: &str) -> std::io::Result<std::fs::File> {
    let fd = openat(
        Some(dir.as_raw_fd()),
        name,
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o644),
    )?;
    // SAFETY: `fd` was just returned by openat and is owned by nothing else.
    Ok(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

fn io(rel: &str, component: &str, source: std::io::Error) -> ConfinedWriteError {
    ConfinedWriteError::Io {
        path: rel.to_owned(),
        component: component.to_owned(),
        source,
    }
}

/// The components of a relative path made only of plain names (`.` dropped), and
/// none of them a forbidden folder.
fn plain_components(rel: &str) -> Result<Vec<&str>, ConfinedWriteError> {
    let not_inside = || ConfinedWriteError::NotInside {
        path: rel.to_owned(),
    };
    let mut names = Vec::new();
    for c in Path::new(rel).components() {
        match c {
            Component::Normal(name) => names.push(name.to_str().ok_or_else(not_inside)?),
            Component::CurDir => {}
            _ => return Err(not_inside()),
        }
    }
    if names.is_empty() {
        return Err(not_inside());
    }
    if let Some(name) = names
        .iter()
        .find(|n| FORBIDDEN_FOLDERS.iter().any(|f| f.eq_ignore_ascii_case(n)))
    {
        return Err(ConfinedWriteError::Forbidden {
            path: rel.to_owned(),
            component: (*name).to_owned(),
        });
    }
    Ok(names)
}

pub(crate) fn open_dir(
    parent: Option<&OwnedFd>,
    path: &Path,
    extra: OFlag,
) -> Result<OwnedFd, Errno> {
    let fd = openat(
        parent.map(std::os::fd::AsRawFd::as_raw_fd),
        path,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | extra,
        Mode::empty(),
    )?;
    // SAFETY: `fd` was just returned by openat and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens (creating when missing) one folder below `dir`, never through a symlink.
fn open_child_dir(
    dir: &OwnedFd,
    name: &str,
    rel: &str,
    walked: &str,
) -> Result<OwnedFd, ConfinedWriteError> {
    let nofollow = OFlag::O_NOFOLLOW;
    let classify = |e: Errno| -> ConfinedWriteError {
        let is_link = fstatat(Some(dir.as_raw_fd()), name, AtFlags::AT_SYMLINK_NOFOLLOW)
            .is_ok_and(|s| SFlag::from_bits_truncate(s.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK);
        if is_link {
            ConfinedWriteError::Symlink {
                path: rel.to_owned(),
                component: walked.to_owned(),
            }
        } else if e == Errno::ENOTDIR {
            ConfinedWriteError::NotAFolder {
                path: rel.to_owned(),
                component: walked.to_owned(),
            }
        } else {
            ConfinedWriteError::Io {
                path: rel.to_owned(),
                component: walked.to_owned(),
                source: e.into(),
            }
        }
    };
    match open_dir(Some(dir), Path::new(name), nofollow) {
        Ok(fd) => Ok(fd),
        Err(Errno::ENOENT) => {
            match mkdirat(Some(dir.as_raw_fd()), name, Mode::from_bits_truncate(0o755)) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(classify(e)),
            }
            open_dir(Some(dir), Path::new(name), nofollow).map_err(classify)
        }
        Err(e) => Err(classify(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn writes_inside_creating_folders() {
        let root = tempfile::tempdir().unwrap();
        let sha = write_confined(root.path(), "docs/specs/a.md", b"hello").unwrap();
        assert_eq!(
            std::fs::read_to_string(root.path().join("docs/specs/a.md")).unwrap(),
            "hello"
        );
        assert_eq!(sha, hex::encode(Sha256::digest(b"hello")));
        write_confined(root.path(), "./docs/specs/a.md", b"again").unwrap();
        let names: Vec<_> = std::fs::read_dir(root.path().join("docs/specs"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["a.md"], "no temporary file is left");
    }

    #[test]
    fn a_symlinked_component_is_refused_and_nothing_is_written() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join(".git")).unwrap();
        symlink(root.path().join(".git"), root.path().join("notes")).unwrap();
        symlink(outside.path(), root.path().join("out")).unwrap();
        std::fs::create_dir(root.path().join("docs")).unwrap();
        symlink(outside.path().join("x.md"), root.path().join("docs/x.md")).unwrap();
        for (rel, component) in [
            ("notes/config", "notes"),
            ("out/a.md", "out"),
            ("out/deeper/a.md", "out"),
            ("docs/x.md", "docs/x.md"),
        ] {
            let err = write_confined(root.path(), rel, b"[core]\n").unwrap_err();
            assert!(
                matches!(&err, ConfinedWriteError::Symlink { component: c, .. } if c == component),
                "{rel}: {err}"
            );
            assert!(err.to_string().contains(rel), "{err}");
        }
        assert!(!root.path().join(".git/config").exists());
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }

    #[test]
    fn paths_leaving_the_root_or_into_own_folders_are_refused() {
        let root = tempfile::tempdir().unwrap();
        for rel in ["", "/etc/passwd", "../x.md", "a/../../x.md"] {
            let err = write_confined(root.path(), rel, b"x").unwrap_err();
            assert!(
                matches!(err, ConfinedWriteError::NotInside { .. }),
                "{rel}: {err}"
            );
        }
        for rel in [
            ".git/config",
            "a/.specbridge/x",
            ".claude/settings.json",
            ".GIT/hooks/x",
        ] {
            let err = write_confined(root.path(), rel, b"x").unwrap_err();
            assert!(
                matches!(err, ConfinedWriteError::Forbidden { .. }),
                "{rel}: {err}"
            );
        }
    }
}
