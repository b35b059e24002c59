//! Streaming one output stream of the child into its sink, up to a byte cap,
//! while handing stdout lines to an observer. Memory use is a read buffer and at
//! most one line of the observer's [`StdoutObserver::max_line_bytes`] (plus what
//! the sink holds back), whatever the child prints.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc::UnboundedSender;

use super::record::OutputStream;
use super::sink::OutputSink;

/// The longest line handed to an observer that does not say otherwise; the rest
/// of a longer line is dropped (it still goes to the sink), so one huge line
/// cannot exhaust memory.
pub const MAX_OBSERVED_LINE_BYTES: usize = 1024 * 1024;

const READ_BUFFER_BYTES: usize = 64 * 1024;

/// What an observer tells the supervisor after a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObserverControl {
    Continue,
    /// The final result has arrived: the process now has the kill grace to exit.
    ResultSeen,
    /// Stop the process group at once (SIGKILL, no grace): what it printed shows
    /// that it must not go on.
    Stop,
}

/// Watches stdout line by line as it arrives, e.g. for stream-json events.
pub trait StdoutObserver: Send {
    /// One line without its `\n`, cut at [`Self::max_line_bytes`]. Only bytes
    /// within the stdout cap are ever seen; a last line without `\n` is seen at end
    /// of stream unless the cap cut it.
    fn on_line(&mut self, line: &[u8]) -> ObserverControl;

    /// The longest line this observer is handed; what a line has beyond it is
    /// not seen. One line this long is held in memory while it arrives.
    fn max_line_bytes(&self) -> usize {
        MAX_OBSERVED_LINE_BYTES
    }
}

/// What the capture tells the controlling loop while the process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CaptureEvent {
    LimitExceeded(OutputStream),
    ResultSeen,
    Stop,
    Failed(OutputStream),
}

/// The state of one stream's capture. It outlives the pumping future so that the
/// counts stay readable when pumping is abandoned (a pipe held open by a process
/// that left the group).
pub(crate) struct Capture<'o> {
    stream: OutputStream,
    sink: Box<dyn OutputSink>,
    cap: u64,
    pub kept: u64,
    pub truncated: bool,
    pub error: Option<io::Error>,
    lines: Option<LineSplitter<'o>>,
}

impl<'o> Capture<'o> {
    pub(crate) fn new(
        stream: OutputStream,
        sink: Box<dyn OutputSink>,
        cap: u64,
        observer: Option<&'o mut dyn StdoutObserver>,
    ) -> Self {
        Self {
            stream,
            sink,
            cap,
            kept: 0,
            truncated: false,
            error: None,
            lines: observer.map(LineSplitter::new),
        }
    }

    pub(crate) fn describe(&self) -> String {
        self.sink.describe()
    }

    /// Makes the sink's destination (a log file and its folders), called once
    /// the child exists and before its spawn is recorded: what reads the run
    /// sees the attempt's folder as soon as its `process-spawned` event.
    pub(crate) fn open(&mut self) -> io::Result<()> {
        self.sink.open()
    }

    /// Copies `pipe` into the opened sink until end of stream, the cap, or an
    /// error.
    /// The sink writes synchronously: a chunk at a time into a local file.
    /// Past the cap the pipe is dropped unread: the process is being stopped anyway.
    pub(crate) async fn pump(
        &mut self,
        mut pipe: impl AsyncRead + Unpin,
        events: UnboundedSender<CaptureEvent>,
    ) {
        let mut buffer = vec![0u8; READ_BUFFER_BYTES];
        loop {
            let read = match pipe.read(&mut buffer).await {
                Ok(0) => break,
                Ok(read) => read,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => return self.fail(error, &events),
            };
            let room = self.cap.saturating_sub(self.kept);
            let take = read.min(usize::try_from(room).unwrap_or(usize::MAX));
            let kept = &buffer[..take];
            if let Err(error) = self.sink.write_chunk(kept) {
                return self.fail(error, &events);
            }
            self.kept += take as u64;
            if let Some(lines) = &mut self.lines {
                if lines.feed(kept) {
                    let _ = events.send(CaptureEvent::ResultSeen);
                }
                if lines.take_stop() {
                    let _ = events.send(CaptureEvent::Stop);
                }
            }
            if take < read {
                self.truncated = true;
                let _ = events.send(CaptureEvent::LimitExceeded(self.stream));
                return;
            }
        }
        if let Some(lines) = &mut self.lines {
            if lines.finish() {
                let _ = events.send(CaptureEvent::ResultSeen);
            }
            if lines.take_stop() {
                let _ = events.send(CaptureEvent::Stop);
            }
        }
    }

    fn fail(&mut self, error: io::Error, events: &UnboundedSender<CaptureEvent>) {
        self.error = Some(error);
        let _ = events.send(CaptureEvent::Failed(self.stream));
    }

    /// Completes the sink (held bytes written, file synced and recorded); the
    /// first error of the capture wins.
    pub(crate) fn finish(&mut self) {
        if let Err(error) = self.sink.finish() {
            self.error.get_or_insert(error);
        }
    }
}

/// Splits a byte stream into lines for an observer, keeping at most the
/// observer's [`StdoutObserver::max_line_bytes`] of a line.
struct LineSplitter<'o> {
    observer: &'o mut dyn StdoutObserver,
    max_line: usize,
    line: Vec<u8>,
    result_seen: bool,
    /// The observer asked for a stop that was not yet passed on.
    stop_pending: bool,
}

impl<'o> LineSplitter<'o> {
    fn new(observer: &'o mut dyn StdoutObserver) -> Self {
        Self {
            max_line: observer.max_line_bytes(),
            observer,
            line: Vec::new(),
            result_seen: false,
            stop_pending: false,
        }
    }

    /// Feeds bytes; true when the observer reported the result for the first time.
    fn feed(&mut self, mut bytes: &[u8]) -> bool {
        let mut newly_seen = false;
        while let Some(end) = bytes.iter().position(|&b| b == b'\n') {
            self.push(&bytes[..end]);
            newly_seen |= self.emit();
            bytes = &bytes[end + 1..];
        }
        self.push(bytes);
        newly_seen
    }

    /// Hands over a last line that had no `\n`.
    fn finish(&mut self) -> bool {
        !self.line.is_empty() && self.emit()
    }

    /// True once after the observer asked for a stop.
    fn take_stop(&mut self) -> bool {
        std::mem::take(&mut self.stop_pending)
    }

    fn push(&mut self, bytes: &[u8]) {
        let room = self.max_line - self.line.len();
        self.line.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    fn emit(&mut self) -> bool {
        let control = self.observer.on_line(&self.line);
        self.stop_pending |= control == ObserverControl::Stop;
        self.line.clear();
        // Give back what one huge line took, so it is not held for the whole run.
        self.line.shrink_to(READ_BUFFER_BYTES);
        let newly_seen = control == ObserverControl::ResultSeen && !self.result_seen;
        self.result_seen |= newly_seen;
        newly_seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Collect {
        lines: Vec<Vec<u8>>,
    }

    impl StdoutObserver for Collect {
        fn on_line(&mut self, line: &[u8]) -> ObserverControl {
            self.lines.push(line.to_vec());
            if line.starts_with(b"result") {
                ObserverControl::ResultSeen
            } else {
                ObserverControl::Continue
            }
        }
    }

    #[test]
    fn lines_split_across_chunks_are_joined() {
        let mut seen = Collect::default();
        let mut lines = LineSplitter::new(&mut seen);
        assert!(!lines.feed(b"one\ntw"));
        assert!(!lines.feed(b"o\n\nthr"));
        assert!(!lines.finish());
        assert_eq!(seen.lines, [&b"one"[..], b"two", b"", b"thr"]);
    }

    #[test]
    fn the_result_is_reported_once() {
        let mut seen = Collect::default();
        let mut lines = LineSplitter::new(&mut seen);
        assert!(lines.feed(b"result 1\n"));
        assert!(!lines.feed(b"result 2\n"));
    }

    #[test]
    fn huge_lines_are_cut_for_the_observer() {
        let mut seen = Collect::default();
        let mut lines = LineSplitter::new(&mut seen);
        let chunk = vec![b'x'; 300 * 1024];
        for _ in 0..10 {
            lines.feed(&chunk);
        }
        assert!(lines.line.len() <= MAX_OBSERVED_LINE_BYTES);
        lines.feed(b"\nnext\n");
        assert!(lines.line.capacity() <= READ_BUFFER_BYTES);
        assert_eq!(seen.lines[0].len(), MAX_OBSERVED_LINE_BYTES);
        assert_eq!(seen.lines[1], b"next");
    }

    /// An observer that needs whole lines longer than the default says so.
    struct Wide(Collect);

    impl StdoutObserver for Wide {
        fn on_line(&mut self, line: &[u8]) -> ObserverControl {
            self.0.on_line(line)
        }
        fn max_line_bytes(&self) -> usize {
            3 * MAX_OBSERVED_LINE_BYTES
        }
    }

    #[test]
    fn an_observer_can_ask_for_longer_lines() {
        let mut seen = Wide(Collect::default());
        let mut lines = LineSplitter::new(&mut seen);
        let chunk = vec![b'x'; 300 * 1024];
        for _ in 0..8 {
            lines.feed(&chunk);
        }
        lines.feed(b"\n");
        for _ in 0..12 {
            lines.feed(&chunk);
        }
        lines.feed(b"\n");
        assert_eq!(seen.0.lines[0].len(), 8 * chunk.len());
        assert_eq!(seen.0.lines[1].len(), 3 * MAX_OBSERVED_LINE_BYTES);
    }
}
