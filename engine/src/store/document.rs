//! A generate stage's document written in two steps: its bytes made durable in
//! the run's own folder as soon as the agent's output shows them, and moved
//! into the repository only once the stage has passed.
//!
//! Written in one step (`write_confined`), the document's sync waited on the
//! stage's path after its evidence, and its temporary file lay in the working
//! tree meanwhile, where a stage running beside this one could see it appear
//! or vanish in its own snapshot. Staged, the bytes are synced while the CLI is
//! still ending (its result comes tens of milliseconds before its exit), the
//! working tree only ever sees the finished file renamed into place, its
//! folder is synced with the end batch's folders, and a stage that does not
//! pass drops the staged file, which removes it. The staged file is checked
//! again before it is moved: it was made while the agent could still act. The
//! run folder lies in the repository, so the rename is within one file
//! system; where it is not (`EXDEV`: a mount between them), the document is
//! written in one step after all.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{openat, renameat, OFlag};
use nix::sys::stat::{fstat, Mode, SFlag};
use sha2::{Digest, Sha256};

use super::confined::{create_new, open_dir, temporary_name, ConfinedWriteError, Target};

/// The prefix of a staged document's name in the run folder: hidden, so that
/// one left by a crash is never taken for an unannounced record (docs/audit.md).
const STAGED_PREFIX: &str = ".document-";

/// A document's bytes, synced under a hidden name in a folder of the run, waiting
/// for [`publish_confined`]. Dropped unpublished, the file is removed.
#[derive(Debug)]
pub struct StagedDocument {
    dir: OwnedFd,
    name: String,
    bytes: Vec<u8>,
    sha256: String,
    published: bool,
}

impl StagedDocument {
    /// Writes and syncs `bytes` in `staging` (a folder of the run).
    pub fn stage(staging: &Path, bytes: &[u8]) -> std::io::Result<StagedDocument> {
        let dir = open_dir(None, staging, OFlag::O_NOFOLLOW)?;
        let name = temporary_name(STAGED_PREFIX);
        let mut file = create_new(&dir, &name)?;
        let staged = StagedDocument {
            dir,
            name,
            bytes: bytes.to_vec(),
            sha256: hex::encode(Sha256::digest(bytes)),
            published: false,
        };
        // Dropped on a failure below, the staged document removes its file.
        file.write_all(bytes)?;
        file.sync_all()?;
        Ok(staged)
    }

    /// The sha256 of the staged bytes.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// Whether the staged file still holds the staged bytes, alone: a regular
    /// file with no other name. It may have been made while the agent was still
    /// ending, in a folder of the repository.
    fn intact(&self) -> bool {
        let Ok(fd) = openat(
            Some(self.dir.as_raw_fd()),
            self.name.as_str(),
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) else {
            return false;
        };
        // SAFETY: `fd` was just returned by openat and is owned by nothing else.
        let file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        let alone = fstat(file.as_raw_fd()).is_ok_and(|st| {
            SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG
                && st.st_nlink == 1
        });
        let mut held = Vec::with_capacity(self.bytes.len());
        alone
            && file
                .take(self.bytes.len() as u64 + 1)
                .read_to_end(&mut held)
                .is_ok()
            && held == self.bytes
    }
}

impl Drop for StagedDocument {
    fn drop(&mut self) {
        if !self.published {
            let _ = nix::unistd::unlinkat(
                Some(self.dir.as_raw_fd()),
                self.name.as_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            );
        }
    }
}

/// A document in place: the sha256 of its bytes, and its folder, whose new
/// entry may not be on disk yet — announce the document with
/// [`RunHandle::defer_event_after_sync`](super::RunHandle::defer_event_after_sync),
/// which syncs the folder with the batch's own first.
#[derive(Debug)]
pub struct Published {
    pub sha256: String,
    pub folder: OwnedFd,
}

/// Moves `staged` to `root/rel` as [`write_confined`](super::write_confined)
/// would write it: the same refusals (a symlink on the way, a forbidden folder,
/// something that is not a file at the end), checked now; then one rename. A
/// staged file that no longer holds the staged bytes alone is removed and the
/// bytes written in one step instead (its folder then synced at once).
pub fn publish_confined(
    root: &Path,
    rel: &str,
    mut staged: StagedDocument,
) -> Result<Published, ConfinedWriteError> {
    let target = Target::open(root, rel)?;
    if !staged.intact() {
        target.write(&staged.bytes)?;
    } else {
        match renameat(
            Some(staged.dir.as_raw_fd()),
            staged.name.as_str(),
            Some(target.dir.as_raw_fd()),
            target.file_name,
        ) {
            Ok(()) => staged.published = true,
            // The run folder on another file system than the document's folder.
            Err(Errno::EXDEV) => target.write(&staged.bytes)?,
            Err(e) => return Err(target.failed(e.into())),
        }
    }
    Ok(Published {
        sha256: staged.sha256.clone(),
        folder: target.dir,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, MetadataExt};

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// Publishes `staged` at `rel`: the sha256 handed back is that of `bytes`,
    /// and the document holds them.
    fn publish_holding(root: &Path, rel: &str, staged: StagedDocument, bytes: &[u8]) {
        let sha = publish_confined(root, rel, staged).unwrap().sha256;
        assert_eq!(sha, hex::encode(Sha256::digest(bytes)), "{rel}");
        assert_eq!(std::fs::read(root.join(rel)).unwrap(), bytes, "{rel}");
    }

    #[test]
    fn a_staged_document_lands_whole_and_leaves_nothing_behind() {
        let root = tempfile::tempdir().unwrap();
        let run = root.path().join(".specbridge/run");
        std::fs::create_dir_all(&run).unwrap();
        let staged = StagedDocument::stage(&run, b"# Notes\n").unwrap();
        assert_eq!(names(&run).len(), 1, "staged in the run folder");
        assert!(names(&run)[0].starts_with(STAGED_PREFIX), "hidden");
        assert!(
            !root.path().join("docs").exists(),
            "nothing in the tree before it is published"
        );
        publish_holding(root.path(), "docs/notes.md", staged, b"# Notes\n");
        assert_eq!(names(&run), Vec::<String>::new(), "moved, not copied");
        assert_eq!(names(&root.path().join("docs")), ["notes.md"]);
    }

    #[test]
    fn a_staged_document_dropped_unpublished_is_removed() {
        let run = tempfile::tempdir().unwrap();
        let staged = StagedDocument::stage(run.path(), b"x").unwrap();
        assert_eq!(names(run.path()).len(), 1);
        drop(staged);
        assert_eq!(names(run.path()), Vec::<String>::new());
    }

    #[test]
    fn publishing_refuses_what_writing_refuses_and_drops_the_staged_file() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let run = root.path().join(".specbridge/run");
        std::fs::create_dir_all(&run).unwrap();
        symlink(outside.path(), root.path().join("out")).unwrap();
        std::fs::create_dir(root.path().join("docs")).unwrap();
        symlink(outside.path().join("x.md"), root.path().join("docs/x.md")).unwrap();
        std::fs::create_dir(root.path().join("docs/folder.md")).unwrap();
        for rel in [
            "out/a.md",
            "docs/x.md",
            "docs/folder.md",
            ".git/config",
            "../a.md",
        ] {
            let staged = StagedDocument::stage(&run, b"[core]\n").unwrap();
            let err = publish_confined(root.path(), rel, staged).unwrap_err();
            let expected = match rel {
                "out/a.md" | "docs/x.md" => matches!(err, ConfinedWriteError::Symlink { .. }),
                "docs/folder.md" => matches!(err, ConfinedWriteError::NotAFile { .. }),
                ".git/config" => matches!(err, ConfinedWriteError::Forbidden { .. }),
                _ => matches!(err, ConfinedWriteError::NotInside { .. }),
            };
            assert!(expected, "{rel}: {err}");
            assert_eq!(
                names(&run),
                Vec::<String>::new(),
                "{rel}: staged file removed"
            );
        }
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        assert!(!root.path().join(".git").exists());
    }

    #[test]
    fn a_staged_file_changed_or_linked_since_is_not_moved_and_the_bytes_are_written() {
        let root = tempfile::tempdir().unwrap();
        let run = root.path().join(".specbridge/run");
        std::fs::create_dir_all(&run).unwrap();
        let elsewhere = root.path().join(".specbridge/elsewhere");
        type Tamper<'a> = (&'a str, &'a dyn Fn(&Path));
        let tampers: [Tamper; 4] = [
            ("rewritten", &|p| {
                std::fs::write(p, b"# Injected\n").unwrap();
            }),
            ("grown", &|p| {
                let mut f = std::fs::OpenOptions::new().append(true).open(p).unwrap();
                f.write_all(b"more").unwrap();
            }),
            ("linked", &|p| std::fs::hard_link(p, &elsewhere).unwrap()),
            ("replaced by a symlink", &|p| {
                std::fs::remove_file(p).unwrap();
                symlink("/etc/hostname", p).unwrap();
            }),
        ];
        for (what, tamper) in tampers {
            let _ = std::fs::remove_file(&elsewhere);
            let staged = StagedDocument::stage(&run, b"# Notes\n").unwrap();
            tamper(&run.join(&staged.name));
            let sha = publish_confined(root.path(), "notes.md", staged)
                .unwrap()
                .sha256;
            assert_eq!(sha, hex::encode(Sha256::digest(b"# Notes\n")), "{what}");
            let path = root.path().join("notes.md");
            assert!(!path.symlink_metadata().unwrap().is_symlink(), "{what}");
            assert_eq!(std::fs::read(&path).unwrap(), b"# Notes\n", "{what}");
            assert_eq!(
                std::fs::metadata(&path).unwrap().nlink(),
                1,
                "{what}: the document has no other name"
            );
            assert_eq!(
                names(&run),
                Vec::<String>::new(),
                "{what}: staged file removed"
            );
        }
    }

    #[test]
    fn a_run_folder_on_another_file_system_still_gets_the_document_written() {
        // /dev/shm is a tmpfs of its own: the rename between it and the
        // repository's file system fails with EXDEV.
        let run = tempfile::tempdir_in("/dev/shm")
            .expect("a tmpfs at /dev/shm, to hold the run folder on a file system of its own");
        let root = tempfile::tempdir().unwrap();
        assert_ne!(
            std::fs::metadata(run.path()).unwrap().dev(),
            std::fs::metadata(root.path()).unwrap().dev()
        );
        let staged = StagedDocument::stage(run.path(), b"moved across\n").unwrap();
        publish_holding(root.path(), "a/b.md", staged, b"moved across\n");
        assert_eq!(
            names(run.path()),
            Vec::<String>::new(),
            "staged file removed"
        );
        assert_eq!(
            names(&root.path().join("a")),
            ["b.md"],
            "no temporary file left"
        );
    }
}
