//! Which attempts start without a `running` `stage.json`, and the record such a
//! stage is read back with while it runs or after a crash cut it off.
//!
//! A check stage's first attempt writes its `stage.json` once, when it ends: the
//! `running` record it used to write first, and replace a few milliseconds later,
//! was a third of the files a stage made and two of its seven waits for the disk
//! (docs/performance.md). What that record said is still known: the stage's
//! `stage-started` event is in the log (a check whose needs ended in the same
//! process makes its attempt folder while that event is being written, so a crash
//! can leave the folder without the event), and the attempt folder and
//! `plan.json` say which stage and attempt it was. Retries
//! (whose `stage.json` holds the attempt before), agent stages (which write the
//! record with their prompt, in a batch they write anyway) and fan-out instances
//! (which `plan.json` lists only once the run settles) still write it.
//!
//! The scheduler asks [`writes_running_record`]; the reader ([`crate::store::RunReader`])
//! and resume ask [`started_record`], so the two sides cannot disagree.

use crate::pipeline::StageKind;
use crate::status::StageStatus;
use crate::store::records::{PlanNode, StageRecord, SCHEMA_VERSION};

/// Whether attempt `attempt` of a stage of `kind` writes a `running` `stage.json`
/// before it starts.
pub fn writes_running_record(kind: StageKind, attempt: u32, instance: bool) -> bool {
    !(kind == StageKind::Check && attempt == 1 && !instance)
}

/// The record of a stage whose attempt folders go up to `last_attempt` and that
/// has no `stage.json`: `running`, when it is one of the attempts that start
/// without one; `None` otherwise (a stage with no record and no such attempt has
/// not started, or lost its record, which the audit reports).
pub(crate) fn started_record(node: &PlanNode, last_attempt: u32) -> Option<StageRecord> {
    if last_attempt == 0
        || writes_running_record(node.kind, last_attempt, node.instance_of.is_some())
    {
        return None;
    }
    Some(StageRecord {
        schema_version: SCHEMA_VERSION,
        stage_id: node.id.clone(),
        kind: node.kind,
        status: StageStatus::Running,
        needs: node.needs.clone(),
        instance_of: None,
        item_id: None,
        input_hash: node.input_hash.clone(),
        input_parts: None,
        attempts: last_attempt,
        reason: None,
        evidence_status: None,
        output: None,
        document: None,
        started_at: None,
        ended_at: None,
        duration_ms: None,
        cost_usd: 0.0,
        turns: 0,
        tokens: Default::default(),
        reused: None,
        transient_attempts: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(kind: StageKind, instance: bool) -> PlanNode {
        PlanNode {
            id: "s".into(),
            kind,
            needs: vec!["a".into()],
            input_hash: Some("h".into()),
            instance_of: instance.then(|| "fan".into()),
            item_id: instance.then(|| "i".into()),
            excluded: false,
        }
    }

    #[test]
    fn only_a_check_stages_first_attempt_starts_without_a_record() {
        assert!(!writes_running_record(StageKind::Check, 1, false));
        assert!(writes_running_record(StageKind::Check, 2, false));
        assert!(writes_running_record(StageKind::Check, 1, true));
        assert!(writes_running_record(StageKind::Generate, 1, false));
        assert!(writes_running_record(StageKind::Execute, 1, false));
    }

    #[test]
    fn the_record_read_back_is_running_for_exactly_those_attempts() {
        let rec = started_record(&node(StageKind::Check, false), 1).unwrap();
        assert_eq!(rec.status, StageStatus::Running);
        assert_eq!(
            (rec.attempts, rec.needs.as_slice()),
            (1, &["a".to_string()][..])
        );
        assert_eq!(rec.input_hash.as_deref(), Some("h"));
        // A stage that writes its record, or never made an attempt folder, has
        // lost it or not started: nothing is made up for it.
        assert!(started_record(&node(StageKind::Check, false), 0).is_none());
        assert!(started_record(&node(StageKind::Check, false), 2).is_none());
        assert!(started_record(&node(StageKind::Check, true), 1).is_none());
        assert!(started_record(&node(StageKind::Generate, false), 1).is_none());
    }
}
