//! Time zones: IANA names through chrono-tz, and the zone this machine runs in.

use crate::error::ScheduleError;
use chrono_tz::Tz;

/// Reads an IANA zone name (`Europe/Berlin`, `UTC`).
pub fn parse_zone(name: &str) -> Result<Tz, ScheduleError> {
    name.trim().parse::<Tz>().map_err(|_| ScheduleError::Zone {
        name: name.to_owned(),
    })
}

/// The system's zone: `$TZ` when it names a zone, else the target of `/etc/localtime`, else
/// `/etc/timezone`, else UTC.
pub fn system_zone() -> Tz {
    let from_env = std::env::var("TZ")
        .ok()
        .and_then(|tz| tz.trim_start_matches(':').parse::<Tz>().ok());
    from_env
        .or_else(|| {
            let target = std::fs::read_link("/etc/localtime").ok()?;
            let text = target.to_string_lossy().into_owned();
            let (_, name) = text.split_once("zoneinfo/")?;
            name.parse::<Tz>().ok()
        })
        .or_else(|| {
            std::fs::read_to_string("/etc/timezone")
                .ok()?
                .trim()
                .parse::<Tz>()
                .ok()
        })
        .unwrap_or(Tz::UTC)
}
