//! Wall-clock time as unix milliseconds and as RFC 3339 (UTC, millisecond precision).

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

pub fn now_ms() -> i64 {
    (OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
}

pub fn rfc3339(ms: i64) -> String {
    let t = OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH);
    let t = t
        .replace_nanosecond(t.millisecond() as u32 * 1_000_000)
        .unwrap_or(t);
    t.format(&Rfc3339).unwrap_or_default()
}

pub fn now_rfc3339() -> String {
    rfc3339(now_ms())
}

#[cfg(test)]
mod tests {
    #[test]
    fn rfc3339_is_utc_with_milliseconds() {
        assert_eq!(
            super::rfc3339(1_700_000_000_123),
            "2023-11-14T22:13:20.123Z"
        );
    }
}
