//! The scheduler against a scripted executor: order, skips, fail-fast, budget,
//! concurrency and fan-out growth.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use specbridge_engine::pipeline::StageKind;
use specbridge_engine::scheduler::{
    run_plan, BoxFuture, Node, SchedulerOptions, StageExecutor, StageReport, StageRun,
};
use specbridge_engine::store::{RunHandle, RunStore};
use specbridge_engine::StageStatus;

#[derive(Default)]
struct Scripted {
    fail: Vec<&'static str>,
    cost: f64,
    started: Mutex<Vec<String>>,
    running: AtomicUsize,
    peak: AtomicUsize,
}

impl StageExecutor for Scripted {
    fn execute(self: Arc<Self>, stage: StageRun) -> BoxFuture<StageReport> {
        let id = stage.node.id.clone();
        self.started.lock().unwrap().push(id.clone());
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        let fail = self.fail.contains(&id.as_str());
        let cost = self.cost;
        let me = self.clone();
        Box::pin(async move {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            me.running.fetch_sub(1, Ordering::SeqCst);
            StageReport {
                status: if fail {
                    StageStatus::Failed
                } else {
                    StageStatus::Succeeded
                },
                cost_usd: cost,
                invocations: 1,
                ..Default::default()
            }
        })
    }

    fn expand(&self, placeholder: &Node, _run: &RunHandle) -> Result<Vec<Node>, String> {
        // Three instances; the third depends on the first.
        let mk = |item: &str, needs: Vec<String>| Node {
            id: format!("{}.{item}", placeholder.id),
            instance_of: Some(placeholder.id.clone()),
            item_id: Some(item.to_string()),
            placeholder: false,
            needs,
            ..placeholder.clone()
        };
        let base = placeholder.needs.clone();
        let mut third = base.clone();
        third.push(format!("{}.t1", placeholder.id));
        Ok(vec![
            mk("t1", base.clone()),
            mk("t2", base),
            mk("t3", third),
        ])
    }
}

fn node(id: &str, kind: StageKind, needs: &[&str]) -> Node {
    Node::stage(
        id,
        kind,
        needs.iter().map(std::string::ToString::to_string).collect(),
    )
}

async fn run(
    nodes: Vec<Node>,
    exec: Arc<Scripted>,
    opts: SchedulerOptions,
) -> BTreeMap<String, StageStatus> {
    let repo = tempfile::tempdir().unwrap();
    let handle = Arc::new(
        RunStore::new(repo.path())
            .create(Default::default())
            .unwrap(),
    );
    let out = run_plan(nodes, exec, handle, opts).await.unwrap();
    out.statuses
}

fn opts(concurrency: usize) -> SchedulerOptions {
    SchedulerOptions {
        concurrency,
        fail_fast: false,
        budget_usd: None,
        spent_before_usd: 0.0,
    }
}

#[tokio::test]
async fn diamond_with_a_failing_branch_skips_only_its_dependents() {
    use StageKind::Check;
    let nodes = vec![
        node("a", Check, &[]),
        node("b", Check, &["a"]),
        node("c", Check, &["a"]),
        node("d", Check, &["b", "c"]),
        node("e", Check, &[]),
        node("f", Check, &["e"]),
    ];
    let exec = Arc::new(Scripted {
        fail: vec!["c"],
        ..Default::default()
    });
    let st = run(nodes, exec.clone(), opts(2)).await;
    assert_eq!(st["a"], StageStatus::Succeeded);
    assert_eq!(st["b"], StageStatus::Succeeded);
    assert_eq!(st["c"], StageStatus::Failed);
    assert_eq!(st["d"], StageStatus::Blocked);
    assert_eq!(
        st["f"],
        StageStatus::Succeeded,
        "independent branch goes on"
    );
    let started = exec.started.lock().unwrap().clone();
    let pos = |x: &str| started.iter().position(|s| s == x).unwrap();
    assert!(pos("a") < pos("b") && pos("a") < pos("c") && pos("e") < pos("f"));
    assert!(!started.contains(&"d".to_string()));
    assert!(exec.peak.load(Ordering::SeqCst) <= 2);
}

#[tokio::test]
async fn fail_fast_starts_nothing_after_a_failure() {
    use StageKind::Check;
    let nodes = vec![
        node("a", Check, &[]),
        node("b", Check, &["a"]),
        node("z", Check, &["a"]),
    ];
    let exec = Arc::new(Scripted {
        fail: vec!["a"],
        ..Default::default()
    });
    let mut o = opts(1);
    o.fail_fast = true;
    let st = run(nodes, exec.clone(), o).await;
    assert_eq!(st["a"], StageStatus::Failed);
    assert_eq!(st["b"], StageStatus::Skipped);
    assert_eq!(exec.started.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn concurrency_one_runs_one_at_a_time() {
    use StageKind::Check;
    let nodes = (0..5).map(|i| node(&format!("s{i}"), Check, &[])).collect();
    let exec = Arc::new(Scripted::default());
    run(nodes, exec.clone(), opts(1)).await;
    assert_eq!(exec.peak.load(Ordering::SeqCst), 1);
    assert_eq!(
        *exec.started.lock().unwrap(),
        vec!["s0", "s1", "s2", "s3", "s4"],
        "ties are broken by id"
    );
}

#[tokio::test]
async fn run_budget_stops_the_next_agent_invocation() {
    use StageKind::Generate;
    let nodes = vec![
        node("a", Generate, &[]),
        node("b", Generate, &["a"]),
        node("c", Generate, &["b"]),
    ];
    let exec = Arc::new(Scripted {
        cost: 0.6,
        ..Default::default()
    });
    let mut o = opts(1);
    o.budget_usd = Some(1.0);
    let st = run(nodes, exec.clone(), o).await;
    assert_eq!(st["a"], StageStatus::Succeeded);
    assert_eq!(st["b"], StageStatus::Succeeded);
    assert_eq!(st["c"], StageStatus::BudgetExceeded);
    assert_eq!(exec.started.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn fan_out_grows_and_dependents_wait_for_every_instance() {
    use StageKind::{Check, Execute, Generate};
    let mut implement = node("implement", Execute, &["tasks"]);
    implement.placeholder = true;
    let nodes = vec![
        node("tasks", Generate, &[]),
        implement,
        node("lint", Check, &["implement"]),
    ];
    let exec = Arc::new(Scripted::default());
    let st = run(nodes, exec.clone(), opts(3)).await;
    for id in ["implement.t1", "implement.t2", "implement.t3", "lint"] {
        assert_eq!(st[id], StageStatus::Succeeded, "{id}");
    }
    assert!(!st.contains_key("implement"));
    let started = exec.started.lock().unwrap().clone();
    let pos = |x: &str| started.iter().position(|s| s == x).unwrap();
    assert!(pos("implement.t1") < pos("implement.t3"));
    assert_eq!(pos("lint"), started.len() - 1);
}

/// Deletes the run folder in stage `a`, once the batch that started it is
/// written; every other stage works until it is stopped.
#[derive(Default)]
struct DeletesItsRunFolder {
    started: Mutex<Vec<String>>,
    stopped: std::sync::atomic::AtomicBool,
}

impl StageExecutor for DeletesItsRunFolder {
    fn execute(self: Arc<Self>, stage: StageRun) -> BoxFuture<StageReport> {
        let id = stage.node.id.clone();
        self.started.lock().unwrap().push(id.clone());
        let me = self.clone();
        Box::pin(async move {
            if id == "a" {
                // Once the batch that starts `a` and `slow` is written: the
                // folder goes under a later batch, whatever the timing.
                let log = stage.run.dir().join("events.jsonl");
                let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
                while !std::fs::read_to_string(&log).is_ok_and(|l| l.contains("\"slow\""))
                    && std::time::Instant::now() < until
                {
                    tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                }
                std::fs::remove_dir_all(stage.run.dir()).unwrap();
            } else {
                let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
                while !me.stopped.load(Ordering::SeqCst) && std::time::Instant::now() < until {
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            }
            StageReport {
                status: StageStatus::Succeeded,
                cost_usd: 0.25,
                invocations: 1,
                ..Default::default()
            }
        })
    }

    fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
    }
}

/// What a run of `nodes`, two at a time under [`DeletesItsRunFolder`], ended
/// with: its records' failure and what it spent, the stages it started, and
/// whether its folder exists again.
struct Stopped {
    failure: specbridge_engine::store::StoreFailure,
    spent: specbridge_engine::store::Totals,
    started: Vec<String>,
    stopped: bool,
    folder_exists: bool,
}

async fn run_deleting_its_folder(nodes: Vec<Node>) -> Stopped {
    let repo = tempfile::tempdir().unwrap();
    let handle = Arc::new(
        RunStore::new(repo.path())
            .create(Default::default())
            .unwrap(),
    );
    let exec = Arc::new(DeletesItsRunFolder::default());
    let clock = std::time::Instant::now();
    let err = run_plan(nodes, exec.clone(), handle.clone(), opts(2))
        .await
        .unwrap_err();
    assert!(
        clock.elapsed() < std::time::Duration::from_secs(20),
        "the running stage was not stopped"
    );
    let specbridge_engine::scheduler::SchedulerError::RecordsFailed { failure, spent } = err else {
        panic!("{err}");
    };
    let started = exec.started.lock().unwrap().clone();
    Stopped {
        failure,
        spent,
        started,
        stopped: exec.stopped.load(Ordering::SeqCst),
        folder_exists: handle.dir().exists(),
    }
}

#[tokio::test]
async fn a_vanished_run_folder_stops_the_run_and_ends_what_runs() {
    use StageKind::Check;
    let nodes = vec![
        node("a", Check, &[]),
        node("slow", Check, &[]),
        node("b", Check, &["a"]),
    ];
    let end = run_deleting_its_folder(nodes).await;
    assert!(end.failure.vanished, "{:?}", end.failure);
    assert!(
        end.failure.message.contains("no longer exists"),
        "{:?}",
        end.failure
    );
    assert!(end.stopped);
    assert_eq!(end.started, ["a", "slow"], "b never starts");
    // What the stages spent still counts, though it could not be recorded.
    assert_eq!(end.spent.invocations, 2);
    assert!(!end.folder_exists, "nothing made the folder again");
}

#[tokio::test]
async fn a_batch_that_fails_behind_the_scheduler_stops_the_run_and_ends_what_runs() {
    use StageKind::Check;
    // `z` needs nothing: it starts beside the batch that ends `a`, which the
    // scheduler writes behind it while `slow` and `z` run. That batch fails.
    let nodes = vec![
        node("a", Check, &[]),
        node("slow", Check, &[]),
        node("z", Check, &[]),
    ];
    let end = run_deleting_its_folder(nodes).await;
    assert!(end.failure.vanished, "{:?}", end.failure);
    assert!(end.stopped, "what runs is ended");
    assert_eq!(end.started, ["a", "slow", "z"]);
    assert_eq!(end.spent.invocations, 3);
    assert!(!end.folder_exists, "nothing made the folder again");
}
