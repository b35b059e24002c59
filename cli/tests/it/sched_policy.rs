//! The engine's threads wait behind what a run starts (`engine/src/background.rs`):
//! specbridge's threads run `SCHED_BATCH`, the commands it starts run under the
//! policy specbridge was started with.

use crate::common::TestContext;

/// One check stage that prints its own policy and that of its parent's main
/// thread (specbridge's, which runs the scheduler): field 41 of `/proc/PID/stat`,
/// the 39th after the command name.
const POLICIES: &str = r#"
version: 1
name: policies
stages:
  - id: p
    kind: check
    sandbox: off
    argv: [sh, -c, "policy() { sed 's/.*) //' \"$1\" | cut -d' ' -f39; }; policy /proc/$$/stat; policy /proc/$PPID/stat"]
"#;

/// (the command's policy, specbridge's main thread's policy) of a run started
/// from a thread under `policy`.
fn policies_under(policy: libc::c_int) -> (i32, i32) {
    let ctx = TestContext::new();
    ctx.write("specbridge.yaml", POLICIES);
    let out = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let param = libc::sched_param { sched_priority: 0 };
                // SAFETY: this thread alone; specbridge inherits it at its spawn.
                assert_eq!(unsafe { libc::sched_setscheduler(0, policy, &param) }, 0);
                ctx.run(&["run"])
            })
            .join()
            .unwrap()
    });
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let printed = std::fs::read_to_string(
        ctx.only_run_dir()
            .join("stages/p/attempt-001/raw-stdout.log"),
    )
    .unwrap();
    let seen: Vec<i32> = printed.lines().map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(seen.len(), 2, "{printed:?}");
    (seen[0], seen[1])
}

#[test]
fn the_engine_waits_behind_a_command_that_runs_as_specbridge_was_started() {
    assert_eq!(
        policies_under(libc::SCHED_OTHER),
        (libc::SCHED_OTHER, libc::SCHED_BATCH)
    );
}

/// `SCHED_BATCH` rather than `SCHED_IDLE` here (the unit tests hold that one):
/// an idle-class run could starve behind the rest of a busy suite.
#[test]
fn a_specbridge_started_under_another_policy_keeps_it_for_itself_and_its_commands() {
    assert_eq!(
        policies_under(libc::SCHED_BATCH),
        (libc::SCHED_BATCH, libc::SCHED_BATCH)
    );
}
