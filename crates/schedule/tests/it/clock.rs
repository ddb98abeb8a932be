//! The manual clock walks a sleeper from deadline to deadline and knows when it is idle.

use chrono::{Duration, TimeZone, Utc};
use reef_schedule::{Clock, ManualClock};
use std::sync::{Arc, Mutex};

#[tokio::test]
async fn advance_stops_at_every_deadline_the_sleeper_asks_for() {
    let start = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let clock = ManualClock::new(start);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sleeper = {
        let clock = clock.clone();
        let seen = seen.clone();
        tokio::spawn(async move {
            let mut next = start + Duration::minutes(10);
            loop {
                clock.sleep_until(next).await;
                seen.lock().unwrap().push(clock.now());
                next += Duration::minutes(10);
            }
        })
    };
    clock.advance_to(start + Duration::hours(1)).await;
    let got = seen.lock().unwrap().clone();
    let expected: Vec<_> = (1..=6).map(|k| start + Duration::minutes(10 * k)).collect();
    assert_eq!(got, expected);
    assert_eq!(clock.now(), start + Duration::hours(1));
    clock.advance_to(start + Duration::minutes(65)).await;
    assert_eq!(
        seen.lock().unwrap().len(),
        6,
        "no deadline between 60 and 65 minutes"
    );
    sleeper.abort();
}
