//! A line of `events.jsonl` read back: the envelope the log adds (`seq`, `at`,
//! `prev`) and the [`RunEvent`] it carries.

use std::path::Path;

use serde_json::Value;

use super::RunEvent;
use crate::store::events::{verify_chain_with, ChainCheck, Envelope, EventError, Prev};

/// The fields the log adds around every event; a payload never carries them.
pub(crate) const ENVELOPE: [&str; 3] = ["seq", "at", "prev"];

/// One whole line of the log.
#[derive(Debug, Clone, PartialEq)]
pub struct EventLine {
    pub seq: u64,
    /// RFC 3339 UTC with milliseconds.
    pub at: String,
    pub event: RunEvent,
}

/// Why a line that is JSON is not a [`RunEvent`]: an unknown `type`, a missing or
/// unknown field, a value of the wrong shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{kind}` is not an event this version writes ({message})")]
pub struct UnknownEvent {
    /// The line's `type`, or `?` when it has none.
    pub kind: String,
    pub message: String,
}

/// The event a parsed line carries. The envelope fields are set aside first, so
/// that a payload's unknown-field check sees only the payload.
pub fn parse(line: &Value) -> Result<RunEvent, UnknownEvent> {
    parse_owned(line.clone())
}

/// [`parse`] of a line the caller no longer needs: its fields are moved into the
/// event, not copied (a resume reads every line of a log this way).
pub fn parse_owned(line: Value) -> Result<RunEvent, UnknownEvent> {
    let kind = line
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string();
    let Value::Object(mut payload) = line else {
        return Err(UnknownEvent {
            kind,
            message: "not an object".into(),
        });
    };
    for field in ENVELOPE {
        payload.remove(field);
    }
    serde_json::from_value(Value::Object(payload)).map_err(|e| UnknownEvent {
        kind,
        message: e.to_string(),
    })
}

/// Read a log once, checking its chain (see [`verify_chain_with`]) and handing
/// each line to `visit` as its line number and either its event or why it is not
/// one. A line that is not JSON at all is a chain problem and is not visited.
pub fn read_with(
    path: &Path,
    mut visit: impl FnMut(u64, Result<EventLine, UnknownEvent>),
) -> Result<ChainCheck, EventError> {
    let mut payload = Vec::new();
    verify_chain_with(path, |line_no, line, last_hash| {
        let (envelope, parsed) = read_line(line_no, line, last_hash, &mut payload)?;
        visit(line_no, parsed);
        Ok(envelope)
    })
}

/// The event one line carries, read as [`read_with`] reads it but outside the
/// chain (a line known to be the log's own, `store/tamper.rs`); `None` for a
/// line that is not an event.
pub(crate) fn event_of(line: &[u8], payload: &mut Vec<u8>) -> Option<RunEvent> {
    let (_, parsed) = read_line(0, line, "", payload).ok()?;
    parsed.ok().map(|l| l.event)
}

/// One line: its envelope and its event, or why it is not JSON. A line as the
/// log writes it is read without a JSON tree ([`as_written`]); every other line,
/// and every line whose event does not parse that way, is read as a JSON value
/// first ([`read_line_as_value`]), which gives the same answer for the first
/// kind (a property test holds them equal) and is the only reading of the rest.
fn read_line(
    line_no: u64,
    line: &[u8],
    last_hash: &str,
    payload: &mut Vec<u8>,
) -> Result<(Envelope, Result<EventLine, UnknownEvent>), String> {
    if let Some(found) = as_written(line, last_hash, payload) {
        return Ok(found);
    }
    read_line_as_value(line_no, line, last_hash)
}

/// The general reading: the line as a JSON value, its envelope from that value,
/// and its event from the value less the envelope.
fn read_line_as_value(
    line_no: u64,
    line: &[u8],
    last_hash: &str,
) -> Result<(Envelope, Result<EventLine, UnknownEvent>), String> {
    let value = serde_json::from_slice::<Value>(line).map_err(|e| e.to_string())?;
    let envelope = Envelope::of(&value, last_hash);
    let seq = envelope.seq.unwrap_or(line_no);
    let at = value
        .get("at")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let parsed = parse_owned(value).map(|event| EventLine { seq, at, event });
    Ok((envelope, parsed))
}

/// A line as [`crate::store::events::EventLog`] writes it — `{"seq":N,"at":"…",
/// "type":"…","prev":"…"` then the payload's fields, no whitespace, no escape in
/// the envelope — read without a JSON tree: the envelope by its bytes, the event
/// straight from `{"type":"…"` and the rest of the line. `None` for any other
/// shape, and for an event that does not parse this way: its payload may repeat
/// an envelope field, which a JSON value would keep the last of (every payload
/// refuses unknown and repeated fields, so an event that parses here has none).
fn as_written(
    line: &[u8],
    last_hash: &str,
    payload: &mut Vec<u8>,
) -> Option<(Envelope, Result<EventLine, UnknownEvent>)> {
    let rest = line.strip_prefix(b"{\"seq\":")?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    // JSON allows no leading zero; a number past u64 is not a `seq` either.
    if digits == 0 || (digits > 1 && rest[0] == b'0') {
        return None;
    }
    let seq: u64 = std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()?;
    let rest = rest[digits..].strip_prefix(b",\"at\":\"")?;
    let (at, rest) = plain_string(rest)?;
    let rest = rest.strip_prefix(b",\"type\":\"")?;
    let (kind, rest) = plain_string(rest)?;
    let rest = rest.strip_prefix(b",\"prev\":\"")?;
    let (prev, rest) = plain_string(rest)?;
    if !matches!(rest.first(), Some(b',' | b'}')) {
        return None;
    }
    payload.clear();
    payload.extend_from_slice(b"{\"type\":\"");
    payload.extend_from_slice(kind.as_bytes());
    payload.push(b'"');
    payload.extend_from_slice(rest);
    let event = serde_json::from_slice::<RunEvent>(payload).ok()?;
    let envelope = Envelope {
        seq: Some(seq),
        prev: Prev::of(Some(prev), last_hash),
        at: true,
        kind: true,
    };
    let line = EventLine {
        seq,
        at: at.to_string(),
        event,
    };
    Some((envelope, Ok(line)))
}

/// The text of a JSON string up to its closing quote, and what follows it, when
/// the string holds no escape and no control character: then its value is that
/// text.
fn plain_string(s: &[u8]) -> Option<(&str, &[u8])> {
    let end = s
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
    if s[end] != b'"' {
        return None;
    }
    Some((std::str::from_utf8(&s[..end]).ok()?, &s[end + 1..]))
}

/// Every event of a log whose lines parse, in order; unreadable lines are left
/// out. For readers that tell a story (the report, `runs show`), not for audit.
pub fn read_all(path: &Path) -> Vec<EventLine> {
    let mut out = Vec::new();
    let _ = read_with(path, |_, parsed| {
        if let Ok(line) = parsed {
            out.push(line);
        }
    });
    out
}

#[cfg(test)]
mod read_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{ProcessSpawned, StageFinished, StageProcess, VerificationProcess};
    use crate::status::StageStatus;
    use serde_json::json;

    #[test]
    fn lines_written_before_the_type_existed_parse() {
        // Taken from the committed recording and from older logs.
        let finished = json!({"seq":23,"at":"2026-11-30T14:24:04.445Z","type":"stage-finished","prev":"29","stage":"requirements","attempt":1,"status":"succeeded","outcome":null,"evidenceStatus":null});
        assert_eq!(
            parse(&finished).unwrap(),
            RunEvent::StageFinished(StageFinished {
                stage: "requirements".into(),
                attempt: Some(1),
                status: StageStatus::Succeeded,
                outcome: None,
                evidence_status: None,
                recovered: false,
            })
        );
        let blocked = json!({"seq":3,"at":"x","type":"stage-finished","prev":"p","stage":"b","status":"blocked","outcome":"needs a"});
        assert!(
            matches!(parse(&blocked).unwrap(), RunEvent::StageFinished(f) if f.attempt.is_none())
        );
        let started = json!({"seq":1,"at":"x","type":"run-started","prev":"0","runId":"r"});
        assert!(
            matches!(parse(&started).unwrap(), RunEvent::RunStarted(s) if s.specbridge_version.is_none())
        );
        let finished_run = json!({"seq":117,"at":"x","type":"run-finished","prev":"c","status":"succeeded","exitCode":0,"totals":{"costUsd":0.0036,"invocations":5,"turns":14}});
        assert!(matches!(
            parse(&finished_run).unwrap(),
            RunEvent::RunFinished(_)
        ));
    }

    #[test]
    fn both_shapes_of_a_spawn_parse_to_their_own_payload() {
        let stage = json!({"type":"process-spawned","stage":"s","attempt":1,"pid":7,"pgid":7});
        let verification = json!({"type":"process-spawned","verification":"tests","attempt":"stages/s/attempt-001","pid":8,"pgid":8});
        assert!(matches!(
            parse(&stage).unwrap(),
            RunEvent::ProcessSpawned(ProcessSpawned::Stage(StageProcess { pid: 7, .. }))
        ));
        assert!(matches!(
            parse(&verification).unwrap(),
            RunEvent::ProcessSpawned(ProcessSpawned::Verification(VerificationProcess {
                pid: 8,
                ..
            }))
        ));
    }

    #[test]
    fn an_unknown_type_or_field_is_an_error_not_a_guess() {
        let unknown = parse(&json!({"seq":1,"type":"note","text":"hi"})).unwrap_err();
        assert_eq!(unknown.kind, "note");
        let extra = parse(&json!({"type":"stage-started","stage":"s","attempt":1,"extra":true}))
            .unwrap_err();
        assert!(extra.message.contains("extra"), "{extra}");
        let missing = parse(&json!({"type":"record-written","path":"a"})).unwrap_err();
        assert!(missing.message.contains("sha256"), "{missing}");
        assert_eq!(parse(&json!({"stage":"s"})).unwrap_err().kind, "?");
    }

    #[test]
    fn an_event_round_trips_through_its_line() {
        let ev = RunEvent::record_written("run.json", &"a".repeat(64));
        let v = serde_json::to_value(&ev).unwrap();
        assert_eq!(v["type"], "record-written");
        assert!(v.get("recovered").is_none(), "false is not written");
        assert_eq!(parse(&v).unwrap(), ev);
    }
}
