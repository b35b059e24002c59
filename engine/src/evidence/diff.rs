//! `diff.patch`: what the attempt changed as a git patch (binary-safe), kept under a
//! size cap by leaving out whole files, never by cutting one in half.
//!
//! New files only show in `git diff` once they are in an index, so they are marked
//! intent-to-add in a copy of the index: the user's real index is never touched.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::Stdio;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::attribute::ChangedFiles;
use super::git::Git;
use super::paths::is_under;
use super::snapshot::{EntryKind, GitSnapshot, PathStatus};
use super::EvidenceError;

/// 1 MiB.
pub const DEFAULT_DIFF_MAX_BYTES: u64 = 1024 * 1024;

/// Paths per git invocation, well below any argv limit.
const PATHS_PER_CALL: usize = 500;

/// The patch of an attempt and the note recorded about it in `evidence.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptDiff {
    pub patch: Vec<u8>,
    pub info: DiffInfo,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiffInfo {
    /// Size of `diff.patch` as written.
    pub bytes: u64,
    /// Size of the whole patch before the cap.
    pub full_bytes: u64,
    pub max_bytes: u64,
    /// Whether files were left out to stay under the cap.
    pub truncated: bool,
    /// The files left out (their diff alone did not fit in what was left).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub omitted_paths: Vec<String>,
    /// sha256 of `diff.patch` as written.
    pub sha256: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The patch of the paths attributed to the attempt (pre-existing and ambiguous
/// changes and specbridge's own writes are not the attempt's and are left out;
/// so is git's own directory, which is no part of any patch), against
/// `patch_head` when given (the tree an attempt's patch starts from), else
/// `after`'s HEAD. The patch taken `ahead` is it where it was taken of the same
/// paths against the same tree; else it is taken now.
pub fn attempt_diff(
    ahead: Option<PatchAhead>,
    root: &Path,
    changed: &ChangedFiles,
    after: &GitSnapshot,
    patch_head: Option<&str>,
    max_bytes: u64,
) -> Result<AttemptDiff, EvidenceError> {
    let paths = patch_paths(changed);
    let head = patch_base(patch_head, after);
    if let Some(diff) = ahead.and_then(|ahead| ahead.of(&paths, head, max_bytes)) {
        return Ok(diff);
    }
    patch_of(root, &paths, after, head, max_bytes)
}

/// The tree an attempt's patch is taken against: `patch_head` when given,
/// else `after`'s HEAD (none: the empty tree).
fn patch_base<'a>(patch_head: Option<&'a str>, after: &'a GitSnapshot) -> Option<&'a str> {
    patch_head.or(after.head.as_deref())
}

/// The patch of an attempt taken as soon as its after-snapshot is, while the
/// kernel still tears the agent down and before anything else waits for it:
/// of the paths the two snapshots alone attribute to the attempt (the run's
/// own writes, which only the run knows, left out of the reckoning). Where
/// the attempt's attributed paths turn out to be those, as they are unless a
/// change is the run's own or one it made before, it is the attempt's patch;
/// taken at the after-snapshot's moment, it shows the tree that snapshot saw.
#[derive(Debug)]
pub struct PatchAhead {
    paths: BTreeSet<String>,
    head: Option<String>,
    max_bytes: u64,
    /// None where taking it failed: it is taken again, and its error met, when
    /// the attempt's patch is.
    diff: Option<AttemptDiff>,
}

impl PatchAhead {
    /// The patch of what changed from `before` to `after`, against
    /// `patch_head` as [`attempt_diff`] takes it.
    pub fn take(
        root: &Path,
        before: &GitSnapshot,
        after: &GitSnapshot,
        patch_head: Option<&str>,
        max_bytes: u64,
    ) -> Self {
        let changed = super::attribute(before, after, &[]);
        let paths = patch_paths(&changed);
        let head = patch_base(patch_head, after);
        let diff = patch_of(root, &paths, after, head, max_bytes).ok();
        PatchAhead {
            paths: paths.into_iter().cloned().collect(),
            head: head.map(str::to_owned),
            max_bytes,
            diff,
        }
    }

    /// The patch, where it was taken of `paths` against `head` under the same
    /// cap.
    fn of(
        self,
        paths: &BTreeSet<&String>,
        head: Option<&str>,
        max_bytes: u64,
    ) -> Option<AttemptDiff> {
        let same = self.head.as_deref() == head
            && self.max_bytes == max_bytes
            && self.paths.iter().eq(paths.iter().copied());
        same.then_some(self.diff).flatten()
    }
}

/// The paths of an attempt's patch: its attributed ones but git's own files.
fn patch_paths(changed: &ChangedFiles) -> BTreeSet<&String> {
    changed
        .attributed()
        .filter(|p| !is_under(p, ".git"))
        .collect()
}

/// The patch of `paths` against `head` (the empty tree where there is none),
/// the files `after` holds untracked marked intent-to-add in a private copy of
/// the index.
fn patch_of(
    root: &Path,
    paths: &BTreeSet<&String>,
    after: &GitSnapshot,
    head: Option<&str>,
    max_bytes: u64,
) -> Result<AttemptDiff, EvidenceError> {
    let mut cap = Capper::new(max_bytes);
    if !paths.is_empty() {
        let tmp = tempfile::tempdir().map_err(|source| EvidenceError::TempIndex { source })?;
        let git = Git::new(root).with_index(private_index(root, tmp.path())?);
        let new_files: Vec<&String> = paths
            .iter()
            .copied()
            .filter(|p| {
                after.entries.get(*p).is_some_and(|s| {
                    s.status == PathStatus::Untracked
                        && matches!(s.kind, EntryKind::File | EntryKind::Symlink)
                })
            })
            .collect();
        for chunk in new_files.chunks(PATHS_PER_CALL) {
            let mut args = vec!["--literal-pathspecs", "add", "--intent-to-add", "--"];
            args.extend(chunk.iter().map(|p| p.as_str()));
            git.run(&args)?;
        }
        let base = match head {
            Some(head) => head.to_string(),
            None => empty_tree(&git)?,
        };
        let paths: Vec<&String> = paths.iter().copied().collect();
        for chunk in paths.chunks(PATHS_PER_CALL) {
            diff_into(&git, &base, chunk, &mut cap)?;
        }
    }
    Ok(cap.finish())
}

/// A copy of the user's index in `dir`, so marking files intent-to-add changes nothing
/// the user sees. The copy keeps the index's modification time: git trusts an
/// entry's stat data unless the entry is as new as the index file ("racily
/// clean"), so a copy made a second later would hide a file rewritten with the
/// same size in the second its entry was recorded.
fn private_index(root: &Path, dir: &Path) -> Result<std::path::PathBuf, EvidenceError> {
    let real = &super::repository_paths(root)?.index_file;
    let copy = dir.join("index");
    if real.exists() {
        let copied = std::fs::copy(real, &copy)
            .and_then(|_| std::fs::metadata(real)?.modified())
            .and_then(|modified| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&copy)?
                    .set_modified(modified)
            });
        copied.map_err(|source| EvidenceError::TempIndex { source })?;
    }
    Ok(copy)
}

fn empty_tree(git: &Git) -> Result<String, EvidenceError> {
    let out = git.run(&["hash-object", "-t", "tree", "/dev/null"])?;
    Ok(String::from_utf8_lossy(&out).trim().to_string())
}

fn diff_into(
    git: &Git,
    base: &str,
    paths: &[&String],
    cap: &mut Capper,
) -> Result<(), EvidenceError> {
    let mut args = vec![
        "--literal-pathspecs",
        "diff",
        "--binary",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--no-renames",
        "--src-prefix=a/",
        "--dst-prefix=b/",
        base,
        "--",
    ];
    args.extend(paths.iter().map(|p| p.as_str()));
    // stderr to a file: a pipe nobody reads while stdout streams could fill and stall git.
    let mut stderr = tempfile::tempfile().map_err(|source| EvidenceError::TempIndex { source })?;
    let spawn_err = |source| EvidenceError::GitSpawn {
        args: "diff".into(),
        root: git.root().to_path_buf(),
        source,
    };
    let mut child = git
        .command(&args)
        .stdout(Stdio::piped())
        .stderr(stderr.try_clone().map_err(spawn_err)?)
        .spawn()
        .map_err(spawn_err)?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let read = cap.read_from(stdout);
    let status = child.wait().map_err(spawn_err)?;
    read.map_err(spawn_err)?;
    if !status.success() {
        use std::io::Seek;
        let mut text = Vec::new();
        let _ = stderr.rewind();
        let _ = stderr.read_to_end(&mut text);
        return Err(git.failed(&args, &text));
    }
    Ok(())
}

/// Keeps whole file sections of a patch while they fit under the cap, and only counts
/// the rest. Memory stays bounded by the cap plus one read.
struct Capper {
    max: u64,
    kept: Vec<u8>,
    full: u64,
    section: Vec<u8>,
    section_path: Option<String>,
    section_dropped: bool,
    omitted: Vec<String>,
}

/// Longest piece of one line read at once; longer lines arrive in pieces.
const PIECE: u64 = 64 * 1024;

impl Capper {
    fn new(max: u64) -> Self {
        Capper {
            max,
            kept: Vec::new(),
            full: 0,
            section: Vec::new(),
            section_path: None,
            section_dropped: false,
            omitted: Vec::new(),
        }
    }

    fn read_from(&mut self, stdout: impl Read) -> std::io::Result<()> {
        let mut reader = BufReader::new(stdout);
        let mut piece = Vec::new();
        let mut at_line_start = true;
        loop {
            piece.clear();
            let n = (&mut reader).take(PIECE).read_until(b'\n', &mut piece)?;
            if n == 0 {
                break;
            }
            // Content lines always start with ' ', '+', '-', '\' or a base85 length
            // letter followed by no space, so this only matches a file header.
            if at_line_start && piece.starts_with(b"diff --git ") {
                self.close_section();
                self.section_path = Some(header_path(&piece));
            }
            self.push(&piece);
            at_line_start = piece.ends_with(b"\n");
        }
        self.close_section();
        Ok(())
    }

    fn push(&mut self, bytes: &[u8]) {
        self.full += bytes.len() as u64;
        if self.section_dropped {
            return;
        }
        if (self.kept.len() + self.section.len() + bytes.len()) as u64 > self.max {
            self.section_dropped = true;
            self.section = Vec::new();
        } else {
            self.section.extend_from_slice(bytes);
        }
    }

    fn close_section(&mut self) {
        if self.section_dropped {
            self.omitted
                .push(self.section_path.take().unwrap_or_default());
        } else {
            self.kept.append(&mut self.section);
        }
        self.section_dropped = false;
        self.section_path = None;
    }

    fn finish(self) -> AttemptDiff {
        let truncated = !self.omitted.is_empty();
        let note = truncated.then(|| {
            format!(
                "{} file(s) left out of diff.patch: the whole patch is {} bytes, over the cap of {} bytes",
                self.omitted.len(),
                self.full,
                self.max
            )
        });
        let info = DiffInfo {
            bytes: self.kept.len() as u64,
            full_bytes: self.full,
            max_bytes: self.max,
            truncated,
            omitted_paths: self.omitted,
            sha256: hex::encode(Sha256::digest(&self.kept)),
            note,
        };
        AttemptDiff {
            patch: self.kept,
            info,
        }
    }
}

/// The path in `diff --git a/P b/P` (the same P twice, renames being off). A name git
/// had to quote is kept as quoted.
fn header_path(line: &[u8]) -> String {
    let rest = String::from_utf8_lossy(&line[b"diff --git ".len()..]);
    let rest = rest.trim_end_matches('\n');
    if rest.len() >= 5 && rest.len() % 2 == 1 && rest.starts_with("a/") {
        let half = (rest.len() - 5) / 2;
        if rest.is_char_boundary(2 + half) && rest[2 + half..].starts_with(" b/") {
            return rest[2..2 + half].to_string();
        }
    }
    rest.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_paths_survive_spaces() {
        assert_eq!(
            header_path(b"diff --git a/x b/y.txt b/x b/y.txt\n"),
            "x b/y.txt"
        );
        assert_eq!(
            header_path(b"diff --git a/caf\xc3\xa9 b/caf\xc3\xa9\n"),
            "café"
        );
        assert_eq!(
            header_path(b"diff --git \"a/t\\tb\" \"b/t\\tb\"\n"),
            "\"a/t\\tb\" \"b/t\\tb\""
        );
    }

    #[test]
    fn the_cap_drops_whole_sections() {
        let patch = b"diff --git a/a b/a\n+1\ndiff --git a/big b/big\n+0123456789\ndiff --git a/c b/c\n+3\n";
        let mut cap = Capper::new(45);
        cap.read_from(&patch[..]).unwrap();
        let diff = cap.finish();
        assert_eq!(
            String::from_utf8(diff.patch).unwrap(),
            "diff --git a/a b/a\n+1\ndiff --git a/c b/c\n+3\n"
        );
        assert_eq!(diff.info.omitted_paths, vec!["big".to_string()]);
        assert_eq!(diff.info.full_bytes, patch.len() as u64);
        assert!(diff.info.truncated);
    }
}
