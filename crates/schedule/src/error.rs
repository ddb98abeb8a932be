//! What can be wrong with a schedule; every message quotes the input and names the fix.

/// A schedule that cannot be used. Nothing to retry: the input must change.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// A cron expression is not valid; the reason names the field and the value.
    #[error("\"{expr}\": {reason}")]
    Cron { expr: String, reason: String },
    /// Not an IANA time zone name.
    #[error("`{name}` is not a time zone; use an IANA name such as Europe/Berlin, or UTC")]
    Zone { name: String },
    /// A duration such as `90s` or `1h30m` could not be read.
    #[error("\"{input}\": {reason}")]
    Duration { input: String, reason: String },
}
