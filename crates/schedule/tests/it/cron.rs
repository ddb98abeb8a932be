//! Fire lists over long stretches of simulated time, checked against lists built from the
//! calendar with chrono-tz alone.

use chrono::{Datelike, Duration, NaiveDate, TimeZone, Utc, Weekday};
use reef_schedule::{CronExpr, DateTime, Schedule, Tz, parse_zone};

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

fn cron(text: &str, zone: &str) -> Schedule {
    Schedule::Cron(Box::new(
        CronExpr::parse(text, parse_zone(zone).unwrap()).unwrap(),
    ))
}

fn fires(s: &Schedule, from: &str, to: &str) -> Vec<DateTime<Utc>> {
    let (list, dropped) = s.between(utc(from), utc(to), usize::MAX);
    assert!(!dropped);
    list
}

/// Local wall time `hh:mm` on `date` in `zone`, the earlier instant when it happens twice
/// and the first instant after the gap when it does not happen.
fn local(zone: Tz, date: NaiveDate, hh: u32, mm: u32) -> DateTime<Utc> {
    let naive = date.and_hms_opt(hh, mm, 0).unwrap();
    match zone.from_local_datetime(&naive) {
        chrono::LocalResult::Single(t) | chrono::LocalResult::Ambiguous(t, _) => {
            t.with_timezone(&Utc)
        }
        chrono::LocalResult::None => zone
            .from_local_datetime(&(naive + Duration::hours(1)).with_minute0())
            .earliest()
            .unwrap()
            .with_timezone(&Utc),
    }
}

trait Minute0 {
    fn with_minute0(self) -> Self;
}
impl Minute0 for chrono::NaiveDateTime {
    fn with_minute0(self) -> Self {
        use chrono::Timelike;
        self.with_minute(0).unwrap()
    }
}

fn days(from: NaiveDate, to: NaiveDate) -> impl Iterator<Item = NaiveDate> {
    from.iter_days().take_while(move |d| *d <= to)
}

#[test]
fn every_five_minutes_for_a_month_through_spring_forward() {
    // Berlin moves from 02:00 to 03:00 on 29 March 2026: an interval expression keeps every
    // real five minutes, so the list in UTC is evenly spaced with nothing twice.
    let s = cron("*/5 * * * *", "Europe/Berlin");
    let got = fires(&s, "2026-03-01T00:00:00+01:00", "2026-04-01T00:00:00+02:00");
    let start = utc("2026-03-01T00:05:00+01:00");
    let end = utc("2026-04-01T00:00:00+02:00");
    let mut expected = Vec::new();
    let mut t = start;
    while t <= end {
        expected.push(t);
        t += Duration::minutes(5);
    }
    assert_eq!(got.len(), expected.len());
    assert_eq!(got, expected);
    assert_eq!(
        got.len(),
        30 * 288 + 288 - 12,
        "31 days less the missing hour"
    );
}

#[test]
fn weekdays_at_nine_in_berlin_across_both_changes() {
    let zone = parse_zone("Europe/Berlin").unwrap();
    let s = cron("0 9 * * MON-FRI", "Europe/Berlin");
    let got = fires(&s, "2026-03-01T00:00:00Z", "2026-11-30T23:59:59Z");
    let expected: Vec<_> = days(
        NaiveDate::from_ymd_opt(2026, 3, 1).unwrap(),
        NaiveDate::from_ymd_opt(2026, 11, 30).unwrap(),
    )
    .filter(|d| !matches!(d.weekday(), Weekday::Sat | Weekday::Sun))
    .map(|d| local(zone, d, 9, 0))
    .collect();
    assert_eq!(got, expected);
    // The wall time holds while UTC moves by an hour at each change.
    for (at, utc_hour) in [
        ("2026-03-27T08:00:00Z", true),
        ("2026-03-30T07:00:00Z", true),
        ("2026-10-23T07:00:00Z", true),
        ("2026-10-26T08:00:00Z", true),
        ("2026-03-30T08:00:00Z", false),
        ("2026-10-26T07:00:00Z", false),
    ] {
        assert_eq!(got.contains(&utc(at)), utc_hour, "{at}");
    }
}

#[test]
fn daily_for_a_month_through_fall_back() {
    let zone = parse_zone("Europe/Berlin").unwrap();
    let s = cron("@daily", "Europe/Berlin");
    let got = fires(&s, "2026-10-01T00:00:00+02:00", "2026-10-31T23:59:59+01:00");
    let expected: Vec<_> = days(
        NaiveDate::from_ymd_opt(2026, 10, 2).unwrap(),
        NaiveDate::from_ymd_opt(2026, 10, 31).unwrap(),
    )
    .map(|d| local(zone, d, 0, 0))
    .collect();
    assert_eq!(got, expected);
    assert_eq!(got.len(), 30);
}

#[test]
fn a_fixed_time_in_the_gap_runs_once_at_three_and_once_on_the_repeated_night() {
    let s = cron("30 2 * * *", "Europe/Berlin");
    let spring = fires(&s, "2026-03-28T12:00:00Z", "2026-03-29T12:00:00Z");
    assert_eq!(spring, vec![utc("2026-03-29T03:00:00+02:00")]);
    let fall = fires(&s, "2026-10-24T12:00:00Z", "2026-10-25T12:00:00Z");
    assert_eq!(fall, vec![utc("2026-10-25T02:30:00+02:00")]);
    // Asked from inside the repeated hour, the next fire is the next day's.
    assert_eq!(
        s.next_after(utc("2026-10-25T02:45:00+01:00")),
        Some(utc("2026-10-26T02:30:00+01:00"))
    );
}

#[test]
fn an_interval_expression_keeps_both_halves_of_the_repeated_hour() {
    let s = cron("*/30 * * * *", "Europe/Berlin");
    let got = fires(&s, "2026-10-24T23:45:00Z", "2026-10-25T02:00:00Z");
    let expected: Vec<_> = ["00:00", "00:30", "01:00", "01:30", "02:00"]
        .iter()
        .map(|t| utc(&format!("2026-10-25T{t}:00Z")))
        .collect();
    assert_eq!(got, expected);
}

#[test]
fn six_fields_and_names() {
    let s = cron("*/20 * * * * *", "UTC");
    let got = fires(&s, "2026-11-23T00:00:00Z", "2026-11-23T00:01:00Z");
    assert_eq!(got.len(), 3);
    let s = cron("0 12 1 jan,Jul *", "UTC");
    let got = fires(&s, "2026-01-01T00:00:00Z", "2027-12-31T00:00:00Z");
    assert_eq!(
        got,
        vec![
            utc("2026-01-01T12:00:00Z"),
            utc("2026-07-01T12:00:00Z"),
            utc("2027-01-01T12:00:00Z"),
            utc("2027-07-01T12:00:00Z"),
        ]
    );
    let s = cron("0 0 * * FRI-SUN", "UTC");
    let got = fires(&s, "2026-11-23T00:00:00Z", "2026-11-30T00:00:00Z");
    let days: Vec<_> = got.iter().map(|t| t.weekday()).collect();
    assert_eq!(days, vec![Weekday::Fri, Weekday::Sat, Weekday::Sun]);
    let s = cron("@hourly", "UTC");
    assert_eq!(
        fires(&s, "2026-11-23T00:00:00Z", "2026-11-24T00:00:00Z").len(),
        24
    );
}

#[test]
fn bad_expressions_name_the_field_and_the_reason() {
    let utc_zone = Tz::UTC;
    for (text, message) in [
        (
            "61 * * * *",
            "\"61 * * * *\": minute 61 is out of range 0-59",
        ),
        ("* 24 * * *", "\"* 24 * * *\": hour 24 is out of range 0-23"),
        (
            "* * 0 * *",
            "\"* * 0 * *\": day-of-month 0 is out of range 1-31",
        ),
        (
            "* * * 13 *",
            "\"* * * 13 *\": month 13 is out of range 1-12",
        ),
        (
            "* * * * FUN",
            "\"* * * * FUN\": day-of-week `FUN` is not a value; use 0-7 (0 and 7 are Sunday) or SUN-SAT",
        ),
        (
            "*/0 * * * *",
            "\"*/0 * * * *\": minute step 0 must be at least 1",
        ),
        (
            "5-1 * * * *",
            "\"5-1 * * * *\": minute range 5-1 runs backwards",
        ),
        (
            "* * * *",
            "\"* * * *\": has 4 fields; use 5 (minute hour day-of-month month day-of-week) or 6 (a second first)",
        ),
        (
            "@fortnightly",
            "\"@fortnightly\": `@fortnightly` is not a shortcut; use one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly",
        ),
        ("0 0 30 2 *", "\"0 0 30 2 *\": never matches a real date"),
        ("", "\"\": is empty; e.g. \"0 9 * * MON-FRI\""),
    ] {
        let err = CronExpr::parse(text, utc_zone).err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some(message), "{text}");
    }
    assert_eq!(
        parse_zone("Mars/Olympus")
            .err()
            .map(|e| e.to_string())
            .as_deref(),
        Some("`Mars/Olympus` is not a time zone; use an IANA name such as Europe/Berlin, or UTC")
    );
}

#[test]
fn intervals_count_from_their_anchor_and_catch_up_keeps_the_newest() {
    let anchor = Utc.with_ymd_and_hms(2026, 11, 23, 20, 0, 0).unwrap();
    let s = Schedule::Every {
        period: std::time::Duration::from_secs(2),
        anchor,
    };
    assert_eq!(s.next_after(anchor - Duration::hours(1)), Some(anchor));
    assert_eq!(s.next_after(anchor), Some(anchor + Duration::seconds(2)));
    assert_eq!(
        s.next_after(anchor + Duration::milliseconds(2500)),
        Some(anchor + Duration::seconds(4))
    );
    let (list, dropped) = s.between(anchor, anchor + Duration::seconds(20), 3);
    assert!(dropped);
    assert_eq!(
        list,
        [16, 18, 20].map(|s| anchor + Duration::seconds(s)).to_vec()
    );
}

#[test]
fn every_five_minutes_for_a_month_through_fall_back() {
    // Berlin repeats 02:00-03:00 on 25 October 2026: both passes fire, so the list in UTC is
    // evenly spaced, the extra hour included.
    let s = cron("*/5 * * * *", "Europe/Berlin");
    let got = fires(&s, "2026-10-01T00:00:00+02:00", "2026-11-01T00:00:00+01:00");
    let mut expected = Vec::new();
    let mut t = utc("2026-10-01T00:05:00+02:00");
    while t <= utc("2026-11-01T00:00:00+01:00") {
        expected.push(t);
        t += Duration::minutes(5);
    }
    assert_eq!(got, expected);
    assert_eq!(got.len(), 31 * 288 + 12, "31 days and the repeated hour");
}
