//! Durations (`90s`, `15m`, `1h`, `250ms`, or an integer of milliseconds) and byte
//! sizes (`10MiB`, `512KiB`, `1GB`, or an integer of bytes) as written in pipeline
//! files.

use std::fmt;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{de, Deserialize, Deserializer, Serialize, Serializer};

/// Why a duration or size could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error("invalid duration `{0}`: expected a number followed by ms, s, m or h (e.g. 90s, 15m, 1h), or an integer of milliseconds")]
    Duration(String),
    #[error("invalid size `{0}`: expected a number followed by B, KB, KiB, MB, MiB, GB or GiB (e.g. 10MiB), or an integer of bytes")]
    Size(String),
}

/// A duration as written, kept with its text so records show what the user wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DurationSpec(pub Duration);

impl DurationSpec {
    pub fn parse(text: &str) -> Result<Self, UnitError> {
        let t = text.trim();
        let err = || UnitError::Duration(text.to_string());
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        if num.is_empty() {
            return Err(err());
        }
        let n: u64 = num.parse().map_err(|_| err())?;
        let ms = match unit.trim() {
            "" | "ms" => Some(n),
            "s" => n.checked_mul(1_000),
            "m" => n.checked_mul(60_000),
            "h" => n.checked_mul(3_600_000),
            _ => return Err(err()),
        }
        .ok_or_else(err)?;
        Ok(DurationSpec(Duration::from_millis(ms)))
    }

    pub fn from_millis(ms: u64) -> Self {
        DurationSpec(Duration::from_millis(ms))
    }

    pub fn as_duration(self) -> Duration {
        self.0
    }

    pub fn as_millis(self) -> u64 {
        self.0.as_millis() as u64
    }
}

impl fmt::Display for DurationSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.as_millis();
        if ms == 0 {
            write!(f, "0s")
        } else if ms % 3_600_000 == 0 {
            write!(f, "{}h", ms / 3_600_000)
        } else if ms % 60_000 == 0 {
            write!(f, "{}m", ms / 60_000)
        } else if ms % 1_000 == 0 {
            write!(f, "{}s", ms / 1_000)
        } else {
            write!(f, "{ms}ms")
        }
    }
}

impl Serialize for DurationSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for DurationSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = DurationSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration such as 90s, 15m, 1h or an integer of milliseconds")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<DurationSpec, E> {
                Ok(DurationSpec::from_millis(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<DurationSpec, E> {
                u64::try_from(v)
                    .map(DurationSpec::from_millis)
                    .map_err(|_| E::custom(UnitError::Duration(v.to_string())))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<DurationSpec, E> {
                DurationSpec::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for DurationSpec {
    fn schema_name() -> String {
        "Duration".into()
    }
    fn json_schema(_: &mut schemars::gen::SchemaGenerator) -> schemars::schema::Schema {
        serde_json::from_value(serde_json::json!({
            "description": "A duration: a number followed by ms, s, m or h (90s, 15m, 1h), or an integer of milliseconds.",
            "anyOf": [
                { "type": "string", "pattern": "^\\s*[0-9]+\\s*(ms|s|m|h)?\\s*$" },
                { "type": "integer", "minimum": 0 }
            ]
        }))
        .expect("static schema")
    }
}

/// A byte count as written (`10MiB`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub fn parse(text: &str) -> Result<Self, UnitError> {
        let t = text.trim();
        let err = || UnitError::Size(text.to_string());
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        if num.is_empty() {
            return Err(err());
        }
        let n: u64 = num.parse().map_err(|_| err())?;
        let mult: u64 = match unit.trim() {
            "" | "B" => 1,
            "KB" | "kB" => 1_000,
            "KiB" => 1 << 10,
            "MB" => 1_000_000,
            "MiB" => 1 << 20,
            "GB" => 1_000_000_000,
            "GiB" => 1 << 30,
            _ => return Err(err()),
        };
        n.checked_mul(mult).map(ByteSize).ok_or_else(err)
    }

    pub fn bytes(self) -> u64 {
        self.0
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        if b != 0 && b % (1 << 30) == 0 {
            write!(f, "{}GiB", b >> 30)
        } else if b != 0 && b % (1 << 20) == 0 {
            write!(f, "{}MiB", b >> 20)
        } else if b != 0 && b % (1 << 10) == 0 {
            write!(f, "{}KiB", b >> 10)
        } else {
            write!(f, "{b}B")
        }
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = ByteSize;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a size such as 10MiB or an integer of bytes")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteSize, E> {
                u64::try_from(v)
                    .map(ByteSize)
                    .map_err(|_| E::custom(UnitError::Size(v.to_string())))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteSize, E> {
                ByteSize::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for ByteSize {
    fn schema_name() -> String {
        "ByteSize".into()
    }
    fn json_schema(_: &mut schemars::gen::SchemaGenerator) -> schemars::schema::Schema {
        serde_json::from_value(serde_json::json!({
            "description": "A size: a number followed by B, KB, KiB, MB, MiB, GB or GiB (10MiB), or an integer of bytes.",
            "anyOf": [
                { "type": "string", "pattern": "^\\s*[0-9]+\\s*(B|KB|kB|KiB|MB|MiB|GB|GiB)?\\s*$" },
                { "type": "integer", "minimum": 0 }
            ]
        }))
        .expect("static schema")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_in_every_unit() {
        assert_eq!(DurationSpec::parse("90s").unwrap().as_millis(), 90_000);
        assert_eq!(DurationSpec::parse("15m").unwrap().as_millis(), 900_000);
        assert_eq!(DurationSpec::parse("1h").unwrap().as_millis(), 3_600_000);
        assert_eq!(DurationSpec::parse("250ms").unwrap().as_millis(), 250);
        assert_eq!(DurationSpec::parse("1500").unwrap().as_millis(), 1500);
        for bad in ["", "s", "1.5h", "10 minutes", "-3s", "1d"] {
            assert!(DurationSpec::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn sizes_parse_binary_and_decimal_units() {
        assert_eq!(ByteSize::parse("10MiB").unwrap().bytes(), 10 << 20);
        assert_eq!(ByteSize::parse("1MB").unwrap().bytes(), 1_000_000);
        assert_eq!(ByteSize::parse("512").unwrap().bytes(), 512);
        for bad in ["", "MiB", "10 mebibytes", "1.5GiB", "10TiB"] {
            assert!(ByteSize::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn display_round_trips() {
        for text in ["90s", "15m", "1h", "250ms"] {
            assert_eq!(DurationSpec::parse(text).unwrap().to_string(), text);
        }
        for text in ["10MiB", "1KiB", "3GiB", "1000B"] {
            assert_eq!(ByteSize::parse(text).unwrap().to_string(), text);
        }
    }
}
