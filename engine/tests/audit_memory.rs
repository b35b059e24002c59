//! Auditing a run with a 200 MiB log keeps memory bounded: the log is hashed and
//! scanned in chunks, never held whole. Its own test binary, so the peak resident
//! size it reads belongs to this test alone.

use std::io::Write;

use specbridge_engine::audit::{audit_run, FindingCode};
use specbridge_engine::events::{RunEvent, RunStarted};
use specbridge_engine::store::RunStore;

const MIB: usize = 1024 * 1024;

/// Peak resident set size of this process so far, in bytes.
fn peak_rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM in /proc/self/status");
    let kib: usize = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap();
    kib * 1024
}

#[test]
fn a_200_mib_log_is_audited_in_bounded_memory() {
    let repo = tempfile::tempdir().unwrap();
    let run = RunStore::new(repo.path())
        .create(Default::default())
        .unwrap();
    run.event(RunEvent::RunStarted(RunStarted {
        run_id: run.id().to_string(),
        specbridge_version: None,
    }))
    .unwrap();
    let rel = "stages/spec/attempt-001/raw-stdout.log";
    // Written around the store (as by an older specbridge, or by hand), so that
    // audit has a secret to find.
    std::fs::create_dir_all(run.dir().join("stages/spec/attempt-001")).unwrap();
    let mut f = std::io::BufWriter::new(std::fs::File::create(run.dir().join(rel)).unwrap());
    let line = "{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"working on it\"}]}}\n";
    let block = line.repeat(MIB / line.len());
    let (mut written, mut lines) = (0, 0);
    while written < 150 * MIB {
        f.write_all(block.as_bytes()).unwrap();
        written += block.len();
        lines += MIB / line.len();
    }
    // One line of 50 MiB, with no newline for the line buffer to stop at.
    let long = "x".repeat(MIB);
    for _ in 0..50 {
        f.write_all(long.as_bytes()).unwrap();
    }
    writeln!(f, " sk-ant-api03-Zx9QwErTyUiOpAsDfGhJkLzXcVbNm0123456789").unwrap();
    f.into_inner().unwrap().sync_all().unwrap();
    drop(long);
    drop(block);
    let sha = specbridge_engine::store::sha256_file(&run.dir().join(rel)).unwrap();
    run.event(RunEvent::record_written(rel, &sha)).unwrap();

    let before = peak_rss();
    let report = audit_run(run.dir()).unwrap();
    let grown = peak_rss().saturating_sub(before);

    let codes: Vec<_> = report.findings.iter().map(|f| f.code).collect();
    assert_eq!(codes, [FindingCode::SecretInFile], "{report:#?}");
    assert!(
        report.findings[0]
            .message
            .contains(&format!("at line {}:", lines + 1)),
        "{}",
        report.findings[0].message
    );
    assert!(
        grown < 16 * MIB,
        "auditing a 200 MiB log raised the peak RSS by {} MiB",
        grown / MIB
    );
}
