//! Whether bubblewrap confines a command here is probed once and remembered
//! for the environment it was found in (`XDG_CACHE_HOME`, one per test
//! context): probed again when the executable changes, when `--refresh-runner`
//! asks and by `runner doctor`; a failure is never remembered; and a
//! remembered pass that has gone stale fails closed — the command never runs
//! outside the sandbox.

use std::path::PathBuf;

use crate::common::{fake_claude_bin, read_json, TestContext};

/// The probe's argv (`engine/src/sandbox/mod.rs`), as the wrapper logs it.
const PROBE: &str =
    "--ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --unshare-pid --unshare-net --die-with-parent true";

/// A repository with one confined check stage, and a `bwrap` first on `PATH`
/// that logs every call and then is the machine's bubblewrap, unless a marker
/// file says to fail: `fail-probe` fails the probe as a machine without user
/// namespaces does, `fail-all` fails every call before anything runs.
struct Wrapped {
    ctx: TestContext,
    bin: tempfile::TempDir,
}

impl Wrapped {
    fn new() -> Wrapped {
        let mut ctx = TestContext::new();
        ctx.write(
            "specbridge.yaml",
            "version: 1\nname: probe-cache\nstages:\n  - { id: tests, kind: check, argv: [touch, ran] }\n",
        );
        ctx.write(".gitignore", "ran\n");
        ctx.commit_all("pipeline");
        let bin = tempfile::tempdir().unwrap();
        let path = format!(
            "{}:{}",
            bin.path().display(),
            std::env::var("PATH").unwrap()
        );
        ctx.set_env("PATH", &path);
        let wrapped = Wrapped { ctx, bin };
        wrapped.install_wrapper("");
        wrapped
    }

    /// (Re)writes the wrapper; `extra` makes it another file, as an upgrade would.
    fn install_wrapper(&self, extra: &str) {
        let real = specbridge_engine::sandbox::find_on_path("bwrap").expect("bubblewrap installed");
        let dir = self.bin.path();
        let script = format!(
            "#!/bin/sh\n{extra}\necho \"$*\" >> {log}\n\
             if [ -e {dir}/fail-all ]; then echo 'bwrap: setting up uid map: Permission denied' >&2; exit 1; fi\n\
             if [ -e {dir}/fail-probe ] && [ \"$*\" = '{PROBE}' ]; then echo 'bwrap: No permissions to create new namespace' >&2; exit 1; fi\n\
             exec {real} \"$@\"\n",
            log = self.log().display(),
            dir = dir.display(),
            real = real.display(),
        );
        let exe = dir.join("bwrap");
        let tmp = dir.join("bwrap.new");
        std::fs::write(&tmp, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::rename(tmp, exe).unwrap();
    }

    fn log(&self) -> PathBuf {
        self.bin.path().join("calls.log")
    }

    fn marker(&self, name: &str, present: bool) {
        let path = self.bin.path().join(name);
        if present {
            std::fs::write(path, "").unwrap();
        } else {
            let _ = std::fs::remove_file(path);
        }
    }

    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.log())
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn probes(&self) -> usize {
        self.calls().iter().filter(|c| *c == PROBE).count()
    }

    fn cache_file(&self) -> PathBuf {
        self.ctx
            .cache
            .path()
            .join("specbridge")
            .join(specbridge_engine::sandbox::PROBE_CACHE_FILE)
    }

    /// A run from a clean tree; its exit code and what it printed.
    fn run(&self, args: &[&str]) -> (i32, String) {
        let _ = std::fs::remove_file(self.ctx.path("ran"));
        let out = self.ctx.run(args);
        (out.code, out.snapshot())
    }
}

#[test]
fn a_bubblewrap_that_confined_once_is_probed_again_only_when_it_changes_or_is_asked() {
    let w = Wrapped::new();
    let (code, out) = w.run(&["run"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(w.probes(), 1);
    assert!(w.cache_file().exists());

    // Remembered: the stage still runs through the wrapper, nothing probes.
    let calls = w.calls().len();
    let (code, out) = w.run(&["run"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(w.probes(), 1, "the second run probed again");
    assert!(
        w.calls().len() > calls,
        "the stage did not run in bubblewrap"
    );
    assert!(w.ctx.path("ran").exists());

    let (code, out) = w.run(&["run", "--refresh-runner"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(w.probes(), 2, "--refresh-runner did not probe");

    // Another executable at the same path, as an upgrade leaves it.
    w.install_wrapper("# 0.9");
    let (code, out) = w.run(&["run"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(w.probes(), 3, "a changed bubblewrap was not probed");

    // `runner doctor` probes whatever is remembered, and writes nothing.
    let cached = std::fs::read(w.cache_file()).unwrap();
    let doctor = w.ctx.run(&[
        "runner",
        "doctor",
        "--command",
        &fake_claude_bin().display().to_string(),
    ]);
    assert!(doctor.stdout.contains("sandbox"), "{}", doctor.snapshot());
    assert_eq!(w.probes(), 4, "the doctor answered from the cache");
    assert_eq!(std::fs::read(w.cache_file()).unwrap(), cached);
}

#[test]
fn a_failing_probe_is_never_remembered() {
    let w = Wrapped::new();
    w.marker("fail-probe", true);
    for attempt in 1..=2 {
        let (code, out) = w.run(&["run"]);
        assert_eq!(code, 2, "{out}");
        assert!(
            out.contains("cannot run: bwrap: No permissions to create new namespace"),
            "{out}"
        );
        assert_eq!(w.probes(), attempt, "a failure answered from the cache");
        assert!(!w.ctx.path(".specbridge").exists(), "a run was created");
    }
    assert!(!w.cache_file().exists(), "a failure was remembered");

    w.marker("fail-probe", false);
    let (code, out) = w.run(&["run"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(w.probes(), 3);
}

/// What the cache cannot see (here a marker file; in life a security policy
/// loaded since) can make a remembered pass wrong. The command is still given
/// to bubblewrap, which refuses it: the stage fails with bubblewrap's words
/// and the command never runs, confined or not.
#[test]
fn a_remembered_pass_gone_stale_fails_closed() {
    let w = Wrapped::new();
    let (code, out) = w.run(&["run"]);
    assert_eq!(code, 0, "{out}");
    w.marker("fail-all", true);
    // The next run is then the only one.
    std::fs::remove_dir_all(w.ctx.path(".specbridge/runs")).unwrap();

    let (code, out) = w.run(&["run"]);
    assert_eq!(w.probes(), 1, "the pass was not used");
    assert_eq!(code, 1, "{out}");
    assert!(!w.ctx.path("ran").exists(), "the command ran");
    let stage_dir = w.ctx.only_run_dir().join("stages/tests");
    let stage = read_json(&stage_dir.join("stage.json"));
    assert_eq!(stage["status"], "check-failed", "{stage:#}");
    let stderr = std::fs::read_to_string(stage_dir.join("attempt-001/raw-stderr.log")).unwrap();
    assert!(
        stderr.contains("bwrap: setting up uid map: Permission denied"),
        "{stderr}"
    );

    // Asked afresh, the machine is refused before the run, as without a cache.
    let (code, out) = w.run(&["run", "--refresh-runner"]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("cannot run: bwrap: setting up uid map"),
        "{out}"
    );
}
