//! One agent attempt from start to end, for generate and execute stages alike:
//! prepare, snapshot the working tree, spawn, take the evidence, rank a safety
//! violation against the runner's own status, and accept the output. What differs
//! between the kinds is an [`AttemptKind`].

use specbridge_engine::beside::beside;
use specbridge_engine::evidence::{GitSnapshot, Violation};
use specbridge_engine::pipeline::{ResolvedRunner, StageDef};
use specbridge_engine::runner::claude_code::{InvocationOutcome, Operation};
use specbridge_engine::scheduler::{StageReport, StageRun};
use specbridge_engine::store::layout;
use specbridge_engine::store::{now_rfc3339, RunHandle};
use specbridge_engine::StageStatus;

use crate::agent::AgentSetup;
use crate::attempt::{prepare, report_of, run_agent, stopped, AgentHooks, Prepared};
use crate::before_snapshot::{may_wait_at_prompt, BeforeSnapshot};
use crate::context::RunContext;
use crate::error::StageError;
use crate::store_check::{PendingCheck, StoreCheck};
use crate::working_tree::{AfterSnapshot, TreeBefore, TreeLedger};

/// What one attempt of an agent stage reads.
pub struct Attempt<'a> {
    pub ctx: &'a RunContext,
    pub agent: &'a AgentSetup,
    pub ledger: &'a TreeLedger,
    pub stage: &'a StageDef,
    /// The stage's runner, resolved once for the node.
    pub runner: &'a ResolvedRunner,
    pub sr: &'a StageRun,
    /// `stages/<id>/attempt-NNN`.
    pub attempt_rel: String,
}

impl<'a> Attempt<'a> {
    pub fn new(
        ctx: &'a RunContext,
        agent: &'a AgentSetup,
        ledger: &'a TreeLedger,
        stage: &'a StageDef,
        runner: &'a ResolvedRunner,
        sr: &'a StageRun,
    ) -> Self {
        Attempt {
            ctx,
            agent,
            ledger,
            stage,
            runner,
            sr,
            attempt_rel: layout::attempt_rel(&sr.node.id, sr.attempt),
        }
    }

    pub fn run(&self) -> &RunHandle {
        &self.sr.run
    }
}

/// The kind-specific parts of an agent attempt.
pub(crate) trait AttemptKind: Sync {
    /// What the agent is allowed to do.
    const OPERATION: Operation;
    /// Whether a safety violation outranks a runner that did not succeed. A
    /// generate stage is read-only, so any change it made is its status whatever
    /// the runner said; an execute stage that timed out or was cancelled keeps that
    /// status, its violations on record in `evidence.json`.
    const VIOLATION_OUTRANKS_RUNNER: bool;

    /// Whether the attempt decides from its before-snapshot what to spawn
    /// ([`AttemptKind::before_spawn`]), and so waits for the snapshot before
    /// the spawn. Else the snapshot is finished while the CLI starts up,
    /// before its prompt (`before_snapshot.rs`).
    fn decides_spawn(_a: &Attempt<'_>) -> bool {
        false
    }

    /// What the attempt decides from the before-snapshot before the spawn,
    /// where it does: after `git-before.json`, it may change what is spawned
    /// and the snapshot the evidence is judged from.
    fn before_spawn(
        _a: &Attempt<'_>,
        p: Prepared,
        before: GitSnapshot,
    ) -> Result<(Prepared, GitSnapshot), StageError> {
        Ok((p, before))
    }

    /// What the kind checks in the before-snapshot before its agent may act,
    /// at the prompt or before the spawn, wherever the snapshot is finished:
    /// it may refuse the attempt (its error then ends it, the agent given no
    /// prompt), and names the tree the attempt's patch is taken against when
    /// not HEAD.
    fn check_before(_a: &Attempt<'_>, _before: &GitSnapshot) -> Result<Option<String>, StageError> {
        Ok(None)
    }

    /// The agent's structured output as soon as the stream shows it, while the
    /// agent may still be ending (`InvokeSpec::on_result`): what the kind
    /// prepares from it is checked again before it is used.
    fn on_result(&self, _a: &Attempt<'_>, _output: &serde_json::Value) {}

    /// After the agent ended: the after-snapshot and the evidence records. Returns
    /// the safety violations; may note the evidence in `report`.
    async fn evidence(
        &mut self,
        a: &Attempt<'_>,
        p: &Prepared,
        outcome: &InvocationOutcome,
        before: &TreeBefore,
        after: AfterAgent,
        report: &mut StageReport,
    ) -> Result<Vec<Violation>, StageError>;

    /// The runner succeeded and nothing broke a safety rule: keep the output and
    /// decide the stage's status.
    fn accept(
        &mut self,
        a: &Attempt<'_>,
        p: &Prepared,
        outcome: InvocationOutcome,
        report: &mut StageReport,
    ) -> Result<(), StageError>;
}

/// What is read after the agent, both perhaps still being taken: the working
/// tree (the after-snapshot) and the run store's comparison, to be asked after
/// the snapshot. Both start when no member of the agent's group can act any more
/// (`InvokeSpec::on_exit`), else when asked for.
pub(crate) struct AfterAgent {
    pub(crate) tree: AfterSnapshot,
    pub(crate) store: StoreCheck,
}

/// Runs one attempt of an agent stage of kind `K`.
pub(crate) async fn run_attempt<K: AttemptKind>(a: &Attempt<'_>, mut kind: K) -> StageReport {
    // The snapshot reads the working tree, the run store's "before" reads the top
    // of `.specbridge/` (its walk goes on beside the agent) and `prepare` reads
    // the stage's inputs: none of them writes, so they run side by side and the
    // waits for git and for the file system are hidden. Every attempt claims
    // the snapshot taken ahead from the session's start (`snapshot_ahead.rs`),
    // used or not; it or the attempt's own is waited for before the spawn
    // only by a kind that decides from it what to spawn, else before the
    // prompt (`before_snapshot.rs`). What the scheduler queued to start the
    // stage (its `running` record and `stage-started`; for the run's first
    // stage, the run's first records, which the scheduler leaves to a stage
    // started alone: `agent_flushes_first`) stays queued: it goes with
    // `git-before.json`, the prompt and the request in the batch the
    // invocation writes once the CLI is spawned and before it is given its
    // prompt (`invoke.rs`, "The prompt waits for the records"), while the CLI
    // starts up. Nothing read here is among those records.
    let run = a.run();
    let before = BeforeSnapshot::start(&a.agent.tree_ahead, &a.ctx.root, run, &a.attempt_rel);
    let (store_before, prepared) = beside(
        || a.agent.store.before(&a.ctx.root, run),
        || prepare(a.ctx, a.agent, a.stage, a.runner, a.sr, K::OPERATION),
    );
    let p = match prepared {
        Ok(p) => p,
        Err(report) => return *report,
    };
    let redactor = run.redactor();
    let input_hash = p.input_hash.clone();
    let not_started = |e: StageError| {
        let mut report = stopped(&now_rfc3339(), e.status(), redactor.redact_str(&e.reason()));
        report.input_hash = Some(input_hash.clone());
        report
    };
    // The kind's check of the before-snapshot, wherever that is finished;
    // once it passed, the after-snapshot's thread may take the attempt's
    // patch ahead, before the reap.
    let after = AfterSnapshot::new(&a.ctx.root);
    let check = |snapshot: GitSnapshot| -> Result<TreeBefore, StageError> {
        let patch_head = K::check_before(a, &snapshot)?;
        let before = TreeBefore {
            snapshot,
            patch_head,
        };
        after.set_before(before.clone());
        Ok(before)
    };
    // A playback changes the tree itself: its snapshot is taken before it;
    // so is one that may outlast the CLI's wait for its prompt.
    let decides_spawn = K::decides_spawn(a);
    let at_prompt = !decides_spawn && p.replay.is_none() && may_wait_at_prompt(&a.ctx.root);
    let (p, before) = if at_prompt {
        (p, Before::AtPrompt(before.checked_by(&check)))
    } else {
        let decided = before.into_recorded().and_then(|recorded| {
            let snapshot = recorded.snapshot;
            let (p, snapshot) = if decides_spawn {
                K::before_spawn(a, p, snapshot)?
            } else {
                (p, snapshot)
            };
            Ok((p, check(snapshot)?))
        });
        match decided {
            Ok((p, before)) => (p, Before::Taken(before)),
            Err(e) => return not_started(e),
        }
    };
    let store_before = store_before.at_spawn(run);
    // The after-snapshot and the run store's "after" start as soon as no member
    // of the agent's group can act any more (while the kernel still tears the
    // CLI down), beside the invocation's own records (`InvokeSpec::on_exit`);
    // the run store's "before", where it is walked beside the agent, once the
    // agent is spawned (`InvokeSpec::on_spawn`).
    let store = PendingCheck::new(&a.ctx.root, run, store_before, a.agent.store.clone());
    let on_spawn = || store.agent_spawned();
    let before_prompt = || before.record_at_prompt();
    let on_exit = || {
        after.start();
        store.start();
    };
    let on_result = |output: &serde_json::Value| kind.on_result(a, output);
    p.schema.compile_beside();
    let hooks = AgentHooks {
        before_prompt: before.at_prompt().then_some(&before_prompt),
        on_spawn: &on_spawn,
        on_exit: &on_exit,
        on_result: &on_result,
    };
    let outcome = run_agent(a.ctx, &p, a.sr, hooks).await;
    let before = match before.into_snapshot() {
        Ok(before) => before,
        Err(e) => return not_started(e),
    };
    let mut report = report_of(&outcome, &p);
    let after = AfterAgent {
        tree: after,
        store: store.into_check(),
    };
    let violations = match kind
        .evidence(a, &p, &outcome, &before, after, &mut report)
        .await
    {
        Ok(v) => v,
        Err(e) => {
            e.end(&mut report, redactor);
            return report;
        }
    };
    let runner_succeeded = outcome.status == StageStatus::Succeeded;
    if !violations.is_empty() && (runner_succeeded || K::VIOLATION_OUTRANKS_RUNNER) {
        report.status = StageStatus::SafetyViolation;
        report.reason = Some(violation_summary(&violations));
        return report;
    }
    if !runner_succeeded {
        return report;
    }
    if let Err(e) = kind.accept(a, &p, outcome, &mut report) {
        e.end(&mut report, redactor);
    }
    report
}

/// An attempt's before-snapshot once its kind has had its say before the
/// spawn.
enum Before<'a> {
    /// To be finished and checked before the agent's prompt.
    AtPrompt(BeforeSnapshot<'a>),
    /// Recorded, decided from and checked.
    Taken(TreeBefore),
}

impl Before<'_> {
    fn at_prompt(&self) -> bool {
        matches!(self, Before::AtPrompt(_))
    }

    /// The invocation's `before_prompt`.
    fn record_at_prompt(&self) -> Result<(), String> {
        match self {
            Before::AtPrompt(before) => before.record(),
            Before::Taken(_) => Ok(()),
        }
    }

    /// The tree the evidence is judged from: recorded and checked by now
    /// where the CLI was spawned, else (not found, cancelled) now.
    fn into_snapshot(self) -> Result<TreeBefore, StageError> {
        match self {
            Before::AtPrompt(before) => before.into_recorded(),
            Before::Taken(before) => Ok(before),
        }
    }
}

/// The reason of a stage that broke a safety rule: the first violation, and how
/// many more `evidence.json` holds.
fn violation_summary(violations: &[Violation]) -> String {
    match violations {
        [] => String::new(),
        [only] => only.message.clone(),
        [first, rest @ ..] => format!(
            "{} (and {} more safety violation(s), see evidence.json)",
            first.message,
            rest.len()
        ),
    }
}
