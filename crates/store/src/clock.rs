//! Timestamps: RFC3339 UTC with millisecond precision, strictly increasing per store.

use time::OffsetDateTime;

/// Issues timestamps that never repeat or go backwards within one `Store`, so ordering by
/// `updated_at` is deterministic even when several writes land in the same millisecond
/// (a collision is bumped by 1 ms).
#[derive(Debug, Default)]
pub(crate) struct Clock {
    last_ms: i128,
}

impl Clock {
    /// The next timestamp, e.g. `2025-01-31T12:34:56.789Z`.
    pub(crate) fn now(&mut self) -> String {
        let now_ms = OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000;
        let ms = now_ms.max(self.last_ms + 1);
        self.last_ms = ms;
        let dt = OffsetDateTime::from_unix_timestamp_nanos(ms * 1_000_000)
            .unwrap_or_else(|_| OffsetDateTime::now_utc());
        format_rfc3339_ms(dt)
    }
}

/// Formats a UTC time as RFC3339 with exactly three fractional digits and a `Z` suffix.
pub(crate) fn format_rfc3339_ms(dt: OffsetDateTime) -> String {
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        dt.year(),
        u8::from(dt.month()),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second(),
        dt.millisecond()
    )
}

/// The store's timestamp for `ago` before now, for "since" queries (`created_at >= …`).
pub fn timestamp_ago(ago: std::time::Duration) -> String {
    let now = OffsetDateTime::now_utc();
    let then = time::Duration::try_from(ago)
        .ok()
        .and_then(|d| now.checked_sub(d))
        .unwrap_or(OffsetDateTime::UNIX_EPOCH);
    format_rfc3339_ms(then)
}

/// Seconds since the Unix epoch now (0 for a clock before 1970).
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The store's timestamp for midnight UTC today, for "today" queries.
pub fn start_of_today() -> String {
    let now = OffsetDateTime::now_utc();
    format_rfc3339_ms(now.replace_time(time::Time::MIDNIGHT))
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn formats_with_milliseconds() {
        let dt = datetime!(2025-01-02 03:04:05.006789 UTC);
        assert_eq!(format_rfc3339_ms(dt), "2025-01-02T03:04:05.006Z");
    }

    #[test]
    fn timestamps_strictly_increase() {
        let mut clock = Clock::default();
        let mut prev = clock.now();
        for _ in 0..100 {
            let next = clock.now();
            assert!(next > prev, "{next} <= {prev}");
            prev = next;
        }
    }
}
