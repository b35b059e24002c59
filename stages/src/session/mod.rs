//! `RunSession`: the one lifecycle of `run`, `resume` and replay
//! (docs/architecture.md). It composes the engine's steps with the stage kinds,
//! which is why it lives here and not in the engine: it builds the
//! [`PipelineExecutor`], the sandbox preflight and the agent setup, all of this
//! crate.
//!
//! The steps, in order, each once for both: check the flags; open the run to
//! resume (lock, audit) or create a scaffold; load and validate the pipeline;
//! resolve the options (over the recorded ones when resuming); plan the nodes;
//! refuse a working tree that cannot be used; settle the command sandbox; open
//! the recordings to replay; detect the runner; then, unless a dry run, begin the
//! run folder (fresh, or resumed with crash recovery), schedule and settle it
//! with SIGINT, SIGTERM and SIGHUP cancelling.

mod detect;
mod error;
mod preflight;
mod replay;
mod settings;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use specbridge_engine::orchestrate::{
    self, plan_nodes, plan_order_indexes, resolve_options, ActiveRun, PipelineSource,
};
use specbridge_engine::pipeline::load::CheckedBefore;
use specbridge_engine::pipeline::validate::load_and_validate_checked;
use specbridge_engine::resume::{open_for_resume, plan_dry_run, Forced, OpenedRun, ResumeStart};
use specbridge_engine::sandbox::SandboxProbe;
use specbridge_engine::scheduler::StageExecutor;
use specbridge_engine::store::RunnerInfo;
use specbridge_engine::supervisor::{install_cancel_signals, CancelToken};
use specbridge_engine::CacheUse;

pub use detect::probe_path;
pub use error::SessionError;
pub use replay::{ReplaySettings, ScaffoldSettings};
pub use settings::{PlannedStage, SessionEnd, SessionKind, SessionObserver, SessionSettings};

use crate::{PipelineExecutor, RunContext};
use specbridge_engine::events::Observed;

/// One `run` or `resume` from its settings to its end.
pub struct RunSession {
    settings: SessionSettings,
    observer: Arc<dyn SessionObserver>,
}

/// Where the run starts from: nothing, or a recorded run opened for resume.
enum Origin {
    Fresh,
    Resume {
        opened: Box<OpenedRun>,
        rerun: Vec<String>,
        reverify: bool,
    },
}

impl RunSession {
    pub fn new(settings: SessionSettings, observer: Arc<dyn SessionObserver>) -> Self {
        RunSession { settings, observer }
    }

    /// Run the lifecycle. Nothing is created before every check has passed.
    pub fn run(self) -> Result<SessionEnd, SessionError> {
        let RunSession { settings, observer } = self;
        settings.given.check()?;
        let dry_run = settings.dry_run;
        // What earlier probes found (the runner's detection, a bubblewrap that
        // confined a command here) answers unless `--refresh-runner` asks anew.
        // One bubblewrap probe for the run, at the first need: the commands'
        // sandbox, or an agent stage offering Bash (the CLI's sandbox).
        let probe_cache = if settings.refresh_runner {
            CacheUse::Refresh
        } else {
            CacheUse::Use
        };
        let mut probe = SandboxProbe::lazy(probe_cache);
        let (origin, replay, scaffold) = match &settings.kind {
            SessionKind::Run { replay, scaffold } => {
                let scaffold = match scaffold {
                    Some(s) => {
                        let created = replay::Scaffold::create(s)?;
                        observer.scaffold_created(created.root(), &s.from, s.keep);
                        Some(created)
                    }
                    None => None,
                };
                (Origin::Fresh, replay.clone(), scaffold)
            }
            SessionKind::Resume {
                run,
                rerun,
                reverify,
            } => {
                if !dry_run {
                    // The audit that gates a resume is its longest step; what the
                    // rest of the session will ask is started beside it
                    // (docs/performance.md). Both only read.
                    specbridge_engine::evidence::ask_ahead(&settings.root);
                    probe = SandboxProbe::ahead(probe_cache);
                }
                let opened = open_for_resume(&settings.root, run)?;
                observer.resume_opened(&opened.findings, opened.torn_tail, dry_run);
                let origin = Origin::Resume {
                    opened: Box::new(opened),
                    rerun: rerun.clone(),
                    reverify: *reverify,
                };
                (origin, ReplaySettings::default(), None)
            }
        };
        let root = scaffold
            .as_ref()
            .map_or_else(|| settings.root.clone(), |s| s.root().to_path_buf());
        // Asked ahead, on a thread of its own, while the pipeline loads
        // (docs/performance.md): the repository's paths for the preflight, the
        // run store and the snapshots. It only reads, and what it finds is what
        // the step that needs it would have found.
        if !dry_run {
            specbridge_engine::evidence::ask_ahead(&root);
        }

        let recorded = match &origin {
            Origin::Resume { opened, .. } => Some(&opened.record),
            Origin::Fresh => None,
        };
        let path = match (&settings.file, recorded) {
            (Some(f), _) => root.join(f),
            (None, Some(r)) => root.join(&r.pipeline.path),
            (None, None) => root.join("specbridge.yaml"),
        };
        let checked = match &origin {
            Origin::Resume { opened, .. } => opened.pipeline_checked(),
            Origin::Fresh => None,
        };
        let (source, validation) = load(&path, &root, checked.as_ref(), observer.as_ref())?;
        if !dry_run {
            // The redactor's pattern compiles on a thread of its own while the run
            // is planned and checked, before the first record is written. Not
            // earlier: on the two cores of a small machine it would slow a
            // resume's audit and the loading's own passes for as long as it takes.
            specbridge_engine::redact::warm_up();
        }
        // Kept only by a dry run, which leaves it unfreed (below); a run drops it now.
        let validation = dry_run.then_some(validation);
        let options = resolve_options(&settings.given, recorded.map(|r| &r.options), &source.file);

        let nodes = match &origin {
            Origin::Fresh => plan_nodes(&source.file, &options.only),
            Origin::Resume { opened, .. } => opened.nodes(&source),
        }
        .map_err(SessionError::Plan)?;
        let run_dir = match &origin {
            Origin::Resume { opened, rerun, .. } => {
                if let Some(p) = opened.unknown_reruns(rerun, &nodes).first() {
                    return Err(SessionError::UnknownRerun {
                        pattern: p.to_string(),
                        run: opened.id.clone(),
                    });
                }
                Some(opened.dir.clone())
            }
            Origin::Fresh => None,
        };
        let tree_ahead = if dry_run {
            Default::default()
        } else {
            let fresh = matches!(origin, Origin::Fresh);
            let ahead = preflight::snapshot_ahead(&root, &nodes, options.allow_dirty, fresh);
            let kept = preflight::check_working_tree(
                &root,
                &nodes,
                options.allow_dirty,
                run_dir.as_deref(),
                &ahead,
            )?;
            if !kept.is_empty() {
                observer.warnings(&kept);
            }
            ahead
        };

        let cancel = CancelToken::new();
        let mut ctx = RunContext::new(
            &root,
            &source,
            options.overrides.clone(),
            cancel.clone(),
            options.allow_dirty,
        );
        if let (true, Origin::Resume { opened, rerun, .. }) = (dry_run, &origin) {
            // From the recorded outputs alone: no sandbox, no runner.
            let executor = PipelineExecutor::new(ctx);
            let decisions = plan_dry_run(
                &nodes,
                &opened.stages,
                executor.as_ref(),
                &opened.dir,
                &root,
                &Forced::new(rerun.clone()),
            );
            return Ok(SessionEnd::ResumePlanned {
                run_id: opened.id.clone(),
                decisions,
            });
        }

        let probe = Arc::new(probe);
        let sandbox = preflight::command_sandbox(&root, &source.file, &nodes, dry_run, &probe)?;
        ctx.bubblewrap = sandbox.bubblewrap;
        // Recordings are audited before anything else happens.
        let replay = replay::setup(&ctx, &replay)?;
        // Agent stages need the runner: detected once, before anything is created —
        // unless every one of them is replayed.
        let commands = if replay.forced.is_some() && !replay.live_when_missing {
            Vec::new()
        } else {
            detect::runner_commands(&ctx, &nodes)
        };
        let runtime = runtime()?;
        let detect::Detection {
            mut agent,
            mut runner,
            mut warnings,
            assumption,
        } = runtime.block_on(detect::detect(
            &root,
            &commands,
            dry_run,
            probe_cache,
            &probe,
        ))?;
        if let Some(recording) = &replay.forced {
            let from = recording.dir().display().to_string();
            warnings.push(format!("agent stages are replayed from {from}"));
            if runner.is_none() {
                runner = Some(RunnerInfo {
                    kind: "replay".into(),
                    command: from,
                    version: None,
                    capabilities: serde_json::Value::Null,
                    detected_by: None,
                });
            }
        }
        agent.replay = replay;
        agent.tree_ahead = Arc::new(tree_ahead);
        warnings.extend(sandbox.warnings);
        observer.warnings(&warnings);

        if dry_run {
            let executor = PipelineExecutor::with_agent(ctx, agent);
            let planned: Vec<(usize, Vec<String>)> = plan_order_indexes(&nodes)
                .into_iter()
                .map(|at| (at, executor.describe(&nodes[at])))
                .collect();
            // The process ends once the plan is printed: freeing what the checks
            // built and the run's context node by node (several milliseconds for
            // 10,000 stages) returns nothing to anyone. On another thread it
            // costs more, contending for the allocator's lock.
            std::mem::forget((validation, executor, source));
            let mut nodes: Vec<Option<_>> = nodes.into_iter().map(Some).collect();
            let stages = planned
                .into_iter()
                .filter_map(|(at, argv)| {
                    Some(PlannedStage {
                        node: nodes[at].take()?,
                        argv,
                    })
                })
                .collect();
            return Ok(SessionEnd::Planned { stages, assumption });
        }

        let executor = PipelineExecutor::with_agent(ctx, agent);
        let begin = |source: PipelineSource| -> Result<ActiveRun, SessionError> {
            match origin {
                Origin::Fresh => {
                    let active =
                        orchestrate::begin_run(&root, &source, options, runner, warnings, nodes)
                            .map_err(SessionError::Run)?;
                    observer.run_started(active.id(), false);
                    Ok(active)
                }
                Origin::Resume {
                    opened,
                    rerun,
                    reverify,
                } => {
                    executor.resume_from(&opened.dir, &opened.stages);
                    observer.run_started(&opened.id, true);
                    let start = ResumeStart {
                        root: root.clone(),
                        source,
                        options,
                        runner,
                        warnings,
                        rerun,
                        reverify,
                    };
                    Ok(opened.begin(start, nodes)?)
                }
            }
        };
        let result = runtime.block_on(async {
            let _signals = install_cancel_signals(cancel.clone());
            let active = begin(source)?;
            let watching = observer.clone();
            active.subscribe(Arc::new(move |seen: &Observed<'_>| watching.observed(seen)));
            active
                .run(executor.clone() as Arc<dyn StageExecutor>)
                .await
                .map_err(SessionError::Run)
        })?;
        let records_deleted = match &scaffold {
            Some(s) if s.kept() => {
                observer.scaffold_kept(s.root());
                false
            }
            Some(_) => true,
            None => false,
        };
        Ok(SessionEnd::Finished {
            result: Box::new(result),
            records_deleted,
        })
    }
}

/// What validation built that a run does not use: the document as JSON, the
/// source index, the stage graph.
type Checked = (
    serde_json::Value,
    specbridge_engine::pipeline::locate::SourceIndex,
    specbridge_engine::dag::StageGraph,
);

/// The pipeline file, loaded and validated; its warnings told. What the checks
/// built is handed back for the caller to drop when it sees fit.
fn load(
    path: &Path,
    root: &Path,
    checked: Option<&CheckedBefore>,
    observer: &dyn SessionObserver,
) -> Result<(PipelineSource, Checked), SessionError> {
    match load_and_validate_checked(path, root, checked) {
        Ok(v) => {
            observer.pipeline_warnings(&v.warnings);
            // Moved, not cloned: the file of a large pipeline is megabytes.
            let source = PipelineSource {
                path: v.pipeline.path,
                bytes: v.pipeline.raw,
                file: std::sync::Arc::new(v.pipeline.file),
            };
            Ok((source, (v.pipeline.document, v.pipeline.index, v.graph)))
        }
        Err(diagnostics) => Err(SessionError::Invalid {
            path: PathBuf::from(path),
            diagnostics,
        }),
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, SessionError> {
    // This thread (it runs the scheduler) and the runtime's wait behind the
    // commands the run starts; the supervisor starts those as specbridge was
    // started.
    specbridge_engine::background::engine_threads();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    // Test hook: `SPECBRIDGE_TEST_THREAD_KEEP_ALIVE_MS=N` ends the runtime's idle
    // blocking threads after N ms instead of 10 s, so that a test sees in a
    // second what a thread's end does to the children it started
    // (docs/testing.md); unset, the runtime is built as it always is.
    if let Some(ms) = std::env::var("SPECBRIDGE_TEST_THREAD_KEEP_ALIVE_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        builder.thread_keep_alive(std::time::Duration::from_millis(ms));
    }
    builder.build().map_err(SessionError::Runtime)
}
