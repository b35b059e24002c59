//! A stage's input hash (docs/resume.md): what resume compares to decide whether a stage
//! that succeeded can be reused, and what replay matches recordings by.
//!
//! It is the sha256 (hex) of one canonical JSON document — object keys sorted, no
//! whitespace — holding:
//!
//! - `v`: the layout of this document (2); a change of layout changes every hash.
//!   Records made with layout 1 stay resumable and replayable: where a recorded
//!   hash differs from the layout-2 one, the layout-1 hash is computed too and
//!   used if it matches ([`crate::upstream::legacy_upstream_hashes`]);
//! - `stage`: the stage definition as written, without its `runner:` section;
//! - `runner`: what the stage kind resolves from defaults and overrides and what
//!   changes the result. Agent stages: the runner settings model, effort,
//!   maxTurns, maxBudgetUsd, tools, allowedBashRules, disallowedTools,
//!   permissionMode, pluginDirs, settingSources, commandArgs — not the command,
//!   the timeout, the kill grace or output limits (they change whether a run
//!   finishes, not what it is asked), and never environment values. Check stages:
//!   `timeoutMs`, the effective timeout (a gate's limit is part of the gate);
//! - `promptSha256`: the rendered prompt, byte for byte as sent, or null;
//! - `schemaSha256`: the output schema's bytes (built-in or file), or null;
//! - `upstream`: for every stage this one needs directly (a `forEach` source
//!   included), the sha256 of its `output.json`; for a check stage, which writes
//!   none, the digest of its own `upstream` (null when empty); a fan-out stage is
//!   seen through its instances (`<stage>.<item>`). Each entry covers everything
//!   above it, so the chain is followed without listing every ancestor (layout 1
//!   listed them all: quadratic in a chain's depth);
//! - `itemId`: the fan-out item of an instance, or null;
//! - `itemSha256`: the sha256 of the item itself (canonical JSON), or null: an
//!   item whose details changed reruns its instance even when the template does
//!   not show the changed field.
//!
//! The rendered prompt already holds whatever upstream text the template used; the
//! upstream hashes make a change in an unused field count too, which errs on the
//! side of running again. [`input_parts`] keeps a digest of each part in
//! `stage.json`, so that resume can say which one changed.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use specbridge_engine::pipeline::{ResolvedRunner, StageDef};
use specbridge_engine::store::InputParts;

/// The version of the hashed document's layout.
pub const INPUT_HASH_FORMAT: u32 = 2;

/// The layout before direct-needs upstream hashes: every ancestor listed.
pub const LEGACY_INPUT_HASH_FORMAT: u32 = 1;

/// Everything that goes into a stage's input hash.
#[derive(Debug, Clone)]
pub struct HashInputs<'a> {
    /// [`INPUT_HASH_FORMAT`], or [`LEGACY_INPUT_HASH_FORMAT`] to match an old record.
    pub layout: u32,
    pub stage: &'a StageDef,
    /// Resolved settings that change the result ([`agent_settings`] for agent
    /// stages).
    pub settings: Value,
    pub prompt: Option<&'a [u8]>,
    pub schema: Option<&'a [u8]>,
    /// Upstream stage id → sha256 of its `output.json` (None when it has none).
    pub upstream: &'a BTreeMap<String, Option<String>>,
    pub item_id: Option<&'a str>,
    /// The fan-out item of an instance, as its source stage output holds it.
    pub item: Option<&'a Value>,
}

/// The runner settings of an agent stage that change what the agent does.
pub(crate) fn agent_settings(r: &ResolvedRunner) -> Value {
    json!({
        "model": r.model,
        "effort": r.effort,
        "maxTurns": r.max_turns,
        "maxBudgetUsd": r.max_budget_usd,
        "tools": r.tools,
        "allowedBashRules": r.allowed_bash_rules,
        "disallowedTools": r.disallowed_tools,
        "permissionMode": r.permission_mode,
        "pluginDirs": r.plugin_dirs,
        "settingSources": r.setting_sources,
        "commandArgs": r.command_args,
    })
}

fn stage_value(inputs: &HashInputs<'_>) -> Value {
    let mut stage = serde_json::to_value(inputs.stage).expect("stage definitions serialise");
    if let Value::Object(map) = &mut stage {
        map.remove("runner");
    }
    stage
}

/// The canonical document that is hashed.
pub(crate) fn hash_document(inputs: &HashInputs<'_>) -> Value {
    json!({
        "v": inputs.layout,
        "stage": stage_value(inputs),
        "runner": inputs.settings,
        "promptSha256": inputs.prompt.map(sha256_hex),
        "schemaSha256": inputs.schema.map(sha256_hex),
        "upstream": inputs.upstream,
        "itemId": inputs.item_id,
        "itemSha256": item_sha256(inputs),
    })
}

fn item_sha256(inputs: &HashInputs<'_>) -> Option<String> {
    inputs
        .item
        .map(|item| sha256_hex(canonical_json(item).as_bytes()))
}

/// The input hash: sha256 (hex) of the canonical form of [`hash_document`].
pub fn input_hash(inputs: &HashInputs<'_>) -> String {
    sha256_hex(canonical_json(&hash_document(inputs)).as_bytes())
}

/// The input hash and its parts in the current layout, or in layout 1 where
/// `recorded` (a hash from a record) matches that and not the current one: a
/// record made before the layout changed is still recognised as unchanged.
/// `compute` gives the hash and parts in the layout it is asked for.
pub(crate) fn matching_layout<E>(
    recorded: Option<&str>,
    compute: impl Fn(u32) -> Result<(String, InputParts), E>,
) -> Result<(String, InputParts), E> {
    let current = compute(INPUT_HASH_FORMAT)?;
    match recorded {
        Some(r) if r != current.0 => {
            let legacy = compute(LEGACY_INPUT_HASH_FORMAT)?;
            Ok(if legacy.0 == r { legacy } else { current })
        }
        _ => Ok(current),
    }
}

/// A digest of each part of the hashed document, kept in `stage.json`: the
/// definition is `stage`, `runner` and `itemId` together.
pub fn input_parts(inputs: &HashInputs<'_>) -> InputParts {
    let definition = json!({
        "stage": stage_value(inputs),
        "runner": inputs.settings,
        "itemId": inputs.item_id,
        "itemSha256": item_sha256(inputs),
    });
    InputParts {
        definition: sha256_hex(canonical_json(&definition).as_bytes()),
        prompt: inputs.prompt.map(sha256_hex),
        schema: inputs.schema.map(sha256_hex),
        upstream: inputs.upstream.clone(),
    }
}

/// Compact JSON with every object's keys sorted, so that the bytes depend only on
/// the content. Written straight from the value: a resume computes it for every
/// stage, and a sorted copy of each document first was a tenth of a no-op
/// resume's time (docs/performance.md).
pub(crate) fn canonical_json(value: &Value) -> String {
    let mut out = Vec::with_capacity(256);
    write_canonical(value, &mut out);
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, key).expect("strings serialise");
                out.push(b':');
                write_canonical(item, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        leaf => serde_json::to_writer(&mut *out, leaf).expect("JSON values serialise"),
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::Map;

    use super::*;
    use specbridge_engine::pipeline::{DurationSpec, RunnerSettings, StageKind};

    fn stage() -> StageDef {
        serde_yaml::from_str(
            "id: design\nkind: generate\nneeds: [requirements]\nprompt: prompts/design.md\noutput: { schema: builtin:document }\n",
        )
        .unwrap()
    }

    struct Case {
        stage: StageDef,
        runner: ResolvedRunner,
        prompt: Vec<u8>,
        schema: Option<Vec<u8>>,
        upstream: BTreeMap<String, Option<String>>,
        item: Option<String>,
    }

    impl Case {
        fn new() -> Case {
            Case {
                stage: stage(),
                runner: ResolvedRunner::default(),
                prompt: b"Design it.\n".to_vec(),
                schema: Some(b"{}".to_vec()),
                upstream: [("requirements".to_string(), Some("ab".repeat(32)))].into(),
                item: None,
            }
        }

        fn hash(&self) -> String {
            input_hash(&self.inputs())
        }

        fn inputs(&self) -> HashInputs<'_> {
            HashInputs {
                layout: INPUT_HASH_FORMAT,
                stage: &self.stage,
                settings: agent_settings(&self.runner),
                prompt: Some(&self.prompt),
                schema: self.schema.as_deref(),
                upstream: &self.upstream,
                item_id: self.item.as_deref(),
                item: None,
            }
        }
    }

    #[test]
    fn every_input_that_changes_the_result_changes_the_hash() {
        let base = Case::new().hash();
        assert_eq!(base, Case::new().hash(), "the hash is deterministic");
        assert_eq!(base.len(), 64);
        type Change = Box<dyn Fn(&mut Case)>;
        let changes: Vec<(&str, Change)> = vec![
            ("prompt", Box::new(|c| c.prompt.push(b' '))),
            ("schema", Box::new(|c| c.schema = Some(b"{ }".to_vec()))),
            ("no schema", Box::new(|c| c.schema = None)),
            ("model", Box::new(|c| c.runner.model = Some("opus".into()))),
            (
                "effort",
                Box::new(|c| c.runner.effort = Some("high".into())),
            ),
            ("maxTurns", Box::new(|c| c.runner.max_turns += 1)),
            ("maxBudgetUsd", Box::new(|c| c.runner.max_budget_usd += 1.0)),
            (
                "tools",
                Box::new(|c| c.runner.tools.pop().map_or((), |_| ())),
            ),
            (
                "rules",
                Box::new(|c| c.runner.allowed_bash_rules.push("Bash(ls *)".into())),
            ),
            (
                "deny",
                Box::new(|c| c.runner.disallowed_tools.push("WebFetch".into())),
            ),
            (
                "mode",
                Box::new(|c| c.runner.permission_mode = "plan".into()),
            ),
            (
                "plugins",
                Box::new(|c| c.runner.plugin_dirs.push("p".into())),
            ),
            (
                "sources",
                Box::new(|c| c.runner.setting_sources = Some(vec!["user".into()])),
            ),
            (
                "commandArgs",
                Box::new(|c| c.runner.command_args.push("--x".into())),
            ),
            (
                "upstream",
                Box::new(|c| {
                    c.upstream
                        .insert("requirements".into(), Some("cd".repeat(32)));
                }),
            ),
            (
                "upstream missing",
                Box::new(|c| {
                    c.upstream.insert("requirements".into(), None);
                }),
            ),
            ("item", Box::new(|c| c.item = Some("t1".into()))),
            (
                "argv",
                Box::new(|c| c.stage.argv = Some(serde_yaml::from_str("[cargo, test]").unwrap())),
            ),
            (
                "check timeout",
                Box::new(|c| c.stage.timeout = Some(DurationSpec::from_millis(5))),
            ),
            (
                "stage",
                Box::new(|c| c.stage.description = Some("new".into())),
            ),
            ("kind", Box::new(|c| c.stage.kind = StageKind::Execute)),
        ];
        for (what, change) in changes {
            let mut case = Case::new();
            change(&mut case);
            assert_ne!(case.hash(), base, "changing {what} must change the hash");
        }
    }

    #[test]
    fn settings_that_do_not_change_the_result_leave_it_alone() {
        let base = Case::new().hash();
        let mut case = Case::new();
        case.runner.command = "/opt/claude".into();
        case.runner.timeout = DurationSpec::from_millis(1);
        case.runner.kill_grace = DurationSpec::from_millis(1);
        case.runner
            .env
            .insert("ANTHROPIC_API_KEY".into(), "x".into());
        // The stage's own runner section counts only through the resolved settings.
        case.stage.runner = Some(Box::new(RunnerSettings {
            command: Some("/opt/claude".into()),
            ..Default::default()
        }));
        assert_eq!(case.hash(), base);
    }

    #[test]
    fn each_part_names_what_changed() {
        let base = input_parts(&Case::new().inputs());
        let mut case = Case::new();
        case.prompt.push(b'!');
        let changed = input_parts(&case.inputs());
        assert_ne!(changed.prompt, base.prompt);
        assert_eq!(changed.definition, base.definition);
        assert_eq!(changed.upstream, base.upstream);
        let mut case = Case::new();
        case.runner.model = Some("opus".into());
        let changed = input_parts(&case.inputs());
        assert_ne!(changed.definition, base.definition);
        assert_eq!(changed.prompt, base.prompt);
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let a: Value =
            serde_json::from_str(r#"{"b":1,"a":{"d":[{"z":1,"y":2}],"c":null}}"#).unwrap();
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"c":null,"d":[{"y":2,"z":1}]},"b":1}"#
        );
    }

    /// The form the hashes were first defined by: a sorted copy, serialised.
    fn reference(value: &Value) -> String {
        fn sorted(value: &Value) -> Value {
            match value {
                Value::Object(map) => {
                    let mut keys: Vec<&String> = map.keys().collect();
                    keys.sort();
                    let mut out = Map::new();
                    for k in keys {
                        out.insert(k.clone(), sorted(&map[k]));
                    }
                    Value::Object(out)
                }
                Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
                other => other.clone(),
            }
        }
        serde_json::to_string(&sorted(value)).unwrap()
    }

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            ".{0,12}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec(("[a-zA-Z\\u{e9}\"\\\\ ]{0,6}", inner), 0..6)
                    .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Every input hash ever recorded was computed from the sorted copy:
        /// the direct writer must give the same bytes for any document.
        #[test]
        fn the_direct_writer_is_the_sorted_copy_serialised(value in any_json()) {
            prop_assert_eq!(canonical_json(&value), reference(&value));
        }
    }
}
