//! Human durations: a sequence of `<number><unit>` with units `ms`, `s`, `m`, `h` and `d`
//! (`90s`, `1h30m`, `2d`), and the same form back for display.

use crate::error::ScheduleError;
use std::time::Duration;

/// Reads a duration such as `2s`, `5m` or `1h30m`.
pub fn parse_duration(input: &str) -> Result<Duration, ScheduleError> {
    let err = |reason: String| ScheduleError::Duration {
        input: input.to_owned(),
        reason,
    };
    let text = input.trim();
    if text.is_empty() {
        return Err(err("empty; write e.g. \"30s\", \"5m\" or \"1h30m\"".into()));
    }
    let mut total: u64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(err(format!(
                "expected a number at `{rest}`; write e.g. \"30s\", \"5m\" or \"1h30m\""
            )));
        }
        let number: u64 = rest[..digits]
            .parse()
            .map_err(|_| err(format!("`{}` is too large", &rest[..digits])))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = rest[..unit_len].trim();
        let millis_per = match unit {
            "ms" => 1,
            "s" | "sec" | "secs" => 1_000,
            "m" | "min" | "mins" => 60_000,
            "h" | "hr" | "hrs" => 3_600_000,
            "d" | "day" | "days" => 86_400_000,
            "" => {
                return Err(err(format!(
                    "`{number}` needs a unit: ms, s, m, h or d (e.g. \"{number}s\")"
                )));
            }
            other => {
                return Err(err(format!(
                    "`{other}` is not a unit; use ms, s, m, h or d"
                )));
            }
        };
        rest = &rest[unit_len..];
        total = number
            .checked_mul(millis_per)
            .and_then(|ms| total.checked_add(ms))
            .ok_or_else(|| err("is too long".into()))?;
    }
    Ok(Duration::from_millis(total))
}

/// `d` in the largest units that divide it: `1h30m`, `90s` is `1m30s`, `250ms`.
pub fn format_duration(d: Duration) -> String {
    let mut ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if ms == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
        ("ms", 1),
    ] {
        if ms >= size {
            out.push_str(&format!("{}{unit}", ms / size));
            ms %= size;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_durations() {
        for (text, secs) in [("2s", 2), ("5m", 300), ("1h30m", 5400), ("1d", 86_400)] {
            let d = parse_duration(text).unwrap_or_default();
            assert_eq!(d, Duration::from_secs(secs), "{text}");
            assert_eq!(format_duration(d), text);
        }
        assert_eq!(
            parse_duration("250ms").ok(),
            Some(Duration::from_millis(250))
        );
        assert_eq!(format_duration(Duration::from_secs(90)), "1m30s");
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        for (text, needle) in [
            ("", "empty"),
            ("5", "needs a unit"),
            ("5w", "`w` is not a unit"),
            ("m5", "expected a number"),
            ("99999999999999999999s", "too large"),
        ] {
            let err = parse_duration(text).err().map(|e| e.to_string());
            assert!(
                err.as_deref().is_some_and(|e| e.contains(needle)),
                "{text}: {err:?}"
            );
        }
    }
}
