//! Timestamps as every record writes them: RFC 3339, UTC, milliseconds (docs/run-directory.md).
//!
//! One format everywhere keeps records comparable as plain strings and stable in
//! snapshots; `chrono`'s default serde form carries nanoseconds and varies in width.

use chrono::{DateTime, SecondsFormat, SubsecRound, Utc};

/// The current time in the record format, e.g. `2026-01-31T12:00:00.123Z`.
pub fn now_rfc3339() -> String {
    format_rfc3339(Utc::now())
}

/// The current time cut to milliseconds, so that a record read back from its file
/// equals the one that was written.
pub(crate) fn now_millis() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(3)
}

/// A file's modification time in nanoseconds since the epoch, as the file system
/// keeps it (whatever its granularity).
pub fn mtime_ns(meta: &std::fs::Metadata) -> i128 {
    use std::os::unix::fs::MetadataExt;
    i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec())
}

/// A file's change time in nanoseconds since the epoch, as the file system keeps
/// it: what no one but the kernel sets.
pub fn ctime_ns(meta: &std::fs::Metadata) -> i128 {
    use std::os::unix::fs::MetadataExt;
    i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec())
}

/// A time in the record format.
pub fn format_rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Serde form of a `DateTime<Utc>` in the record format; accepts any RFC 3339 time
/// on input so that records written by hand or by older versions still load.
///
/// Use as `#[serde(with = "crate::time::rfc3339")]` together with
/// `#[schemars(schema_with = "crate::time::rfc3339::schema")]`.
pub mod rfc3339 {
    use chrono::{DateTime, Utc};
    use schemars::gen::SchemaGenerator;
    use schemars::schema::{InstanceType, Schema, SchemaObject};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(at: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&super::format_rfc3339(*at))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<DateTime<Utc>, D::Error> {
        let text = String::deserialize(deserializer)?;
        DateTime::parse_from_rfc3339(&text)
            .map(|at| at.with_timezone(&Utc))
            .map_err(serde::de::Error::custom)
    }

    pub fn schema(_: &mut SchemaGenerator) -> Schema {
        SchemaObject {
            instance_type: Some(InstanceType::String.into()),
            format: Some("date-time".to_owned()),
            ..Default::default()
        }
        .into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn formats_utc_with_milliseconds() {
        let at = Utc.with_ymd_and_hms(2026, 1, 31, 12, 0, 5).unwrap()
            + chrono::Duration::microseconds(123_456);
        assert_eq!(format_rfc3339(at), "2026-01-31T12:00:05.123Z");
    }

    #[test]
    fn now_has_the_record_shape() {
        let now = now_rfc3339();
        let shape = regex::Regex::new(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$").unwrap();
        assert!(shape.is_match(&now), "{now}");
    }

    #[test]
    fn now_millis_survives_the_record_format() {
        let now = now_millis();
        let text = format_rfc3339(now);
        assert_eq!(DateTime::parse_from_rfc3339(&text).unwrap(), now);
    }

    #[test]
    fn serde_round_trip_keeps_the_format() {
        #[derive(serde::Serialize, serde::Deserialize)]
        struct Stamp(#[serde(with = "rfc3339")] DateTime<Utc>);
        let parsed: Stamp = serde_json::from_str("\"2026-01-31T13:00:05.1+01:00\"").unwrap();
        assert_eq!(
            serde_json::to_string(&parsed).unwrap(),
            "\"2026-01-31T12:00:05.100Z\""
        );
    }
}
