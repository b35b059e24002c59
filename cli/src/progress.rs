//! Live progress on stderr: one plain line per stage event. (On a terminal the
//! agent runner adds a live line per running stage.)

use specbridge_engine::scheduler::{Node, StageReport};
use specbridge_engine::StageStatus;

use crate::printer::Printer;
use crate::table::duration;

pub struct Progress {
    printer: Printer,
    quiet: bool,
}

impl Progress {
    pub fn new(printer: Printer, json: bool) -> Self {
        Progress {
            printer,
            quiet: json,
        }
    }

    pub fn stage(&mut self, node: &Node, status: StageStatus, report: Option<&StageReport>) {
        if self.quiet {
            return;
        }
        let mut line = format!("{:<10} {}", status.as_str(), node.id);
        if let Some(r) = report {
            if status != StageStatus::Running {
                line.push_str(&format!(" ({})", duration(r.duration_ms)));
            }
            if let Some(o) = &r.outcome {
                line.push_str(&format!(": {o}"));
            }
        }
        self.printer.err(line);
    }

    pub fn finish(&mut self) {}
}
