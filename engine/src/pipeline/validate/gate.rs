//! Warnings about a pipeline that runs but proves little: execute stages whose only
//! verification cannot fail a broken build, and a spec file the prompts ask for that
//! is not there.

use super::Checker;
use crate::pipeline::locate::{child_index, child_key};
use crate::pipeline::model::{StageKind, VerificationCommand};

/// Commands that pass whatever the code does: they look at whitespace or the tree,
/// never build or test anything.
fn cannot_fail_a_build(argv: &[String]) -> bool {
    let words: Vec<&str> = argv.iter().map(String::as_str).collect();
    matches!(
        words.as_slice(),
        ["git", "diff", "--check", ..]
            | ["git", "status", ..]
            | ["git", "diff", ..]
            | ["true"]
            | [":"]
            | ["echo", ..]
    )
}

/// The file the starter's prompts read.
const SPEC_FILE: &str = "SPEC.md";

impl Checker<'_> {
    pub(super) fn gate(&mut self) {
        let f = &self.p.file;
        for (i, s) in f.stages.iter().enumerate() {
            if s.kind != StageKind::Execute {
                continue;
            }
            let (cmds, path): (&[VerificationCommand], String) = match &s.verification {
                Some(own) => (own, child_key(&child_index("stages", i), "verification")),
                None => (&f.verification, "verification".to_string()),
            };
            let required: Vec<&VerificationCommand> =
                cmds.iter().filter(|c| c.required.unwrap_or(true)).collect();
            let weak = !required.is_empty()
                && required
                    .iter()
                    .all(|c| c.argv.as_list().is_some_and(cannot_fail_a_build));
            if weak {
                let names: Vec<&str> = required.iter().map(|c| c.name.as_str()).collect();
                self.warning(
                    "weak-verification",
                    &path,
                    format!(
                        "execute stage `{}` is verified only by {}, which cannot fail a broken build: its changes come out `verified` whatever they do",
                        s.id,
                        names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
                    ),
                )
                .help = Some(
                    "add the project's test command, e.g. `{ name: tests, argv: [cargo, test], required: true }`, and allow it to the agent in `allowedBashRules`".into(),
                );
            }
        }
        if self.root.join(SPEC_FILE).symlink_metadata().is_err() {
            let dir = self.p.path.parent().unwrap_or(self.root).to_path_buf();
            let asking = f.stages.iter().enumerate().find(|(_, s)| {
                s.prompt.as_deref().is_some_and(|p| {
                    let text = if p.contains('\n') {
                        p.to_string()
                    } else {
                        std::fs::read_to_string(dir.join(p)).unwrap_or_default()
                    };
                    text.contains(SPEC_FILE)
                })
            });
            if let Some((i, s)) = asking {
                let path = child_key(&child_index("stages", i), "prompt");
                self.warning(
                    "missing-spec",
                    &path,
                    format!(
                        "the prompt of stage `{}` reads {SPEC_FILE}, which does not exist at the repository root",
                        s.id
                    ),
                )
                .help = Some(format!("describe the change in {SPEC_FILE} and commit it before `specbridge run`"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::cannot_fail_a_build;

    #[test]
    fn tree_checks_cannot_fail_a_build_and_tests_can() {
        let v = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
        assert!(cannot_fail_a_build(&v("git diff --check")));
        assert!(cannot_fail_a_build(&v("true")));
        assert!(!cannot_fail_a_build(&v("cargo test")));
        assert!(!cannot_fail_a_build(&v("make test")));
        assert!(!cannot_fail_a_build(&v("git")));
    }
}
