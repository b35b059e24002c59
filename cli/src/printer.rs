//! All user-facing output goes through here: stdout for results, stderr for
//! diagnostics and progress. `--json` modes keep stdout to exactly one JSON value.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::args::ColorChoice;

static JSON_PRINTED: AtomicBool = AtomicBool::new(false);

/// Whether a JSON document went to stdout already (so an error adds none).
pub(crate) fn json_printed() -> bool {
    JSON_PRINTED.load(Ordering::SeqCst)
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Printer {
    pub color: bool,
    /// Whether stderr is a terminal (live progress lines) or a pipe (plain lines).
    pub stderr_is_terminal: bool,
}

impl Printer {
    pub(crate) fn new(choice: ColorChoice) -> Self {
        let stderr_is_terminal = std::io::stderr().is_terminal();
        let color = match choice {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            // NO_COLOR counts when set to anything but the empty string (no-color.org).
            // Both streams: `runs show | less` must not get escapes either.
            ColorChoice::Auto => {
                stderr_is_terminal
                    && std::io::stdout().is_terminal()
                    && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
            }
        };
        Printer {
            color,
            stderr_is_terminal,
        }
    }

    /// A result on stdout: one line, or a long listing built as one text (a
    /// dry run of thousands of stages), which stdout writes in a few calls.
    pub(crate) fn out(&self, text: impl AsRef<str>) {
        let mut o = std::io::stdout().lock();
        let _ = writeln!(o, "{}", text.as_ref());
    }

    /// A JSON document on stdout, pretty-printed.
    pub(crate) fn json(&self, value: &impl serde::Serialize) {
        let text = serde_json::to_string_pretty(value).expect("serializable output");
        JSON_PRINTED.store(true, Ordering::SeqCst);
        self.out(text);
    }

    /// A message on stderr.
    pub(crate) fn err(&self, text: impl AsRef<str>) {
        let mut e = std::io::stderr().lock();
        let _ = writeln!(e, "{}", text.as_ref());
    }

    /// Messages on stderr through one buffer: a warning for each of 10,000
    /// stages costs a few writes, not 20,000 (stderr itself is unbuffered).
    pub(crate) fn err_lines<I>(&self, lines: I)
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        write_lines(std::io::stderr().lock(), lines);
    }

    pub(crate) fn paint(&self, text: &str, ansi: &str) -> String {
        if self.color {
            format!("\x1b[{ansi}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    pub(crate) fn error_label(&self) -> String {
        self.paint("error", "1;31")
    }

    pub(crate) fn warning_label(&self) -> String {
        self.paint("warning", "1;33")
    }
}

/// Lines through one 64 KiB buffer, flushed at the end.
fn write_lines<I>(to: impl Write, lines: I)
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    let mut w = std::io::BufWriter::with_capacity(64 * 1024, to);
    for line in lines {
        let _ = writeln!(w, "{}", line.as_ref());
    }
    let _ = w.flush();
}
