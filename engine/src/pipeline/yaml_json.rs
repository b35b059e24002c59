//! YAML read straight into a JSON value, without serde_yaml's own `Value` in
//! between (which costs as much again as the parse on a large pipeline).
//!
//! Only the plain cases are read here: string, number, boolean or null keys and
//! untagged values. Anything else (a tag, a key that is a list or a mapping, a
//! key given twice) is refused, and the caller reads the file the general way,
//! which gives the same JSON for the plain cases and its own answer for the rest.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// The document as JSON, or None when it holds something only the general
/// reading handles (or is not YAML at all: the general reading says where).
pub(super) fn plain_yaml_to_json(text: &str) -> Option<Value> {
    let mut docs = serde_yaml::Deserializer::from_str(text);
    let value = docs.next()?.deserialize_any(Plain).ok()?;
    // A second document is an error of the general reading: let it say so.
    docs.next().is_none().then_some(value)
}

struct Plain;

impl<'de> Visitor<'de> for Plain {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an untagged YAML value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // What the general reading does with `.nan` and `.inf` too.
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(Plain)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(v) = seq.next_element_seed(PlainSeed)? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let value = map.next_value_seed(PlainSeed)?;
            if out.insert(key, value).is_some() {
                return Err(de::Error::custom("a key given twice"));
            }
        }
        Ok(Value::Object(out))
    }
}

struct PlainSeed;

impl<'de> DeserializeSeed<'de> for PlainSeed {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(Plain)
    }
}

/// A scalar key as the general reading prints it (`1`, `true`, `null`).
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_any(Key)
    }
}

struct Key;

impl Visitor<'_> for Key {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string, number, boolean or null key")
    }

    fn visit_bool<E>(self, v: bool) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_i64<E>(self, v: i64) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_u64<E>(self, v: u64) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_str<E>(self, v: &str) -> Result<String, E> {
        Ok(v.to_string())
    }

    fn visit_string<E>(self, v: String) -> Result<String, E> {
        Ok(v)
    }

    fn visit_unit<E>(self) -> Result<String, E> {
        Ok("null".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The general reading, as `load` does it when this one declines.
    fn general(text: &str) -> Value {
        let yaml: serde_yaml::Value = serde_yaml::from_str(text).unwrap();
        super::super::load::yaml_to_json(&yaml)
    }

    #[test]
    fn plain_documents_read_the_same_as_the_general_way() {
        for text in [
            "version: 1\nname: x\nstages:\n  - { id: a, kind: check, argv: [sh, -c, 'true'] }\n",
            "a: 1\nb: -2\nc: 1.5\nd: .nan\ne: .inf\nf: ~\ng: true\nh: 'yes'\ni: yes\nj: 0x1f\n",
            "1: one\ntrue: t\nnull: n\nnested: { list: [1, [2, {k: v}]], empty: {} }\n",
            "s: |\n  block\n  text\nq: \"esc \\u00e9 \\n\"\nanchor: &a [1, 2]\nalias: *a\n",
            "- just\n- a\n- list\n",
            "plain scalar\n",
        ] {
            assert_eq!(
                plain_yaml_to_json(text).as_ref(),
                Some(&general(text)),
                "{text}"
            );
        }
    }

    #[test]
    fn what_only_the_general_reading_handles_is_declined() {
        for text in [
            "a: !tagged 1\n",
            "? [1, 2]\n: list key\n",
            "a: 1\na: 2\n",
            "a: [1, 2\n",
            "a: 1\n---\nb: 2\n",
        ] {
            assert_eq!(plain_yaml_to_json(text), None, "{text}");
        }
    }
}
