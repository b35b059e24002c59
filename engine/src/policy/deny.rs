//! Protected paths as deny rules (docs/claude-code-runner.md): the CLI refuses an edit of
//! `.git/`, `.specbridge/`, `.claude/`, the pipeline file, its prompts and schemas,
//! the run's documents and `protectedPaths` before specbridge has to detect it
//! after the fact.

use crate::evidence::ProtectedPaths;

/// The deny rules of every protected path. A path may be a file or a folder (or
/// not exist yet), so each gets both forms: `Edit(./p)` and `Edit(./p/**)`. An
/// `Edit` rule covers every file-editing tool (verified on 2.1.332 for Write, Edit
/// and NotebookEdit).
pub(crate) fn protected_deny_rules(paths: &ProtectedPaths) -> Vec<String> {
    let mut out = Vec::new();
    for rule in paths.rules() {
        let p = pattern(&rule.path);
        for r in [format!("Edit(./{p})"), format!("Edit(./{p}/**)")] {
            if !out.contains(&r) {
                out.push(r);
            }
        }
    }
    out
}

/// A path as a rule pattern. A character that could end the rule or act as a
/// wildcard is replaced by `?` (one character): the pattern then matches the path
/// and perhaps a few names like it, which errs on the side of denying.
fn pattern(path: &str) -> String {
    path.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '_' | '-' | '@' | '+') {
                c
            } else {
                '?'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_folders_get_both_forms() {
        let paths = ProtectedPaths::new(
            "specbridge.yaml",
            ["prompts/a b.md"],
            ["docs/x(1).md"],
            ["db"],
        );
        let rules = protected_deny_rules(&paths);
        for r in [
            "Edit(./.git)",
            "Edit(./.git/**)",
            "Edit(./.specbridge/**)",
            "Edit(./.claude/**)",
            "Edit(./specbridge.yaml)",
            "Edit(./prompts/a?b.md)",
            "Edit(./docs/x?1?.md)",
            "Edit(./db/**)",
        ] {
            assert!(rules.contains(&r.to_string()), "{r}: {rules:?}");
        }
    }
}
