//! `reef bench dashboard`: the dashboard served by a daemon in this process on loopback, on a
//! scratch home — the overview's weight with every asset, the time from a change in the
//! daemon to its fragment on a page's live stream (against the time of the change itself),
//! the agent page of a 50,000-message transcript (against an empty one) and the memory taken
//! by five open dashboards.

use crate::args::BenchDashboardArgs;
use anyhow::{Context as _, bail};
use futures::StreamExt as _;
use reef_config::{Config, LoadOptions};
use reef_core::{Message, SessionId};
use reef_runtime::{Runtime, RuntimeOptions, SpawnRequest, Templates};
use serde::Serialize;
use std::time::{Duration, Instant};

#[derive(Serialize)]
struct Report {
    overview_html_bytes: usize,
    assets_bytes: usize,
    overview_total_bytes: usize,
    events: usize,
    event_to_stream_p50_ms: f64,
    event_to_stream_p99_ms: f64,
    change_itself_p50_ms: f64,
    transcript_messages: usize,
    long_agent_page_p50_ms: f64,
    long_agent_page_max_ms: f64,
    empty_agent_page_p50_ms: f64,
    page_back_p50_ms: f64,
    rss_before_kib: u64,
    rss_with_dashboards_kib: u64,
    dashboards: usize,
}

pub async fn dashboard(overrides: &[String], args: BenchDashboardArgs) -> anyhow::Result<u8> {
    let scratch = tempfile::tempdir().context("cannot create a scratch home")?;
    let home = scratch.path().join("home");
    std::fs::create_dir_all(&home)?;
    let env = std::env::vars()
        .filter(|(k, _)| k != "REEF_HOME")
        .chain([("REEF_HOME".to_owned(), home.display().to_string())]);
    let config = Config::load(&LoadOptions::from_env(env, None, overrides.to_vec())?)?;
    let token = reef_server::load_or_create_token(&home.join("api-token"))?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let base = format!("http://{addr}");
    let (runtime, _) = Runtime::start(RuntimeOptions {
        config,
        templates: Templates::builtin()?,
        helper: Some(crate::cmd::sandbox::helper()?),
        model_override: None,
        clock: None,
    })
    .await?;
    let router = reef_server::router(runtime.clone(), &token, addr);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(reef_server::serve(listener, router, None, async move {
        let _ = stopped.await;
    }));
    let result = measure(&runtime, &base, &token, &args).await;
    let _ = stop.send(());
    runtime.shutdown().await;
    server.await??;
    let report = result?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print(&report);
    }
    Ok(crate::exit::OK)
}

fn print(r: &Report) {
    println!(
        "overview: {} B of HTML + {} B of assets = {} B ({:.1} KB) transferred, uncompressed",
        r.overview_html_bytes,
        r.assets_bytes,
        r.overview_total_bytes,
        r.overview_total_bytes as f64 / 1000.0
    );
    println!(
        "change -> fragment on the live stream over {} changes: p50 {:.2} ms, p99 {:.2} ms \
         (the change itself: p50 {:.2} ms)",
        r.events, r.event_to_stream_p50_ms, r.event_to_stream_p99_ms, r.change_itself_p50_ms
    );
    println!(
        "agent page with {} transcript messages: p50 {:.1} ms, max {:.1} ms \
         (empty transcript: p50 {:.1} ms; a page back: p50 {:.1} ms)",
        r.transcript_messages,
        r.long_agent_page_p50_ms,
        r.long_agent_page_max_ms,
        r.empty_agent_page_p50_ms,
        r.page_back_p50_ms
    );
    println!(
        "RSS: {} KiB, {} KiB with {} dashboards open (overview and agent page each) (+{} KiB)",
        r.rss_before_kib,
        r.rss_with_dashboards_kib,
        r.dashboards,
        r.rss_with_dashboards_kib.saturating_sub(r.rss_before_kib)
    );
}

async fn measure(
    rt: &Runtime,
    base: &str,
    token: &str,
    args: &BenchDashboardArgs,
) -> anyhow::Result<Report> {
    let (events, messages, loads, dashboards) = (
        args.events as usize,
        args.messages as usize,
        args.loads as usize,
        args.dashboards as usize,
    );
    let http = reef_llm::http_client_without_redirects(None)?;
    let cookie = sign_in(&http, base, token).await?;
    let get = |path: String| {
        http.get(format!("{base}{path}"))
            .header("cookie", &cookie)
            .send()
    };

    // Weight: the overview and everything it loads.
    let html = get("/".to_owned())
        .await?
        .error_for_status()?
        .text()
        .await?;
    let mut assets_bytes = 0;
    for asset in html.split('"').filter(|s| s.starts_with("/assets/")) {
        assets_bytes += get(asset.to_owned())
            .await?
            .error_for_status()?
            .bytes()
            .await?
            .len();
    }

    // Live: a pause or resume in the daemon, until the overview's stream carries the row.
    for name in ["bench", "long"] {
        rt.spawn_agent(
            SpawnRequest {
                name: name.into(),
                template: "worker".into(),
                ..SpawnRequest::default()
            },
            None,
        )
        .await?;
    }
    let mut live = Stream::open(&http, base, "/live", &cookie).await?;
    live.until(|e| e.name == "agents").await?;
    let mut latency = Vec::new();
    let mut itself = Vec::new();
    for i in 0..events {
        let (want, started) = if i % 2 == 0 {
            let started = Instant::now();
            rt.pause_agent("bench", "bench").await?;
            ("state-paused", started)
        } else {
            let started = Instant::now();
            rt.resume_agent("bench", "bench").await?;
            ("state-running", started)
        };
        itself.push(started.elapsed());
        live.until(|e| e.name == "agents" && e.data.contains(want))
            .await?;
        latency.push(started.elapsed());
    }
    drop(live);

    // A long transcript: its page, an empty one's, and a page back.
    let long = rt.get_agent("long").await?;
    let session = SessionId::new();
    let store = rt.store();
    store
        .create_session(reef_store::NewSession {
            id: session.clone(),
            agent: Some("long".into()),
            workspace: long.workspace.clone(),
            provider: "bench".into(),
            model: "bench".into(),
        })
        .await?;
    for i in 0..messages {
        let message = if i % 2 == 0 {
            Message::user(format!("[message #{i} from operator] step {i}: what next?"))
        } else {
            Message::Assistant {
                content: format!("Step {i} is done; the output was {} lines.", i % 97),
                tool_calls: Vec::new(),
            }
        };
        store.append_message(&session, &message).await?;
    }
    store.set_agent_session(&long.id, &session).await?;
    let mut long_page = Vec::new();
    let mut empty_page = Vec::new();
    let mut back = Vec::new();
    for _ in 0..loads {
        long_page.push(timed(get("/agents/long".to_owned())).await?);
        empty_page.push(timed(get("/agents/bench".to_owned())).await?);
        let middle = messages / 2;
        back.push(timed(get(format!("/agents/long/transcript?before={middle}"))).await?);
    }

    // Memory with dashboards open: each an overview and an agent page, streams read.
    let rss_before_kib = rss_kib()?;
    let mut open = Vec::new();
    for _ in 0..dashboards {
        let mut overview = Stream::open(&http, base, "/live", &cookie).await?;
        overview.until(|e| e.name == "agents").await?;
        let mut agent = Stream::open(&http, base, "/agents/bench/live", &cookie).await?;
        agent.until(|e| e.name == "head").await?;
        get("/".to_owned()).await?.error_for_status()?;
        get("/agents/long".to_owned()).await?.error_for_status()?;
        open.push((overview, agent));
    }
    let rss_with_dashboards_kib = rss_kib()?;
    drop(open);

    Ok(Report {
        overview_html_bytes: html.len(),
        assets_bytes,
        overview_total_bytes: html.len() + assets_bytes,
        events,
        event_to_stream_p50_ms: ms(percentile(&mut latency, 0.50)),
        event_to_stream_p99_ms: ms(percentile(&mut latency, 0.99)),
        change_itself_p50_ms: ms(percentile(&mut itself, 0.50)),
        transcript_messages: messages,
        long_agent_page_p50_ms: ms(percentile(&mut long_page, 0.50)),
        long_agent_page_max_ms: ms(percentile(&mut long_page, 1.0)),
        empty_agent_page_p50_ms: ms(percentile(&mut empty_page, 0.50)),
        page_back_p50_ms: ms(percentile(&mut back, 0.50)),
        rss_before_kib,
        rss_with_dashboards_kib,
        dashboards,
    })
}

/// A session cookie, through a one-time link as `reef dashboard` makes.
async fn sign_in(http: &reqwest::Client, base: &str, token: &str) -> anyhow::Result<String> {
    let link: serde_json::Value = http
        .post(format!("{base}/v1/dashboard/links"))
        .bearer_auth(token)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let url = link["url"].as_str().context("no link in the answer")?;
    let used = http.post(url).header("origin", base).send().await?;
    let cookie = used
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .context("the login link gave no session")?;
    Ok(cookie.to_owned())
}

async fn timed(
    request: impl std::future::Future<Output = reqwest::Result<reqwest::Response>>,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let response = request.await?.error_for_status()?;
    response.bytes().await?;
    Ok(started.elapsed())
}

/// One SSE event as read.
struct SseEvent {
    name: String,
    data: String,
}

/// A page's live stream, read event by event.
struct Stream {
    body: futures::stream::BoxStream<'static, reqwest::Result<Vec<u8>>>,
    buffer: String,
}

impl Stream {
    async fn open(
        http: &reqwest::Client,
        base: &str,
        path: &str,
        cookie: &str,
    ) -> anyhow::Result<Stream> {
        let response = http
            .get(format!("{base}{path}"))
            .header("cookie", cookie)
            .send()
            .await?
            .error_for_status()?;
        Ok(Stream {
            body: response
                .bytes_stream()
                .map(|r| r.map(|b| b.to_vec()))
                .boxed(),
            buffer: String::new(),
        })
    }

    /// Reads events until one satisfies `want` (at most 30 s).
    async fn until(&mut self, want: impl Fn(&SseEvent) -> bool) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut event = SseEvent {
                    name: String::new(),
                    data: String::new(),
                };
                for line in block.lines() {
                    if let Some(name) = line.strip_prefix("event: ") {
                        name.clone_into(&mut event.name);
                    } else if let Some(data) = line.strip_prefix("data: ") {
                        event.data.push_str(data);
                    }
                }
                if want(&event) {
                    return Ok(());
                }
            }
            match tokio::time::timeout_at(deadline, self.body.next()).await {
                Ok(Some(chunk)) => self.buffer.push_str(&String::from_utf8_lossy(&chunk?)),
                Ok(None) => bail!("the live stream ended"),
                Err(_) => bail!("the live stream sent nothing expected for 30 s"),
            }
        }
    }
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let last = samples.len().saturating_sub(1);
    samples
        .get(((last as f64) * p).round() as usize)
        .copied()
        .unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// This process's resident memory.
fn rss_kib() -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS in /proc/self/status")
}
