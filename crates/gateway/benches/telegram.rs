//! Telegram's number: messages per second from the fake Bot API through the gateway to an
//! agent whose model answers at once, and back to the fake, against the baseline of the same
//! number of messages put straight into the agent's inbox (the same turns, no channel). The
//! ratio is what the channel costs: the long poll, routing, the inbox key and cursor writes,
//! rendering and sending the answer.
//!
//! Run: `cargo bench -p reef-gateway --bench telegram`.
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark binary prints its report and fails loudly"
)]

use reef_gateway::Gateway;
use reef_runtime::{Runtime, RuntimeOptions, Sender, SpawnRequest, Templates};
use reef_test_support::telegram::FakeTelegram;
use reef_test_support::{MockLlm, MockReply, TestHome};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MESSAGES: usize = 200;
const TOKEN: &str = "1:bench";
const USER: i64 = 1001;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let fake = FakeTelegram::start(TOKEN).await;
    let mock = MockLlm::start_responder(Arc::new(|_| MockReply::text("ok"))).await;
    let home = TestHome::new();
    let token_file = home.path().join("token");
    std::fs::write(&token_file, TOKEN).unwrap();
    home.write_config(&format!(
        "[providers.mock]\nbase_url = \"{}\"\nmodel = \"m\"\nstream = false\nmax_retries = 0\n\n\
         [daemon]\nmax_concurrent_turns = 4\n\n\
         [secrets.TG_TOKEN]\nfile = \"{}\"\n\n\
         [channels.tg]\ntype = \"telegram\"\ntoken_secret = \"TG_TOKEN\"\napi_url = \"{}\"\n\
         route = \"agent:bench\"\npoll_timeout_secs = 5\n\n[operators]\ntg = [{USER}]\n",
        mock.base_url(),
        token_file.display(),
        fake.url()
    ));
    // Two agents alike, each with a fresh history, so neither run pays for the other's
    // context; a lifetime budget that holds a run of turns whose history keeps growing.
    let templates = home.path().join("templates");
    std::fs::create_dir_all(&templates).unwrap();
    std::fs::write(
        templates.join("bench.toml"),
        "description = \"benchmark agent\"\npersona = \"Answer.\"\n\n\
         [capabilities]\ntools = [\"list_dir\"]\n\n[budget]\ntokens = 100000000\nrounds = 2\n",
    )
    .unwrap();
    let (runtime, _) = Runtime::start(RuntimeOptions {
        config: home.load_config(),
        templates: Templates::load(&templates).unwrap(),
        helper: None,
        model_override: None,
        clock: None,
    })
    .await
    .unwrap();
    for name in ["direct", "bench"] {
        runtime
            .spawn_agent(
                SpawnRequest {
                    name: name.into(),
                    template: "bench".into(),
                    ..SpawnRequest::default()
                },
                None,
            )
            .await
            .unwrap();
    }

    // Baseline: the same turns, the messages put in the inbox directly.
    let from = runtime.store().last_event_seq().await.unwrap();
    let t = Instant::now();
    for i in 0..MESSAGES {
        runtime
            .send_message(
                "direct",
                Sender::Channel("bench"),
                &format!("message {i}"),
                &format!("direct-{i}"),
                None,
            )
            .await
            .unwrap();
    }
    let direct_turns = wait_turns(&runtime, from, MESSAGES).await;
    let direct = t.elapsed();

    let gateway = Gateway::start(&runtime).await;
    wait_up(&runtime).await;
    let up_from = runtime.store().last_event_seq().await.unwrap();
    let t = Instant::now();
    for i in 0..MESSAGES {
        fake.push_text(USER, (USER, "op"), &format!("message {i}"));
    }
    // Every message handled (a turn may take several that arrived together), and every
    // turn's answer delivered to the fake.
    let turns = wait_turns(&runtime, up_from, MESSAGES).await;
    while fake.sent().len() < turns {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let through = t.elapsed();
    gateway.shutdown().await;

    let rate = |d: Duration| MESSAGES as f64 / d.as_secs_f64();
    println!(
        "baseline: {MESSAGES} messages into the inbox, answered      {:>8.1} msg/s ({:.0} ms, {direct_turns} turns)",
        rate(direct),
        direct.as_secs_f64() * 1000.0
    );
    println!(
        "telegram: {MESSAGES} messages from the fake Bot API, answered {:>8.1} msg/s ({:.0} ms, {turns} turns)",
        rate(through),
        through.as_secs_f64() * 1000.0
    );
    println!(
        "ratio (telegram / baseline throughput): {:.2}",
        rate(through) / rate(direct)
    );
}

/// Waits until turns after event `after` have handled `n` messages; returns how many turns.
async fn wait_turns(runtime: &Runtime, mut after: u64, n: usize) -> usize {
    let (mut handled, mut turns) = (0, 0);
    while handled < n {
        let page = runtime
            .store()
            .events_after(after, None, 1000)
            .await
            .unwrap();
        for event in &page {
            after = event.seq;
            if event.kind == "turn.ended" {
                turns += 1;
                handled += event.data["inbox_ids"].as_array().map_or(0, Vec::len);
            }
        }
        if page.is_empty() {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    turns
}

async fn wait_up(runtime: &Runtime) {
    while !runtime
        .channels()
        .iter()
        .any(|c| c.name == "tg" && c.state == reef_runtime::ChannelState::Up)
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
