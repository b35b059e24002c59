//! Live progress on stderr, drawn from the run's event stream: the display is a
//! subscriber of the events the store appends (and of the agents' live-only
//! progress), like the recorder. On a terminal: a live line per running stage
//! (elapsed time, and for agent stages turns, last tool and cost so far). On a
//! pipe: one plain line per stage event. With `--json`: nothing.

use std::collections::HashMap;
use std::time::Duration;

use chrono::DateTime;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use specbridge_engine::events::{Observed, RunEvent, StageFinished};
use specbridge_engine::resume::reuse::Action;
use specbridge_engine::runner::claude_code::stream::Progress as AgentProgress;

use crate::printer::Printer;
use crate::table::duration;

pub(crate) struct Progress {
    printer: Printer,
    quiet: bool,
    live: Option<MultiProgress>,
    bars: HashMap<String, ProgressBar>,
    /// When each running stage's current attempt started (`at` of its event).
    started: HashMap<String, i64>,
}

fn millis(at: &str) -> Option<i64> {
    DateTime::parse_from_rfc3339(at)
        .ok()
        .map(|t| t.timestamp_millis())
}

impl Progress {
    pub(crate) fn new(printer: Printer, json: bool) -> Self {
        let live = (printer.stderr_is_terminal && !json)
            .then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()));
        Progress {
            printer,
            quiet: json,
            live,
            bars: HashMap::new(),
            started: HashMap::new(),
        }
    }

    /// One thing seen on the run's stream.
    pub(crate) fn observe(&mut self, seen: &Observed<'_>) {
        if self.quiet {
            return;
        }
        let line = match seen {
            Observed::AgentProgress { stage, progress } => return self.detail(stage, progress),
            Observed::Recorded(line) => line,
        };
        match &line.event {
            RunEvent::StageStarted(s) => {
                if let Some(at) = millis(&line.at) {
                    self.started.insert(s.stage.clone(), at);
                }
                self.running(&s.stage);
            }
            RunEvent::StageFinished(f) => {
                let took = self
                    .started
                    .remove(&f.stage)
                    .zip(millis(&line.at))
                    .map(|(start, end)| u64::try_from(end - start).unwrap_or(0));
                self.settled(&f.stage, Self::finished_line(f, took));
            }
            // A reused stage does not start: its decision is its line.
            RunEvent::ResumeDecision(d) if d.action == Action::Reuse => {
                self.settled(&d.stage, format!("{:<10} {}", "reused", d.stage));
            }
            _ => {}
        }
    }

    fn running(&mut self, stage: &str) {
        let Some(mp) = &self.live else {
            self.printer.err(format!("{:<10} {stage}", "running"));
            return;
        };
        // A retry starts the stage again: its line goes on.
        if self.bars.contains_key(stage) {
            return;
        }
        let bar = mp.add(ProgressBar::new_spinner());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {prefix} {elapsed} {msg}")
                .expect("valid template"),
        );
        bar.set_prefix(stage.to_string());
        bar.enable_steady_tick(Duration::from_millis(120));
        self.bars.insert(stage.to_string(), bar);
    }

    fn settled(&mut self, stage: &str, line: String) {
        let Some(mp) = &self.live else {
            self.printer.err(line);
            return;
        };
        if let Some(bar) = self.bars.remove(stage) {
            bar.finish_and_clear();
            mp.remove(&bar);
        }
        let _ = mp.println(line);
    }

    /// Live detail of a running agent stage: turns, last tool, cost so far. Shown on
    /// the stage's terminal line; plain output stays one line per stage event.
    fn detail(&self, stage: &str, progress: &AgentProgress) {
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

    /// `status id (duration) [evidence]: outcome`; the duration is from the
    /// attempt's `stage-started` to its `stage-finished`, `-` for a stage that
    /// never started.
    fn finished_line(f: &StageFinished, took: Option<u64>) -> String {
        let mut line = format!("{:<10} {} ({})", f.status.as_str(), f.stage, duration(took));
        if let Some(e) = f.evidence_status {
            line.push_str(&format!(" [{}]", e.as_str()));
        }
        if let Some(o) = &f.outcome {
            line.push_str(&format!(": {o}"));
        }
        line
    }

    pub(crate) fn finish(&mut self) {
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
