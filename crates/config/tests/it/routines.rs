//! `[scheduler]` and `[routines.NAME]`: one trigger and one action each, guardrails, and
//! errors that name the key with the position and reason.

use crate::{Fixture, MAIN};
use reef_core::{Action, CatchUp, Concurrency, Trigger};
use std::path::Path;
use std::time::Duration;

fn load(extra: &str) -> Result<reef_config::Config, String> {
    let fx = Fixture::new();
    fx.write(Path::new("home/reef.toml"), &format!("{MAIN}\n{extra}"));
    fx.load(&[], &[]).map_err(|e| e.to_string())
}

#[test]
fn routines_have_a_trigger_an_action_and_guardrails() {
    let config = load(
        "[scheduler]\nmin_interval = \"1s\"\n\n\
         [routines.tick]\nevery = \"2s\"\nagent = \"clock\"\nmessage = \"tick\"\ncatch_up = \"all\"\n\n\
         [routines.standup]\ncron = \"0 9 * * MON-FRI\"\ntz = \"Europe/Berlin\"\n\
         template = \"worker\"\ntask = \"check the backups\"\ntimeout = \"5m\"\n\
         concurrency = \"queue\"\nmax_failures = 5\nrun_cost = 0.25\nenabled = false\n\n\
         [routines.watch]\nevent = \"agent.state\"\nmatch = \"failed\"\nagent = \"ops\"\n\
         message = \"look\"\ncooldown = \"1m\"\n",
    )
    .unwrap();
    assert_eq!(config.scheduler.min_interval, Duration::from_secs(1));
    let tick = &config.routines["tick"];
    assert_eq!(tick.spec.trigger, Trigger::Every { millis: 2000 });
    assert_eq!(
        tick.spec.action,
        Action::Message {
            agent: "clock".into(),
            text: "tick".into()
        }
    );
    assert_eq!(tick.spec.guardrails.catch_up, CatchUp::All);
    assert!(tick.enabled);
    let standup = &config.routines["standup"];
    assert_eq!(
        standup.spec.trigger,
        Trigger::Cron {
            expr: "0 9 * * MON-FRI".into(),
            tz: "Europe/Berlin".into()
        }
    );
    assert_eq!(
        standup.spec.action,
        Action::Spawn {
            template: "worker".into(),
            task: "check the backups".into(),
            timeout_secs: 300
        }
    );
    assert_eq!(standup.spec.guardrails.concurrency, Concurrency::Queue);
    assert_eq!(standup.spec.guardrails.max_failures, 5);
    assert_eq!(standup.spec.guardrails.run_cost_micros, Some(250_000));
    assert!(!standup.enabled);
    let watch = &config.routines["watch"];
    assert_eq!(
        watch.spec.trigger,
        Trigger::Event {
            event: "agent.state".into(),
            pattern: Some("failed".into())
        }
    );
    assert_eq!(watch.spec.guardrails.cooldown_secs, 60);
}

#[test]
fn a_cron_routine_without_a_zone_takes_the_systems() {
    let config =
        load("[routines.daily]\ncron = \"@daily\"\nagent = \"a\"\nmessage = \"m\"\n").unwrap();
    let Trigger::Cron { tz, .. } = &config.routines["daily"].spec.trigger else {
        panic!("not cron");
    };
    assert_eq!(tz, reef_schedule::system_zone().name());
}

#[test]
fn bad_routines_name_the_key_the_position_and_the_reason() {
    let base = "agent = \"a\"\nmessage = \"m\"\n";
    for (toml, key, message) in [
        (
            format!("[routines.r]\ncron = \"61 * * * *\"\n{base}"),
            "routines.r.cron",
            "\"61 * * * *\": minute 61 is out of range 0-59",
        ),
        (
            format!("[routines.r]\ncron = \"0 9 * * *\"\ntz = \"Mars/Olympus\"\n{base}"),
            "routines.r.tz",
            "`Mars/Olympus` is not a time zone",
        ),
        (
            format!("[routines.r]\nevery = \"5s\"\n{base}"),
            "routines.r.every",
            "5s is shorter than scheduler.min_interval (1m)",
        ),
        (
            format!("[routines.r]\nevery = \"5 seconds\"\n{base}"),
            "routines.r.every",
            "`seconds` is not a unit",
        ),
        (
            format!("[routines.r]\nevery = \"1h\"\ncron = \"@daily\"\n{base}"),
            "routines.r.every",
            "one trigger, but this one sets cron and every",
        ),
        (
            format!("[routines.r]\n{base}"),
            "routines.r",
            "has no trigger",
        ),
        (
            "[routines.r]\nevery = \"1h\"\n".into(),
            "routines.r",
            "has no action",
        ),
        (
            "[routines.r]\nevery = \"1h\"\nagent = \"a\"\n".into(),
            "routines.r.message",
            "missing",
        ),
        (
            "[routines.r]\nevery = \"1h\"\ntemplate = \"worker\"\n".into(),
            "routines.r.task",
            "missing",
        ),
        (
            format!("[routines.r]\nevent = \"agent.state\"\nmatch = \"(\"\n{base}"),
            "routines.r.match",
            "is not a regular expression",
        ),
        (
            format!("[routines.r]\nevery = \"1h\"\nconcurrency = \"sometimes\"\n{base}"),
            "routines.r.concurrency",
            "`sometimes` is not skip, queue or replace",
        ),
        (
            format!("[routines.Bad]\nevery = \"1h\"\n{base}"),
            "routines.Bad",
            "a routine's name",
        ),
        (
            "[scheduler]\nmin_interval = \"0s\"\n".into(),
            "scheduler.min_interval",
            "at least 1s",
        ),
    ] {
        let err = load(&toml).unwrap_err();
        assert!(
            err.contains(key) && err.contains(message),
            "{toml}\nexpected {key}: {message}\ngot {err}"
        );
    }
}

#[test]
fn a_project_file_may_not_declare_routines_without_trust() {
    let fx = Fixture::new();
    fx.write(Path::new("home/reef.toml"), MAIN);
    fx.write(
        Path::new("project/reef.toml"),
        "[routines.r]\nevery = \"1h\"\nagent = \"a\"\nmessage = \"m\"\n",
    );
    let err = fx.load(&[], &[]).unwrap_err().to_string();
    assert!(err.contains("routines.*"), "{err}");
}

#[test]
fn heartbeat_and_jobs_have_defaults_and_checked_values() {
    let config = load("").unwrap();
    assert_eq!(config.heartbeat, None);
    assert_eq!(config.jobs.stuck_after, reef_config::DEFAULT_STUCK_AFTER);
    let config = load(
        "[heartbeat]\nevery = \"30m\"\nactive_hours = \"22:00-06:00\"\ntz = \"Europe/Berlin\"\n\
         templates = [\"worker\"]\n\n[jobs]\nstuck_after = \"10m\"\n",
    )
    .unwrap();
    let hb = config.heartbeat.unwrap();
    assert_eq!(hb.every, Duration::from_secs(1800));
    assert!(hb.selects("anyone", "worker") && !hb.selects("anyone", "coder"));
    assert_eq!(config.jobs.stuck_after, Duration::from_secs(600));
    assert_eq!(reef_config::active_window("08:00-22:00"), Ok((480, 1320)));
    for (toml, key, message) in [
        (
            "[heartbeat]\nactive_hours = \"08:00-22:00\"\n",
            "heartbeat.every",
            "missing",
        ),
        (
            "[heartbeat]\nevery = \"10s\"\n",
            "heartbeat.every",
            "shorter than scheduler.min_interval",
        ),
        (
            "[heartbeat]\nevery = \"1h\"\nactive_hours = \"8-22\"\n",
            "heartbeat.active_hours",
            "\"8-22\" is not a window like \"08:00-22:00\"",
        ),
        (
            "[heartbeat]\nevery = \"1h\"\nchannel = \"nope\"\n",
            "heartbeat.channel",
            "no [channels.nope] is defined",
        ),
        (
            "[jobs]\nstuck_after = \"soon\"\n",
            "jobs.stuck_after",
            "expected a number",
        ),
    ] {
        let err = load(toml).unwrap_err();
        assert!(err.contains(key) && err.contains(message), "{toml}: {err}");
    }
}

#[test]
fn a_webhook_routine_takes_its_hooks_route() {
    let base = "[secrets.K]\nenv = \"K\"\n\n";
    let config = load(&format!(
        "{base}[hooks.deploys]\nsecret = \"K\"\n\n\
         [routines.check]\nwebhook = \"deploys\"\nagent = \"ops\"\nmessage = \"look\"\n"
    ))
    .unwrap();
    assert_eq!(
        config.hooks.hooks["deploys"].route,
        reef_config::HookRoute::Routine("check".into())
    );
    for (toml, key, message) in [
        (
            format!("{base}[routines.check]\nwebhook = \"nope\"\nagent = \"a\"\nmessage = \"m\"\n"),
            "routines.check.webhook",
            "no [hooks.nope] is defined",
        ),
        (
            format!(
                "{base}[hooks.deploys]\nsecret = \"K\"\nroute = \"agent:a\"\n\n\
                 [routines.check]\nwebhook = \"deploys\"\nagent = \"a\"\nmessage = \"m\"\n"
            ),
            "hooks.deploys.route",
            "[routines.check] is fired by this hook; remove `route`",
        ),
        (
            format!(
                "{base}[hooks.deploys]\nsecret = \"K\"\n\n\
                 [routines.a]\nwebhook = \"deploys\"\nagent = \"a\"\nmessage = \"m\"\n\n\
                 [routines.b]\nwebhook = \"deploys\"\nagent = \"a\"\nmessage = \"m\"\n"
            ),
            "routines.b.webhook",
            "[hooks.deploys] already fires [routines.a]",
        ),
    ] {
        let err = load(&toml).unwrap_err();
        assert!(err.contains(key) && err.contains(message), "{toml}\n{err}");
    }
}

#[test]
fn a_cron_that_fires_more_often_than_the_minimum_is_refused() {
    let err =
        load("[routines.r]\ncron = \"* * * * * *\"\nagent = \"a\"\nmessage = \"m\"\n").unwrap_err();
    assert!(
        err.contains("routines.r.cron")
            && err.contains("fires 1s apart, more often than scheduler.min_interval (1m)"),
        "{err}"
    );
    // Every minute is the minimum itself: accepted.
    load("[routines.r]\ncron = \"* * * * *\"\nagent = \"a\"\nmessage = \"m\"\n").unwrap();
}
