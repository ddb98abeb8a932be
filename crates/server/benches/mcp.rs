//! Requests per second of the daemon's `/mcp` for `list_agents` (a `tools/call` through the
//! official SDK's streamable HTTP transport, bearer token and Host check included), next to
//! `GET /v1/agents` of the REST API answering the same from the same runtime (the baseline),
//! with 20 agents and 8 concurrent clients, each for 3 s.
//!
//! Run with `cargo bench -p reef-server --bench mcp`.
#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "benchmark set-up")]

use reef_mcp::{McpHost, RemoteHost};
use reef_runtime::{HelperCommand, Runtime, RuntimeOptions, SpawnRequest, Templates};
use reef_test_support::{MockLlm, MockReply, TestHome, sandbox_helper};
use serde_json::Map;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const TOKEN: &str = "0123456789abcdef0123456789abcdef";
const CLIENTS: usize = 8;
const AGENTS: usize = 20;
const RUN: Duration = Duration::from_secs(3);

/// Runs `request` from `CLIENTS` tasks for `RUN`; requests per second.
async fn rate<F, Fut>(request: F) -> f64
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (request, done) = (request.clone(), done.clone());
            tokio::spawn(async move {
                while start.elapsed() < RUN {
                    request().await;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mock = MockLlm::start_responder(Arc::new(|_| MockReply::text("ok"))).await;
    let home = TestHome::new();
    home.write_config(&format!(
        "[providers.mock]\nbase_url = \"{}\"\nmodel = \"m\"\nstream = false\n",
        mock.base_url()
    ));
    let (runtime, _) = Runtime::start(RuntimeOptions {
        config: home.load_config(),
        templates: Templates::builtin().unwrap(),
        helper: Some(HelperCommand {
            program: sandbox_helper(),
            args: Vec::new(),
        }),
        model_override: None,
        clock: None,
    })
    .await
    .unwrap();
    for i in 0..AGENTS {
        let spawn = SpawnRequest {
            name: format!("a{i}"),
            template: "worker".into(),
            model: None,
            persona: None,
            task: None,
            ephemeral: false,
            budget: None,
        };
        runtime.spawn_agent(spawn, None).await.unwrap();
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = reef_server::router(runtime.clone(), TOKEN, addr);
    tokio::spawn(reef_server::serve(
        listener,
        router,
        None,
        std::future::pending(),
    ));

    // Plain http on loopback; reqwest still wants a TLS provider chosen.
    let _first = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let url = format!("http://{addr}/v1/agents");
    let rest = rate(move || {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let resp = http.get(&url).bearer_auth(TOKEN).send().await.unwrap();
            assert!(resp.status().is_success());
            resp.bytes().await.unwrap();
        }
    })
    .await;

    // One MCP session per client, as hosts keep theirs.
    let mut hosts = Vec::new();
    for _ in 0..CLIENTS {
        let host = RemoteHost::connect(
            &format!("http://{addr}/mcp"),
            TOKEN,
            Duration::from_secs(30),
        )
        .await
        .unwrap();
        hosts.push(Arc::new(host));
    }
    let next = Arc::new(AtomicU64::new(0));
    let mcp = rate(move || {
        let i = next.fetch_add(1, Ordering::Relaxed) as usize % CLIENTS;
        let host = hosts[i].clone();
        async move {
            let result = host.call("list_agents", Map::new()).await.unwrap();
            assert!(!result.is_error);
        }
    })
    .await;
    println!("list_agents with {AGENTS} agents, {CLIENTS} concurrent clients, {RUN:?} each:");
    println!("  GET /v1/agents (REST)        {rest:>8.0} requests/s   (baseline)");
    println!(
        "  /mcp tools/call list_agents  {mcp:>8.0} requests/s   ({:.2}x the baseline)",
        mcp / rest
    );
    runtime.shutdown().await;
}
