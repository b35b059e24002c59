//! The commands specbridge runs itself — check stages and verification commands —
//! run in bubblewrap unless the pipeline turns a command's sandbox off (docs/claude-code-runner.md).
//!
//! Every check stage is confined by default, not only checks downstream of an
//! execute stage: the working tree a check sees can hold code an agent wrote in an
//! earlier run, or in a stage that runs beside it, and "downstream" changes with
//! `--only`, resume and fan-out. One rule — every command specbridge runs in the
//! repository is confined unless it says `sandbox: off` — is the one a reader of
//! the pipeline can check.

use std::path::{Path, PathBuf};

use specbridge_engine::pipeline::{CommandSandbox, PipelineFile, StageKind};
use specbridge_engine::sandbox::{
    expand_writable, home_dir, AppliedSandbox, Confinement, SandboxError,
};
use specbridge_engine::scheduler::Node;
use specbridge_engine::store::RunHandle;
use specbridge_engine::supervisor::{resolve_program, SpawnSpec, SupervisorError};

use crate::context::RunContext;
use crate::error::StageError;

/// One command of a plan that specbridge will run itself, as the pipeline
/// gives it (borrowed: a plan of 10,000 checks is looked over, not copied).
#[derive(Debug, Clone, Copy)]
pub struct PlannedCommand<'a> {
    pub stage: &'a str,
    /// The verification command's name; `None` for a check stage.
    pub verification: Option<&'a str>,
    pub argv: &'a [String],
    pub sandbox: Option<&'a CommandSandbox>,
}

impl PlannedCommand<'_> {
    pub(crate) fn is_off(&self) -> bool {
        matches!(self.sandbox, Some(CommandSandbox::Off(_)))
    }

    fn describe(&self) -> String {
        let argv = crate::shell_words(self.argv);
        match self.verification {
            Some(name) => format!("verification `{name}` of stage `{}` (`{argv}`)", self.stage),
            None => format!("check stage `{}` (`{argv}`)", self.stage),
        }
    }
}

/// The check stages and verification commands of the planned nodes, in plan order.
pub(crate) fn planned_commands<'a>(
    pipeline: &'a PipelineFile,
    nodes: &[Node],
) -> Vec<PlannedCommand<'a>> {
    // By id, not a scan per node: a plan of 10,000 stages is planned in one pass.
    let by_id: std::collections::HashMap<&str, &specbridge_engine::pipeline::StageDef> =
        pipeline.stages.iter().map(|s| (s.id.as_str(), s)).collect();
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for node in nodes {
        let id = node.instance_of.as_deref().unwrap_or(&node.id);
        if !seen.insert(id) {
            continue;
        }
        let Some(stage) = by_id.get(id) else {
            continue;
        };
        let argv_of = |a: Option<&'a specbridge_engine::pipeline::Argv>| -> &'a [String] {
            a.and_then(|a| a.as_list()).unwrap_or_default()
        };
        match stage.kind {
            StageKind::Check => out.push(PlannedCommand {
                stage: &stage.id,
                verification: None,
                argv: argv_of(stage.argv.as_ref()),
                sandbox: stage.sandbox.as_ref(),
            }),
            StageKind::Execute => {
                let commands = stage
                    .verification
                    .as_ref()
                    .unwrap_or(&pipeline.verification);
                out.extend(commands.iter().map(|c| PlannedCommand {
                    stage: &stage.id,
                    verification: Some(&c.name),
                    argv: argv_of(Some(&c.argv)),
                    sandbox: c.sandbox.as_ref(),
                }));
            }
            StageKind::Generate => {}
        }
    }
    out
}

/// What a run needs to know before it starts: the bubblewrap to use, and the
/// warnings about commands that run unconfined ([`unconfined_warnings`]).
#[derive(Debug, Clone, Default)]
pub struct SandboxPreflight {
    pub bubblewrap: Option<PathBuf>,
    pub warnings: Vec<String>,
}

/// Up to this many unconfined commands are warned about one line each; more
/// share one line. A pipeline of 1,000 `sandbox: off` checks printed 1,000
/// lines on every run and kept them all in `run.json` (143 KB, rewritten at the
/// run's start and settle and read by `runs list`). Which commands ran
/// unconfined stays recorded one by one: each attempt's `process.json` says
/// `sandbox.mode: off`.
const WARNED_ONE_BY_ONE: usize = 3;

/// The warnings about the commands that run without a sandbox: one a command, or
/// past [`WARNED_ONE_BY_ONE`] one for all, naming the first of them and
/// counting the rest.
fn unconfined_warnings(commands: &[PlannedCommand<'_>]) -> Vec<String> {
    let off: Vec<&PlannedCommand<'_>> = commands.iter().filter(|c| c.is_off()).collect();
    if off.len() <= WARNED_ONE_BY_ONE {
        return off
            .iter()
            .map(|c| {
                format!(
                    "{} runs without a sandbox (`sandbox: off`): the code it runs has your full rights",
                    c.describe()
                )
            })
            .collect();
    }
    let named: Vec<String> = off[..WARNED_ONE_BY_ONE]
        .iter()
        .map(|c| c.describe())
        .collect();
    vec![format!(
        "{} commands run without a sandbox (`sandbox: off`): the code they run has your full rights: {} and {} more (each attempt's process.json records its sandbox)",
        off.len(),
        named.join(", "),
        off.len() - WARNED_ONE_BY_ONE
    )]
}

/// Checked before anything is created or spawned. `bubblewrap` is asked only when
/// a command is confined; its error refuses the run, naming the first command
/// that needs it.
pub(crate) fn preflight(
    commands: &[PlannedCommand<'_>],
    bubblewrap: impl FnOnce() -> Result<PathBuf, String>,
) -> Result<SandboxPreflight, String> {
    let warnings = unconfined_warnings(commands);
    let Some(first) = commands.iter().find(|c| !c.is_off()) else {
        return Ok(SandboxPreflight {
            bubblewrap: None,
            warnings,
        });
    };
    let bwrap = bubblewrap().map_err(|problem| {
        format!(
            "{} runs confined in bubblewrap, but {problem}; or turn its sandbox off explicitly with `sandbox: off`",
            first.describe()
        )
    })?;
    Ok(SandboxPreflight {
        bubblewrap: Some(bwrap),
        warnings,
    })
}

/// A warning per confined `cargo` command when `CARGO_TARGET_DIR` names a folder
/// outside the repository that the command cannot write: cargo would fail on its
/// lock file there, which reads as a failed test.
pub(crate) fn cargo_target_warnings(
    commands: &[PlannedCommand<'_>],
    root: &Path,
    cargo_target_dir: Option<&Path>,
) -> Vec<String> {
    let Some(target) = cargo_target_dir.filter(|t| t.is_absolute()) else {
        return Vec::new();
    };
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    if canon(target).starts_with(canon(root)) {
        return Vec::new();
    }
    let home = home_dir();
    commands
        .iter()
        .filter(|c| !c.is_off())
        .filter(|c| c.argv.first().is_some_and(|p| Path::new(p).ends_with("cargo")))
        .filter(|c| {
            let writable = match c.sandbox {
                Some(CommandSandbox::Confined(o)) => o.writable.as_slice(),
                _ => &[],
            };
            !writable.iter().any(|w| {
                expand_writable(w, home.as_deref()).is_ok_and(|w| target.starts_with(w))
            })
        })
        .map(|c| {
            format!(
                "{} is confined, and CARGO_TARGET_DIR ({}) is outside the repository: cargo cannot write there; add it to the command's `sandbox.writable` or unset CARGO_TARGET_DIR",
                c.describe(),
                target.display()
            )
        })
        .collect()
}

/// A command ready to spawn: the program and arguments (bubblewrap first when
/// confined) and the sandbox record.
#[derive(Debug, Clone)]
pub struct Wrapped {
    pub program: String,
    /// Where `program` was found, when it was looked up here (unconfined): the
    /// spawn does not look it up again.
    pub executable: Option<PathBuf>,
    pub args: Vec<String>,
    pub applied: AppliedSandbox,
}

/// Where a command's output goes (record paths in the run) and how much is kept.
pub struct CommandLogs<'a> {
    pub run: &'a RunHandle,
    pub stdout: &'a str,
    pub stderr: &'a str,
    pub max_stdout_bytes: u64,
    pub max_stderr_bytes: u64,
}

/// The spawn of a command specbridge runs itself (a check, a verification): in
/// the repository root, as `wrapped` confines it, its output streamed through the
/// run store's logs (redacted as the command prints), announced behind the
/// command in the run's order of writes rather than at once
/// ([`RunHandle::log_behind`]). `argv` is what is recorded.
pub(crate) fn spawn_spec(
    ctx: &RunContext,
    wrapped: Wrapped,
    argv: Vec<String>,
    logs: CommandLogs<'_>,
    timeout: std::time::Duration,
    kill_grace: std::time::Duration,
) -> Result<(SpawnSpec, AppliedSandbox), StageError> {
    let log = |rel: &str| {
        logs.run.log_behind(rel).map_err(|source| StageError::Log {
            name: rel.to_string(),
            source,
        })
    };
    let spec = SpawnSpec {
        program: wrapped.program,
        executable: wrapped.executable,
        args: wrapped.args,
        redacted_argv: argv,
        cwd: ctx.root.clone(),
        env: Vec::new(),
        env_remove: Vec::new(),
        stdin: None,
        stdout: Box::new(log(logs.stdout)?),
        stderr: Box::new(log(logs.stderr)?),
        max_stdout_bytes: logs.max_stdout_bytes,
        max_stderr_bytes: logs.max_stderr_bytes,
        timeout: Some(timeout),
        kill_grace,
    };
    Ok((spec, wrapped.applied))
}

/// Why a command specbridge runs itself cannot be prepared to run confined as
/// asked. Recorded as the command's failure (verification) or the stage's reason
/// (check).
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    #[error("no argv array to run")]
    NoArgv,
    /// The program is not there: it fails as it would unconfined.
    #[error(transparent)]
    Program(#[from] SupervisorError),
    #[error("failed to confine the command: bubblewrap was not found before the run")]
    NoBubblewrap,
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// Its git folder would be left writable (a linked worktree's).
    #[error("failed to confine the command: where git keeps the repository is unknown")]
    Repository(#[source] specbridge_engine::evidence::EvidenceError),
}

/// `argv` under the sandbox that `sandbox` asks for. The program is looked up
/// first, so that a missing one fails as it does unconfined, not as bubblewrap's
/// exit code.
pub fn wrap(
    ctx: &RunContext,
    sandbox: Option<&CommandSandbox>,
    argv: &[String],
) -> Result<Wrapped, ConfineError> {
    let (program, args) = argv.split_first().ok_or(ConfineError::NoArgv)?;
    let executable = resolve_program(program, &ctx.root, &[])?;
    let options = match sandbox {
        Some(CommandSandbox::Off(_)) => {
            return Ok(Wrapped {
                program: program.clone(),
                executable: Some(executable),
                args: args.to_vec(),
                applied: AppliedSandbox::off(),
            })
        }
        Some(CommandSandbox::Confined(o)) => o.clone(),
        None => Default::default(),
    };
    let bubblewrap = ctx.bubblewrap.clone().ok_or(ConfineError::NoBubblewrap)?;
    let home = home_dir();
    let writable = options
        .writable
        .iter()
        .map(|w| expand_writable(w, home.as_deref()))
        .collect::<Result<Vec<_>, _>>()?;
    let repository = specbridge_engine::evidence::repository_paths(&ctx.root)
        .map_err(ConfineError::Repository)?;
    let confinement = Confinement {
        bubblewrap,
        root: ctx.root.clone(),
        home,
        writable,
        network: options.network,
        git_common_dir: repository.common_dir.clone(),
    };
    let (wrapper, applied) = confinement.wrapper()?;
    let (program, rest) = wrapper.split_first().expect("the wrapper names bubblewrap");
    let mut all = rest.to_vec();
    all.extend(argv.iter().cloned());
    Ok(Wrapped {
        program: program.clone(),
        executable: None,
        args: all,
        applied,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pipeline(yaml: &str) -> (PipelineFile, Vec<Node>) {
        let file: PipelineFile = serde_yaml::from_str(yaml).unwrap();
        let nodes = specbridge_engine::orchestrate::plan_nodes(&file, &[]).unwrap();
        (file, nodes)
    }

    const PIPELINE: &str = r#"
version: 1
name: t
verification:
  - { name: unit, argv: [cargo, test] }
  - { name: lint, argv: [cargo, clippy], sandbox: off }
stages:
  - { id: impl, kind: execute, prompt: "x\ny\n" }
  - { id: gate, kind: check, needs: [impl], argv: [make, check], sandbox: { network: true } }
  - { id: free, kind: check, argv: [echo], sandbox: off }
"#;

    #[test]
    fn every_check_and_verification_command_is_planned() {
        let (file, nodes) = pipeline(PIPELINE);
        let cmds = planned_commands(&file, &nodes);
        let names: Vec<_> = cmds
            .iter()
            .map(|c| format!("{}/{}", c.stage, c.verification.unwrap_or("-")))
            .collect();
        assert_eq!(names, ["impl/unit", "impl/lint", "gate/-", "free/-"]);
        assert_eq!(cmds.iter().filter(|c| c.is_off()).count(), 2);
    }

    #[test]
    fn a_missing_bubblewrap_refuses_and_names_the_command() {
        let (file, nodes) = pipeline(PIPELINE);
        let cmds = planned_commands(&file, &nodes);
        let err = preflight(&cmds, || Err("bwrap is not on PATH; install".into())).unwrap_err();
        assert!(err.contains("verification `unit` of stage `impl`"), "{err}");
        assert!(err.contains("bwrap is not on PATH") && err.contains("sandbox: off"));
    }

    #[test]
    fn a_cargo_target_dir_outside_the_repository_is_warned_unless_opened() {
        let (file, nodes) = pipeline(
            "version: 1\nname: t\nstages:\n  - { id: a, kind: check, argv: [cargo, test] }\n  - { id: b, kind: check, argv: [cargo, build], sandbox: { writable: [/shared] } }\n  - { id: c, kind: check, argv: [make] }\n",
        );
        let cmds = planned_commands(&file, &nodes);
        let root = Path::new("/repo");
        let w = cargo_target_warnings(&cmds, root, Some(Path::new("/shared/target")));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("check stage `a`") && w[0].contains("/shared/target"));
        assert!(cargo_target_warnings(&cmds, root, Some(Path::new("/repo/target"))).is_empty());
        assert!(cargo_target_warnings(&cmds, root, None).is_empty());
    }

    #[test]
    fn commands_all_off_need_no_bubblewrap_but_are_warned() {
        let (file, nodes) = pipeline(
            "version: 1\nname: t\nstages:\n  - { id: a, kind: check, argv: [echo], sandbox: off }\n",
        );
        let cmds = planned_commands(&file, &nodes);
        let p = preflight(&cmds, || panic!("bubblewrap is not needed")).unwrap();
        assert_eq!(p.bubblewrap, None);
        assert_eq!(p.warnings.len(), 1);
        assert!(
            p.warnings[0].contains("check stage `a`"),
            "{:?}",
            p.warnings
        );
    }

    /// A pipeline of many unconfined commands is warned about in one line, not
    /// a line each; up to three still get a line each.
    #[test]
    fn many_unconfined_commands_share_one_warning_that_names_the_first_and_counts_the_rest() {
        let stages = |n: usize| {
            let mut yaml = String::from("version: 1\nname: t\nstages:\n");
            for i in 0..n {
                yaml.push_str(&format!(
                    "  - {{ id: s{i}, kind: check, argv: [echo, '{i}'], sandbox: off }}\n"
                ));
            }
            // A confined one among them is not counted.
            yaml.push_str("  - { id: boxed, kind: check, argv: [echo] }\n");
            pipeline(&yaml)
        };
        let (file, nodes) = stages(3);
        let few = unconfined_warnings(&planned_commands(&file, &nodes));
        assert_eq!(few.len(), 3, "{few:?}");
        assert!(few[2].starts_with("check stage `s2` (`echo 2`) runs without a sandbox"));

        let (file, nodes) = stages(1000);
        let many = unconfined_warnings(&planned_commands(&file, &nodes));
        assert_eq!(many.len(), 1, "{many:?}");
        let line = &many[0];
        assert!(
            line.starts_with("1000 commands run without a sandbox (`sandbox: off`)"),
            "{line}"
        );
        for named in ["check stage `s0` (`echo 0`)", "check stage `s2` (`echo 2`)"] {
            assert!(line.contains(named), "{line}");
        }
        assert!(!line.contains("`s3`"), "{line}");
        assert!(!line.contains("boxed"), "{line}");
        assert!(line.contains(" and 997 more "), "{line}");
        assert!(line.len() < 400, "{line}");
    }

    #[test]
    fn an_unconfined_program_is_looked_up_once_and_a_confined_one_by_bubblewrap() {
        let (file, nodes) = pipeline(PIPELINE);
        let source = specbridge_engine::orchestrate::PipelineSource {
            path: "specbridge.yaml".into(),
            bytes: Vec::new(),
            file: std::sync::Arc::new(file.clone()),
        };
        // A repository: a confined command's git folder is asked of git.
        let repo = crate::working_tree::tests::committed_repo();
        let mut ctx = RunContext::new(
            repo.path(),
            &source,
            Default::default(),
            specbridge_engine::supervisor::CancelToken::new(),
            false,
        );
        let free = planned_commands(&file, &nodes)
            .into_iter()
            .find(PlannedCommand::is_off)
            .unwrap();
        let argv = ["sh".to_string(), "-c".into(), "true".into()];
        let off = wrap(&ctx, free.sandbox, &argv).unwrap();
        let found = resolve_program("sh", Path::new("/"), &[]).unwrap();
        assert_eq!(off.program, "sh");
        assert_eq!(off.executable.as_deref(), Some(found.as_path()));

        // Confined, the program run is bubblewrap, found before the run; the
        // command's own program is only checked to exist here.
        ctx.bubblewrap = Some(PathBuf::from("/usr/bin/bwrap"));
        let confined = wrap(&ctx, None, &argv).unwrap();
        assert_eq!(confined.program, "/usr/bin/bwrap");
        assert_eq!(confined.executable, None);
        let missing = ["specbridge-no-such-program".to_string()];
        assert!(matches!(
            wrap(&ctx, None, &missing),
            Err(ConfineError::Program(SupervisorError::NotFound { .. }))
        ));

        // Outside a repository, where its git folder lies is unknown: the
        // command is not started rather than started with it writable.
        let outside = tempfile::tempdir().unwrap();
        ctx.root = outside.path().to_path_buf();
        let refused = wrap(&ctx, None, &argv);
        assert!(
            matches!(refused, Err(ConfineError::Repository(_))),
            "{:?}",
            refused.err()
        );
        assert_eq!(
            ConfineError::Repository(
                specbridge_engine::evidence::repository_paths(outside.path()).unwrap_err()
            )
            .to_string(),
            "failed to confine the command: where git keeps the repository is unknown"
        );
    }
}
