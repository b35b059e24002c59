use super::*;
use crate::user_cache::epoch_secs;
use std::cell::Cell;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::PathBuf;
use std::time::Duration;
use std::time::UNIX_EPOCH;

/// A stand-in for `/proc` holding every file the digest reads, and a
/// stand-in for the `bwrap` executable.
struct World {
    dir: tempfile::TempDir,
}

const STATUS: &str = "Name:\tspecbridge\nUmask:\t0022\nState:\tR (running)\nPid:\t4242\n\
Uid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nVmRSS:\t 9000 kB\n\
CapEff:\t0000000000000000\nCapBnd:\t000001ffffffffff\nNoNewPrivs:\t0\nSeccomp:\t0\n\
Seccomp_filters:\t0\n";

impl World {
    fn new() -> World {
        let world = World {
            dir: tempfile::tempdir().unwrap(),
        };
        world.write("proc/sys/kernel/random/boot_id", "b0\n");
        for (i, ns) in NAMESPACES.iter().enumerate() {
            world.set_ns(ns, &format!("{ns}:[40265318{i}]"));
        }
        world.write("proc/self/status", STATUS);
        for setting in SETTINGS {
            world.write(&format!("proc/sys/{setting}"), "1\n");
        }
        world.write("proc/self/attr/current", "unconfined\n");
        world.write("bin/bwrap", "#!/bin/sh\n");
        world
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn write(&self, rel: &str, text: &str) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn set_ns(&self, ns: &str, target: &str) {
        let link = self.path("proc/self/ns").join(ns);
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        let _ = std::fs::remove_file(&link);
        symlink(target, link).unwrap();
    }

    fn digest(&self) -> Option<String> {
        environment_digest(&self.path("proc"), &self.path("bin/bwrap"))
    }
}

#[test]
fn the_key_changes_with_everything_the_probe_depends_on_and_nothing_else() {
    let world = World::new();
    let first = world.digest().expect("every source readable");
    assert_eq!(
        world.digest().as_ref(),
        Some(&first),
        "the same environment"
    );

    // What changes from one process to the next is not part of it.
    world.write(
        "proc/self/status",
        &STATUS.replace("4242", "4343").replace("9000", "9100"),
    );
    assert_eq!(
        world.digest().as_ref(),
        Some(&first),
        "pid or memory changed the key"
    );

    type Change = Box<dyn Fn(&World)>;
    let status = |from: &'static str, to: &'static str| -> Change {
        Box::new(move |w: &World| w.write("proc/self/status", &STATUS.replace(from, to)))
    };
    let mut changes: Vec<(String, Change)> = vec![
        (
            "reboot".into(),
            Box::new(|w| w.write("proc/sys/kernel/random/boot_id", "b1\n")),
        ),
        ("uid".into(), status("Uid:\t1000", "Uid:\t0")),
        ("gid".into(), status("Gid:\t1000", "Gid:\t0")),
        (
            "capabilities".into(),
            status("CapEff:\t0000", "CapEff:\t0001"),
        ),
        (
            "bounding set".into(),
            status("CapBnd:\t0000", "CapBnd:\t0001"),
        ),
        (
            "no new privileges".into(),
            status("NoNewPrivs:\t0", "NoNewPrivs:\t1"),
        ),
        ("seccomp".into(), status("Seccomp:\t0", "Seccomp:\t2")),
        (
            "seccomp filters".into(),
            status("Seccomp_filters:\t0", "Seccomp_filters:\t1"),
        ),
        (
            "label".into(),
            Box::new(|w| w.write("proc/self/attr/current", "docker-default (enforce)\n")),
        ),
        (
            "executable rewritten".into(),
            Box::new(|w| w.write("bin/bwrap", "#!/bin/sh\nexit 1\n")),
        ),
        (
            "executable's mode".into(),
            Box::new(|w| {
                let exe = w.path("bin/bwrap");
                std::fs::set_permissions(exe, std::fs::Permissions::from_mode(0o4755)).unwrap();
            }),
        ),
        (
            "executable rewritten in place, size and mtime put back".into(),
            Box::new(|w| {
                let exe = w.path("bin/bwrap");
                let modified = std::fs::metadata(&exe).unwrap().modified().unwrap();
                // The change time has a clock tick to move past.
                std::thread::sleep(Duration::from_millis(20));
                std::fs::write(&exe, "#!/bin/bh\n").unwrap();
                let file = std::fs::File::options().write(true).open(&exe).unwrap();
                file.set_modified(modified).unwrap();
            }),
        ),
        (
            "executable replaced by a copy".into(),
            Box::new(|w| {
                let exe = w.path("bin/bwrap");
                let copy = w.path("bin/copy");
                std::fs::copy(&exe, &copy).unwrap();
                let modified = std::fs::metadata(&exe).unwrap().modified().unwrap();
                std::fs::File::options()
                    .write(true)
                    .open(&copy)
                    .unwrap()
                    .set_modified(modified)
                    .unwrap();
                std::fs::rename(copy, exe).unwrap();
            }),
        ),
    ];
    for ns in NAMESPACES {
        changes.push((
            format!("{ns} namespace"),
            Box::new(move |w| w.set_ns(ns, &format!("{ns}:[1]"))),
        ));
    }
    for setting in SETTINGS {
        changes.push((
            format!("{setting} set"),
            Box::new(move |w| w.write(&format!("proc/sys/{setting}"), "0\n")),
        ));
        changes.push((
            format!("{setting} missing"),
            Box::new(move |w| {
                std::fs::remove_file(w.path(&format!("proc/sys/{setting}"))).unwrap();
            }),
        ));
    }
    for (what, change) in changes {
        let world = World::new();
        let before = world.digest().unwrap();
        change(&world);
        let after = world.digest().expect(&what);
        assert_ne!(before, after, "{what} left the key as it was");
    }
}

#[test]
fn an_environment_that_cannot_be_read_has_no_key() {
    for missing in [
        "proc/sys/kernel/random/boot_id",
        "proc/self/ns/user",
        "proc/self/ns/net",
        "proc/self/status",
        "bin/bwrap",
    ] {
        let world = World::new();
        std::fs::remove_file(world.path(missing)).unwrap();
        assert_eq!(world.digest(), None, "{missing}");
    }
    // No security label is a label of its own, not an unknown environment.
    let world = World::new();
    std::fs::remove_file(world.path("proc/self/attr/current")).unwrap();
    assert!(world.digest().is_some());
}

#[test]
fn this_process_has_a_key_on_this_machine() {
    let bwrap = crate::sandbox::find_on_path("sh").unwrap();
    let key = environment_digest(Path::new("/proc"), &bwrap);
    assert!(key.is_some(), "no key: every run would probe");
    assert_eq!(key, environment_digest(Path::new("/proc"), &bwrap));
}

/// The answer through [`answer`], counting the probes it made.
struct Asker {
    dir: tempfile::TempDir,
    probes: Cell<u32>,
}

impl Asker {
    fn new() -> Asker {
        Asker {
            dir: tempfile::tempdir().unwrap(),
            probes: Cell::new(0),
        }
    }

    fn file(&self) -> PathBuf {
        self.dir.path().join("specbridge").join(CACHE_FILE)
    }

    fn ask(
        &self,
        key: &str,
        cache: CacheUse,
        at: SystemTime,
        result: Result<(), &str>,
    ) -> Result<(), String> {
        answer(Some(&self.file()), Some(key), cache, at, || {
            self.probes.set(self.probes.get() + 1);
            result.map_err(str::to_string)
        })
    }
}

fn key(i: u8) -> String {
    hex::encode([i; 32])
}

#[test]
fn a_pass_answers_for_its_key_within_its_lifetime_and_a_failure_never() {
    let asker = Asker::new();
    let t0 = UNIX_EPOCH + Duration::from_secs(2_000_000);
    let later = |s: u64| t0 + Duration::from_secs(s);

    // A failure is never remembered: its message is always fresh.
    let refused = asker.ask(&key(1), CacheUse::Use, t0, Err("bwrap: No permissions"));
    assert_eq!(refused.unwrap_err(), "bwrap: No permissions");
    assert!(asker.ask(&key(1), CacheUse::Use, t0, Err("again")).is_err());
    assert_eq!(asker.probes.get(), 2);

    asker.ask(&key(1), CacheUse::Use, t0, Ok(())).unwrap();
    assert_eq!(asker.probes.get(), 3);
    // Remembered: a probe that would fail now is not asked.
    asker
        .ask(&key(1), CacheUse::Use, later(60), Err("unasked"))
        .unwrap();
    assert_eq!(asker.probes.get(), 3);
    // Another environment, an expired pass, a clock set back: probed.
    assert!(asker
        .ask(&key(2), CacheUse::Use, later(60), Err("other"))
        .is_err());
    let expired = later(PROBE_LIFETIME.as_secs());
    assert!(asker
        .ask(&key(1), CacheUse::Use, expired, Err("expired"))
        .is_err());
    assert!(asker
        .ask(
            &key(1),
            CacheUse::Use,
            t0 - Duration::from_secs(1),
            Err("back")
        )
        .is_err());
    assert_eq!(asker.probes.get(), 6);
    // `--refresh-runner` probes whatever is remembered.
    assert!(asker
        .ask(&key(1), CacheUse::Refresh, later(60), Err("fresh"))
        .is_err());
    assert_eq!(asker.probes.get(), 7);
}

#[test]
fn never_probes_and_leaves_the_cache_as_it_was() {
    let asker = Asker::new();
    let now = SystemTime::now();
    asker.ask(&key(1), CacheUse::Never, now, Ok(())).unwrap();
    assert!(!asker.file().exists(), "`runner doctor` wrote the cache");
    asker.ask(&key(1), CacheUse::Use, now, Ok(())).unwrap();
    asker.ask(&key(1), CacheUse::Never, now, Ok(())).unwrap();
    assert_eq!(asker.probes.get(), 3, "a remembered pass answered `Never`");
}

#[test]
fn the_file_keeps_the_latest_passes_and_ignores_what_it_cannot_read() {
    let asker = Asker::new();
    let now = SystemTime::now();
    for i in 0..(KEEP as u8 + 2) {
        asker.ask(&key(i), CacheUse::Use, now, Ok(())).unwrap();
    }
    let kept: Vec<_> = listed(&asker.file()).into_iter().map(|(k, _)| k).collect();
    assert_eq!(kept.len(), KEEP);
    assert!(!kept.contains(&key(0)) && kept.contains(&key(KEEP as u8 + 1)));

    let file = asker.file();
    let remembered = |k: &str| passed(&file, k, now);
    let line = |k: &str| format!("{k} {}\n", epoch_secs(now));
    std::fs::write(&file, format!("{}\n{}", header(), line(&key(9)))).unwrap();
    assert!(remembered(&key(9)));
    let other = header().replace(env!("CARGO_PKG_VERSION"), "0.0.0-other");
    std::fs::write(&file, format!("{other}\n{}", line(&key(9)))).unwrap();
    assert!(!remembered(&key(9)), "another version's probe argv");
    std::fs::write(
        &file,
        format!("{}\n{} soon\nshort {}\n", header(), key(9), epoch_secs(now)),
    )
    .unwrap();
    assert!(!remembered(&key(9)), "a garbled line");
    std::fs::write(&file, [0xff, 0xfe]).unwrap();
    assert!(!remembered(&key(9)), "unreadable as text");
    // Replaced whole by the next pass.
    asker.ask(&key(9), CacheUse::Use, now, Ok(())).unwrap();
    assert!(remembered(&key(9)));
}
