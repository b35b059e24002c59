//! Protected paths and the other safety rules checked on evidence (docs/evidence.md): a
//! protected path changed, HEAD moved, the branch or any local ref changed.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::attribute::ChangedFiles;
use super::paths::{is_under, normalize_rel_path};
use super::snapshot::GitSnapshot;
use super::RUN_STORE_DIR;

/// The CLI's project settings folder (settings, hooks, agents, commands).
pub(crate) const CLAUDE_SETTINGS_DIR: &str = ".claude";

/// Why a path is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ProtectionReason {
    GitDir,
    RunStore,
    /// `.claude/`: the CLI's project settings and hooks, which the next agent
    /// invocation (or a user's own session) would load.
    ClaudeSettings,
    PipelineFile,
    /// A prompt or schema file the pipeline names.
    PipelineReference,
    /// A document written by a generate stage of the run.
    Document,
    /// Listed in the pipeline's `protectedPaths`.
    Configured,
}

impl ProtectionReason {
    fn describe(self) -> &'static str {
        match self {
            ProtectionReason::GitDir => "git's own directory",
            ProtectionReason::RunStore => "the run store",
            ProtectionReason::ClaudeSettings => "Claude Code's project settings",
            ProtectionReason::PipelineFile => "the pipeline file",
            ProtectionReason::PipelineReference => "a file the pipeline names",
            ProtectionReason::Document => "a document written by this run",
            ProtectionReason::Configured => "protectedPaths",
        }
    }
}

/// A path (a file, or a folder covering everything under it) no agent may change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProtectedRule {
    pub path: String,
    pub reason: ProtectionReason,
}

/// Every protected path of a run: `.git/`, `.specbridge/` and `.claude/` always, the pipeline file,
/// the prompts and schemas it names, the run's documents, and `protectedPaths`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedPaths {
    rules: Vec<ProtectedRule>,
}

impl ProtectedPaths {
    /// Paths are relative to the repository root. A path outside the repository (an
    /// absolute one, or one through `..`) cannot show up in a snapshot and is left out.
    pub fn new<A, B, C>(pipeline_file: &str, referenced: A, documents: B, configured: C) -> Self
    where
        A: IntoIterator,
        A::Item: AsRef<str>,
        B: IntoIterator,
        B::Item: AsRef<str>,
        C: IntoIterator,
        C::Item: AsRef<str>,
    {
        let mut paths = ProtectedPaths {
            rules: vec![
                ProtectedRule {
                    path: ".git".into(),
                    reason: ProtectionReason::GitDir,
                },
                ProtectedRule {
                    path: RUN_STORE_DIR.into(),
                    reason: ProtectionReason::RunStore,
                },
                ProtectedRule {
                    path: CLAUDE_SETTINGS_DIR.into(),
                    reason: ProtectionReason::ClaudeSettings,
                },
            ],
        };
        paths.add(pipeline_file, ProtectionReason::PipelineFile);
        for p in referenced {
            paths.add(p.as_ref(), ProtectionReason::PipelineReference);
        }
        for p in documents {
            paths.add(p.as_ref(), ProtectionReason::Document);
        }
        for p in configured {
            paths.add(p.as_ref(), ProtectionReason::Configured);
        }
        paths
    }

    fn add(&mut self, raw: &str, reason: ProtectionReason) {
        let raw = raw.trim();
        if raw.is_empty() || raw.starts_with('/') {
            return;
        }
        let path = normalize_rel_path(raw);
        if path.split('/').any(|c| c == "..") {
            return;
        }
        self.rules.push(ProtectedRule { path, reason });
    }

    pub fn rules(&self) -> &[ProtectedRule] {
        &self.rules
    }

    /// The first rule covering `path`, by whole path components.
    pub fn covering(&self, path: &str) -> Option<&ProtectedRule> {
        self.rules.iter().find(|r| is_under(path, &r.path))
    }

    /// Every safety rule the attempt broke. Changes specbridge made itself
    /// (`ownWrites`) and pre-existing ones are not the attempt's and break nothing.
    pub fn violations(
        &self,
        changed: &ChangedFiles,
        before: &GitSnapshot,
        after: &GitSnapshot,
    ) -> Vec<Violation> {
        let mut found: Vec<Violation> = changed
            .changed_during_attempt()
            .filter_map(|path| {
                self.covering(path).map(|rule| {
                    Violation::new(ViolationKind::ProtectedPathChanged {
                        path: path.clone(),
                        rule: rule.path.clone(),
                        reason: rule.reason,
                    })
                })
            })
            .collect();
        found.sort_by(|a, b| a.message.cmp(&b.message));
        found.extend(head_violations(before, after));
        found
    }
}

/// HEAD, branch and refs: how a commit, checkout, tag or stash by the agent shows up,
/// since nothing under `.git/` appears in git status.
pub(crate) fn head_violations(before: &GitSnapshot, after: &GitSnapshot) -> Vec<Violation> {
    let mut found = Vec::new();
    if before.head != after.head {
        found.push(Violation::new(ViolationKind::HeadMoved {
            from: before.head.clone(),
            to: after.head.clone(),
        }));
    }
    if before.branch != after.branch {
        found.push(Violation::new(ViolationKind::BranchChanged {
            from: before.branch.clone(),
            to: after.branch.clone(),
        }));
    }
    // A moved HEAD moves its branch's ref too; report that once.
    if found.is_empty() && before.refs_sha256 != after.refs_sha256 {
        found.push(Violation::new(ViolationKind::RefsChanged));
    }
    found
}

/// A safety rule broken by an attempt: the stage ends `safety-violation` (exit 6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Violation {
    #[serde(flatten)]
    pub kind: ViolationKind,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "kind",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase"
)]
pub enum ViolationKind {
    ProtectedPathChanged {
        path: String,
        /// The protected path covering it.
        rule: String,
        reason: ProtectionReason,
    },
    /// The agent committed, reset or checked out: it must never move HEAD.
    HeadMoved {
        from: Option<String>,
        to: Option<String>,
    },
    BranchChanged {
        from: Option<String>,
        to: Option<String>,
    },
    /// A local branch, tag or stash was created, moved or deleted.
    RefsChanged,
    /// Generate stages are read-only: any change they make is a violation.
    ChangedByGenerate { path: String },
}

impl Violation {
    pub fn new(kind: ViolationKind) -> Self {
        let message = match &kind {
            ViolationKind::ProtectedPathChanged { path, rule, reason } if path == rule => {
                format!("protected path {path} changed ({})", reason.describe())
            }
            ViolationKind::ProtectedPathChanged { path, rule, reason } => format!(
                "protected path {path} changed (under {rule}, {})",
                reason.describe()
            ),
            ViolationKind::HeadMoved { from, to } => format!(
                "HEAD moved from {} to {}: an agent must never commit",
                or_none(from),
                or_none(to)
            ),
            ViolationKind::BranchChanged { from, to } => format!(
                "the checked-out branch changed from {} to {}",
                or_none(from),
                or_none(to)
            ),
            ViolationKind::RefsChanged => {
                "a local branch, tag or stash was created, moved or deleted".to_string()
            }
            ViolationKind::ChangedByGenerate { path } => {
                format!("{path} changed during a generate stage, which is read-only")
            }
        };
        Violation { kind, message }
    }
}

fn or_none(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("(none)")
}
