//! Checks of runner settings and commands: permission modes, forbidden flags,
//! argv arrays, verification, durations.

use super::*;

impl Checker<'_> {
    pub(super) fn argv(&mut self, argv: &Argv, path: &str) {
        match argv {
            Argv::Shell(line) => {
                let at = self.at_value(path);
                self.error(
                    "shell-string",
                    path,
                    at,
                    format!("`{path}` is a shell string; specbridge runs commands without a shell"),
                )
                .help = Some(format!(
                    "give the arguments as a list: `[{}]`",
                    suggest_list(line)
                ));
            }
            Argv::List(items) if items.is_empty() => {
                let at = self.at_value(path);
                self.error("empty-argv", path, at, format!("`{path}` is empty"));
            }
            Argv::List(items) if items[0].trim().contains(char::is_whitespace) => {
                let p = child_index(path, 0);
                let at = self.at_value(&p);
                self.error(
                    "shell-string",
                    &p,
                    at,
                    format!("`{p}` holds a whole command line; specbridge runs commands without a shell"),
                )
                .help = Some(format!("give the arguments as a list: `[{}]`", suggest_list(&items[0])));
            }
            Argv::List(_) => {}
        }
    }

    pub(super) fn verification(&mut self, cmds: &[VerificationCommand], base: &str) {
        let mut names = BTreeSet::new();
        for (i, v) in cmds.iter().enumerate() {
            let path = child_index(base, i);
            self.argv(&v.argv, &child_key(&path, "argv"));
            if let Some(t) = v.timeout {
                self.nonzero_duration(t.as_millis(), &child_key(&path, "timeout"));
            }
            if let Some(sb) = &v.sandbox {
                self.command_sandbox(sb, &child_key(&path, "sandbox"));
            }
            if !names.insert(v.name.as_str()) {
                let p = child_key(&path, "name");
                let at = self.at_value(&p);
                self.error(
                    "duplicate-verification",
                    &p,
                    at,
                    format!("two verification commands are named `{}`", v.name),
                );
            }
        }
    }

    /// `writable` entries of a command's sandbox, by the rule the run applies.
    pub(super) fn command_sandbox(&mut self, sb: &CommandSandbox, path: &str) {
        let CommandSandbox::Confined(options) = sb else {
            return;
        };
        for (i, entry) in options.writable.iter().enumerate() {
            if let Some(problem) = crate::sandbox::writable_form_problem(entry) {
                let p = child_index(&child_key(path, "writable"), i);
                let at = self.at_value(&p);
                self.error(
                    "invalid-sandbox",
                    &p,
                    at,
                    format!("`{p}` is `{entry}`: {problem}"),
                );
            }
        }
    }

    pub(super) fn nonzero_duration(&mut self, ms: u64, path: &str) {
        if ms == 0 {
            let at = self.at_value(path);
            self.error(
                "invalid-value",
                path,
                at,
                format!("`{path}` must be longer than zero"),
            );
        }
    }

    pub(super) fn runner(&mut self, r: &RunnerSettings, base: &str, stage: Option<&StageDef>) {
        if let Some(mode) = &r.permission_mode {
            let p = child_key(base, "permissionMode");
            let at = self.at_value(&p);
            if safety::forbidden_mode(mode).is_some() {
                // Reported with the other forbidden values, as a safety error.
            } else if !safety::ALLOWED_MODES.contains(&mode.as_str()) {
                let help = match did_you_mean(mode, safety::ALLOWED_MODES.iter().copied()) {
                    Some(m) => format!("did you mean `{m}`?"),
                    None => format!("use one of {}", safety::ALLOWED_MODES.join(", ")),
                };
                self.error(
                    "invalid-mode",
                    &p,
                    at,
                    format!("unknown permission mode `{mode}`"),
                )
                .help = Some(help);
            } else if mode == "acceptEdits" && stage.is_none_or(|s| s.kind == StageKind::Execute) {
                self.warning(
                    "accept-edits",
                    &p,
                    "`acceptEdits` lets the agent run `rm`, `mv` and shell redirections inside the repository without asking; specbridge adds deny rules for them (Bash(rm:*), Bash(mv:*), …)".into(),
                );
            }
        }
        if let Some(s) = stage.filter(|s| s.kind == StageKind::Generate) {
            for (key, set) in [
                ("tools", r.tools.is_some()),
                ("allowedBashRules", r.allowed_bash_rules.is_some()),
                ("permissionMode", r.permission_mode.is_some()),
            ] {
                if set {
                    self.warning(
                        "ignored-setting",
                        &child_key(base, key),
                        format!("`{key}` is ignored for generate stage `{}`: generate stages are always read-only", s.id),
                    );
                }
            }
        }
        if r.max_turns == Some(0) {
            let p = child_key(base, "maxTurns");
            let at = self.at_value(&p);
            self.error("invalid-value", &p, at, format!("`{p}` must be at least 1"));
        }
        if r.retries
            .is_some_and(|n| n > crate::pipeline::resolve::MAX_RETRIES)
        {
            let p = child_key(base, "retries");
            let at = self.at_value(&p);
            self.error(
                "invalid-value",
                &p,
                at,
                format!(
                    "`{p}` must be at most {} (0 disables retries)",
                    crate::pipeline::resolve::MAX_RETRIES
                ),
            );
        }
        if let Some(b) = r.max_budget_usd {
            self.positive_money(b, &child_key(base, "maxBudgetUsd"));
        }
        if let Some(t) = r.timeout {
            self.nonzero_duration(t.as_millis(), &child_key(base, "timeout"));
        }
        for (i, dir) in r.plugin_dirs.iter().flatten().enumerate() {
            if !self.root.join(dir).is_dir() {
                let p = child_index(&child_key(base, "pluginDirs"), i);
                let at = self.at_value(&p);
                self.error(
                    "missing-plugin-dir",
                    &p,
                    at,
                    format!("plugin folder `{dir}` not found"),
                )
                .help = Some("plugin folders are relative to the repository root".into());
            }
        }
    }
}

/// A shell line as a YAML flow list, for a help message; quotes words that YAML
/// would otherwise read differently.
pub(super) fn suggest_list(line: &str) -> String {
    line.split_whitespace()
        .map(|w| {
            let plain = w
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./=+@%^".contains(c));
            if plain {
                w.to_string()
            } else {
                format!("\"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""))
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}
