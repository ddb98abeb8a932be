//! The scheduler on a hand-moved clock: exact fire lists over months of simulated time
//! through both daylight-saving changes, catch-up after downtime, guardrails, and a
//! template's `schedule` spawning agents that report and are gone after their timeout.

use crate::daemon::{Daemon, daemon_at, spawn, start_on, wait_for};
use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc, Weekday};
use reef_core::{Action, CatchUp, Concurrency, Guardrails, RoutineSpec, Trigger};
use reef_runtime::{RoutineRequest, Runtime};
use reef_schedule::ManualClock;
use reef_store::{InboxStatus, JobState};
use reef_test_support::{MockReply, RecordedRequest};
use std::sync::Arc;

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

fn message(agent: &str, trigger: Trigger, guardrails: Guardrails) -> RoutineSpec {
    RoutineSpec {
        trigger,
        action: Action::Message {
            agent: agent.into(),
            text: "tick".into(),
        },
        guardrails,
    }
}

fn cron(expr: &str) -> Trigger {
    Trigger::Cron {
        expr: expr.into(),
        tz: "Europe/Berlin".into(),
    }
}

fn queue() -> Guardrails {
    Guardrails {
        concurrency: Concurrency::Queue,
        ..Guardrails::default()
    }
}

async fn create(rt: &Runtime, name: &str, spec: RoutineSpec) {
    rt.create_routine(
        RoutineRequest {
            name: name.into(),
            spec,
            enabled: true,
        },
        None,
    )
    .await
    .unwrap();
}

/// The instants a routine ran at, oldest first.
async fn ran(rt: &Runtime, name: &str) -> Vec<DateTime<Utc>> {
    let mut out: Vec<_> = rt
        .routine_history(name, 1_000_000)
        .await
        .unwrap()
        .into_iter()
        .filter(|f| f.outcome == "run")
        .map(|f| DateTime::from_timestamp_millis(f.scheduled_ms).unwrap())
        .collect();
    out.sort();
    out
}

/// Equal lists, or a failure that shows where they part (not the whole lists).
fn same(got: &[DateTime<Utc>], expected: &[DateTime<Utc>]) {
    let first = got.iter().zip(expected).position(|(a, b)| a != b);
    assert!(
        first.is_none() && got.len() == expected.len(),
        "{} fires, expected {}; first difference at {first:?}: got {:?}, expected {:?}",
        got.len(),
        expected.len(),
        first.and_then(|i| got.get(i)),
        first.and_then(|i| expected.get(i)),
    );
}

/// Wall time `hh:mm` in Berlin on `date`: the earlier instant when it happens twice.
fn berlin(date: NaiveDate, hh: u32, mm: u32) -> DateTime<Utc> {
    chrono_tz::Europe::Berlin
        .from_local_datetime(&date.and_hms_opt(hh, mm, 0).unwrap())
        .earliest()
        .unwrap()
        .with_timezone(&Utc)
}

async fn quiet_daemon(clock: &ManualClock) -> Daemon {
    daemon_at(
        Arc::new(|_: &RecordedRequest| MockReply::text("ok")),
        "",
        "",
        Some(Arc::new(clock.clone())),
        |_| {},
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn months_of_simulated_time_fire_exactly_the_calendar() {
    let clock = ManualClock::new(utc("2026-02-28T23:00:00Z"));
    let d = quiet_daemon(&clock).await;
    let rt = &d.runtime;
    // Messages wait in a paused agent's inbox: no turns, only fires.
    rt.spawn_agent(spawn("clock", "worker"), None)
        .await
        .unwrap();
    rt.pause_agent("clock", "test").await.unwrap();
    create(rt, "five", message("clock", cron("*/5 * * * *"), queue())).await;
    create(
        rt,
        "nine",
        message("clock", cron("0 9 * * MON-FRI"), queue()),
    )
    .await;
    create(rt, "daily", message("clock", cron("@daily"), queue())).await;

    // March: Berlin springs forward on the 29th.
    clock.advance_to(utc("2026-04-01T00:00:00+02:00")).await;
    rt.set_routine_enabled("five", false).await.unwrap();
    let mut expected = Vec::new();
    let mut t = utc("2026-02-28T23:05:00Z");
    while t <= utc("2026-04-01T00:00:00+02:00") {
        expected.push(t);
        t += Duration::minutes(5);
    }
    let five = ran(rt, "five").await;
    same(&five, &expected);
    assert_eq!(
        five.len(),
        31 * 288 - 12,
        "31 days less the hour Berlin skipped"
    );

    // On to the end of November: Berlin falls back on 25 October.
    clock.advance_to(utc("2026-11-30T23:59:00Z")).await;
    let days: Vec<NaiveDate> = NaiveDate::from_ymd_opt(2026, 3, 1)
        .unwrap()
        .iter_days()
        .take_while(|d| *d <= NaiveDate::from_ymd_opt(2026, 11, 30).unwrap())
        .collect();
    let nine: Vec<_> = days
        .iter()
        .filter(|d| !matches!(d.weekday(), Weekday::Sat | Weekday::Sun))
        .map(|d| berlin(*d, 9, 0))
        .collect();
    same(&ran(rt, "nine").await, &nine);
    // Midnight of 1 March was the start instant itself; midnight of 1 December is 23:00 UTC.
    let daily: Vec<_> = days[1..]
        .iter()
        .copied()
        .chain([NaiveDate::from_ymd_opt(2026, 12, 1).unwrap()])
        .map(|d| berlin(d, 0, 0))
        .collect();
    same(&ran(rt, "daily").await, &daily);

    // Every run is one message naming the routine and the scheduled instant.
    let inbox = rt
        .store()
        .inbox(
            &rt.get_agent("clock").await.unwrap().id,
            InboxStatus::Pending,
        )
        .await
        .unwrap();
    assert_eq!(inbox.len(), five.len() + nine.len() + daily.len());
    assert!(
        inbox
            .iter()
            .any(|m| m.body == "[routine nine, scheduled 2026-03-27T08:00:00Z] tick")
    );
    assert!(
        inbox
            .iter()
            .any(|m| m.body == "[routine nine, scheduled 2026-03-30T07:00:00Z] tick")
    );
    assert!(inbox.iter().all(|m| m.sender.starts_with("routine:")));
    d.runtime.shutdown().await;
}

fn every_minute(agent: &str, catch_up: CatchUp, max: u32) -> RoutineSpec {
    message(
        agent,
        Trigger::Every { millis: 60_000 },
        Guardrails {
            catch_up,
            catch_up_max: max,
            concurrency: Concurrency::Queue,
            ..Guardrails::default()
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fires_missed_while_down_follow_catch_up() {
    let start = utc("2026-11-23T20:00:00Z");
    let clock = ManualClock::new(start);
    let d = quiet_daemon(&clock).await;
    d.runtime
        .spawn_agent(spawn("clock", "worker"), None)
        .await
        .unwrap();
    d.runtime.pause_agent("clock", "test").await.unwrap();
    for (name, catch_up, max) in [
        ("skip", CatchUp::Skip, 100),
        ("once", CatchUp::Once, 100),
        ("all", CatchUp::All, 100),
        ("capped", CatchUp::All, 3),
    ] {
        create(&d.runtime, name, every_minute("clock", catch_up, max)).await;
    }
    clock.advance_to(start + Duration::minutes(5)).await;
    d.runtime.shutdown().await;

    // Down from 20:05 to 20:10:30; the restarted scheduler sees 20:06 to 20:10 as missed.
    let later = ManualClock::new(start + Duration::seconds(630));
    let rt = start_on(&d._home, Some(Arc::new(later.clone()))).await;
    later.settled().await;
    let minute = |m: i64| start + Duration::minutes(m);
    let up: Vec<_> = (1..=5).map(minute).collect();
    for (name, extra) in [
        ("skip", vec![]),
        ("once", vec![minute(10)]),
        ("all", (6..=10).map(minute).collect()),
        ("capped", (8..=10).map(minute).collect()),
    ] {
        let expected: Vec<_> = up.iter().copied().chain(extra).collect();
        same(&ran(&rt, name).await, &expected);
        let skipped = rt
            .routine_history(name, 100)
            .await
            .unwrap()
            .into_iter()
            .filter(|f| f.outcome == "skipped")
            .count();
        assert_eq!(
            skipped + ran(&rt, name).await.len(),
            10,
            "{name}: every fire is accounted for"
        );
    }
    let history = rt.routine_history("skip", 100).await.unwrap();
    assert!(history.iter().filter(|f| f.outcome == "skipped").all(|f| {
        f.reason
            .as_deref()
            .is_some_and(|r| r.contains("missed while reef was not running"))
    }));
    // After the restart the routines go on as before.
    later.advance_to(start + Duration::minutes(12)).await;
    assert_eq!(ran(&rt, "skip").await.last(), Some(&minute(12)));
    rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_failed_runs_disable_a_routine_and_skip_records_a_run_in_progress() {
    let start = utc("2026-11-23T20:00:00Z");
    let clock = ManualClock::new(start);
    let d = quiet_daemon(&clock).await;
    let rt = &d.runtime;
    rt.spawn_agent(spawn("gone", "worker"), None).await.unwrap();
    rt.spawn_agent(spawn("busy", "worker"), None).await.unwrap();
    rt.pause_agent("busy", "test").await.unwrap();
    create(rt, "fails", every_minute("gone", CatchUp::Skip, 1)).await;
    let skip = message(
        "busy",
        Trigger::Every { millis: 60_000 },
        Guardrails::default(),
    );
    create(rt, "skips", skip).await;
    rt.destroy_agent("gone", false).await.unwrap();

    clock.advance_to(start + Duration::minutes(5)).await;
    let fails = rt.routine("fails").await.unwrap().record;
    assert!(!fails.enabled);
    assert_eq!(fails.failures, 3);
    assert_eq!(
        ran(rt, "fails").await.len(),
        3,
        "no fire after it was disabled"
    );
    let reason = fails.disabled_reason.unwrap();
    assert!(
        reason.contains("3 failed runs in a row") && reason.contains("agent `gone` does not exist"),
        "{reason}"
    );
    let events = rt.store().events_after(0, None, 10_000).await.unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.kind == "routine.disabled" && e.data["routine"] == "fails")
    );
    let failed = rt.list_jobs(Some(JobState::Failed), 10).await.unwrap();
    assert_eq!(failed.len(), 3);

    // `busy` never finishes its first message: the next four fires are skipped, and say why.
    let history = rt.routine_history("skips", 10).await.unwrap();
    assert_eq!(history.len(), 5);
    let first_job = history.last().and_then(|f| f.job_id).unwrap();
    for fire in &history[..4] {
        assert_eq!(fire.outcome, "skipped");
        assert_eq!(
            fire.reason.as_deref(),
            Some(
                format!("job {first_job} of this routine is still going (concurrency = skip)")
                    .as_str()
            )
        );
    }
    d.runtime.shutdown().await;
}

const REPORTER: &str = r#"
description = "Checks the backups every minute."
persona = "You check the backups and report in one line."
schedule = "* * * * *"
schedule_tz = "UTC"
schedule_timeout = "5m"
schedule_task = "Check the backups."

[sandbox]
network = "none"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_template_spawns_an_agent_that_reports_and_is_gone_after_its_timeout() {
    let start = utc("2026-11-23T20:00:00Z");
    let clock = ManualClock::new(start);
    // The first run answers at once; the second never does before its timeout.
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let responder = {
        let calls = calls.clone();
        Arc::new(move |_: &RecordedRequest| {
            if calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                MockReply::text("backups are fine")
            } else {
                MockReply::Delayed(
                    std::time::Duration::from_secs(600),
                    Box::new(MockReply::text("late")),
                )
            }
        })
    };
    let d = daemon_at(responder, "", "", Some(Arc::new(clock.clone())), |home| {
        std::fs::create_dir_all(home.path().join("templates")).unwrap();
        std::fs::write(home.path().join("templates/reporter.toml"), REPORTER).unwrap();
    })
    .await;
    let rt = &d.runtime;
    let routine = rt.routine("reporter-cron").await.unwrap();
    assert_eq!(routine.next.as_deref(), Some("2026-11-23T20:01:00Z"));

    clock.advance_to(start + Duration::minutes(1)).await;
    wait_for(rt, "the first run's report", |events| {
        events.iter().any(|e| e.kind == "routine.report")
    })
    .await;
    let events = rt.store().events_after(0, None, 10_000).await.unwrap();
    let report = events.iter().find(|e| e.kind == "routine.report").unwrap();
    let agent = report.data["agent"].as_str().unwrap().to_owned();
    assert!(agent.starts_with("reporter-cron-"), "{agent}");
    assert_eq!(report.data["room"], "#agents");
    assert_eq!(report.data["text"], "backups are fine");
    // The model was told which fire this is.
    let asked = d.mock.requests();
    let task = asked[0].last_user_text().unwrap_or_default();
    assert!(
        task.contains("[routine reporter-cron, scheduled 2026-11-23T20:01:00Z] Check the backups."),
        "{task}"
    );
    // Done, it is destroyed; its transcript stays.
    wait_for(rt, "the first agent destroyed", |events| {
        events
            .iter()
            .any(|e| e.kind == "agent.destroyed" && e.data["name"] == agent.as_str())
    })
    .await;
    assert!(rt.store().agent_by_name(&agent).await.unwrap().is_none());
    let events = rt.store().events_after(0, None, 10_000).await.unwrap();
    let destroyed = events
        .iter()
        .find(|e| e.kind == "agent.destroyed" && e.data["name"] == agent.as_str())
        .unwrap();
    let session = reef_core::SessionId::from(destroyed.data["session"].as_str().unwrap());
    assert!(rt.store().get_session(&session).await.unwrap().is_some());

    // The second run hangs; at its timeout it fails and its agent is gone.
    clock.advance_to(start + Duration::minutes(2)).await;
    wait_for(rt, "the second run asking the model", |_| {
        calls.load(std::sync::atomic::Ordering::SeqCst) >= 2
    })
    .await;
    let running = rt.list_jobs(Some(JobState::Running), 10).await.unwrap();
    assert_eq!(running.len(), 1);
    let second = running[0].agent_name.clone().unwrap();
    // Minutes 3 to 6 are skipped while it runs; at 20:07 it is past its five minutes.
    clock
        .advance_to(start + Duration::minutes(7) + Duration::seconds(1))
        .await;
    wait_for(rt, "the second agent destroyed", |events| {
        events
            .iter()
            .any(|e| e.kind == "agent.destroyed" && e.data["name"] == second.as_str())
    })
    .await;
    let job = rt.job(running[0].id).await.unwrap();
    assert_eq!(job.state, JobState::Failed);
    assert!(
        job.reason
            .as_deref()
            .is_some_and(|r| r.contains("still running at its timeout")),
        "{job:?}"
    );
    let history = rt.routine_history("reporter-cron", 20).await.unwrap();
    assert!(history.iter().any(|f| {
        f.outcome == "skipped"
            && f.reason
                .as_deref()
                .is_some_and(|r| r.contains("still going"))
    }));
    d.runtime.shutdown().await;
}

/// The heartbeat model: `HEARTBEAT_OK` for the first beat, a finding for later ones; a slow
/// answer to ordinary work; anything else is acknowledged.
fn heartbeat_model(req: &RecordedRequest) -> MockReply {
    let text = req.last_user_text().unwrap_or_default();
    if text.contains("[heartbeat, ") {
        if text.contains("scheduled 2026-11-23T20:01:00Z") {
            return MockReply::text("HEARTBEAT_OK");
        }
        return MockReply::text("disk /var is 95% full");
    }
    if text.contains("long job") {
        return MockReply::Delayed(
            std::time::Duration::from_millis(1500),
            Box::new(MockReply::text("done")),
        );
    }
    MockReply::text("noted")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_stay_silent_when_ok_report_findings_and_never_overlap_a_turn() {
    let start = utc("2026-11-23T20:00:00Z");
    let clock = ManualClock::new(start);
    let d = daemon_at(
        Arc::new(heartbeat_model),
        "",
        "[heartbeat]\nevery = \"1m\"\ntz = \"UTC\"\nactive_hours = \"08:00-22:00\"\n\
         agents = [\"watcher\", \"kid\"]\n",
        Some(Arc::new(clock.clone())),
        |_| {},
    )
    .await;
    let rt = &d.runtime;
    let watcher = rt
        .spawn_agent(spawn("watcher", "worker"), None)
        .await
        .unwrap()
        .agent;
    let boss = rt
        .spawn_agent(spawn("boss", "manager"), None)
        .await
        .unwrap()
        .agent;
    let kid = rt
        .spawn_agent(spawn("kid", "worker"), Some(&boss))
        .await
        .unwrap()
        .agent;
    for agent in [&watcher, &kid] {
        std::fs::write(
            std::path::Path::new(&agent.workspace).join("HEARTBEAT.md"),
            "- is /var above 90%?\n- any failed backups?\n",
        )
        .unwrap();
    }
    let beats = |events: &[reef_store::StoredEvent], state: &str| {
        events
            .iter()
            .filter(|e| {
                e.kind == "job.ended" && e.data["kind"] == "heartbeat" && e.data["state"] == state
            })
            .count()
    };

    // 20:01: both answer HEARTBEAT_OK: nothing is delivered anywhere.
    clock.advance_to(start + Duration::minutes(1)).await;
    wait_for(rt, "two beats", |e| beats(e, "completed") == 2).await;
    let events = rt.store().events_after(0, None, 10_000).await.unwrap();
    assert!(!events.iter().any(|e| e.kind == "heartbeat.alert"));
    let asked = d.mock.requests();
    let beat = asked.iter().find(|r| r.agent() == "watcher").unwrap();
    let text = beat.last_user_text().unwrap();
    assert!(
        text.contains("- is /var above 90%?"),
        "the checklist is the message: {text}"
    );
    assert!(text.contains("answer exactly HEARTBEAT_OK"), "{text}");

    // 20:02: a finding. The watcher has no parent: it is for the control room; the kid's goes
    // to its parent's inbox.
    clock.advance_to(start + Duration::minutes(2)).await;
    wait_for(rt, "two alerts", |e| {
        e.iter().filter(|e| e.kind == "heartbeat.alert").count() == 2
    })
    .await;
    let events = rt.store().events_after(0, None, 10_000).await.unwrap();
    let alerts: Vec<_> = events
        .iter()
        .filter(|e| e.kind == "heartbeat.alert")
        .collect();
    let to = |agent: &str| {
        alerts
            .iter()
            .find(|e| e.data["agent"] == agent)
            .map(|e| e.data["to"].as_str().unwrap().to_owned())
    };
    assert_eq!(to("watcher").as_deref(), Some("#control"));
    assert_eq!(to("kid").as_deref(), Some("boss"));
    wait_for(rt, "the boss reading the kid's finding", |_| {
        d.mock.requests().iter().any(|r| {
            r.agent() == "boss"
                && r.last_user_text()
                    .is_some_and(|t| t.contains("[heartbeat of kid] disk /var is 95% full"))
        })
    })
    .await;

    // 20:03 while the watcher works on a long job: its beat is skipped, not queued.
    rt.send_message(
        "watcher",
        reef_runtime::Sender::Operator,
        "long job",
        "long",
        None,
    )
    .await
    .unwrap();
    wait_for(rt, "the long job started", |e| {
        e.iter()
            .any(|e| e.kind == "turn.started" && e.data["from"] == "operator")
    })
    .await;
    clock.advance_to(start + Duration::minutes(3)).await;
    let history = rt.routine_history("heartbeat-watcher", 10).await.unwrap();
    let third = &history[0];
    assert_eq!(third.outcome, "skipped");
    assert!(
        third.reason.as_deref().unwrap().contains("watcher is busy"),
        "{third:?}"
    );
    wait_for(rt, "the long job done", |e| {
        e.iter()
            .any(|e| e.kind == "turn.ended" && e.data["from"] == "operator")
    })
    .await;
    // No heartbeat turn ever began while another turn of the watcher was open.
    let events = rt.store().events_after(0, None, 10_000).await.unwrap();
    let mut open = 0;
    for e in events
        .iter()
        .filter(|e| e.agent_id.as_ref() == Some(&watcher.id))
    {
        match e.kind.as_str() {
            "turn.started" => {
                open += 1;
                assert_eq!(open, 1, "two turns of the watcher at once");
            }
            "turn.ended" | "turn.interrupted" => open -= 1,
            _ => {}
        }
    }
    // 22:30 is outside the active hours: skipped, and says why.
    clock.advance_to(utc("2026-11-23T22:30:00Z")).await;
    let history = rt.routine_history("heartbeat-watcher", 1).await.unwrap();
    assert!(
        history[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("outside active hours"),
        "{:?}",
        history[0]
    );
    d.runtime.shutdown().await;
}

/// A manager that schedules a check for itself and tries one for an agent not its own, then
/// lists its routines; then answers the fires.
fn scheduling_manager(req: &RecordedRequest) -> MockReply {
    let text = req.last_user_text().unwrap_or_default();
    if text.contains("[routine boss-check, scheduled") {
        return MockReply::text("queue is empty");
    }
    if req.ends_with_tool_result() {
        let results = req.tool_results();
        // The schedules ran in parallel; the listing comes after them.
        if !results.iter().any(|r| r.contains("enabled=")) {
            return MockReply::ToolCalls(vec![("list_routines".into(), serde_json::json!({}))]);
        }
        return MockReply::text(format!("results: {}", results.join(" | ")));
    }
    if text.contains("set up checks") {
        return MockReply::ToolCalls(vec![
            (
                "schedule_routine".into(),
                serde_json::json!({"name": "check", "every": "1m", "agent": "boss",
                                   "message": "check the queue"}),
            ),
            (
                "schedule_routine".into(),
                serde_json::json!({"name": "poke", "every": "1m", "agent": "stranger",
                                   "message": "hi"}),
            ),
        ]);
    }
    MockReply::text("ok")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_schedules_its_own_routine_which_dies_with_it() {
    let start = utc("2026-11-23T20:00:00Z");
    let clock = ManualClock::new(start);
    let d = daemon_at(
        Arc::new(scheduling_manager),
        "",
        "",
        Some(Arc::new(clock.clone())),
        |_| {},
    )
    .await;
    let rt = &d.runtime;
    rt.spawn_agent(spawn("stranger", "worker"), None)
        .await
        .unwrap();
    let mut boss = spawn("boss", "manager");
    boss.task = Some("set up checks".into());
    rt.spawn_agent(boss, None).await.unwrap();
    wait_for(rt, "the manager's answer", |e| {
        e.iter().any(|e| {
            e.kind == "turn.ended"
                && e.data["outcome"]["text"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("results:"))
        })
    })
    .await;
    let events = rt.store().events_after(0, None, 10_000).await.unwrap();
    let answer = events
        .iter()
        .find(|e| {
            e.kind == "turn.ended"
                && e.data["outcome"]["text"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("results:"))
        })
        .unwrap();
    let answer = answer.data["outcome"]["text"].as_str().unwrap();
    assert!(
        answer.contains("scheduled routine boss-check; next fire 2026-11-23T20:01:00Z"),
        "{answer}"
    );
    assert!(
        answer.contains("may message you or your child agents, not `stranger`"),
        "{answer}"
    );
    assert!(answer.contains("boss-check enabled=true"), "{answer}");
    let routine = rt.routine("boss-check").await.unwrap().record;
    assert_eq!(routine.source, reef_store::RoutineSource::Agent);
    // Workers do not get the tools.
    rt.send_message("stranger", reef_runtime::Sender::Operator, "hi", "hi", None)
        .await
        .unwrap();
    wait_for(rt, "the worker asked", |_| {
        d.mock.requests().iter().any(|r| r.agent() == "stranger")
    })
    .await;
    let asked = d.mock.requests();
    let offered = |agent: &str| {
        asked
            .iter()
            .find(|r| r.agent() == agent)
            .map(|r| r.tool_names())
            .unwrap_or_default()
    };
    assert!(offered("boss").iter().any(|t| t == "schedule_routine"));
    assert!(
        !offered("stranger")
            .iter()
            .any(|t| t.ends_with("_routine") || t == "list_routines")
    );

    clock.advance_to(start + Duration::minutes(1)).await;
    wait_for(rt, "the fire answered", |e| {
        e.iter()
            .any(|e| e.kind == "turn.ended" && e.data["outcome"]["text"] == "queue is empty")
    })
    .await;
    rt.destroy_agent("boss", false).await.unwrap();
    assert!(
        rt.routine("boss-check").await.is_err(),
        "the routine died with its agent"
    );
    d.runtime.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_budget_spent_skips_the_next_runs() {
    let clock = ManualClock::new(Utc::now());
    let d = quiet_daemon(&clock).await;
    let rt = &d.runtime;
    let spec = RoutineSpec {
        trigger: Trigger::Manual,
        action: Action::Spawn {
            template: "worker".into(),
            task: "count the backups".into(),
            timeout_secs: 300,
        },
        guardrails: Guardrails {
            day_tokens: Some(1),
            ..Guardrails::default()
        },
    };
    create(rt, "counter", spec).await;
    rt.run_routine("counter").await.unwrap();
    wait_for(rt, "the first run's report", |e| {
        e.iter().any(|e| e.kind == "routine.report")
    })
    .await;
    rt.run_routine("counter").await.unwrap();
    let history = rt.routine_history("counter", 10).await.unwrap();
    assert_eq!(history.len(), 2);
    let second = &history[0];
    assert_eq!(second.outcome, "skipped");
    let reason = second.reason.as_deref().unwrap();
    assert!(
        reason.starts_with("today's runs used ") && reason.ends_with("tokens of day_tokens = 1"),
        "{reason}"
    );
    // A message routine has no run budget of its own: said at creation.
    let bad = RoutineSpec {
        trigger: Trigger::Manual,
        action: Action::Message {
            agent: "nobody".into(),
            text: "x".into(),
        },
        guardrails: Guardrails {
            run_tokens: Some(10),
            ..Guardrails::default()
        },
    };
    let err = rt
        .create_routine(
            RoutineRequest {
                name: "bad".into(),
                spec: bad,
                enabled: true,
            },
            None,
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("run_tokens: applies to spawned runs"),
        "{err}"
    );
    d.runtime.shutdown().await;
}

/// Waits until the scheduler's event listener has read the history up to its current end.
async fn listener_caught_up(rt: &Runtime) {
    let end = rt.store().last_event_seq().await.unwrap();
    for _ in 0..3000 {
        if rt.store().scheduler_cursor().await.unwrap().unwrap_or(0) >= end {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the event listener never read up to {end}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_routine_fires_once_per_event_and_never_on_what_routines_cause() {
    let d = crate::daemon::daemon(
        Arc::new(|_: &RecordedRequest| MockReply::text("seen")),
        "[scheduler]\nmin_interval = \"1s\"\n",
    )
    .await;
    let rt = &d.runtime;
    rt.spawn_agent(spawn("dev", "worker"), None).await.unwrap();
    rt.spawn_agent(spawn("ops", "worker"), None).await.unwrap();
    let spec = RoutineSpec {
        trigger: Trigger::Event {
            event: "message.delivered".into(),
            pattern: Some("deploy".into()),
        },
        action: Action::Message {
            agent: "ops".into(),
            text: "look at the deploy".into(),
        },
        guardrails: Guardrails {
            cooldown_secs: 1,
            ..Guardrails::default()
        },
    };
    create(rt, "watch", spec).await;
    rt.send_message(
        "dev",
        reef_runtime::Sender::Operator,
        "deploy done",
        "d1",
        None,
    )
    .await
    .unwrap();
    wait_for(rt, "ops to answer", |e| {
        e.iter()
            .any(|e| e.kind == "turn.ended" && e.data["from"] == "routine:watch")
    })
    .await;
    listener_caught_up(rt).await;
    // The message to ops says "deploy" too, but a routine's own message triggers nothing.
    let history = rt.routine_history("watch", 10).await.unwrap();
    assert_eq!(history.len(), 1, "{history:?}");
    assert!(history[0].key.starts_with("event:"));
    let asked = d.mock.requests();
    let told = asked
        .iter()
        .find(|r| r.agent() == "ops")
        .and_then(|r| r.last_user_text())
        .unwrap();
    assert!(
        told.contains("[routine watch, event message.delivered #"),
        "{told}"
    );
    assert!(
        told.contains("deploy done") && told.ends_with("] look at the deploy"),
        "{told}"
    );
    // A cooldown shorter than scheduler.min_interval is refused.
    let fast = RoutineSpec {
        trigger: Trigger::Event {
            event: "agent.*".into(),
            pattern: None,
        },
        action: Action::Message {
            agent: "ops".into(),
            text: "x".into(),
        },
        guardrails: Guardrails::default(),
    };
    let err = rt
        .create_routine(
            RoutineRequest {
                name: "fast".into(),
                spec: fast,
                enabled: true,
            },
            None,
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("cooldown: an event routine waits at least"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_agent_ends_fails_and_counts() {
    let start = utc("2026-11-23T20:00:00Z");
    let clock = ManualClock::new(start);
    let d = quiet_daemon(&clock).await;
    let rt = &d.runtime;
    rt.spawn_agent(spawn("slow", "worker"), None).await.unwrap();
    rt.pause_agent("slow", "test").await.unwrap();
    create(rt, "nudge", every_minute("slow", CatchUp::Skip, 1)).await;
    clock.advance_to(start + Duration::minutes(1)).await;
    let running = rt.list_jobs(Some(JobState::Running), 10).await.unwrap();
    assert_eq!(running.len(), 1);
    // The agent is stopped with the routine's message still waiting: the run fails.
    rt.stop_agent("slow", "test").await.unwrap();
    let job = rt.job(running[0].id).await.unwrap();
    assert_eq!(job.state, JobState::Failed);
    assert!(
        job.reason
            .as_deref()
            .unwrap()
            .contains("agent slow is terminated"),
        "{job:?}"
    );
    let routine = rt.routine("nudge").await.unwrap().record;
    assert_eq!(routine.failures, 1);
    d.runtime.shutdown().await;
}
