//! reef-schedule: when reef's routines fire. Cron expressions (5 or 6 fields, named days and
//! months, `@hourly`-style shortcuts) evaluated in an IANA time zone with cron's daylight-saving
//! rules, fixed intervals, human durations (`90s`, `1h30m`), and the [`Clock`] the scheduler
//! sleeps on: the system's, or a [`ManualClock`] that tests and benchmarks move by hand.

mod clock;
mod cron;
mod duration;
mod error;
mod routine;
mod schedule;
mod zone;

pub use chrono::{DateTime, Utc};
pub use chrono_tz::Tz;
pub use clock::{Clock, MAX_NAP, ManualClock, SystemClock};
pub use cron::CronExpr;
pub use duration::{format_duration, parse_duration};
pub use error::ScheduleError;
pub use routine::{MAX_TIMEOUT_SECS, RoutineError, check_routine, schedule_of};
pub use schedule::Schedule;
pub use zone::{parse_zone, system_zone};
