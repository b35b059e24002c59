//! Live progress on stderr. On a terminal: a live line per running stage (elapsed
//! time, and for agent stages turns, last tool and cost so far). On a pipe: one
//! plain line per stage event. With `--json`: nothing.

use std::collections::HashMap;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use specbridge_engine::runner::claude_code::stream::Progress as AgentProgress;
use specbridge_engine::scheduler::{Node, StageReport};
use specbridge_engine::StageStatus;

use crate::printer::Printer;
use crate::table::duration;

pub struct Progress {
    printer: Printer,
    quiet: bool,
    live: Option<MultiProgress>,
    bars: HashMap<String, ProgressBar>,
}

impl Progress {
    pub fn new(printer: Printer, json: bool) -> Self {
        let live = (printer.stderr_is_terminal && !json)
            .then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()));
        Progress {
            printer,
            quiet: json,
            live,
            bars: HashMap::new(),
        }
    }

    /// A stage changed status.
    pub fn stage(&mut self, node: &Node, status: StageStatus, report: Option<&StageReport>) {
        if self.quiet {
            return;
        }
        let line = Self::line(node, status, report);
        let Some(mp) = &self.live else {
            self.printer.err(line);
            return;
        };
        if status == StageStatus::Running {
            let bar = mp.add(ProgressBar::new_spinner());
            bar.set_style(
                ProgressStyle::with_template("{spinner} {prefix} {elapsed} {msg}")
                    .expect("valid template"),
            );
            bar.set_prefix(node.id.clone());
            bar.enable_steady_tick(Duration::from_millis(120));
            self.bars.insert(node.id.clone(), bar);
            return;
        }
        if let Some(bar) = self.bars.remove(&node.id) {
            bar.finish_and_clear();
            mp.remove(&bar);
        }
        let _ = mp.println(line);
    }

    /// Live detail of a running agent stage: turns, last tool, cost so far. Shown on
    /// the stage's terminal line; plain output stays one line per status change.
    pub fn detail(&self, stage: &str, progress: &AgentProgress) {
        if self.quiet {
            return;
        }
        if let Some(bar) = self.bars.get(stage) {
            bar.set_message(Self::detail_text(progress));
        }
    }

    fn detail_text(p: &AgentProgress) -> String {
        let mut parts = vec![format!(
            "{} turn{}",
            p.turns,
            if p.turns == 1 { "" } else { "s" }
        )];
        if let Some(tool) = &p.last_tool {
            parts.push(format!("last tool {tool}"));
        }
        if let Some(cost) = p.cost_usd_so_far {
            parts.push(format!("${cost:.4}"));
        }
        if p.api_retries > 0 {
            parts.push(format!("{} API retries", p.api_retries));
        }
        parts.join(" · ")
    }

    fn line(node: &Node, status: StageStatus, report: Option<&StageReport>) -> String {
        let label = match report {
            Some(r) if r.reused => "reused",
            _ => status.as_str(),
        };
        let mut line = format!("{:<10} {}", label, node.id);
        if let Some(r) = report {
            if status != StageStatus::Running && !r.reused {
                line.push_str(&format!(" ({})", duration(r.duration_ms)));
            }
            if let Some(e) = r.evidence_status {
                line.push_str(&format!(" [{}]", e.as_str()));
            }
            if let Some(o) = &r.reason {
                line.push_str(&format!(": {o}"));
            }
        }
        line
    }

    pub fn finish(&mut self) {
        for (_, bar) in self.bars.drain() {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detail_shows_turns_last_tool_cost_and_retries() {
        let mut p = AgentProgress {
            turns: 1,
            ..Default::default()
        };
        assert_eq!(Progress::detail_text(&p), "1 turn");
        p.turns = 3;
        p.last_tool = Some("Grep".into());
        assert_eq!(Progress::detail_text(&p), "3 turns · last tool Grep");
        p.cost_usd_so_far = Some(0.01234);
        p.api_retries = 2;
        assert_eq!(
            Progress::detail_text(&p),
            "3 turns · last tool Grep · $0.0123 · 2 API retries"
        );
    }
}
