//! The grammar of `reef audit …`.

use clap::{Args, Subcommand};
use std::time::Duration;

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Records of the audit log, newest first: tool calls (their arguments' hash), approvals
    /// and answers, secret uses (names only), operator requests and commands, agents spawned
    /// and destroyed, routines changed, the configuration each start loaded.
    Query(AuditQueryArgs),
    /// Checks that every record chains to the one before (exit 0), or names the first that
    /// does not (exit 1).
    Verify(crate::args::JsonFlag),
    /// Removes records older than a period, leaving a sealed checkpoint so `verify` still
    /// works; refused when those records do not verify.
    Prune {
        /// Records older than this go: 30d, 12h.
        #[arg(long, value_name = "PERIOD", value_parser = crate::args::period_arg)]
        older_than: Duration,
    },
}

#[derive(Debug, Args)]
pub struct AuditQueryArgs {
    /// Only records about this agent (by name).
    #[arg(long)]
    pub agent: Option<String>,
    /// Only this kind (`tool.call`), or kinds starting with a prefix ending in `.` (`approval.`).
    #[arg(long)]
    pub kind: Option<String>,
    /// Only records since: a period (30m, 24h, 7d) or a time (2026-11-24, 2026-11-24T09:00:00Z).
    #[arg(long, value_name = "PERIOD|TIME", value_parser = since_arg)]
    pub since: Option<String>,
    /// At most this many records.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..))]
    pub limit: u32,
    #[arg(long)]
    pub json: bool,
}

/// A period ago, or a UTC time (a date, or RFC 3339 with `Z`) written the way the log's
/// timestamps are (`2026-11-24T09:00:00.000Z`), so that they compare in order as text.
fn since_arg(text: &str) -> Result<String, String> {
    let text = text.trim();
    if let Ok(period) = crate::args::period_arg(text) {
        return Ok(reef_store::timestamp_ago(period));
    }
    utc_time(text).ok_or_else(|| {
        format!(
            "{text:?} is neither a period (30m, 24h, 7d) nor a UTC time (2026-11-24 or \
             2026-11-24T09:00:00Z)"
        )
    })
}

/// `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM:SS[.fff]Z`, as `YYYY-MM-DDTHH:MM:SS.fffZ`.
fn utc_time(text: &str) -> Option<String> {
    let digits =
        |part: &str, len: usize| part.len() == len && part.bytes().all(|b| b.is_ascii_digit());
    let (date, time) = match text.split_once('T') {
        Some((date, time)) => (date, Some(time.strip_suffix('Z')?)),
        None => (text, None),
    };
    let mut ymd = date.split('-');
    let (y, m, d) = (ymd.next()?, ymd.next()?, ymd.next()?);
    if ymd.next().is_some() || !digits(y, 4) || !digits(m, 2) || !digits(d, 2) {
        return None;
    }
    let Some(time) = time else {
        return Some(format!("{date}T00:00:00.000Z"));
    };
    let (hms, fraction) = time.split_once('.').unwrap_or((time, "000"));
    let mut parts = hms.split(':');
    let (h, mi, sec) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some()
        || ![h, mi, sec].iter().all(|p| digits(p, 2))
        || fraction.is_empty()
        || fraction.len() > 3
        || !fraction.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    Some(format!("{date}T{hms}.{fraction:0<3}Z"))
}

#[cfg(test)]
mod tests {
    use super::since_arg;

    #[test]
    fn since_takes_a_period_or_a_utc_time() {
        assert_eq!(since_arg("2026-11-24").unwrap(), "2026-11-24T00:00:00.000Z");
        // Written as the log writes times, so 09:00:00.000 itself is included.
        assert_eq!(
            since_arg("2026-11-24T09:00:00Z").unwrap(),
            "2026-11-24T09:00:00.000Z"
        );
        assert_eq!(
            since_arg("2026-11-24T09:00:00.5Z").unwrap(),
            "2026-11-24T09:00:00.500Z"
        );
        assert!(since_arg("2026-11-24TfooZ").is_err());
        assert!(since_arg("2026-1-24").is_err());
        assert!(since_arg("7d").unwrap().ends_with('Z'));
        assert!(since_arg("yesterday").is_err());
        assert!(since_arg("2026-11-24T09:00:00+02:00").is_err());
    }
}
