//! `git-before.json` / `git-after.json`: what differs from HEAD, path by path, with
//! the sha256 of each path's current content, plus HEAD, branch and git's own
//! control files (which `git status` never shows).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::git::Git;
use super::paths::is_under;
use super::{EvidenceError, RUN_STORE_DIR};
use crate::store::{now_rfc3339, sha256_file, SCHEMA_VERSION};

fn schema_version() -> u32 {
    SCHEMA_VERSION
}

/// The state of a repository's working tree at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GitSnapshot {
    #[serde(default = "schema_version")]
    pub schema_version: u32,
    pub taken_at: String,
    /// The commit HEAD points to; none in a repository without commits.
    pub head: Option<String>,
    /// The checked-out branch; none when HEAD is detached.
    pub branch: Option<String>,
    /// sha256 over every local ref and the object it names. Left out are the
    /// refs git moves in the background, at any time: remote-tracking refs (a
    /// background fetch) and `refs/prefetch/` (a scheduled `git maintenance`).
    pub refs_sha256: String,
    /// Every path that differs from HEAD, and every untracked file that is not
    /// ignored. `.specbridge/` is never listed.
    pub entries: BTreeMap<String, PathState>,
    /// sha256 of git's configuration, hooks and info files, keyed `.git/<name>`: an
    /// agent that installs a hook has changed what the user's next git command runs.
    /// `info/refs` is left out: git derives it from the refs for clients over
    /// plain HTTP, and every repack rewrites it, among them the one a user's
    /// commit starts in the background (`git maintenance run --auto --detach`).
    #[serde(default)]
    pub git_control: BTreeMap<String, String>,
}

/// One path that differs from HEAD.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PathState {
    /// What git status says about the path.
    pub status: PathStatus,
    /// What is on disk now.
    pub kind: EntryKind,
    /// sha256 of the file's bytes, or of a symlink's target; none when the path is
    /// missing or a directory (a submodule or nested repository).
    pub sha256: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub executable: bool,
}

impl PathState {
    /// Whether two states have the same content on disk (git's view aside).
    pub fn same_content(&self, other: &PathState) -> bool {
        self.kind == other.kind
            && self.sha256 == other.sha256
            && self.executable == other.executable
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PathStatus {
    Modified,
    Added,
    Deleted,
    Renamed,
    Copied,
    TypeChanged,
    Unmerged,
    Untracked,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum EntryKind {
    File,
    Symlink,
    Directory,
    Missing,
}

/// `--branch` for HEAD and the branch's name. Not the counts of commits ahead of
/// and behind its upstream, which no snapshot records: git finds them by walking
/// every commit between the two, and a branch 50,000 commits behind took 333 ms
/// a status instead of 3 (docs/performance.md), twice an agent attempt.
/// (`--no-ahead-behind` is git 2.17's.)
const STATUS_ARGS: &[&str] = &[
    "status",
    "--porcelain=v2",
    "--branch",
    "--no-ahead-behind",
    "-z",
    "--untracked-files=all",
    "--no-renames",
    "--ignore-submodules=none",
    "--",
    ".",
    ":(exclude).specbridge",
];

impl GitSnapshot {
    /// Take a snapshot of the repository whose root is `root`.
    ///
    /// One `git status --porcelain=v2 --branch` gives the entries, HEAD and the
    /// branch; the refs are read by a second git at the same time, and git's
    /// control files are hashed meanwhile. Run one after another they were never
    /// one atomic view either, so only the wait goes (it sits on the path of every
    /// agent attempt, twice).
    pub fn take(root: &Path) -> Result<GitSnapshot, EvidenceError> {
        let git = Git::new(root);
        let taken_at = now_rfc3339();
        std::thread::scope(|scope| {
            let refs = scope.spawn(|| refs_fingerprint(&git));
            let control = scope.spawn(|| git_control(&git));
            let status = status_entries(&git, root);
            let (refs, control) = (joined(refs), joined(control));
            // Fields are evaluated as written: the first failure reported is the
            // one the commands in this order would have met first.
            let status = status?;
            Ok(GitSnapshot {
                entries: status.entries,
                head: status.head,
                branch: status.branch,
                refs_sha256: refs?,
                git_control: control?,
                schema_version: SCHEMA_VERSION,
                taken_at,
            })
        })
    }

    /// Whether nothing differs from HEAD.
    pub fn is_clean(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Execute stages start from a clean tree unless the run allows a dirty one (then the
/// pre-existing changes are recorded and kept out of attribution).
pub fn require_clean_start(before: &GitSnapshot, allow_dirty: bool) -> Result<(), EvidenceError> {
    if allow_dirty || before.is_clean() {
        return Ok(());
    }
    Err(EvidenceError::DirtyTree {
        paths: before.entries.keys().cloned().collect(),
    })
}

/// A scoped thread's result; its panic goes on in the caller.
fn joined<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    handle
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// What one `git status` said: HEAD, the branch, and every path it lists (less
/// the run store) with what is on disk now.
struct Status {
    head: Option<String>,
    branch: Option<String>,
    entries: BTreeMap<String, PathState>,
}

fn status_entries(git: &Git, root: &Path) -> Result<Status, EvidenceError> {
    let out = git.run(STATUS_ARGS)?;
    let parsed = parse_porcelain_v2(&out).map_err(|d| git.bad_output(STATUS_ARGS, d))?;
    let mut entries = BTreeMap::new();
    for (xy, path) in parsed.records {
        let key = String::from_utf8_lossy(path.strip_suffix(b"/").unwrap_or(path)).into_owned();
        if is_under(&key, RUN_STORE_DIR) {
            continue;
        }
        let (kind, sha256, executable) = observe(&root.join(OsStr::from_bytes(path)))?;
        entries.insert(
            key,
            PathState {
                status: status_of(xy),
                kind,
                sha256,
                executable,
            },
        );
    }
    Ok(Status {
        head: parsed.head,
        branch: parsed.branch,
        entries,
    })
}

/// A status record: the two status letters as porcelain v1 spells them (`??`
/// for untracked, a space for unchanged) and the path's bytes.
type StatusRecord<'a> = ([u8; 2], &'a [u8]);

/// `git status --porcelain=v2 --branch -z`, parsed.
#[derive(Debug, Default)]
struct Porcelain<'a> {
    /// `# branch.oid`: none before the first commit (`(initial)`).
    head: Option<String>,
    /// `# branch.head`: none when HEAD is detached (`(detached)`).
    branch: Option<String>,
    records: Vec<StatusRecord<'a>>,
}

/// Records of porcelain v2, NUL-terminated (git-status(1), "Porcelain Format
/// Version 2"): headers `# name value`; changed entries `1 XY sub mH mI mW hH hI
/// path`; renamed or copied ones `2 XY sub mH mI mW hH hI Xscore path`, followed by
/// their source; unmerged ones `u XY sub m1 m2 m3 mW h1 h2 h3 path`; untracked
/// `? path` (ignored ones are not asked for). A path may hold spaces, so only the fields before
/// it are split.
fn parse_porcelain_v2(out: &[u8]) -> Result<Porcelain<'_>, String> {
    let mut records = out.split(|b| *b == 0).filter(|r| !r.is_empty());
    let mut parsed = Porcelain::default();
    let bad = |rec: &[u8]| format!("unexpected record {:?}", String::from_utf8_lossy(rec));
    while let Some(rec) = records.next() {
        match rec {
            [b'#', b' ', header @ ..] => {
                let text = String::from_utf8_lossy(header);
                if let Some(oid) = text.strip_prefix("branch.oid ") {
                    parsed.head = (oid != "(initial)").then(|| oid.to_string());
                } else if let Some(name) = text.strip_prefix("branch.head ") {
                    parsed.branch = (name != "(detached)").then(|| name.to_string());
                }
            }
            [b'1', b' ', ..] => parsed
                .records
                .push(v2_entry(rec, 8).ok_or_else(|| bad(rec))?),
            [b'2', b' ', ..] => {
                let (xy, path) = v2_entry(rec, 9).ok_or_else(|| bad(rec))?;
                parsed.records.push((xy, path));
                // The source no longer exists under its old name in the index.
                let from = records.next().ok_or("a rename without its source")?;
                parsed.records.push(([b'D', b' '], from));
            }
            [b'u', b' ', ..] => parsed
                .records
                .push(v2_entry(rec, 10).ok_or_else(|| bad(rec))?),
            [b'?', b' ', path @ ..] if !path.is_empty() => {
                parsed.records.push(([b'?', b'?'], path));
            }
            _ => return Err(bad(rec)),
        }
    }
    Ok(parsed)
}

/// The XY and path of an entry whose path follows `fields` space-separated
/// fields (its type letter and XY included). XY is spelled as in porcelain v1.
fn v2_entry(rec: &[u8], fields: usize) -> Option<StatusRecord<'_>> {
    let mut parts = rec.splitn(fields + 1, |b| *b == b' ');
    let xy: [u8; 2] = parts.nth(1)?.try_into().ok()?;
    let path = parts.nth(fields - 2)?;
    (!path.is_empty()).then(|| (xy.map(|b| if b == b'.' { b' ' } else { b }), path))
}

fn status_of(xy: [u8; 2]) -> PathStatus {
    match xy {
        [b'?', b'?'] => PathStatus::Untracked,
        [x, y] if x == b'U' || y == b'U' || (x == y && matches!(x, b'A' | b'D')) => {
            PathStatus::Unmerged
        }
        [x, y] if x == b'D' || y == b'D' => PathStatus::Deleted,
        [b'A', _] => PathStatus::Added,
        [b'R', _] => PathStatus::Renamed,
        [b'C', _] => PathStatus::Copied,
        [x, y] if x == b'T' || y == b'T' => PathStatus::TypeChanged,
        _ => PathStatus::Modified,
    }
}

/// What is at `path` now. Symlinks are never followed: their target is their content.
fn observe(path: &Path) -> Result<(EntryKind, Option<String>, bool), EvidenceError> {
    let err = |source| EvidenceError::Hash {
        path: path.to_path_buf(),
        source,
    };
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if is_missing(&e) => return Ok((EntryKind::Missing, None, false)),
        Err(e) => return Err(err(e)),
    };
    let ft = meta.file_type();
    if ft.is_symlink() {
        let target = std::fs::read_link(path).map_err(err)?;
        let digest = Sha256::digest(target.as_os_str().as_bytes());
        return Ok((EntryKind::Symlink, Some(hex::encode(digest)), false));
    }
    if ft.is_dir() {
        return Ok((EntryKind::Directory, None, false));
    }
    let sha = sha256_file(path).map_err(err)?;
    Ok((
        EntryKind::File,
        Some(sha),
        meta.permissions().mode() & 0o111 != 0,
    ))
}

fn is_missing(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR)
}

/// The refs git itself moves in the background, which no fingerprint covers.
const BACKGROUND_REFS: [&[u8]; 2] = [b"refs/remotes/", b"refs/prefetch/"];

/// The files of `.git/info/` git derives and rewrites in the background, which
/// no fingerprint covers.
const DERIVED_INFO: [&str; 1] = ["refs"];

fn refs_fingerprint(git: &Git) -> Result<String, EvidenceError> {
    let out = git.run(&["for-each-ref", "--format=%(objectname) %(refname)"])?;
    let mut h = Sha256::new();
    for line in out.split(|b| *b == b'\n') {
        // `<object> <refname>`: names hold no space.
        let name = line.splitn(2, |b| *b == b' ').nth(1).unwrap_or_default();
        let background = BACKGROUND_REFS.iter().any(|p| name.starts_with(p));
        if !line.is_empty() && !background {
            h.update(line);
            h.update(b"\n");
        }
    }
    Ok(hex::encode(h.finalize()))
}

fn git_control(git: &Git) -> Result<BTreeMap<String, String>, EvidenceError> {
    let dir = super::repository_paths(git.root())?.common_dir.clone();
    let mut files = BTreeMap::new();
    for name in ["config", "config.worktree"] {
        let path = dir.join(name);
        // Claude Code's sandbox leaves an empty `config.worktree` behind (a mount
        // point that keeps sandboxed commands from writing it). git reads no
        // setting from an empty file, so empty counts as absent.
        if name == "config.worktree" && std::fs::metadata(&path).is_ok_and(|m| m.len() == 0) {
            continue;
        }
        control_file(&path, format!(".git/{name}"), &mut files)?;
    }
    for sub in ["hooks", "info"] {
        let Ok(read) = std::fs::read_dir(dir.join(sub)) else {
            continue;
        };
        for entry in read.flatten() {
            let name = entry.file_name();
            if sub == "info" && DERIVED_INFO.iter().any(|d| name == *d) {
                continue;
            }
            let label = format!(".git/{sub}/{}", name.to_string_lossy());
            control_file(&entry.path(), label, &mut files)?;
        }
    }
    Ok(files)
}

fn control_file(
    path: &Path,
    label: String,
    files: &mut BTreeMap<String, String>,
) -> Result<(), EvidenceError> {
    if let (EntryKind::File | EntryKind::Symlink, Some(sha), exec) = observe(path)? {
        // A hook only runs when executable, so the bit is part of what we compare.
        files.insert(label, if exec { format!("{sha}+x") } else { sha });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn porcelain_v2_records_parse_with_headers_renames_and_conflicts() {
        let out = b"# branch.oid 1111111111111111111111111111111111111111\0# branch.head main\0\
# branch.upstream origin/main\0\
1 .M N... 100644 100644 100644 aaaa bbbb a b.txt\0\
? new dir/x y\0\
2 R. N... 100644 100644 100644 aaaa aaaa R100 to\0from\0\
1 D. N... 100644 000000 000000 aaaa 0000 gone\0\
u UU N... 100644 100644 100644 100644 aaaa bbbb cccc both\0\
1 A. N... 000000 100644 100644 0000 aaaa added\0";
        let parsed = parse_porcelain_v2(out).unwrap();
        assert_eq!(
            parsed.head.as_deref(),
            Some("1111111111111111111111111111111111111111")
        );
        assert_eq!(parsed.branch.as_deref(), Some("main"));
        let names: Vec<_> = parsed
            .records
            .iter()
            .map(|(xy, p)| (status_of(*xy), String::from_utf8_lossy(p).into_owned()))
            .collect();
        assert_eq!(
            names,
            vec![
                (PathStatus::Modified, "a b.txt".to_string()),
                (PathStatus::Untracked, "new dir/x y".to_string()),
                (PathStatus::Renamed, "to".to_string()),
                (PathStatus::Deleted, "from".to_string()),
                (PathStatus::Deleted, "gone".to_string()),
                (PathStatus::Unmerged, "both".to_string()),
                (PathStatus::Added, "added".to_string()),
            ]
        );
    }

    #[test]
    fn porcelain_v2_headers_of_an_unborn_or_detached_head() {
        let unborn = parse_porcelain_v2(b"# branch.oid (initial)\0# branch.head main\0").unwrap();
        assert_eq!(
            (unborn.head, unborn.branch.as_deref()),
            (None, Some("main"))
        );
        let detached = parse_porcelain_v2(b"# branch.oid abc\0# branch.head (detached)\0").unwrap();
        assert_eq!(
            (detached.head.as_deref(), detached.branch),
            (Some("abc"), None)
        );
    }

    /// git says `+? -?` where it has not counted; a count would be `+1 -2`.
    #[test]
    fn a_snapshot_does_not_count_the_commits_between_the_branch_and_its_upstream() {
        let repo = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| crate::evidence::git::git_for_test(repo.path(), args);
        git(&["init", "-q"]);
        git(&["symbolic-ref", "HEAD", "refs/heads/main"]);
        for n in ["1", "2", "3"] {
            std::fs::write(repo.path().join(n), n).unwrap();
            git(&["add", n]);
            git(&["commit", "-qm", n]);
        }
        // An upstream two commits ahead of the branch, which is one ahead of it.
        git(&["remote", "add", "origin", "."]);
        git(&["update-ref", "refs/remotes/origin/main", "HEAD"]);
        git(&["branch", "-q", "--set-upstream-to=origin/main"]);
        git(&["reset", "-q", "--hard", "HEAD~2"]);
        std::fs::write(repo.path().join("local"), "l").unwrap();
        git(&["add", "local"]);
        git(&["commit", "-qm", "local"]);

        let out = Git::new(repo.path()).run(STATUS_ARGS).unwrap();
        let headers: Vec<_> = out
            .split(|b| *b == 0)
            .map(String::from_utf8_lossy)
            .filter(|l| l.starts_with("# branch."))
            .collect();
        assert!(
            headers.iter().any(|l| l == "# branch.upstream origin/main"),
            "{headers:?}"
        );
        assert!(
            headers.iter().any(|l| l == "# branch.ab +? -?"),
            "{headers:?}"
        );
        let snap = GitSnapshot::take(repo.path()).unwrap();
        assert_eq!(snap.branch.as_deref(), Some("main"));
        assert!(snap.is_clean(), "{:?}", snap.entries);
    }

    #[test]
    fn porcelain_v2_rejects_what_it_does_not_know() {
        for bad in [
            &b"2 R. N... 100644 100644 100644 aaaa aaaa R100 to\0"[..],
            b"garbage\0",
            b"1 .M N... 100644\0",
            b"?? v1-style\0",
            b"! ignored\0",
        ] {
            assert!(
                parse_porcelain_v2(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
