//! Helpers shared by the supervisor test binaries.
#![allow(
    dead_code,
    reason = "shared by several test binaries, each using a part"
)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use specbridge_engine::supervisor::{ObserverControl, OutputSink, SpawnSpec, StdoutObserver};

/// A plain file, for the supervisor's own tests (runs write through the store's
/// redacting logs instead).
pub(crate) struct FileSink {
    path: PathBuf,
    file: std::fs::File,
}

impl FileSink {
    pub(crate) fn create(path: PathBuf) -> Box<Self> {
        let file = std::fs::File::create(&path).unwrap();
        Box::new(FileSink { path, file })
    }
}

impl OutputSink for FileSink {
    fn write_chunk(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.file.write_all(bytes)
    }

    fn finish(&mut self) -> std::io::Result<()> {
        self.file.sync_data()
    }

    fn describe(&self) -> String {
        self.path.display().to_string()
    }
}

/// A `sh -c SCRIPT` child writing into `dir`, with limits that never get in the way.
pub(crate) fn sh(dir: &Path, script: &str) -> SpawnSpec {
    SpawnSpec {
        program: "sh".into(),
        executable: None,
        args: vec!["-c".into(), script.into()],
        redacted_argv: vec!["sh".into(), "-c".into(), "<script>".into()],
        cwd: dir.to_path_buf(),
        env: Vec::new(),
        env_remove: Vec::new(),
        stdin: None,
        stdout: FileSink::create(dir.join("raw-stdout.log")),
        stderr: FileSink::create(dir.join("raw-stderr.log")),
        max_stdout_bytes: 1024 * 1024,
        max_stderr_bytes: 1024 * 1024,
        // Only there so that a broken supervisor fails the test instead of hanging it.
        timeout: Some(Duration::from_secs(120)),
        kill_grace: Duration::from_millis(200),
    }
}

/// Pids of the live (non-zombie) processes in group `pgid`, read from `/proc`
/// independently of the supervisor's own check.
pub(crate) fn live_group_members(pgid: i32) -> Vec<i32> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if let Some((state, group)) = stat(pid) {
            if group == pgid && state != 'Z' {
                members.push(pid);
            }
        }
    }
    members
}

/// Whether `pid` is a running (non-zombie) process.
pub(crate) fn alive(pid: i32) -> bool {
    matches!(stat(pid), Some((state, _)) if state != 'Z')
}

fn stat(pid: i32) -> Option<(char, i32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = text[text.rfind(')')? + 2..].split(' ').collect();
    Some((fields[0].chars().next()?, fields[2].parse().ok()?))
}

/// `kill(-pgid, 0)` fails with ESRCH, or only zombies (which an init that does not
/// reap leaves behind) are left in the group.
pub(crate) fn assert_group_gone(pgid: i32) {
    assert!(pgid > 1);
    let probe = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), None);
    if probe != Err(nix::errno::Errno::ESRCH) {
        let members = live_group_members(pgid);
        assert!(members.is_empty(), "group {pgid} still has {members:?}");
    }
}

/// Reports the result on a line starting with `result`, and each line on `lines`.
pub(crate) struct ResultOnLine {
    pub lines: tokio::sync::mpsc::UnboundedSender<Vec<u8>>,
}

impl StdoutObserver for ResultOnLine {
    fn on_line(&mut self, line: &[u8]) -> ObserverControl {
        let _ = self.lines.send(line.to_vec());
        if line.starts_with(b"result") {
            ObserverControl::ResultSeen
        } else {
            ObserverControl::Continue
        }
    }
}
