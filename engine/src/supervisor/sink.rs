//! Where the supervisor puts what a child prints.

use std::io;

/// One output stream's destination. The run store's redacting log
/// (`store::RunLog`) is the implementation for everything under `.specbridge/`:
/// the supervisor never opens a file itself, so nothing a child prints reaches
/// the disk unredacted.
pub trait OutputSink: Send + Sync {
    /// Makes the destination ready, called once the child exists and before
    /// its spawn is recorded (the caller's `on_spawn`): what it makes (a file
    /// and its folders) is made while the child starts, not before, and is on
    /// the disk before anything says the child was spawned. An error stops the
    /// child as a failed write does.
    fn open(&mut self) -> io::Result<()> {
        Ok(())
    }
    /// Bytes as read from the child, in order; a chunk may end anywhere.
    fn write_chunk(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// End of the stream: write what is held, flush, sync, record the file.
    fn finish(&mut self) -> io::Result<()>;
    /// Where the bytes go, for error messages.
    fn describe(&self) -> String;
}

/// Throws the output away (a stream nobody keeps).
#[derive(Debug, Default)]
pub struct Discard;

impl OutputSink for Discard {
    fn write_chunk(&mut self, _: &[u8]) -> io::Result<()> {
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn describe(&self) -> String {
        "nowhere".into()
    }
}
