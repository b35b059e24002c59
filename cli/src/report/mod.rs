//! `runs report`: a run as one self-contained HTML page. It lives in the CLI, next
//! to the other views of a run (`runs show`), and reads the same records through
//! `crate::inspect`; the engine stays free of presentation.
//!
//! The page needs nothing from the network: styles and the few lines of script
//! are inline. Each stage's details (tool calls, verification, evidence, diff) sit
//! in a `<template>`, which the browser parses but does not render until the
//! stage is opened, so a 1,000-stage run stays quick to open.

mod html;
mod svg;
mod timeline;

use specbridge_engine::audit::AuditReport;
use specbridge_engine::store::{RunReader, RunRecord, StoreError};

use crate::inspect::StageStory;

pub(crate) use html::render;

/// How many bytes of one attempt's diff the page embeds.
pub(crate) const DIFF_BYTES: usize = 64 * 1024;

/// Everything the page shows, read from the run folder.
pub(crate) struct ReportData {
    pub run: RunRecord,
    pub stories: Vec<StageStory>,
    pub timeline: Vec<timeline::Bar>,
    /// `resume-decision` events: reruns and what a human changed between runs.
    pub decisions: Vec<specbridge_engine::events::ResumeDecision>,
    pub audit: Result<AuditReport, String>,
}

impl ReportData {
    pub(crate) fn read(reader: &RunReader, run: RunRecord) -> Result<ReportData, StoreError> {
        let stories = reader
            .stages_in_plan_order()?
            .into_iter()
            .map(|s| StageStory::read(reader, s, 8))
            .collect::<Result<_, _>>()?;
        let (timeline, decisions) = timeline::from_events(&reader.events_path());
        let audit = specbridge_engine::audit::audit_run(reader.dir())
            .map_err(|e| specbridge_engine::error_chain(&e));
        Ok(ReportData {
            run,
            stories,
            timeline,
            decisions,
            audit,
        })
    }
}

/// `&`, `<`, `>`, `"` and `'` as entities: every text from the records goes
/// through here (the records are redacted, not trusted).
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The CSS class of a status: its name, restricted to what a class may hold.
pub(crate) fn status_class(status: &str) -> String {
    status
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_records_is_inert() {
        assert_eq!(
            esc(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
        assert_eq!(status_class("max-turns\"><x"), "max-turnsx");
    }
}
