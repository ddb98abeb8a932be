//! Round-trip latency of one message on the QUIC gateway (a `message` frame out, its
//! `accepted` frame back, on an open conversation) next to the same request over the HTTP
//! API (`POST /v1/agents/NAME/messages` on a kept-alive connection, 202 back): both check
//! the token and put the message in the agent's inbox. The agent is paused, so no turn runs
//! and only the doors are measured. The two are interleaved in rounds, so drift on the
//! machine falls on both.
//!
//! Run with `cargo bench -p reef-server --bench quic`.
#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "benchmark set-up")]

use reef_quic::{Client, ServerFrame};
use reef_runtime::{Runtime, RuntimeOptions, SpawnRequest, Templates};
use reef_server::quic::QuicGateway;
use reef_test_support::{MockLlm, MockReply, TestHome};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TOKEN: &str = "0123456789abcdef0123456789abcdef";
const ROUNDS: usize = 10;
const PER_ROUND: usize = 200;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mock = MockLlm::start_responder(Arc::new(|_| MockReply::text("ok"))).await;
    let home = TestHome::new();
    home.write_config(&format!(
        "[providers.mock]\nbase_url = \"{}\"\nmodel = \"m\"\nstream = false\n\n\
         [daemon]\nrate_limit = 0\n\n[gateway.quic]\nlisten = \"127.0.0.1:0\"\n",
        mock.base_url()
    ));
    let (runtime, _) = Runtime::start(RuntimeOptions {
        config: home.load_config(),
        templates: Templates::builtin().unwrap(),
        helper: None,
        model_override: None,
        clock: None,
    })
    .await
    .unwrap();
    let spawn = SpawnRequest {
        name: "ada".into(),
        template: "worker".into(),
        ..SpawnRequest::default()
    };
    runtime.spawn_agent(spawn, None).await.unwrap();
    runtime.pause_agent("ada", "benchmark").await.unwrap();

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = reef_server::router(runtime.clone(), TOKEN, addr);
    tokio::spawn(reef_server::serve(
        listener,
        router,
        None,
        std::future::pending(),
    ));
    let gateway = QuicGateway::bind(&runtime, TOKEN, &home.reef_home(), &[])
        .unwrap()
        .unwrap();
    let (quic_addr, fingerprint) = (gateway.addr.to_string(), gateway.fingerprint.clone());
    tokio::spawn(gateway.serve(std::future::pending()));

    let http = reef_llm::http_client(Some(Duration::from_secs(30))).unwrap();
    let url = format!("http://{addr}/v1/agents/ada/messages");
    let client = Client::connect(&quic_addr, &fingerprint).await.unwrap();
    let mut conversation = client.open(TOKEN, "ada").await.unwrap();

    let (mut over_http, mut over_quic) = (Vec::new(), Vec::new());
    let mut n = 0u64;
    // A warm-up round of each, not counted.
    for round in 0..=ROUNDS {
        let mut http_round = Vec::new();
        for _ in 0..PER_ROUND {
            n += 1;
            let t = Instant::now();
            let resp = http
                .post(&url)
                .bearer_auth(TOKEN)
                .json(&serde_json::json!({"text": format!("m{n}")}))
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 202);
            resp.bytes().await.unwrap();
            http_round.push(t.elapsed());
        }
        let mut quic_round = Vec::new();
        for _ in 0..PER_ROUND {
            n += 1;
            let t = Instant::now();
            conversation.send(&format!("m{n}"), None).await.unwrap();
            let frame = conversation.next().await.unwrap();
            assert!(
                matches!(frame, Some(ServerFrame::Accepted { .. })),
                "{frame:?}"
            );
            quic_round.push(t.elapsed());
        }
        if round > 0 {
            over_http.extend(http_round);
            over_quic.extend(quic_round);
        }
    }
    over_http.sort();
    over_quic.sort();
    let report = |name: &str, sorted: &[Duration]| {
        println!(
            "{name:<48} p50 {:>7.1} µs  p99 {:>7.1} µs  ({} requests)",
            micros(percentile(sorted, 0.5)),
            micros(percentile(sorted, 0.99)),
            sorted.len()
        );
    };
    report("HTTP API: POST /v1/agents/ada/messages → 202", &over_http);
    report("QUIC gateway: message frame → accepted frame", &over_quic);
    println!(
        "ratio QUIC / HTTP: p50 {:.2}, p99 {:.2}",
        micros(percentile(&over_quic, 0.5)) / micros(percentile(&over_http, 0.5)),
        micros(percentile(&over_quic, 0.99)) / micros(percentile(&over_http, 0.99))
    );
    conversation.finish();
    client.close().await;
}
