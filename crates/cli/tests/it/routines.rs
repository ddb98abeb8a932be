//! Routines through the real `reef serve`: a routine firing every 2 s for two minutes while the
//! daemon is SIGKILLed at ten random points and restarted 2 to 3 s later. The store accounts for every
//! scheduled instant once (run, or skipped as missed under `catch_up = "skip"`), and the
//! model sees each run's instant as a new message once; a second sight of one only ever comes
//! marked as the retry of a turn the kill cut short.

use crate::daemon::{Daemon, daemon_home};
use reef_test_support::{MockLlm, MockReply};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the routines run.
const RUN: Duration = Duration::from_secs(120);
const KILLS: usize = 10;
const RETRY_MARK: &str = "an earlier attempt at this message did not finish";

/// A small xorshift generator; the seed is printed so a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The scheduled instant in a routine message: `[routine NAME, scheduled T] …`.
fn instant(text: &str, routine: &str) -> Option<String> {
    let head = format!("[routine {routine}, scheduled ");
    let start = text.find(&head)? + head.len();
    let end = text[start..].find(']')? + start;
    Some(text[start..end].to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routine_fires_each_instant_once_across_ten_sigkills() {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("crash schedule seed: {seed}");
    let mut rng = Rng(seed);
    let mock = MockLlm::start_responder(Arc::new(|_| MockReply::text("ok"))).await;
    let home = daemon_home(&mock);
    let config = std::fs::read_to_string(home.reef_home().join("reef.toml")).unwrap();
    home.write_config(&format!("{config}\n[scheduler]\nmin_interval = \"1s\"\n"));

    let mut d = Daemon::start(&home).await;
    for agent in ["all", "skip"] {
        d.post("/v1/agents", json!({"name": agent, "template": "worker"}))
            .await;
        d.post(
            "/v1/routines",
            json!({"name": agent, "every": "2s", "agent": agent, "message": "tick",
                   "catch_up": agent, "concurrency": "queue"}),
        )
        .await;
    }
    // Ten kill points at random in the two minutes.
    let mut kills: Vec<u64> = (0..KILLS)
        .map(|_| rng.below(RUN.as_millis() as u64))
        .collect();
    kills.sort_unstable();
    let started = Instant::now();
    for at in kills {
        let wait = Duration::from_millis(at).saturating_sub(started.elapsed());
        tokio::time::sleep(wait).await;
        d.kill();
        // Down for 2 to 3 s, so at least one instant of each routine falls due meanwhile.
        tokio::time::sleep(Duration::from_millis(2000 + rng.below(1000))).await;
        d = Daemon::start(&home).await;
    }
    tokio::time::sleep(RUN.saturating_sub(started.elapsed())).await;
    // Stop firing, let every delivered message be answered.
    for agent in ["all", "skip"] {
        d.post(&format!("/v1/routines/{agent}/disable"), json!({}))
            .await;
        d.wait(
            &format!("{agent}'s inbox to drain"),
            &format!("/v1/agents/{agent}/inbox"),
            |m| {
                m.as_array()
                    .is_some_and(|a| a.iter().all(|m| m["status"] == "done"))
            },
        )
        .await;
    }

    let requests = mock.requests();
    for routine in ["all", "skip"] {
        let history = d
            .get(&format!("/v1/routines/{routine}/history?limit=10000"))
            .await;
        let fires = history.as_array().unwrap();
        let mut by_instant: BTreeMap<String, &Value> = BTreeMap::new();
        for fire in fires {
            let at = fire["scheduled"].as_str().unwrap().to_owned();
            assert!(
                by_instant.insert(at.clone(), fire).is_none(),
                "{routine}: {at} claimed twice"
            );
        }
        // No instant is lost: from the first to the last, every 2 s is there.
        let instants: Vec<i64> = fires
            .iter()
            .map(|f| f["key"].as_str().unwrap()["at:".len()..].parse().unwrap())
            .collect();
        let (first, last) = (
            *instants.iter().min().unwrap(),
            *instants.iter().max().unwrap(),
        );
        assert_eq!(
            instants.len() as i64,
            (last - first) / 2000 + 1,
            "{routine}: every instant between the first and the last fire is accounted for"
        );
        assert!(
            instants.len() >= 55,
            "{routine}: only {} fires in two minutes",
            instants.len()
        );
        // What the model saw, per instant: first sights and marked retries.
        let mut seen: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for req in &requests {
            let text = req.last_user_text().unwrap_or_default();
            if let Some(at) = instant(&text, routine) {
                let entry = seen.entry(at).or_default();
                if text.contains(RETRY_MARK) {
                    entry.1 += 1;
                } else {
                    entry.0 += 1;
                }
            }
        }
        for (at, fire) in &by_instant {
            let (first_sights, retries) = seen.get(at).copied().unwrap_or_default();
            match fire["outcome"].as_str() {
                Some("run") => {
                    assert!(
                        first_sights <= 1,
                        "{routine}: {at} sent as new {first_sights} times"
                    );
                    assert!(
                        first_sights + retries >= 1,
                        "{routine}: {at} ran but the model never saw it"
                    );
                }
                _ => {
                    assert_eq!(routine, "skip", "{routine}: {at} skipped: {fire}");
                    assert!(
                        fire["reason"]
                            .as_str()
                            .unwrap()
                            .contains("missed while reef was not running"),
                        "{fire}"
                    );
                    assert_eq!(
                        first_sights + retries,
                        0,
                        "{routine}: skipped {at} reached the model"
                    );
                }
            }
        }
        assert!(
            seen.keys().all(|at| by_instant.contains_key(at)),
            "{routine}: the model saw an instant no fire claimed"
        );
    }
    // catch_up = "all" ran every instant; "skip" passed over those that fell due while down.
    let all = d.get("/v1/routines/all/history?limit=10000").await;
    assert!(
        all.as_array()
            .unwrap()
            .iter()
            .all(|f| f["outcome"] == "run")
    );
    let skip = d.get("/v1/routines/skip/history?limit=10000").await;
    let skipped = skip
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["outcome"] == "skipped")
        .count();
    assert!(
        skipped >= 1,
        "ten restarts and no instant missed: the kills did not land"
    );
    let recovered = d.get("/v1/events?kind=daemon.recovered&limit=100").await;
    eprintln!(
        "fires: all {}, skip {} ({skipped} skipped); recoveries with released turns: {}",
        all.as_array().unwrap().len(),
        skip.as_array().unwrap().len(),
        recovered.as_array().map_or(0, Vec::len)
    );
}
