//! The tool policy of every agent stage, checked by the same code that assembles
//! the agent's argv ([`crate::policy::check`]), so that `validate` and `run` never
//! disagree. Each refusal points at the runner section that wrote the value: the
//! stage's own `runner:` when it sets the key, else the pipeline's.

use super::*;
use crate::pipeline::{ResolvedRunner, RunOverrides};
use crate::policy::{self, Field, RefusalClass};

impl Checker<'_> {
    pub(super) fn policy(&mut self) {
        let f = &self.p.file;
        // The pipeline's section on its own too, so that a refused value is found
        // even where no stage uses it.
        let mut targets: Vec<Option<(usize, &StageDef)>> = vec![None];
        targets.extend(
            f.stages
                .iter()
                .enumerate()
                .filter(|(_, s)| s.kind.is_agent())
                .map(Some),
        );
        let mut reported: BTreeSet<(String, String)> = self
            .out
            .iter()
            .filter(|d| d.is_error())
            .filter_map(|d| d.path.clone().map(|p| (String::new(), p)))
            .collect();
        for target in targets {
            let resolved =
                ResolvedRunner::for_stage(f, target.map(|(_, s)| s), &RunOverrides::default());
            let base = |field: &Field| match target {
                Some((i, s)) if s.runner.as_ref().is_some_and(|r| sets(r, field)) => {
                    child_key(&child_index("stages", i), "runner")
                }
                _ => "runner".to_string(),
            };
            match policy::check(&resolved) {
                Ok(checked) => {
                    for o in checked.opt_ins() {
                        let path = match target {
                            Some((i, s))
                                if s.runner.as_ref().is_some_and(|r| sets_key(r, o.field)) =>
                            {
                                child_key(&child_key(&child_index("stages", i), "runner"), o.field)
                            }
                            _ => child_key("runner", o.field),
                        };
                        if reported.insert(("opt-in".into(), path.clone())) {
                            self.warning("policy-opt-in", &path, o.message.clone());
                        }
                    }
                }
                Err(refusals) => {
                    for r in refusals {
                        // Reported by the mode checks, with the value's location.
                        if r.field == Field::PermissionMode {
                            continue;
                        }
                        let path = format!("{}.{}", base(&r.field), r.field.path_in_runner());
                        if reported.contains(&(String::new(), path.clone()))
                            || !reported.insert((r.code.to_string(), path.clone()))
                        {
                            continue;
                        }
                        let at = self.at_value(&path);
                        let d = self.error(r.code, &path, at, r.message);
                        d.help = r.help;
                        if r.class == RefusalClass::Safety {
                            d.class = crate::diagnostic::DiagnosticClass::Safety;
                        }
                    }
                }
            }
        }
    }
}

/// The section sets the key a refusal is about.
fn sets(r: &RunnerSettings, field: &Field) -> bool {
    match field {
        Field::Env(name) => r.env.as_ref().is_some_and(|e| e.contains_key(name)),
        other => sets_key(r, other.key()),
    }
}

fn sets_key(r: &RunnerSettings, key: &str) -> bool {
    match key {
        "tools" => r.tools.is_some(),
        "allowedBashRules" => r.allowed_bash_rules.is_some(),
        "disallowedTools" => r.disallowed_tools.is_some(),
        "commandArgs" => r.command_args.is_some(),
        "env" => r.env.is_some(),
        "permissionMode" => r.permission_mode.is_some(),
        "settingSources" => r.setting_sources.is_some(),
        "mcpConfig" => r.mcp_config.is_some(),
        "sandbox" => r.sandbox.is_some(),
        _ => false,
    }
}
