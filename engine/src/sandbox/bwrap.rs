//! Confining a command specbridge runs itself (a check stage, a verification
//! command) in bubblewrap (docs/claude-code-runner.md): the command may run code the agent wrote.
//!
//! Inside: the whole file system read-only, the repository writable except `.git`
//! and `.specbridge` (a write to `.git/config` or a hook would run outside the
//! sandbox at the next `git status`; `.specbridge` holds the records), a private
//! `/tmp`, a private `/dev` and `/proc`, no network (a new network namespace: not
//! even the host's loopback), a new PID namespace, and `--die-with-parent`. There
//! is no `--new-session`: the command stays in the supervisor's process group, so
//! a timeout's SIGTERM reaches it directly; the PID namespace ends whatever it
//! started, even a child that left the group, when bubblewrap goes.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Folders of the repository that stay read-only inside the sandbox.
pub const READ_ONLY_IN_REPOSITORY: &[&str] = &[".git", ".specbridge"];

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("sandbox.writable entry `{entry}`: {reason}")]
    Writable { entry: String, reason: String },
    #[error("failed to create the writable folder {path}")]
    CreateWritable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// How a command was run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SandboxMode {
    /// Under bubblewrap.
    Bubblewrap,
    /// With the user's full rights (`sandbox: off` in the pipeline).
    Off,
}

/// The sandbox a command actually ran in, as `verification.json` and a check's
/// `process.json` record it. The command's own argv is recorded apart from the
/// wrapper, as written in the pipeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppliedSandbox {
    pub mode: SandboxMode,
    /// The bubblewrap executable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bubblewrap: Option<String>,
    /// Paths the command could write (besides its private `/tmp`, `/dev`).
    pub writable: Vec<String>,
    /// Paths inside writable ones that stayed read-only.
    pub read_only: Vec<String>,
    /// Whether the command had the network.
    pub network: bool,
    /// `HOME` inside the sandbox (read-only unless made writable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<String>,
    /// The wrapper placed before the command's argv, up to and including `--`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wrapper_argv: Vec<String>,
}

impl AppliedSandbox {
    /// The record of a command run with `sandbox: off`.
    pub fn off() -> Self {
        AppliedSandbox {
            mode: SandboxMode::Off,
            bubblewrap: None,
            writable: Vec::new(),
            read_only: Vec::new(),
            network: true,
            home: None,
            wrapper_argv: Vec::new(),
        }
    }
}

/// Why a `writable` entry, as written, is not usable; `None` when it is. The one
/// rule for validation and for the run: an absolute path, or `~/…` (`~` alone is
/// the home folder), never `..` (it would hide what is opened up).
pub fn writable_form_problem(entry: &str) -> Option<&'static str> {
    let rest = if entry == "~" {
        ""
    } else if let Some(rest) = entry.strip_prefix("~/") {
        rest
    } else if entry.starts_with('~') {
        return Some("`~user` is not supported; write `~/…` or an absolute path");
    } else if entry.starts_with('/') {
        entry
    } else {
        return Some("write an absolute path or `~/…`; the repository itself is writable already");
    };
    if Path::new(rest)
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Some("`..` is not allowed; name the folder itself");
    }
    None
}

/// A `writable` entry as a path, `~` replaced by `home`.
pub fn expand_writable(entry: &str, home: Option<&Path>) -> Result<PathBuf, SandboxError> {
    let bad = |reason: &str| SandboxError::Writable {
        entry: entry.to_string(),
        reason: reason.to_string(),
    };
    if let Some(problem) = writable_form_problem(entry) {
        return Err(bad(problem));
    }
    if entry == "~" || entry.starts_with("~/") {
        let home = home.ok_or_else(|| bad("HOME is not set, so `~` means nothing"))?;
        return Ok(home.join(entry.trim_start_matches('~').trim_start_matches('/')));
    }
    Ok(PathBuf::from(entry))
}

/// The user's home folder, from `HOME`.
pub fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// Everything that decides a bubblewrap sandbox.
#[derive(Debug, Clone)]
pub struct Confinement {
    pub bubblewrap: PathBuf,
    /// The repository (working tree) root, writable.
    pub root: PathBuf,
    pub home: Option<PathBuf>,
    /// Extra writable paths, expanded.
    pub writable: Vec<PathBuf>,
    pub network: bool,
    /// The repository's common git folder (`git rev-parse --git-common-dir`),
    /// required so that no confinement leaves it out. A linked worktree's lies
    /// outside its root, in the main checkout: it is made read-only like the
    /// root's own `.git`.
    pub git_common_dir: PathBuf,
}

impl Confinement {
    /// Creates missing writable folders (an opt-in names a cache that a first build
    /// creates), then returns the bubblewrap argv up to `--` and its record.
    pub fn wrapper(&self) -> Result<(Vec<String>, AppliedSandbox), SandboxError> {
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let root = canon(&self.root);
        let mut extras = Vec::new();
        for path in &self.writable {
            if !path.exists() {
                std::fs::create_dir_all(path).map_err(|source| SandboxError::CreateWritable {
                    path: path.clone(),
                    source,
                })?;
            }
            extras.push(canon(path));
        }
        let s = |p: &Path| p.display().to_string();
        let mut argv: Vec<String> = vec![s(&self.bubblewrap)];
        let mut push =
            |items: &[&str]| argv.extend(items.iter().map(std::string::ToString::to_string));
        push(&["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]);
        push(&["--tmpfs", "/tmp"]);
        // A HOME under /tmp (a CI job's, a test's) would vanish behind the private
        // /tmp; it stays visible, read-only, like any other home.
        let home = self.home.clone().unwrap_or_else(|| PathBuf::from("/tmp"));
        if home.starts_with("/tmp") && home != Path::new("/tmp") && home.is_dir() {
            push(&["--ro-bind", &s(&home), &s(&home)]);
        }
        // Extra paths before the repository, and the read-only folders last, so
        // that no opt-in can make `.git` or `.specbridge` writable.
        for p in &extras {
            push(&["--bind", &s(p), &s(p)]);
        }
        push(&["--bind", &s(&root), &s(&root)]);
        let mut read_only = Vec::new();
        for name in READ_ONLY_IN_REPOSITORY {
            let p = root.join(name);
            let real_folder = std::fs::symlink_metadata(&p).is_ok_and(|m| !m.is_symlink());
            if real_folder {
                push(&["--ro-bind", &s(&p), &s(&p)]);
                read_only.push(s(&p));
            }
        }
        // A linked worktree's git folder is its main checkout's: bound after
        // every opt-in, so that one over the main checkout cannot open it (its
        // hooks run at the user's next commit), and after the private /tmp, so
        // that git still finds it when the checkout lies there.
        let common = canon(&self.git_common_dir);
        if !common.starts_with(&root) && common.is_dir() {
            push(&["--ro-bind", &s(&common), &s(&common)]);
            read_only.push(s(&common));
        }
        push(&["--unshare-pid", "--die-with-parent"]);
        if !self.network {
            push(&["--unshare-net"]);
        }
        // `/tmp` is the private one; a TMPDIR elsewhere would be read-only.
        push(&["--setenv", "TMPDIR", "/tmp"]);
        push(&["--setenv", "HOME", &s(&home)]);
        // The bound path: a relative or symlinked root would name something else
        // (or nothing) inside the sandbox.
        push(&["--chdir", &s(&root), "--"]);
        let mut writable = vec![s(&root)];
        writable.extend(extras.iter().map(|p| s(p)));
        let applied = AppliedSandbox {
            mode: SandboxMode::Bubblewrap,
            bubblewrap: Some(s(&self.bubblewrap)),
            writable,
            read_only,
            network: self.network,
            home: Some(s(&home)),
            wrapper_argv: argv.clone(),
        };
        Ok((argv, applied))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writable_entries_are_absolute_or_under_home() {
        assert_eq!(writable_form_problem("/var/cache/x"), None);
        assert_eq!(writable_form_problem("~/.cargo"), None);
        assert_eq!(writable_form_problem("~"), None);
        assert!(writable_form_problem("target").is_some());
        assert!(writable_form_problem("../cache").is_some());
        assert!(writable_form_problem("~bob/x").is_some());
        assert!(writable_form_problem("/a/../etc").is_some());
        assert!(writable_form_problem("~/x/../../etc").is_some());
    }

    #[test]
    fn tilde_is_the_home_folder() {
        let home = Path::new("/home/u");
        assert_eq!(
            expand_writable("~/.cache/go", Some(home)).unwrap(),
            PathBuf::from("/home/u/.cache/go")
        );
        assert_eq!(expand_writable("~", Some(home)).unwrap(), home);
        assert!(expand_writable("~/x", None).is_err());
        assert!(expand_writable("rel", Some(home)).is_err());
    }

    #[test]
    fn the_repository_is_writable_and_its_records_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        std::fs::create_dir_all(root.join(".git")).unwrap();
        let cache = dir.path().join("cache/new");
        let c = Confinement {
            bubblewrap: "/usr/bin/bwrap".into(),
            root: root.clone(),
            home: Some("/home/u".into()),
            writable: vec![cache.clone()],
            network: false,
            git_common_dir: root.join(".git"),
        };
        let (argv, applied) = c.wrapper().unwrap();
        assert!(cache.is_dir(), "a missing writable folder is created");
        let line = argv.join(" ");
        let root = std::fs::canonicalize(&root).unwrap();
        let cache = std::fs::canonicalize(&cache).unwrap();
        let (r, g, k) = (
            root.display().to_string(),
            root.join(".git").display().to_string(),
            cache.display().to_string(),
        );
        assert!(line.starts_with("/usr/bin/bwrap --ro-bind / / "), "{line}");
        assert!(line.ends_with(&format!(" --chdir {r} --")), "{line}");
        let at = |needle: &str| {
            line.find(needle)
                .unwrap_or_else(|| panic!("{needle}: {line}"))
        };
        assert!(at(&format!("--bind {k} {k}")) < at(&format!("--bind {r} {r}")));
        assert!(at(&format!("--bind {r} {r}")) < at(&format!("--ro-bind {g} {g}")));
        assert!(at("--tmpfs /tmp") < at(&format!("--bind {k} {k}")));
        assert!(line.contains("--unshare-net") && line.contains("--die-with-parent"));
        assert!(
            !line.contains("--new-session"),
            "the process group must hold"
        );
        assert_eq!(applied.writable, vec![r.clone(), k]);
        assert_eq!(
            applied.read_only,
            vec![g],
            "the root's own .git, bound once"
        );
        assert!(!applied.network);

        let open = Confinement {
            network: true,
            writable: Vec::new(),
            ..c
        };
        let (argv, applied) = open.wrapper().unwrap();
        assert!(!argv.iter().any(|a| a == "--unshare-net"));
        assert!(applied.network);
    }

    #[test]
    fn a_linked_worktrees_git_folder_is_read_only_whatever_is_opened() {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().join("main");
        let common = main.join(".git");
        std::fs::create_dir_all(&common).unwrap();
        let root = dir.path().join("worktree");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join(".git"), "gitdir: ../main/.git/worktrees/w\n").unwrap();
        let c = Confinement {
            bubblewrap: "/usr/bin/bwrap".into(),
            root: root.clone(),
            home: Some("/home/u".into()),
            // An opt-in over the whole main checkout.
            writable: vec![main.clone()],
            network: false,
            git_common_dir: common.clone(),
        };
        let (argv, applied) = c.wrapper().unwrap();
        let line = argv.join(" ");
        let s = |p: &Path| std::fs::canonicalize(p).unwrap().display().to_string();
        let (m, g) = (s(&main), s(&common));
        let at = |needle: &str| {
            line.find(needle)
                .unwrap_or_else(|| panic!("{needle}: {line}"))
        };
        assert!(at(&format!("--bind {m} {m}")) < at(&format!("--ro-bind {g} {g}")));
        assert!(at("--tmpfs /tmp") < at(&format!("--ro-bind {g} {g}")));
        // The worktree's own `.git`, a file naming the git folder, stays
        // read-only too.
        assert_eq!(
            applied.read_only,
            vec![format!("{}/.git", s(&root)), g],
            "{line}"
        );
    }
}
