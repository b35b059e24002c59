//! Memory stays flat whatever a child prints. Its own test binary, so that no
//! other test raises the process's memory high-water mark.

mod supervisor_common;

use std::time::Duration;

use specbridge_engine::supervisor::{run, CancelToken, OutputStream};
use supervisor_common::{assert_group_gone, sh, ResultOnLine};

const MIB: u64 = 1024 * 1024;
const GIB: u64 = 1024 * MIB;

/// The peak resident memory of this process so far, in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|line| line.starts_with("VmHWM:"))
        .expect("Linux reports VmHWM");
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[tokio::test]
async fn a_gibibyte_of_output_with_a_mebibyte_cap_keeps_the_cap_in_flat_memory() {
    let dir = tempfile::tempdir().unwrap();
    // One line of zeros without end, so the observer's line buffer is held too.
    let mut spec = sh(dir.path(), &format!("head -c {GIB} /dev/zero; sleep 1000"));
    spec.max_stdout_bytes = MIB;
    let (lines, _seen) = tokio::sync::mpsc::unbounded_channel();
    let mut observer = ResultOnLine { lines };
    let record = tokio::time::timeout(
        Duration::from_secs(120),
        run(spec, CancelToken::new(), Some(&mut observer), |_, _| {}),
    )
    .await
    .expect("the capped run ends")
    .unwrap();

    assert!(record.stdout_truncated);
    assert_eq!(record.limit_exceeded, Some(OutputStream::Stdout));
    assert_eq!(record.stdout_bytes, MIB);
    assert_eq!(
        std::fs::metadata(dir.path().join("raw-stdout.log"))
            .unwrap()
            .len(),
        MIB
    );
    assert_group_gone(record.pgid);
    let peak = peak_rss();
    assert!(peak < 50 * MIB, "peak RSS {} MiB", peak / MIB);
}

/// The whole gibibyte streamed through the observer, into a sink that keeps
/// nothing so that the test costs no disk.
#[tokio::test]
async fn a_gibibyte_streamed_below_its_cap_stays_in_flat_memory() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = sh(
        dir.path(),
        &format!("head -c {GIB} /dev/zero | tr '\\0' 'x'"),
    );
    spec.stdout = Box::new(specbridge_engine::supervisor::Discard);
    spec.max_stdout_bytes = 2 * GIB;
    spec.timeout = Some(Duration::from_secs(1800));
    let (lines, _seen) = tokio::sync::mpsc::unbounded_channel();
    let mut observer = ResultOnLine { lines };
    let record = run(spec, CancelToken::new(), Some(&mut observer), |_, _| {})
        .await
        .unwrap();

    assert_eq!(record.exit_code, Some(0));
    assert_eq!(record.stdout_bytes, GIB);
    assert!(!record.stdout_truncated);
    let peak = peak_rss();
    assert!(peak < 50 * MIB, "peak RSS {} MiB", peak / MIB);
}
