//! What `run` and `resume` show: the session as it goes ([`Watcher`]: warnings,
//! live progress) and how it ended ([`summary`]).

pub(crate) mod summary;

use std::path::Path;
use std::sync::{Arc, Mutex};

use specbridge_engine::audit::Finding;
use specbridge_engine::events::Observed;
use specbridge_engine::Diagnostic;
use specbridge_stages::session::SessionObserver;

use crate::diagnostics;
use crate::printer::Printer;
use crate::progress::Progress;

/// Prints what a session tells, on stderr; stdout stays for the summary.
pub(crate) struct Watcher {
    printer: Printer,
    json: bool,
    progress: Mutex<Progress>,
}

impl Watcher {
    pub(crate) fn new(printer: Printer, json: bool) -> Arc<Self> {
        Arc::new(Watcher {
            printer,
            json,
            progress: Mutex::new(Progress::new(printer, json)),
        })
    }

    /// Clear the live lines before the summary.
    pub(crate) fn finish(&self) {
        if let Ok(mut progress) = self.progress.lock() {
            progress.finish();
        }
    }

    fn warn(&self, text: impl std::fmt::Display) {
        self.printer
            .err(format!("{}: {text}", self.printer.warning_label()));
    }
}

impl SessionObserver for Watcher {
    fn scaffold_created(&self, root: &Path, from: &Path, keep: bool) {
        if keep {
            self.printer.err(format!(
                "scaffold: {} (a copy of {} in a new git repository)",
                root.display(),
                from.display()
            ));
        } else {
            self.printer.err(format!(
                "scaffold: a copy of {} in a new git repository, deleted after the run (--no-keep)",
                from.display()
            ));
        }
    }

    fn scaffold_kept(&self, root: &Path) {
        self.printer
            .err(format!("scaffold kept at {}", root.display()));
    }

    fn resume_opened(&self, findings: &[Finding], torn_tail: Option<usize>, dry_run: bool) {
        for f in findings {
            self.warn(f.headline());
        }
        if let Some(bytes) = torn_tail {
            let what = if dry_run {
                "would be set aside"
            } else {
                "is set aside"
            };
            self.warn(format!(
                "events.jsonl ends in an incomplete line ({bytes} bytes, left by a crash); it {what} as events.jsonl.torn-N"
            ));
        }
    }

    fn pipeline_warnings(&self, found: &[Diagnostic]) {
        diagnostics::print(&self.printer, &diagnostics::relative(found.to_vec()));
    }

    fn warnings(&self, warnings: &[String]) {
        let label = self.printer.warning_label();
        self.printer
            .err_lines(warnings.iter().map(|w| format!("{label}: {w}")));
    }

    fn run_started(&self, run_id: &str, resumed: bool) {
        if !self.json {
            let how = if resumed { "resumed" } else { "started" };
            self.printer.err(format!("run {run_id} {how}"));
        }
    }

    fn observed(&self, seen: &Observed<'_>) {
        if let Ok(mut progress) = self.progress.lock() {
            progress.observe(seen);
        }
    }
}
