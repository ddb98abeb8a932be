//! Cron expressions: 5 fields (minute hour day-of-month month day-of-week) or 6 (second
//! first), names for months and days, and the `@yearly` … `@hourly` shortcuts. reef checks
//! every field itself first, so a mistake is reported by field and value; croner then
//! evaluates the expression in the routine's time zone with cron's daylight-saving rules: a
//! fixed time that does not exist on a spring-forward day runs once when the clock resumes
//! (02:30 runs at 03:00), a fixed time that happens twice on a fall-back day runs once, and
//! interval expressions (`*/5`) keep every real instant.

use crate::error::ScheduleError;
use chrono::{DateTime, Offset, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use croner::JobType;
use croner::parser::{CronParser, Seconds, Year};

/// A valid cron expression and the zone it is read in.
#[derive(Clone, Debug)]
pub struct CronExpr {
    text: String,
    zone: Tz,
    cron: croner::Cron,
}

impl PartialEq for CronExpr {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text && self.zone == other.zone
    }
}

struct Field {
    name: &'static str,
    min: u32,
    max: u32,
    /// Names accepted for values, with the number each stands for.
    names: &'static [(&'static str, u32)],
    /// What to write instead of a bad value.
    hint: &'static str,
}

const SECOND: Field = Field {
    name: "second",
    min: 0,
    max: 59,
    names: &[],
    hint: "0-59",
};
const MINUTE: Field = Field {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
    hint: "0-59",
};
const HOUR: Field = Field {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
    hint: "0-23",
};
const DAY_OF_MONTH: Field = Field {
    name: "day-of-month",
    min: 1,
    max: 31,
    names: &[],
    hint: "1-31, L or NW",
};
const MONTH: Field = Field {
    name: "month",
    min: 1,
    max: 12,
    names: &[
        ("JAN", 1),
        ("FEB", 2),
        ("MAR", 3),
        ("APR", 4),
        ("MAY", 5),
        ("JUN", 6),
        ("JUL", 7),
        ("AUG", 8),
        ("SEP", 9),
        ("OCT", 10),
        ("NOV", 11),
        ("DEC", 12),
    ],
    hint: "1-12 or JAN-DEC",
};
const DAY_OF_WEEK: Field = Field {
    name: "day-of-week",
    min: 0,
    max: 7,
    names: &[
        ("SUN", 0),
        ("MON", 1),
        ("TUE", 2),
        ("WED", 3),
        ("THU", 4),
        ("FRI", 5),
        ("SAT", 6),
    ],
    hint: "0-7 (0 and 7 are Sunday) or SUN-SAT",
};

const SHORTCUTS: [(&str, &str); 7] = [
    ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"),
    ("@monthly", "0 0 1 * *"),
    ("@weekly", "0 0 * * 0"),
    ("@daily", "0 0 * * *"),
    ("@midnight", "0 0 * * *"),
    ("@hourly", "0 * * * *"),
];

impl CronExpr {
    /// Reads `text` as a cron expression in `zone`.
    pub fn parse(text: &str, zone: Tz) -> Result<CronExpr, ScheduleError> {
        let fail = |reason: String| ScheduleError::Cron {
            expr: text.to_owned(),
            reason,
        };
        let trimmed = text.trim();
        let expanded = if trimmed.starts_with('@') {
            SHORTCUTS
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(trimmed))
                .map(|(_, pattern)| *pattern)
                .ok_or_else(|| {
                    fail(format!(
                        "`{trimmed}` is not a shortcut; use one of {}",
                        SHORTCUTS.map(|(n, _)| n).join(", ")
                    ))
                })?
                .to_owned()
        } else {
            trimmed.to_ascii_uppercase()
        };
        let parts: Vec<&str> = expanded.split_whitespace().collect();
        let fields: &[Field] = match parts.len() {
            5 => &[MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK],
            6 => &[SECOND, MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK],
            0 => return Err(fail("is empty; e.g. \"0 9 * * MON-FRI\"".into())),
            n => {
                return Err(fail(format!(
                    "has {n} fields; use 5 (minute hour day-of-month month day-of-week) or 6 \
                     (a second first)"
                )));
            }
        };
        let mut normalized = Vec::with_capacity(parts.len());
        for (part, field) in parts.iter().zip(fields) {
            normalized.push(check_field(part, field).map_err(fail)?);
        }
        let normalized = normalized.join(" ");
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build()
            .parse(&normalized)
            .map_err(|e| fail(e.to_string()))?;
        let expr = CronExpr {
            text: trimmed.to_owned(),
            zone,
            cron,
        };
        if expr.next_after(Utc::now()).is_none() {
            return Err(fail("never matches a real date".into()));
        }
        Ok(expr)
    }

    /// The expression as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn zone(&self) -> Tz {
        self.zone
    }

    /// The first fire strictly after `after`, or `None` when there is none in the next
    /// centuries.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let mut from = after;
        // A start inside a repeated (fall-back) hour can be answered with the earlier of the
        // two instants that share its wall time: step past it.
        for _ in 0..4 {
            let next = self
                .cron
                .find_next_occurrence(&from.with_timezone(&self.zone), false)
                .ok()?
                .with_timezone(&Utc);
            if next > after {
                return Some(self.second_pass(after, next).unwrap_or(next));
            }
            from += chrono::Duration::hours(1);
        }
        None
    }

    /// croner walks wall time, so after a fall-back it does not see the repeated stretch a
    /// second time. An interval expression fires in both passes: the first matching instant of
    /// a repeated stretch that lies in `(after, next)`.
    fn second_pass(&self, after: DateTime<Utc>, next: DateTime<Utc>) -> Option<DateTime<Utc>> {
        if self.cron.determine_job_type() != JobType::IntervalWildcard {
            return None;
        }
        let mut from = after - chrono::Duration::hours(3);
        while let Some((at, size)) = self.fall_back_after(from, next) {
            let start = (after + chrono::Duration::seconds(1)).max(at);
            let start = start.with_nanosecond(0).unwrap_or(start);
            let end = next.min(at + size);
            let mut t = start;
            while t < end {
                if self
                    .cron
                    .is_time_matching(&t.with_timezone(&self.zone))
                    .unwrap_or(false)
                {
                    return Some(t);
                }
                t += chrono::Duration::seconds(1);
            }
            from = at + chrono::Duration::seconds(1);
        }
        None
    }

    /// The first instant in `(from, to]` where the zone's offset drops, and by how much.
    fn fall_back_after(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Option<(DateTime<Utc>, chrono::Duration)> {
        let offset = |t: DateTime<Utc>| {
            self.zone
                .offset_from_utc_datetime(&t.naive_utc())
                .fix()
                .local_minus_utc()
        };
        let mut a = from;
        while a < to {
            let b = (a + chrono::Duration::days(1)).min(to);
            let (before, after) = (offset(a), offset(b));
            if after < before {
                // Bisect to the second the offset changes.
                let (mut lo, mut hi) = (a, b);
                while hi - lo > chrono::Duration::seconds(1) {
                    let mid = lo + (hi - lo) / 2;
                    if offset(mid) == before {
                        lo = mid;
                    } else {
                        hi = mid;
                    }
                }
                return Some((hi, chrono::Duration::seconds(i64::from(before - after))));
            }
            a = b;
        }
        None
    }
}

/// Checks one field and returns it with names replaced by numbers.
fn check_field(part: &str, field: &Field) -> Result<String, String> {
    let mut items = Vec::new();
    for item in part.split(',') {
        if item.is_empty() {
            return Err(format!("{} has an empty list item in `{part}`", field.name));
        }
        let (base, step) = match item.split_once('/') {
            Some((base, step)) => (base, Some(step)),
            None => (item, None),
        };
        if let Some(step) = step {
            match step.parse::<u32>() {
                Ok(0) => return Err(format!("{} step 0 must be at least 1", field.name)),
                Ok(n) if n > field.max => {
                    return Err(format!(
                        "{} step {n} is larger than the range {}-{}",
                        field.name, field.min, field.max
                    ));
                }
                Ok(_) => {}
                Err(_) => {
                    return Err(format!("{} step `{step}` is not a number", field.name));
                }
            }
        }
        let base = if base == "*" || base == "?" {
            base.to_owned()
        } else if is_special(base, field) {
            // L, W and # forms are croner's to check.
            base.to_owned()
        } else {
            let (from, to) = match base.split_once('-') {
                Some((from, to)) => (from, Some(to)),
                None => (base, None),
            };
            let from_n = value(from, field)?;
            match to {
                Some(to) => {
                    let to_n = value(to, field)?;
                    if from_n > to_n && !(field.name == "day-of-week" && to_n == 0) {
                        return Err(format!("{} range {from}-{to} runs backwards", field.name));
                    }
                    // SUN at the end of a range is 7.
                    let to_n = if field.name == "day-of-week" && to_n == 0 {
                        7
                    } else {
                        to_n
                    };
                    format!("{from_n}-{to_n}")
                }
                None => from_n.to_string(),
            }
        };
        items.push(match step {
            Some(step) => format!("{base}/{step}"),
            None => base,
        });
    }
    Ok(items.join(","))
}

fn is_special(base: &str, field: &Field) -> bool {
    match field.name {
        "day-of-month" => base == "L" || base == "LW" || base.ends_with('W'),
        "day-of-week" => base.contains('#') || (base.ends_with('L') && base.len() > 1),
        _ => false,
    }
}

fn value(text: &str, field: &Field) -> Result<u32, String> {
    if let Some((_, n)) = field.names.iter().find(|(name, _)| *name == text) {
        return Ok(*n);
    }
    let n: u32 = text
        .parse()
        .map_err(|_| format!("{} `{text}` is not a value; use {}", field.name, field.hint))?;
    if n < field.min || n > field.max {
        return Err(format!(
            "{} {n} is out of range {}-{}",
            field.name, field.min, field.max
        ));
    }
    Ok(n)
}
