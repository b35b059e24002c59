//! Git evidence against real repositories in temporary folders: snapshots,
//! attribution, protected paths, the attempt diff, the evidence status and the
//! record schemas.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};
use specbridge_engine::evidence::{
    attempt_diff, attribute, generate_violations, judge, require_clean_start, AttemptDiff,
    ChangeCounts, ChangedFiles, Claims, EntryKind, EvidenceInput, EvidenceKind, EvidenceRecord,
    GitSnapshot, OwnWrite, PatchAhead, PathStatus, ProtectedPaths, ProtectionReason,
    VerificationResult, VerificationSummary, Violation, ViolationKind, DEFAULT_DIFF_MAX_BYTES,
};
use specbridge_engine::EvidenceStatus;

struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    /// A repository with one commit holding `README.md`.
    fn new() -> Self {
        let repo = Repo::empty();
        repo.write("README.md", "hello\n");
        repo.commit_all("initial");
        repo
    }

    /// A repository without commits.
    fn empty() -> Self {
        let repo = Repo {
            dir: tempfile::tempdir().unwrap(),
        };
        repo.git(&["init", "-q", "-b", "main"]);
        repo.git(&["config", "user.name", "Evidence Test"]);
        repo.git(&["config", "user.email", "evidence@example.com"]);
        repo.git(&["config", "commit.gpgsign", "false"]);
        repo
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    fn remove(&self, rel: &str) {
        std::fs::remove_file(self.path(rel)).unwrap();
    }

    fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .current_dir(self.root())
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn commit_all(&self, message: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
    }

    fn snapshot(&self) -> GitSnapshot {
        GitSnapshot::take(self.root()).unwrap()
    }
}

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The attempt's patch taken now, against the after-snapshot's HEAD.
fn patch_now(repo: &Repo, changed: &ChangedFiles, after: &GitSnapshot, max: u64) -> AttemptDiff {
    attempt_diff(None, repo.root(), changed, after, None, max).unwrap()
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(std::string::ToString::to_string).collect()
}

fn no_paths() -> [&'static str; 0] {
    []
}

#[test]
fn a_clean_tree_has_an_empty_snapshot() {
    let repo = Repo::new();
    let snap = repo.snapshot();
    assert!(snap.is_clean(), "{:?}", snap.entries);
    assert_eq!(
        snap.head.as_deref(),
        Some(repo.git(&["rev-parse", "HEAD"]).trim())
    );
    assert_eq!(snap.branch.as_deref(), Some("main"));
    assert_eq!(snap.schema_version, 1);
    assert!(require_clean_start(&snap, false).is_ok());
}

#[test]
fn a_repository_without_commits_has_no_head_but_a_branch() {
    let repo = Repo::empty();
    repo.write("new.txt", "x");
    let snap = repo.snapshot();
    assert_eq!(snap.head, None);
    assert_eq!(snap.branch.as_deref(), Some("main"));
    assert_eq!(snap.entries["new.txt"].status, PathStatus::Untracked);

    let before = GitSnapshot {
        entries: Default::default(),
        ..snap.clone()
    };
    let changed = attribute(&before, &snap, &[]);
    let diff = patch_now(&repo, &changed, &snap, DEFAULT_DIFF_MAX_BYTES);
    let patch = String::from_utf8(diff.patch).unwrap();
    assert!(
        patch.contains("new file mode") && patch.contains("+x"),
        "{patch}"
    );
}

#[test]
fn each_kind_of_change_is_attributed_with_its_sha256() {
    let repo = Repo::new();
    repo.write("src/a.rs", "fn a() {}\n");
    repo.write("src/b.rs", "fn b() {}\n");
    repo.commit_all("two files");
    let before = repo.snapshot();

    repo.write("src/a.rs", "fn a() { changed() }\n");
    repo.remove("src/b.rs");
    repo.write("src/untracked.rs", "fn u() {}\n");
    repo.write("src/staged.rs", "fn s() {}\n");
    repo.git(&["add", "src/staged.rs"]);
    let after = repo.snapshot();

    let a = &after.entries["src/a.rs"];
    assert_eq!(a.status, PathStatus::Modified);
    assert_eq!(
        a.sha256.as_deref(),
        Some(sha(b"fn a() { changed() }\n").as_str())
    );
    let b = &after.entries["src/b.rs"];
    assert_eq!(
        (b.status, b.kind, b.sha256.as_deref()),
        (PathStatus::Deleted, EntryKind::Missing, None)
    );
    assert_eq!(
        after.entries["src/untracked.rs"].status,
        PathStatus::Untracked
    );
    assert_eq!(
        after.entries["src/untracked.rs"].sha256.as_deref(),
        Some(sha(b"fn u() {}\n").as_str())
    );
    assert_eq!(after.entries["src/staged.rs"].status, PathStatus::Added);

    let changed = attribute(&before, &after, &[]);
    assert_eq!(changed.added, s(&["src/staged.rs", "src/untracked.rs"]));
    assert_eq!(changed.modified, s(&["src/a.rs"]));
    assert_eq!(changed.deleted, s(&["src/b.rs"]));
    assert!(changed.pre_existing.is_empty() && changed.ambiguous.is_empty());
}

#[test]
fn a_file_changed_and_changed_back_is_no_change() {
    let repo = Repo::new();
    let before = repo.snapshot();
    repo.write("README.md", "edited\n");
    repo.write("README.md", "hello\n");
    let changed = attribute(&before, &repo.snapshot(), &[]);
    assert_eq!(
        changed,
        ChangedFiles {
            schema_version: 1,
            ..Default::default()
        }
    );
}

#[test]
fn a_dirty_tree_needs_allow_dirty_and_its_changes_are_pre_existing() {
    let repo = Repo::new();
    repo.write("README.md", "user's work in progress\n");
    repo.write("notes.txt", "user's notes\n");
    let before = repo.snapshot();
    let err = require_clean_start(&before, false).unwrap_err();
    insta::assert_snapshot!(err.to_string(), @"failed to start: the working tree has 2 uncommitted change(s) (README.md, notes.txt); commit or stash them, or pass --allow-dirty");
    assert!(require_clean_start(&before, true).is_ok());

    repo.write("feature.rs", "fn feature() {}\n");
    let changed = attribute(&before, &repo.snapshot(), &[]);
    assert_eq!(changed.pre_existing, s(&["README.md", "notes.txt"]));
    assert_eq!(changed.added, s(&["feature.rs"]));
    assert!(changed.ambiguous.is_empty());
}

#[test]
fn a_dirty_path_changed_again_is_ambiguous_and_blocks_verified() {
    let repo = Repo::new();
    repo.write("README.md", "user's edit\n");
    repo.write("notes.txt", "user's notes\n");
    let before = repo.snapshot();
    repo.write("README.md", "user's edit\nand the agent's\n");
    // Reverting a dirty file to HEAD also changes it during the attempt.
    repo.remove("notes.txt");
    repo.write("feature.rs", "fn feature() {}\n");
    let changed = attribute(&before, &repo.snapshot(), &[]);
    assert_eq!(changed.ambiguous, s(&["README.md", "notes.txt"]));
    assert_eq!(changed.added, s(&["feature.rs"]));

    let decision = judge(EvidenceInput {
        runner_succeeded: true,
        output_valid: true,
        changed: &changed,
        violations: &[],
        verification: &[],
    });
    assert_eq!(decision.status, EvidenceStatus::ImplementedUnverified);
    assert!(
        decision
            .reasons
            .iter()
            .any(|r| r.contains("README.md, notes.txt")),
        "{:?}",
        decision.reasons
    );
}

#[test]
fn a_commit_between_snapshots_moves_head() {
    let repo = Repo::new();
    let before = repo.snapshot();
    repo.write("feature.rs", "fn feature() {}\n");
    repo.commit_all("agent commit");
    let after = repo.snapshot();
    let changed = attribute(&before, &after, &[]);
    let violations = protected(&[]).violations(&changed, &before, &after);
    assert_eq!(
        kinds(&violations),
        vec![ViolationKind::HeadMoved {
            from: before.head.clone(),
            to: after.head.clone()
        }]
    );
    assert!(violations[0].message.contains("must never commit"));
}

#[test]
fn a_checkout_or_a_new_tag_is_a_violation() {
    let repo = Repo::new();
    let before = repo.snapshot();
    repo.git(&["checkout", "-q", "-b", "other"]);
    let after = repo.snapshot();
    let changed = attribute(&before, &after, &[]);
    assert_eq!(
        kinds(&protected(&[]).violations(&changed, &before, &after)),
        vec![ViolationKind::BranchChanged {
            from: Some("main".into()),
            to: Some("other".into())
        }]
    );

    let before = repo.snapshot();
    repo.git(&["tag", "v1"]);
    let after = repo.snapshot();
    let changed = attribute(&before, &after, &[]);
    assert_eq!(
        kinds(&protected(&[]).violations(&changed, &before, &after)),
        vec![ViolationKind::RefsChanged]
    );
}

#[test]
fn an_installed_git_hook_is_a_protected_path_change() {
    let repo = Repo::new();
    let before = repo.snapshot();
    repo.write(".git/hooks/pre-commit", "#!/bin/sh\ncurl evil\n");
    let after = repo.snapshot();
    let changed = attribute(&before, &after, &[]);
    assert_eq!(changed.added, s(&[".git/hooks/pre-commit"]));
    let violations = protected(&[]).violations(&changed, &before, &after);
    assert_eq!(
        kinds(&violations),
        vec![ViolationKind::ProtectedPathChanged {
            path: ".git/hooks/pre-commit".into(),
            rule: ".git".into(),
            reason: ProtectionReason::GitDir
        }]
    );
    // git's own files are no part of a patch.
    let diff = patch_now(&repo, &changed, &after, DEFAULT_DIFF_MAX_BYTES);
    assert!(diff.patch.is_empty());
}

/// The patch taken ahead, as soon as the after-snapshot is, is the attempt's
/// patch where the attempt's attributed paths are the ones it was taken of,
/// against the same tree: it shows the tree as that snapshot saw it, even
/// once the tree has moved on. Attributed otherwise (a path the run wrote
/// itself), the patch is taken anew.
#[test]
fn the_patch_taken_ahead_is_the_attempts_where_its_paths_and_base_are() {
    let repo = Repo::new();
    let before = repo.snapshot();
    repo.write("README.md", "hello, edited\n");
    repo.write("src/new.rs", "fn main() {}\n");
    let after = repo.snapshot();
    let changed = attribute(&before, &after, &[]);
    let now = |changed: &ChangedFiles, max: u64| patch_now(&repo, changed, &after, max);
    let taken = now(&changed, DEFAULT_DIFF_MAX_BYTES);
    let patch = String::from_utf8(taken.patch.clone()).unwrap();
    assert!(
        patch.contains("+hello, edited") && patch.contains("+fn main"),
        "{patch}"
    );
    // Taken ahead, all of them, before the tree moves on.
    let mut ahead = std::iter::repeat_with(|| {
        PatchAhead::take(repo.root(), &before, &after, None, DEFAULT_DIFF_MAX_BYTES)
    })
    .take(4)
    .collect::<Vec<_>>()
    .into_iter();
    repo.write("README.md", "hello, edited again\n");

    // Same paths, same tree: the patch taken ahead, of the tree as it was.
    let reused = attempt_diff(
        ahead.next(),
        repo.root(),
        &changed,
        &after,
        None,
        DEFAULT_DIFF_MAX_BYTES,
    )
    .unwrap();
    assert_eq!(reused, taken);

    // Another cap, other paths (one the run wrote itself) or another tree:
    // taken anew, of the tree as it is now.
    let own = [OwnWrite::new(
        "src/new.rs",
        after.entries["src/new.rs"].sha256.clone(),
    )];
    let with_own = attribute(&before, &after, &own);
    assert_eq!(with_own.attributed().count(), 1, "{with_own:?}");
    for (changed, max) in [
        (&changed, DEFAULT_DIFF_MAX_BYTES / 2),
        (&with_own, DEFAULT_DIFF_MAX_BYTES),
    ] {
        let got = attempt_diff(ahead.next(), repo.root(), changed, &after, None, max).unwrap();
        assert_eq!(got, now(changed, max));
        let got = String::from_utf8(got.patch).unwrap();
        assert!(got.contains("+hello, edited again"), "{got}");
    }
    let other_tree = "0".repeat(40);
    assert!(
        attempt_diff(
            ahead.next(),
            repo.root(),
            &changed,
            &after,
            Some(&other_tree),
            DEFAULT_DIFF_MAX_BYTES
        )
        .is_err(),
        "taken anew against a tree that does not exist"
    );
}

/// A commit that leaves enough loose objects starts `git maintenance run
/// --auto --detach`, whose repack rewrites `.git/info/refs` seconds later, in
/// the middle of whatever stage runs then; a scheduled maintenance's prefetch
/// moves `refs/prefetch/`. Neither changes what git runs or what a ref names,
/// and neither is the agent's.
#[test]
fn git_maintenance_in_the_background_is_not_the_agents_change() {
    let repo = Repo::new();
    repo.write("README.md", "hello again\n");
    repo.commit_all("second");
    repo.git(&["update-ref", "refs/prefetch/remotes/origin/main", "HEAD~1"]);
    let before = repo.snapshot();
    repo.git(&["gc", "--quiet"]);
    repo.git(&["update-ref", "refs/prefetch/remotes/origin/main", "HEAD"]);
    let after = repo.snapshot();
    assert!(repo.path(".git/info/refs").is_file(), "the repack wrote it");
    let changed = attribute(&before, &after, &[]);
    assert_eq!(
        generate_violations(&changed, &before, &after),
        Vec::<Violation>::new()
    );

    // What git reads from `.git/info/` is still the agent's change.
    let before = repo.snapshot();
    repo.write(".git/info/attributes", "*.rs filter=evil\n");
    let after = repo.snapshot();
    let changed = attribute(&before, &after, &[]);
    assert_eq!(changed.added, s(&[".git/info/attributes"]));
}

#[test]
fn changes_under_the_run_store_are_never_seen() {
    let repo = Repo::new();
    let before = repo.snapshot();
    repo.write(".specbridge/runs/0190/run.json", "{}");
    repo.write(".specbridge/lock", "");
    let after = repo.snapshot();
    assert!(after.is_clean(), "{:?}", after.entries);
    assert_eq!(attribute(&before, &after, &[]).attributed_count(), 0);
}

#[test]
fn protected_paths_cover_whole_components() {
    let repo = Repo::new();
    repo.write("specbridge.yaml", "version: 1\n");
    repo.write("prompts/plan.md", "plan\n");
    repo.commit_all("pipeline");
    let before = repo.snapshot();
    repo.write("specbridge.yaml", "version: 2\n");
    repo.write("prompts/plan.md", "rewritten\n");
    repo.write("db/migrations/001.sql", "drop table users;\n");
    repo.write("db/migrations-old/001.sql", "fine\n");
    repo.write("docs/spec.md", "edited by the agent\n");
    let after = repo.snapshot();
    let changed = attribute(&before, &after, &[]);
    let paths = ProtectedPaths::new(
        "./specbridge.yaml",
        ["prompts/plan.md"],
        ["docs/spec.md"],
        ["db/migrations/", "/outside/the/repo", "../elsewhere"],
    );
    let violations = paths.violations(&changed, &before, &after);
    let found: Vec<(String, ProtectionReason)> = violations
        .iter()
        .map(|v| match &v.kind {
            ViolationKind::ProtectedPathChanged { path, reason, .. } => (path.clone(), *reason),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(
        found,
        vec![
            (
                "db/migrations/001.sql".to_string(),
                ProtectionReason::Configured
            ),
            ("docs/spec.md".to_string(), ProtectionReason::Document),
            (
                "prompts/plan.md".to_string(),
                ProtectionReason::PipelineReference
            ),
            (
                "specbridge.yaml".to_string(),
                ProtectionReason::PipelineFile
            ),
        ]
    );
    let messages: Vec<&str> = violations.iter().map(|v| v.message.as_str()).collect();
    insta::assert_debug_snapshot!(messages, @r#"
    [
        "protected path db/migrations/001.sql changed (under db/migrations, protectedPaths)",
        "protected path docs/spec.md changed (a document written by this run)",
        "protected path prompts/plan.md changed (a file the pipeline names)",
        "protected path specbridge.yaml changed (the pipeline file)",
    ]
    "#);
    assert!(paths.covering("db/migrations-old/001.sql").is_none());
    assert!(paths
        .rules()
        .iter()
        .all(|r| !r.path.contains("outside") && !r.path.contains("..")));
}

#[test]
fn own_writes_are_not_attributed_unless_their_content_changed() {
    let repo = Repo::new();
    let before = repo.snapshot();
    let doc = "# Spec\n";
    repo.write("docs/spec.md", doc);
    let after = repo.snapshot();

    let own = [OwnWrite::new("./docs/spec.md", Some(sha(doc.as_bytes())))];
    let changed = attribute(&before, &after, &own);
    assert_eq!(changed.own_writes, s(&["docs/spec.md"]));
    assert_eq!(changed.attributed_count(), 0);
    assert!(generate_violations(&changed, &before, &after).is_empty());
    let paths = ProtectedPaths::new("specbridge.yaml", no_paths(), ["docs/spec.md"], no_paths());
    assert!(paths.violations(&changed, &before, &after).is_empty());

    // Someone rewrote the document after specbridge wrote it.
    let stale = [OwnWrite::new(
        "docs/spec.md",
        Some(sha(b"what specbridge wrote")),
    )];
    let changed = attribute(&before, &after, &stale);
    assert_eq!(changed.added, s(&["docs/spec.md"]));
    assert_eq!(paths.violations(&changed, &before, &after).len(), 1);
}

#[test]
fn any_change_during_a_generate_stage_is_a_violation() {
    let repo = Repo::new();
    repo.write("wip.txt", "user's\n");
    let before = repo.snapshot();
    repo.write("README.md", "the agent wrote this\n");
    repo.write("wip.txt", "user's, and the agent's\n");
    let after = repo.snapshot();
    let changed = attribute(&before, &after, &[]);
    let messages: Vec<String> = generate_violations(&changed, &before, &after)
        .into_iter()
        .map(|v| v.message)
        .collect();
    insta::assert_debug_snapshot!(messages, @r#"
    [
        "README.md changed during a generate stage, which is read-only",
        "wip.txt changed during a generate stage, which is read-only",
    ]
    "#);
}

#[test]
fn the_diff_holds_added_and_modified_files_and_leaves_the_index_alone() {
    let repo = Repo::new();
    repo.write("staged-by-user.txt", "staged\n");
    repo.git(&["add", "staged-by-user.txt"]);
    let before = repo.snapshot();
    let cached_before = repo.git(&["diff", "--cached", "--binary"]);
    let index_before = std::fs::read(repo.path(".git/index")).unwrap();

    repo.write("README.md", "hello\nworld\n");
    repo.write("src/new.rs", "fn new() {}\n");
    repo.write("logo.bin", [0u8, 159, 146, 150, 0, 1]);
    let after = repo.snapshot();
    let changed = attribute(&before, &after, &[]);
    let diff = patch_now(&repo, &changed, &after, DEFAULT_DIFF_MAX_BYTES);
    let patch = String::from_utf8_lossy(&diff.patch).into_owned();

    assert!(patch.contains("diff --git a/README.md b/README.md") && patch.contains("+world"));
    assert!(
        patch.contains("diff --git a/src/new.rs b/src/new.rs") && patch.contains("+fn new() {}")
    );
    assert!(patch.contains("GIT binary patch"), "{patch}");
    assert!(
        !patch.contains("staged-by-user.txt"),
        "pre-existing changes are not the attempt's"
    );
    assert!(!diff.info.truncated);
    assert_eq!(diff.info.bytes, diff.patch.len() as u64);
    assert_eq!(diff.info.full_bytes, diff.info.bytes);
    assert_eq!(diff.info.sha256, sha(&diff.patch));

    assert_eq!(repo.git(&["diff", "--cached", "--binary"]), cached_before);
    assert!(
        std::fs::read(repo.path(".git/index")).unwrap() == index_before,
        "the user's index changed"
    );
    assert_eq!(repo.snapshot().entries, after.entries);

    // The patch is real: it reverses cleanly on the tree it came from.
    let patch_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(patch_file.path(), &diff.patch).unwrap();
    repo.git(&[
        "apply",
        "--check",
        "-R",
        patch_file.path().to_str().unwrap(),
    ]);
}

#[test]
fn the_diff_is_capped_by_leaving_out_whole_files() {
    let repo = Repo::new();
    let before = repo.snapshot();
    repo.write("a-small.txt", "small\n");
    repo.write("b-large.txt", "line of text\n".repeat(200));
    repo.write("c-small.txt", "also small\n");
    let after = repo.snapshot();
    let changed = attribute(&before, &after, &[]);
    let max = 600;
    let diff = patch_now(&repo, &changed, &after, max);
    let patch = String::from_utf8(diff.patch.clone()).unwrap();

    assert!(
        patch.contains("+small") && patch.contains("+also small"),
        "{patch}"
    );
    assert!(!patch.contains("line of text"));
    assert!(diff.info.truncated);
    assert_eq!(diff.info.omitted_paths, s(&["b-large.txt"]));
    assert!(diff.info.bytes <= max && diff.info.full_bytes > 2600);
    assert_eq!(diff.info.sha256, sha(&diff.patch));
    let note = diff.info.note.unwrap();
    assert!(
        note.starts_with("1 file(s) left out of diff.patch"),
        "{note}"
    );
}

/// git trusts an index entry's stat data unless the entry is as new as the index
/// file ("racily clean"). A file rewritten with the same size in the second its
/// entry was recorded looks unchanged by its stat data alone: the patch must
/// still hold the change, however much later it is made.
#[test]
fn a_same_size_rewrite_in_the_second_of_the_commit_is_in_the_patch() {
    let repo = Repo::new();
    // Early in a second, so that the commit and the rewrite share it (20 ms
    // in: file times come from a clock that lags by up to a tick).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    std::thread::sleep(std::time::Duration::from_nanos(
        1_020_000_000 - u64::from(now.subsec_nanos()),
    ));
    repo.write("f.txt", "v1\n");
    repo.commit_all("one");
    let before = repo.snapshot();
    repo.write("f.txt", "v2\n");
    let after = repo.snapshot();
    let changed = attribute(&before, &after, &[]);
    assert_eq!(changed.modified, s(&["f.txt"]));
    // The patch is made in a later second than the index was written.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let diff = patch_now(&repo, &changed, &after, DEFAULT_DIFF_MAX_BYTES);
    let patch = String::from_utf8(diff.patch).unwrap();
    assert!(patch.contains("+v2"), "{patch}");
}

#[test]
fn names_with_spaces_and_unicode_work_throughout() {
    let repo = Repo::new();
    repo.write("ünïcode dir/naïve café.txt", "v1\n");
    repo.commit_all("unicode");
    let before = repo.snapshot();
    repo.write("ünïcode dir/naïve café.txt", "v2\n");
    repo.write("with space/new file [1].txt", "new\n");
    let after = repo.snapshot();
    let changed = attribute(&before, &after, &[]);
    assert_eq!(changed.modified, s(&["ünïcode dir/naïve café.txt"]));
    assert_eq!(changed.added, s(&["with space/new file [1].txt"]));
    assert_eq!(
        after.entries["ünïcode dir/naïve café.txt"]
            .sha256
            .as_deref(),
        Some(sha(b"v2\n").as_str())
    );
    let diff = patch_now(&repo, &changed, &after, DEFAULT_DIFF_MAX_BYTES);
    let patch = String::from_utf8(diff.patch).unwrap();
    assert!(
        patch.contains("b/ünïcode dir/naïve café.txt") && patch.contains("+v2"),
        "{patch}"
    );
    assert!(patch.contains("b/with space/new file [1].txt") && patch.contains("+new"));
}

#[test]
fn every_evidence_status_follows_from_the_evidence() {
    let some_change = ChangedFiles {
        modified: s(&["src/lib.rs"]),
        ..Default::default()
    };
    let nothing = ChangedFiles::default();
    let only_ambiguous = ChangedFiles {
        ambiguous: s(&["README.md"]),
        ..Default::default()
    };
    let violation = [Violation::new(ViolationKind::HeadMoved {
        from: Some("a".into()),
        to: Some("b".into()),
    })];
    let check = |name: &str, required, passed| VerificationResult {
        name: name.into(),
        required,
        passed,
    };
    let tests_pass = [check("tests", true, true), check("lint", false, false)];
    let tests_fail = [check("tests", true, false)];

    struct Case<'a> {
        runner: bool,
        valid: bool,
        changed: &'a ChangedFiles,
        violations: &'a [Violation],
        verification: &'a [VerificationResult],
        expect: EvidenceStatus,
        reason: &'a str,
    }
    use EvidenceStatus::*;
    let cases = [
        Case {
            runner: true,
            valid: true,
            changed: &some_change,
            violations: &[],
            verification: &tests_pass,
            expect: Verified,
            reason: "optional verification lint failed",
        },
        Case {
            runner: true,
            valid: true,
            changed: &some_change,
            violations: &[],
            verification: &[],
            expect: Verified,
            reason: "0 required verification(s) passed",
        },
        Case {
            runner: false,
            valid: true,
            changed: &some_change,
            violations: &[],
            verification: &tests_pass,
            expect: Failed,
            reason: "the runner did not succeed",
        },
        Case {
            runner: false,
            valid: false,
            changed: &nothing,
            violations: &[],
            verification: &[],
            expect: Failed,
            reason: "the runner did not succeed",
        },
        Case {
            runner: true,
            valid: true,
            changed: &nothing,
            violations: &[],
            verification: &tests_pass,
            expect: NoChange,
            reason: "the attempt changed no file",
        },
        Case {
            runner: true,
            valid: true,
            changed: &some_change,
            violations: &violation,
            verification: &tests_pass,
            expect: ImplementedUnverified,
            reason: "safety violation: HEAD moved",
        },
        Case {
            runner: true,
            valid: false,
            changed: &some_change,
            violations: &[],
            verification: &tests_pass,
            expect: ImplementedUnverified,
            reason: "the output did not validate",
        },
        Case {
            runner: true,
            valid: true,
            changed: &some_change,
            violations: &[],
            verification: &tests_fail,
            expect: ImplementedUnverified,
            reason: "required verification tests failed",
        },
        Case {
            runner: true,
            valid: true,
            changed: &only_ambiguous,
            violations: &[],
            verification: &tests_pass,
            expect: ImplementedUnverified,
            reason: "no change can be attributed",
        },
    ];
    for (i, c) in cases.iter().enumerate() {
        let d = judge(EvidenceInput {
            runner_succeeded: c.runner,
            output_valid: c.valid,
            changed: c.changed,
            violations: c.violations,
            verification: c.verification,
        });
        assert_eq!(d.status, c.expect, "case {i}: {:?}", d.reasons);
        assert!(
            d.reasons.iter().any(|r| r.contains(c.reason)),
            "case {i}: {:?} lacks {:?}",
            d.reasons,
            c.reason
        );
    }
}

#[test]
fn the_evidence_record_keeps_claims_apart_and_matches_its_schema() {
    let changed = ChangedFiles {
        added: s(&["a"]),
        ..Default::default()
    };
    let verification = [VerificationResult {
        name: "tests".into(),
        required: true,
        passed: false,
    }];
    let record = EvidenceRecord {
        schema_version: 1,
        stage: "implement.t1".into(),
        attempt: 1,
        kind: EvidenceKind::Execute,
        status: Some(EvidenceStatus::ImplementedUnverified),
        reasons: vec!["required verification tests failed".into()],
        violations: vec![Violation::new(ViolationKind::HeadMoved {
            from: Some("a".into()),
            to: None,
        })],
        head_before: Some("a".into()),
        head_after: None,
        changed: ChangeCounts::from(&changed),
        verification: VerificationSummary::from(&verification[..]),
        diff: None,
        findings: Vec::new(),
        claims: Some(Claims::new(serde_json::json!({"status": "completed"}))),
    };
    let json = serde_json::to_value(&record).unwrap();
    assert_eq!(json["claims"]["countsTowardStatus"], false);
    assert_eq!(json["violations"][0]["kind"], "head-moved");
    assert_eq!(json["violations"][0]["to"], serde_json::Value::Null);
    assert_eq!(json["changed"]["added"], 1);
    assert_eq!(json["verification"]["failed"][0], "tests");

    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(schemas_dir().join("evidence.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(validator.is_valid(&json));
    let roundtrip: EvidenceRecord = serde_json::from_value(json).unwrap();
    assert_eq!(roundtrip, record);
}

#[test]
fn snapshots_validate_against_their_schema() {
    let repo = Repo::new();
    repo.write("x.txt", "x");
    let snap = serde_json::to_value(repo.snapshot()).unwrap();
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(schemas_dir().join("git-snapshot.schema.json")).unwrap(),
    )
    .unwrap();
    assert!(jsonschema::validator_for(&schema).unwrap().is_valid(&snap));
}

fn schemas_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas")
}

fn protected(configured: &[&str]) -> ProtectedPaths {
    ProtectedPaths::new("specbridge.yaml", no_paths(), no_paths(), configured.iter())
}

fn kinds(violations: &[Violation]) -> Vec<ViolationKind> {
    violations.iter().map(|v| v.kind.clone()).collect()
}

/// What git's one-question commands say of the repository: HEAD, the branch, and
/// `status --porcelain=v1` (the snapshot reads all three from one porcelain v2).
fn asked_one_by_one(repo: &Repo) -> (Option<String>, Option<String>, Vec<(String, String)>) {
    let optional = |args: &[&str]| {
        let out = Command::new("git")
            .current_dir(repo.root())
            .args(args)
            .output()
            .unwrap();
        Some(String::from_utf8(out.stdout).unwrap().trim().to_string()).filter(|s| !s.is_empty())
    };
    let head = optional(&["rev-parse", "-q", "--verify", "HEAD^{commit}"]);
    let branch = optional(&["symbolic-ref", "--short", "-q", "HEAD"]);
    let status = repo.git(&[
        "-c",
        "core.quotepath=off",
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=all",
        "--no-renames",
    ]);
    let mut entries: Vec<(String, String)> = status
        .split('\0')
        .filter(|r| !r.is_empty())
        .map(|r| (r[3..].to_string(), r[..2].to_string()))
        .collect();
    entries.sort();
    (head, branch, entries)
}

fn status_letters(status: PathStatus) -> &'static [&'static str] {
    match status {
        PathStatus::Modified => &[" M", "M ", "MM"],
        PathStatus::Added => &["A ", "AM", "AD"],
        PathStatus::Deleted => &[" D", "D ", "MD"],
        PathStatus::Untracked => &["??"],
        PathStatus::Unmerged => &["UU", "AA", "DD", "AU", "UA", "DU", "UD"],
        PathStatus::TypeChanged => &[" T", "T "],
        PathStatus::Renamed | PathStatus::Copied => &[],
    }
}

#[test]
fn the_snapshot_agrees_with_git_asked_one_question_at_a_time() {
    let repo = Repo::new();
    repo.write("keep.txt", "k\n");
    repo.write("to-stage.txt", "s\n");
    repo.write("to-delete.txt", "d\n");
    repo.write("conflict.txt", "base\n");
    repo.commit_all("more");
    repo.git(&["checkout", "-q", "-b", "feature/x"]);
    repo.write("conflict.txt", "ours\n");
    repo.commit_all("ours");
    repo.git(&["checkout", "-q", "main"]);
    repo.write("conflict.txt", "theirs\n");
    repo.commit_all("theirs");
    let merge = Command::new("git")
        .current_dir(repo.root())
        .args(["merge", "-q", "feature/x"])
        .output()
        .unwrap();
    assert!(!merge.status.success(), "the merge conflicts");
    repo.write("keep.txt", "changed\n");
    repo.write("to-stage.txt", "staged\n");
    repo.git(&["add", "to-stage.txt"]);
    repo.remove("to-delete.txt");
    repo.git(&["mv", "README.md", "moved with space.md"]);
    repo.write("dir/new ü.txt", "n\n");
    repo.write("staged-new.txt", "a\n");
    repo.git(&["add", "staged-new.txt"]);

    let check = |repo: &Repo| {
        let snap = repo.snapshot();
        let (head, branch, entries) = asked_one_by_one(repo);
        assert_eq!(snap.head, head);
        assert_eq!(snap.branch, branch);
        let listed: Vec<&String> = snap.entries.keys().collect();
        let expected: Vec<&String> = entries.iter().map(|(p, _)| p).collect();
        assert_eq!(listed, expected);
        for (path, letters) in &entries {
            let status = snap.entries[path].status;
            assert!(
                status_letters(status).contains(&letters.as_str()),
                "{path}: {letters:?} read as {status:?}"
            );
        }
        snap
    };
    let snap = check(&repo);
    assert_eq!(snap.entries["conflict.txt"].status, PathStatus::Unmerged);
    assert_eq!(snap.entries.len(), 8, "{:?}", snap.entries.keys());

    repo.git(&["merge", "--abort"]);
    let head = repo.git(&["rev-parse", "HEAD"]);
    repo.git(&["checkout", "-q", "--detach", head.trim()]);
    let detached = check(&repo);
    assert_eq!(detached.branch, None);
    repo.git(&["checkout", "-q", "feature/x"]);
    assert_eq!(check(&repo).branch.as_deref(), Some("feature/x"));
}
