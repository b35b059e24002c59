//! The checks behind [`super::check`], one method per runner key.

use super::*;
use crate::pipeline::suggest::did_you_mean;
use crate::pipeline::{SandboxSetting, SandboxSwitch};
use crate::safety;

#[derive(Default)]
pub(super) struct Check {
    pub(super) refusals: Vec<Refusal>,
    pub(super) opt_ins: Vec<OptIn>,
}

impl Check {
    fn refuse(
        &mut self,
        field: Field,
        class: RefusalClass,
        code: &'static str,
        message: String,
    ) -> &mut Refusal {
        self.refusals.push(Refusal {
            field,
            class,
            code,
            message,
            help: None,
        });
        self.refusals.last_mut().expect("just pushed")
    }

    pub(super) fn tools(
        &mut self,
        names: &[String],
        mcp_opted_in: bool,
    ) -> (Vec<&'static tools::ToolSpec>, Vec<String>) {
        let mut specs = Vec::new();
        let mut mcp = Vec::new();
        for (i, raw) in names.iter().enumerate() {
            let name = raw.trim();
            let field = Field::Tools(i);
            if let Some(spec) = tools::allowed(name) {
                if !specs.contains(&spec) {
                    specs.push(spec);
                }
            } else if name.contains('(') || name.contains(')') {
                self.refuse(
                    field,
                    RefusalClass::Safety,
                    "rule-in-tools",
                    format!("`{name}` is a permission rule; `tools` holds tool names only"),
                )
                .help = Some("file tools are always scoped to the repository; Bash commands go in `allowedBashRules`, e.g. `Bash(cargo test *)`".into());
            } else if let Some(why) = tools::refused(name) {
                self.refuse(
                    field,
                    RefusalClass::Safety,
                    "refused-tool",
                    format!("tool `{name}` is never offered: {why}"),
                )
                .help = Some(format!("the tools a stage may use are {}", allowed_list()));
            } else if name.starts_with(tools::MCP_PREFIX) && mcp_opted_in {
                mcp.push(name.to_string());
            } else if name.starts_with(tools::MCP_PREFIX) {
                self.refuse(
                    field,
                    RefusalClass::Config,
                    "mcp-tool-without-config",
                    format!("`{name}` is an MCP tool, but the runner loads no MCP server"),
                )
                .help = Some("list the server's configuration file in `runner.mcpConfig`".into());
            } else if tools::INTERACTIVE_TOOLS.contains(&name) {
                self.refuse(
                    field,
                    RefusalClass::Config,
                    "interactive-tool",
                    format!("tool `{name}` waits for a person, and nobody answers in print mode"),
                );
            } else {
                let help = match did_you_mean(name, tools::ALLOWED_TOOLS.iter().map(|t| t.name)) {
                    Some(m) => format!("did you mean `{m}`?"),
                    None => format!("the tools a stage may use are {}", allowed_list()),
                };
                self.refuse(
                    field,
                    RefusalClass::Config,
                    "unknown-tool",
                    format!("unknown tool `{name}`"),
                )
                .help = Some(help);
            }
        }
        (specs, mcp)
    }

    pub(super) fn bash_rules(&mut self, list: &[String]) {
        for (i, rule) in list.iter().enumerate() {
            let field = Field::AllowedBashRules(i);
            match rules::check_bash_rule(rule) {
                Ok(()) => {}
                Err(rules::BashRuleProblem::AllowsEverything) => {
                    self.refuse(
                        field,
                        RefusalClass::Safety,
                        "bash-allows-everything",
                        format!("allowed Bash rule `{rule}` allows every command"),
                    )
                    .help = Some(
                        "name the commands, as in `Bash(git status *)` or `Bash(cargo test *)`"
                            .into(),
                    );
                }
                Err(rules::BashRuleProblem::NotARule) => {
                    let t = rule.trim();
                    self.refuse(
                        field,
                        RefusalClass::Config,
                        "invalid-bash-rule",
                        format!("allowed Bash rule `{rule}` is not a Bash permission rule"),
                    )
                    .help = Some(format!(
                        "write it as `Bash({t})`, e.g. `Bash(git status *)`"
                    ));
                }
                Err(rules::BashRuleProblem::Smuggling(c)) => {
                    self.refuse(
                        field,
                        RefusalClass::Safety,
                        "rule-smuggling",
                        format!(
                            "allowed Bash rule `{rule}` holds `{}`, which can end the rule early and start another",
                            c.escape_default()
                        ),
                    )
                    .help = Some("one command pattern per rule, without `(`, `)` or `,`".into());
                }
            }
        }
    }

    pub(super) fn deny_rules(&mut self, list: &[String]) {
        for (i, rule) in list.iter().enumerate() {
            if let Err(why) = rules::check_deny_rule(rule) {
                self.refuse(
                    Field::DisallowedTools(i),
                    RefusalClass::Config,
                    "invalid-deny-rule",
                    format!("deny rule `{rule}` is malformed: {why}"),
                );
            }
        }
    }

    pub(super) fn command_args(&mut self, list: &[String]) {
        for (i, (arg, verdict)) in list.iter().zip(args::classify(list)).enumerate() {
            let field = Field::CommandArgs(i);
            let name = args::flag_name(arg).unwrap_or(arg);
            match verdict {
                args::ArgVerdict::PassThrough(_) | args::ArgVerdict::Value => {}
                args::ArgVerdict::Widening(why) => {
                    self.refuse(
                        field,
                        RefusalClass::Safety,
                        "widening-flag",
                        format!("`commandArgs` passes `{name}`: {why}"),
                    )
                    .help = Some("grant what a stage needs with `tools`, `allowedBashRules` and the runner's own keys".into());
                }
                args::ArgVerdict::Managed(why) => {
                    self.refuse(
                        field,
                        RefusalClass::Config,
                        "managed-flag",
                        format!(
                            "`commandArgs` passes `{name}`, which specbridge sets itself: {why}"
                        ),
                    );
                }
                args::ArgVerdict::Unknown => {
                    let list: Vec<&str> = args::pass_through_names().collect();
                    let help = match did_you_mean(name, list.iter().copied()) {
                        Some(m) => format!("did you mean `{m}`?"),
                        None => format!("`commandArgs` may pass {}", list.join(", ")),
                    };
                    self.refuse(
                        field,
                        RefusalClass::Config,
                        "unknown-flag",
                        format!("`commandArgs` passes `{name}`, a flag specbridge does not know to leave the tool policy alone"),
                    )
                    .help = Some(help);
                }
                args::ArgVerdict::Stray => {
                    self.refuse(
                        field,
                        RefusalClass::Config,
                        "stray-argument",
                        format!("`commandArgs` holds `{arg}`, which is not the value of a flag; the CLI would read it as the prompt"),
                    );
                }
            }
        }
    }

    pub(super) fn env<'a>(&mut self, names: impl Iterator<Item = &'a String>) {
        for name in names {
            if let Some(why) = env::widening(name) {
                self.refuse(
                    Field::Env(name.clone()),
                    RefusalClass::Safety,
                    "widening-env",
                    format!("`env` sets `{name}`, which {why}"),
                )
                .help = Some("the agent runs with specbridge's settings only; remove it".into());
            }
        }
    }

    pub(super) fn mode(&mut self, mode: &str) {
        // Unknown and forbidden modes are reported by validation's own checks
        // (with the value's location); here they only stop assembly.
        if safety::forbidden_mode(mode).is_some() || safety::forbidden_in(mode).is_some() {
            self.refuse(
                Field::PermissionMode,
                RefusalClass::Safety,
                "forbidden-mode",
                format!("permission mode `{mode}` is forbidden"),
            );
        } else if !safety::ALLOWED_MODES.contains(&mode) {
            self.refuse(
                Field::PermissionMode,
                RefusalClass::Config,
                "invalid-mode",
                format!("unknown permission mode `{mode}`"),
            );
        }
    }

    pub(super) fn setting_sources(&mut self, list: &[String]) {
        for (i, s) in list.iter().enumerate() {
            if !SETTING_SOURCES.contains(&s.as_str()) {
                let help = match did_you_mean(s, SETTING_SOURCES.iter().copied()) {
                    Some(m) => format!("did you mean `{m}`?"),
                    None => format!("the sources are {}", SETTING_SOURCES.join(", ")),
                };
                self.refuse(
                    Field::SettingSources(i),
                    RefusalClass::Config,
                    "unknown-setting-source",
                    format!("unknown setting source `{s}`"),
                )
                .help = Some(help);
            }
        }
        if !list.is_empty() {
            self.opt_ins.push(OptIn {
                field: "settingSources",
                message: format!(
                    "runner.settingSources loads Claude Code settings files ({}): their allow rules, hooks and MCP servers can widen the policy that specbridge records",
                    list.join(", ")
                ),
            });
        }
    }

    pub(super) fn mcp_config(&mut self, list: &[String]) {
        for (i, p) in list.iter().enumerate() {
            if let Some(why) = sandbox::escapes(p) {
                self.refuse(
                    Field::McpConfig(i),
                    RefusalClass::Safety,
                    "path-outside-repo",
                    format!("MCP configuration `{p}` {why}; it must be a file in the repository"),
                );
            }
        }
        if !list.is_empty() {
            self.opt_ins.push(OptIn {
                field: "mcpConfig",
                message: format!(
                    "runner.mcpConfig starts MCP servers ({}): they run with the user's rights, outside the repository's confinement and the sandbox",
                    list.join(", ")
                ),
            });
        }
    }

    pub(super) fn sandbox(&mut self, setting: Option<&SandboxSetting>) -> SandboxPlan {
        match setting {
            None => SandboxPlan::On(Default::default()),
            Some(SandboxSetting::Switch(SandboxSwitch::Off)) => {
                self.opt_ins.push(OptIn {
                    field: "sandbox",
                    message: "runner.sandbox is off: Bash commands the rules allow run unconfined, so code the agent wrote can write outside the repository and reach the network".into(),
                });
                SandboxPlan::Off
            }
            Some(SandboxSetting::Settings(s)) => {
                for (i, p) in s.writable_paths.iter().enumerate() {
                    if let Err(why) = sandbox::check_writable_path(p) {
                        self.refuse(
                            Field::SandboxWritablePaths(i),
                            RefusalClass::Safety,
                            "sandbox-path",
                            format!("sandbox writable path `{p}` {why}"),
                        )
                        .help = Some("name a folder a build needs, such as `~/.cargo/registry` or `/tmp/build-cache`".into());
                    }
                }
                for (i, d) in s.allowed_domains.iter().enumerate() {
                    if let Err(why) = sandbox::check_domain(d) {
                        self.refuse(
                            Field::SandboxAllowedDomains(i),
                            RefusalClass::Safety,
                            "sandbox-domain",
                            format!("sandbox allowed domain `{d}` {why}"),
                        )
                        .help = Some("name a host, as in `crates.io`, `*.npmjs.org` or `db.example.com:5432`".into());
                    }
                }
                if !s.writable_paths.is_empty() || !s.allowed_domains.is_empty() {
                    self.opt_ins.push(OptIn {
                        field: "sandbox",
                        message: format!(
                            "runner.sandbox widens the sandbox of Bash commands: writable {}; network {}",
                            list_or_none(&s.writable_paths),
                            list_or_none(&s.allowed_domains)
                        ),
                    });
                }
                SandboxPlan::On(s.clone())
            }
        }
    }
}

fn list_or_none(list: &[String]) -> String {
    if list.is_empty() {
        "nothing more".into()
    } else {
        list.join(", ")
    }
}

fn allowed_list() -> String {
    tools::ALLOWED_TOOLS
        .iter()
        .map(|t| t.name)
        .collect::<Vec<_>>()
        .join(", ")
}
