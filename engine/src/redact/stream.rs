//! Redacting a stream as it is written: a child's stdout arrives in reads of any
//! size, and a secret cut in two by a read must still be caught, without holding
//! the whole stream in memory.
//!
//! Bytes are held until a newline (no shape spans one, see [`super::shapes`]) and
//! written redacted a run of whole lines at a time. A line longer than [`HOLD`] is
//! cut so that at least the longest secret stays held, never inside a match and
//! preferably after a delimiter. A private-key block spans lines: once its header
//! has been written (as `<redacted>`), everything up to its footer is dropped.
//! The result is what [`Redactor::redact_bytes`] gives for the whole stream.

use std::io::{self, Write};
use std::sync::{Arc, LazyLock};

use regex::bytes::Regex;

use super::shapes::{PEM_BEGIN, PEM_END, PEM_MARKER_MAX};
use super::Redactor;

/// Most bytes held while waiting for a newline.
pub(crate) const HOLD: usize = 256 * 1024;
/// Bytes kept back at a cut of an overlong line, at the least.
const KEEP: usize = 4 * 1024;

static BEGIN_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(PEM_BEGIN).expect("valid"));
static END_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(PEM_END).expect("valid"));

/// Writes redacted bytes into `out` as they come.
pub struct RedactingWriter<W: Write> {
    redactor: Arc<Redactor>,
    out: W,
    pending: Vec<u8>,
    /// Inside a private-key block whose header was written: drop until its footer.
    in_key: bool,
}

impl<W: Write> RedactingWriter<W> {
    pub fn new(redactor: Arc<Redactor>, out: W) -> Self {
        RedactingWriter {
            redactor,
            out,
            pending: Vec::new(),
            in_key: false,
        }
    }

    /// Takes a chunk; writes what can be judged already.
    pub fn write_chunk(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.pending.extend_from_slice(bytes);
        self.drain(false)
    }

    /// Writes everything still held and returns the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.drain(true)?;
        self.out.flush()?;
        Ok(self.out)
    }

    /// Bytes held, not yet written.
    pub fn held(&self) -> usize {
        self.pending.len()
    }

    fn drain(&mut self, eof: bool) -> io::Result<()> {
        loop {
            if self.in_key {
                match END_RE.find(&self.pending) {
                    Some(m) => {
                        self.pending.drain(..m.end());
                        self.in_key = false;
                        continue;
                    }
                    None if eof => {
                        self.pending.clear();
                        return Ok(());
                    }
                    None => {
                        // Keep what could be the start of the footer.
                        let keep = PEM_MARKER_MAX.min(self.pending.len());
                        self.pending.drain(..self.pending.len() - keep);
                        return Ok(());
                    }
                }
            }
            let cut = if eof {
                self.pending.len()
            } else {
                self.safe_cut()
            };
            if cut == 0 {
                return Ok(());
            }
            let segment: Vec<u8> = self.pending.drain(..cut).collect();
            self.out.write_all(&self.redactor.redact_bytes(&segment))?;
            // The block regex redacted an unterminated block to the segment's end;
            // the rest of it is still to come.
            self.in_key = unterminated_key(&segment);
            if eof && !self.in_key {
                return Ok(());
            }
        }
    }

    /// How many held bytes can be written now.
    fn safe_cut(&self) -> usize {
        if let Some(nl) = self.pending.iter().rposition(|b| *b == b'\n') {
            return nl + 1;
        }
        if self.pending.len() < HOLD {
            return 0;
        }
        let keep = KEEP.max(self.redactor.longest_literal() + 1);
        let limit = self.pending.len() - keep;
        // After a delimiter when there is one nearby, so no word is split.
        let mut cut = self.pending[limit.saturating_sub(keep)..limit]
            .iter()
            .rposition(|b| is_delimiter(*b))
            .map_or(limit, |i| limit.saturating_sub(keep) + i + 1);
        let spans = self.redactor.boundary_spans(&self.pending);
        loop {
            let inside = spans.iter().find(|(s, e)| *s < cut && cut < *e);
            match inside {
                Some((s, _)) => cut = *s,
                None => break,
            }
        }
        if cut == 0 {
            // One match longer than what is held: it starts here and is redacted
            // from its start; only a monstrous token's tail could escape.
            cut = limit;
        }
        cut
    }
}

fn is_delimiter(b: u8) -> bool {
    b.is_ascii_whitespace() || matches!(b, b'"' | b',' | b'{' | b'}' | b'[' | b']')
}

/// Whether the last private-key header in `bytes` has no footer after it.
fn unterminated_key(bytes: &[u8]) -> bool {
    let Some(last) = BEGIN_RE.find_iter(bytes).last() else {
        return false;
    };
    END_RE.find(&bytes[last.end()..]).is_none()
}
