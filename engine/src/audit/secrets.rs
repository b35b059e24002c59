//! Values shaped like credentials, found in a file read in bounded chunks.
//!
//! The shapes are the redactor's own table (`redact::shapes`, docs/claude-code-runner.md): a shape
//! added there is looked for here. The placeholder matches none of them, so a file
//! the run store wrote is clean.

use std::io::Read;
use std::sync::LazyLock;

use regex::bytes::Regex;
use sha2::{Digest, Sha256};

use crate::redact::SHAPES;

/// The redactor's own shapes (one table, `redact::shapes`), each a named group in
/// table order: where two could start at the same byte (`sk-ant-…` is also
/// `sk-…`), the first wins.
static PATTERN: LazyLock<Regex> = LazyLock::new(|| {
    let parts: Vec<String> = SHAPES
        .iter()
        .enumerate()
        .map(|(i, s)| format!("(?P<s{i}>{})", s.anonymous_pattern()))
        .collect();
    Regex::new(&parts.join("|")).expect("secret pattern compiles")
});

/// Compiles the pattern on a thread of its own, for an audit about to list the
/// run folder: by the first file with bytes in it, the scanning threads find it
/// compiled (about a millisecond) instead of one compiling it while the other
/// waits.
pub(crate) fn warm_up() {
    crate::beside::force_aside("specbridge-secrets", &PATTERN);
}

/// Bytes read at a time.
const CHUNK: usize = 64 * 1024;
/// Bytes held back at the end of the window so a secret cut by a chunk boundary is
/// seen whole in the next window; longer than any credential we look for.
const KEEP: usize = 4 * 1024;
/// Bytes kept before the next unsearched byte, for the word boundary before it.
const CONTEXT: usize = 16;

/// Where one shape of secret was found in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretHit {
    /// Short name of the shape (`anthropic`, `jwt`, …).
    pub shape: &'static str,
    /// Human name of the shape (`an Anthropic API key`).
    pub label: &'static str,
    /// 1-based line of the first occurrence.
    pub first_line: u64,
    pub count: u64,
}

/// What one read of a file yields: its sha256 and the secrets in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileScan {
    pub sha256: String,
    pub bytes: u64,
    pub secrets: Vec<SecretHit>,
}

/// [`Scanner::scan`] with buffers of its own.
#[cfg(test)]
pub(crate) fn scan_reader(reader: impl Read) -> std::io::Result<FileScan> {
    Scanner::default().scan(reader)
}

/// The buffers of a scan, kept from one file to the next: a run has
/// hundreds of small files, and zeroing a fresh 64 KiB chunk for each one cost
/// more than reading it.
#[derive(Default)]
pub(crate) struct Scanner {
    chunk: Vec<u8>,
    window: Vec<u8>,
}

impl Scanner {
    /// Hash a file and look for secrets in one pass, holding at most a window of
    /// `CHUNK + KEEP` bytes whatever the file's size or line lengths.
    pub(crate) fn scan(&mut self, reader: impl Read) -> std::io::Result<FileScan> {
        if self.chunk.len() != CHUNK {
            self.chunk = vec![0u8; CHUNK];
            self.window = Vec::with_capacity(CHUNK + KEEP + CONTEXT);
        }
        self.window.clear();
        scan_with(reader, &mut self.chunk, &mut self.window)
    }
}

fn scan_with(
    mut reader: impl Read,
    chunk: &mut [u8],
    window: &mut Vec<u8>,
) -> std::io::Result<FileScan> {
    let mut hasher = Sha256::new();
    let mut hits: Vec<SecretHit> = Vec::new();
    // Newlines in the bytes already dropped from the front of the window.
    let mut lines_before = 0u64;
    // Matches must start at or after this index of the window: earlier starts
    // were judged in a previous round.
    let mut from = 0usize;
    let mut total = 0u64;
    loop {
        let n = match reader.read(chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&chunk[..n]);
        total += n as u64;
        window.extend_from_slice(&chunk[..n]);
        let eof = n == 0;
        let limit = if eof {
            window.len()
        } else {
            window.len().saturating_sub(KEEP)
        };
        if limit > from {
            for caps in PATTERN.captures_iter(window) {
                let whole = caps.get(0).expect("group 0 always matches");
                if whole.start() < from || whole.start() >= limit {
                    continue;
                }
                let Some(found) = (0..SHAPES.len()).find(|i| caps.name(&format!("s{i}")).is_some())
                else {
                    continue;
                };
                let (shape, label) = (SHAPES[found].name, SHAPES[found].label);
                match hits.iter_mut().find(|h| h.shape == shape) {
                    Some(h) => h.count += 1,
                    None => hits.push(SecretHit {
                        shape,
                        label,
                        first_line: lines_before + count_newlines(&window[..whole.start()]) + 1,
                        count: 1,
                    }),
                }
            }
        }
        if eof {
            break;
        }
        from = from.max(limit);
        let cut = from.saturating_sub(CONTEXT);
        lines_before += count_newlines(&window[..cut]);
        window.drain(..cut);
        from -= cut;
    }
    Ok(FileScan {
        sha256: hex::encode(hasher.finalize()),
        bytes: total,
        secrets: hits,
    })
}

fn count_newlines(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|b| **b == b'\n').count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(text: &str) -> Vec<(&'static str, u64, u64)> {
        scan_reader(text.as_bytes())
            .unwrap()
            .secrets
            .into_iter()
            .map(|h| (h.shape, h.first_line, h.count))
            .collect()
    }

    const ANT: &str = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";

    #[test]
    fn each_shape_is_found() {
        let cases = [
            (ANT, "anthropic"),
            ("sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz012345", "openai"),
            ("ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "github"),
            ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "github"),
            ("AKIAIOSFODNN7EXAMPLE", "aws"),
            ("xoxb-1234567890-abcdefghij", "slack"),
            ("Authorization: Bearer abcdefghijklmnop0123", "bearer"),
            (
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
                "jwt",
            ),
        ];
        for (text, shape) in cases {
            let found = scan(&format!("before {text} after\n"));
            assert_eq!(found, vec![(shape, 1, 1)], "{text}");
        }
    }

    #[test]
    fn the_placeholder_and_ordinary_text_are_clean() {
        let text = "argv: --api-key <redacted>\nAuthorization: Bearer <redacted>\n\
                    token=<redacted> the disk-usage-report-generator-tool ran\n\
                    sha 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n\
                    bearer tokens are replaced; task-ant-api03-abcdefghijklmnopqrstu\n";
        assert_eq!(scan(text), vec![]);
    }

    #[test]
    fn occurrences_are_counted_once_with_the_first_line() {
        let text = format!("a\nb {ANT}\nc\n{ANT} and {ANT}\n");
        assert_eq!(scan(&text), vec![("anthropic", 2, 3)]);
    }

    #[test]
    fn a_secret_across_a_chunk_boundary_is_found_once_at_its_line() {
        for offset in [
            CHUNK - 20,
            CHUNK - 1,
            CHUNK,
            CHUNK - KEEP - 3,
            3 * CHUNK - 7,
        ] {
            let mut text = String::new();
            let mut line = 1;
            while text.len() + 40 < offset {
                text.push_str(&"x".repeat(39));
                text.push('\n');
                line += 1;
            }
            text.push_str(&"y".repeat(offset - text.len()));
            text.push(' ');
            text.push_str(ANT);
            text.push_str("\ntail\n");
            assert_eq!(scan(&text), vec![("anthropic", line, 1)], "offset {offset}");
        }
    }

    #[test]
    fn a_single_huge_line_is_scanned_in_windows() {
        let mut text = "z ".repeat(5 * CHUNK);
        text.push_str(ANT);
        text.push_str(&" z".repeat(CHUNK));
        assert_eq!(scan(&text), vec![("anthropic", 1, 1)]);
    }

    #[test]
    fn the_hash_is_the_sha256_of_all_bytes() {
        let text = "q".repeat(3 * CHUNK + 5);
        let s = scan_reader(text.as_bytes()).unwrap();
        assert_eq!(s.sha256, crate::store::sha256_hex(text.as_bytes()));
        assert_eq!(s.bytes, text.len() as u64);
    }
}
