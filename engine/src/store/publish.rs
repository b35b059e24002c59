//! The one path an event takes: redacted, appended to the log, then handed to the
//! run's subscribers (the live display), in the order of the log.
//!
//! The recorder, the display and any other consumer see one stream: what a
//! subscriber receives is the event as written, after redaction, with its `seq`
//! and `at`. Live-only progress (an agent's turns and tools) goes to the same
//! subscribers and is never written.

use std::sync::{Mutex, MutexGuard};

use serde_json::Value;

use crate::events::line::{self, EventLine};
use crate::events::{Observed, RunEvent, Subscriber};
use crate::redact::Redactor;
use crate::runner::claude_code::stream::Progress;
use crate::store::events::{EventError, EventLog};

/// A [`RunEvent`] as the log writes it: its JSON with every string (and key)
/// redacted. Only the store makes one, so nothing reaches the log unredacted.
#[derive(Debug, Clone)]
pub(in crate::store) struct Redacted(Value);

impl Redacted {
    pub(in crate::store) fn new(event: &RunEvent, redactor: &Redactor) -> Self {
        let mut value = serde_json::to_value(event).expect("an event serializes");
        redactor.redact_json(&mut value);
        Redacted(value)
    }

    /// The event's `type`.
    pub(in crate::store) fn kind(&self) -> &str {
        self.0
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The payload's fields in their order, without the tag.
    pub(in crate::store) fn fields(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.0
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| k.as_str() != "type")
    }
}

/// A run's event log and who listens to it.
pub(in crate::store) struct Publisher {
    log: Mutex<EventLog>,
    subscribers: Mutex<Vec<Subscriber>>,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("log", &self.log)
            .finish_non_exhaustive()
    }
}

impl Publisher {
    pub(in crate::store) fn new(log: EventLog) -> Self {
        Publisher {
            log: Mutex::new(log),
            subscribers: Mutex::new(Vec::new()),
        }
    }

    /// The log, held: a writer that must keep two events together (intent and
    /// announcement) or read the log without an append in between.
    pub(in crate::store) fn lock(&self) -> MutexGuard<'_, EventLog> {
        self.log.lock().expect("event log lock")
    }

    pub(in crate::store) fn subscribe(&self, subscriber: Subscriber) {
        self.subscribers
            .lock()
            .expect("subscribers lock")
            .push(subscriber);
    }

    /// Append one event to a log already held. Subscribers are told while it is
    /// still held, so that they see events in the order of their `seq`; they must
    /// not write to the run.
    pub(in crate::store) fn append_held(
        &self,
        log: &mut EventLog,
        redactor: &Redactor,
        event: &RunEvent,
        at: Option<chrono::DateTime<chrono::Utc>>,
    ) -> Result<u64, EventError> {
        let redacted = Redacted::new(event, redactor);
        let appended = log.append(&redacted, at)?;
        let subscribers = self.subscribers.lock().expect("subscribers lock");
        if !subscribers.is_empty() {
            // What was written, read back: a subscriber never sees a secret the
            // log does not hold. A redaction that broke the event's shape (a
            // declared secret equal to a status name) is not shown rather than
            // shown unredacted.
            if let Ok(event) = line::parse(&redacted.0) {
                let line = EventLine {
                    seq: appended.seq,
                    at: appended.at,
                    event,
                };
                for s in subscribers.iter() {
                    s(&Observed::Recorded(&line));
                }
            }
        }
        Ok(appended.seq)
    }

    /// Hand live progress of an agent to the subscribers; nothing is written.
    pub(in crate::store) fn live(&self, redactor: &Redactor, stage: &str, progress: &Progress) {
        let subscribers = self.subscribers.lock().expect("subscribers lock");
        if subscribers.is_empty() {
            return;
        }
        let mut progress = progress.clone();
        if let Some(tool) = &progress.last_tool {
            progress.last_tool = Some(redactor.redact_str(tool));
        }
        for s in subscribers.iter() {
            s(&Observed::AgentProgress {
                stage,
                progress: &progress,
            });
        }
    }
}
