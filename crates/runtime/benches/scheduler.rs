//! The scheduler with 10,000 enabled routines: the daemon's CPU time per idle minute and its
//! memory, against the same daemon with none; and the delay from each fire's scheduled
//! instant to its claim when 10,000 routines fall due within one minute, against 100.
//!
//! Run: `cargo bench -p reef-runtime --bench scheduler` (about four minutes: it waits out
//! real minutes).
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark binary prints its report and fails loudly"
)]

use chrono::{DateTime, Timelike, Utc};
use reef_config::{Config, LoadOptions};
use reef_core::{Action, Concurrency, Guardrails, RoutineSpec, Trigger};
use reef_runtime::{RoutineRequest, Runtime, RuntimeOptions, SpawnRequest, Templates};
use std::time::{Duration, Instant};

const ROUTINES: usize = 10_000;
const FEW: usize = 100;
const IDLE: Duration = Duration::from_secs(60);

/// User + system CPU time of this process.
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // Linux reports in USER_HZ, 100 on every supported architecture.
    Duration::from_millis(ticks * 10)
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// RSS after giving freed heap pages back to the system: what is retained, not what a peak
/// of allocations left behind in malloc's arenas.
fn retained_kib() -> u64 {
    // SAFETY: malloc_trim only releases free memory at the top of glibc's heaps.
    #[allow(
        unsafe_code,
        reason = "the one libc call that returns freed heap to the system"
    )]
    unsafe {
        libc::malloc_trim(0);
    }
    rss_kib()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn daemon(dir: &std::path::Path) -> Runtime {
    let home = dir.join(".reef");
    std::fs::create_dir_all(&home).unwrap();
    // No tool runs here (the one agent is paused): the sandbox's start-up self-test would only
    // add its process to the measurement.
    std::fs::write(
        home.join("reef.toml"),
        "[sandbox]\nbackend = \"none\"\n[scheduler]\nmin_interval = \"1s\"\n",
    )
    .unwrap();
    let config = Config::load(&LoadOptions {
        home,
        project_dir: None,
        env: Default::default(),
        overrides: Vec::new(),
    })
    .unwrap();
    let (runtime, _) = Runtime::start(RuntimeOptions {
        config,
        templates: Templates::builtin().unwrap(),
        helper: None,
        model_override: None,
        clock: None,
    })
    .await
    .unwrap();
    // Messages wait in a paused agent's inbox: the scheduler's work only, no turns.
    runtime
        .spawn_agent(
            SpawnRequest {
                name: "sink".into(),
                template: "worker".into(),
                ..SpawnRequest::default()
            },
            None,
        )
        .await
        .unwrap();
    runtime.pause_agent("sink", "benchmark").await.unwrap();
    runtime
}

async fn add(runtime: &Runtime, n: usize, cron: impl Fn(usize) -> String) -> Duration {
    let t = Instant::now();
    for i in 0..n {
        runtime
            .create_routine(
                RoutineRequest {
                    name: format!("r{i}"),
                    spec: RoutineSpec {
                        trigger: Trigger::Cron {
                            expr: cron(i),
                            tz: "UTC".into(),
                        },
                        action: Action::Message {
                            agent: "sink".into(),
                            text: "tick".into(),
                        },
                        guardrails: Guardrails {
                            concurrency: Concurrency::Queue,
                            ..Guardrails::default()
                        },
                    },
                    enabled: true,
                },
                None,
            )
            .await
            .unwrap();
    }
    t.elapsed()
}

/// CPU time spent over one idle minute.
async fn idle_minute() -> Duration {
    let before = cpu();
    tokio::time::sleep(IDLE).await;
    cpu() - before
}

/// Delays from scheduled instant to claim when `n` routines fall due over one minute.
async fn delays(n: usize) -> Vec<Duration> {
    let dir = tempfile::tempdir().unwrap();
    let runtime = daemon(dir.path()).await;
    // Every routine fires once, at second `i % 60` of the minute after next.
    let now = Utc::now();
    let target = (now + chrono::Duration::minutes(2)).with_second(0).unwrap();
    let minute = target.minute();
    let hour = target.hour();
    add(&runtime, n, |i| format!("{} {minute} {hour} * * *", i % 60)).await;
    let until = target + chrono::Duration::seconds(62);
    tokio::time::sleep((until - Utc::now()).to_std().unwrap_or_default()).await;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        for fire in runtime.routine_history(&format!("r{i}"), 10).await.unwrap() {
            let claimed = DateTime::parse_from_rfc3339(&fire.claimed_at).unwrap();
            let late = claimed.timestamp_millis() - fire.scheduled_ms;
            out.push(Duration::from_millis(u64::try_from(late.max(0)).unwrap()));
        }
    }
    assert_eq!(out.len(), n, "every routine fired once");
    runtime.shutdown().await;
    out.sort();
    out
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = daemon(dir.path()).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_none = rss_kib();
    let kept_none = retained_kib();
    let cpu_none = idle_minute().await;
    // 10,000 routines due at 03:00 UTC twelve hours from now: enabled, none due.
    let hour = (Utc::now().hour() + 12) % 24;
    let created = add(&runtime, ROUTINES, |i| format!("{} 0 {hour} * * *", i % 60)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_many = rss_kib();
    let kept_many = retained_kib();
    let cpu_many = idle_minute().await;
    runtime.shutdown().await;

    println!("scheduler, {ROUTINES} enabled routines (none due):");
    println!(
        "  created at {:.0} routines/s",
        ROUTINES as f64 / created.as_secs_f64()
    );
    println!(
        "  idle CPU per minute: {:.0} ms with {ROUTINES} routines vs {:.0} ms with none ({:.2}x)",
        ms(cpu_many),
        ms(cpu_none),
        cpu_many.as_secs_f64() / cpu_none.as_secs_f64().max(0.001)
    );
    println!(
        "  RSS: {} KiB vs {} KiB with none (+{} KiB)",
        rss_many,
        rss_none,
        rss_many.saturating_sub(rss_none)
    );
    println!(
        "  retained after malloc_trim: {} KiB vs {} KiB (+{} KiB, {:.1} KiB per routine)",
        kept_many,
        kept_none,
        kept_many.saturating_sub(kept_none),
        kept_many.saturating_sub(kept_none) as f64 / ROUTINES as f64
    );

    let few = delays(FEW).await;
    let many = delays(ROUTINES).await;
    println!("delay from scheduled instant to claim, all firing within one minute:");
    for (label, d) in [
        (format!("{FEW} routines"), &few),
        (format!("{ROUTINES} routines"), &many),
    ] {
        println!(
            "  {label:>16}: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            ms(percentile(d, 0.5)),
            ms(percentile(d, 0.99)),
            ms(*d.last().unwrap())
        );
    }
    println!(
        "  ratio p50 {:.2}x, p99 {:.2}x",
        ms(percentile(&many, 0.5)) / ms(percentile(&few, 0.5)).max(0.001),
        ms(percentile(&many, 0.99)) / ms(percentile(&few, 0.99)).max(0.001)
    );
}
