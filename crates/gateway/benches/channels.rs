//! The channels' numbers against a real ngircd on loopback: how long the overseer takes to
//! answer `!list` with 100 agents on IRC (p50, p99, to the first and to the last line of the
//! answer), against a PING round trip to the same server as the baseline; and how many lines
//! per second one agent's nick sustains under flood control, against the configured ceiling.
//! The overseer's flood control is set loose here (10 lines, then one per 100 ms) so the
//! latency is reef's; with the defaults (5, then one per 2 s) a burst of commands is answered
//! at one line per 2 s once the bucket is empty.
//!
//! Run: `cargo bench -p reef-gateway --bench channels` (needs ngircd: `apt-get install ngircd`).
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark binary prints its report and fails loudly"
)]

use reef_channels::irc::{Credentials, IrcChannel};
use reef_config::IrcConfig;
use reef_core::{Channel, Conversation, Outbound, Speaker};
use reef_gateway::Gateway;
use reef_runtime::{Runtime, RuntimeOptions, SpawnRequest, Templates};
use reef_test_support::{IrcClient, Ngircd, TestHome};
use std::time::{Duration, Instant};

const AGENTS: usize = 100;
const ROUNDS: usize = 30;
/// Between two requests: ngircd holds back a client that sends faster than one command a
/// second (its penalty), and the overseer's flood bucket refills.
const PAUSE: Duration = Duration::from_millis(1100);
const FLOOD_LINES: usize = 60;
const FLOOD_BURST: u32 = 5;
const FLOOD_INTERVAL_MS: u64 = 200;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn report(name: &str, mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let (p50, p99) = (
        ms(percentile(&samples, 0.5)),
        ms(percentile(&samples, 0.99)),
    );
    println!(
        "{name:<32} p50 {p50:>8.2} ms   p99 {p99:>8.2} ms   (n={})",
        samples.len()
    );
    (p50, p99)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let ircd = Ngircd::start();
    let home = TestHome::new();
    home.write_config(&format!(
        "[providers.none]\nbase_url = \"http://127.0.0.1:9\"\nmodel = \"none\"\n\n\
         [channels.irc]\ntype = \"irc\"\nserver = \"{}\"\nflood_burst = 10\nflood_interval_ms = 100\n\n\
         [operators]\nirc = [\"alice!*@*\"]\n",
        ircd.address()
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
    let gateway = Gateway::start(&runtime).await;
    let mut alice = IrcClient::connect(ircd.port(), "alice").await;
    alice.join("#control").await;
    alice.join("#agents").await;

    let t = Instant::now();
    for i in 0..AGENTS {
        spawn(&runtime, &format!("a{i}")).await;
    }
    let last = format!("a{}", AGENTS - 1);
    alice
        .expect(|l| l.command == "JOIN" && l.nick.as_deref() == Some(last.as_str()))
        .await;
    println!(
        "{AGENTS} agents spawned and on IRC in {:.0} ms",
        ms(t.elapsed())
    );

    // Baseline: a PING round trip from the operator's client to the server.
    let mut ping = Vec::with_capacity(ROUNDS);
    for i in 0..ROUNDS {
        tokio::time::sleep(PAUSE).await;
        let token = format!("b{i}");
        let t = Instant::now();
        alice.send(&format!("PING :{token}")).await;
        alice
            .expect(|l| l.command == "PONG" && l.params.last() == Some(&token))
            .await;
        ping.push(t.elapsed());
    }
    let mut first = Vec::with_capacity(ROUNDS);
    let mut whole = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        tokio::time::sleep(PAUSE).await;
        let t = Instant::now();
        alice.say("#control", "!list").await;
        alice
            .expect(|l| {
                l.nick.as_deref() == Some("overseer")
                    && l.privmsg()
                        .is_some_and(|(_, text)| text == format!("{AGENTS} agents"))
            })
            .await;
        first.push(t.elapsed());
        alice
            .expect(|l| {
                l.nick.as_deref() == Some("overseer")
                    && l.privmsg()
                        .is_some_and(|(_, text)| text.ends_with(&format!(" {last}")))
            })
            .await;
        whole.push(t.elapsed());
    }
    println!();
    let (ping50, ping99) = report("baseline: PING round trip", ping);
    let (first50, first99) = report("!list, first line", first);
    let (whole50, whole99) = report("!list, whole answer", whole);
    println!(
        "ratio to the baseline: first line p50 {:.1}x p99 {:.1}x; whole answer p50 {:.1}x p99 {:.1}x",
        first50 / ping50,
        first99 / ping99,
        whole50 / ping50,
        whole99 / ping99
    );
    gateway.shutdown().await;

    // Flood control: one agent nick says FLOOD_LINES lines; the observer times them.
    let mut bob = IrcClient::connect(ircd.port(), "bob").await;
    bob.join("#flood").await;
    let config = IrcConfig {
        host: "127.0.0.1".into(),
        port: ircd.port(),
        tls: false,
        nick: "flood-overseer".into(),
        control: "#flood-control".into(),
        room: "#flood".into(),
        sasl_secret: None,
        nickserv_secret: None,
        flood_burst: FLOOD_BURST,
        flood_interval_ms: FLOOD_INTERVAL_MS,
    };
    let mut channel = IrcChannel::new(config, vec![], Credentials::default(), None).unwrap();
    channel
        .connect(&[("talker".to_owned(), vec!["#flood".to_owned()])])
        .await
        .unwrap();
    bob.expect(|l| l.command == "JOIN" && l.nick.as_deref() == Some("talker"))
        .await;
    // The JOIN took a token; wait for the bucket to fill again.
    tokio::time::sleep(Duration::from_millis(
        FLOOD_INTERVAL_MS * u64::from(FLOOD_BURST) + 100,
    ))
    .await;
    let text: Vec<String> = (0..FLOOD_LINES).map(|i| format!("line {i}")).collect();
    let t = Instant::now();
    channel
        .send(Outbound::Say {
            from: Speaker::Agent("talker".into()),
            to: Conversation::Room("#flood".into()),
            text: text.join("\n"),
        })
        .await
        .unwrap();
    let mut arrivals = Vec::with_capacity(FLOOD_LINES);
    for i in 0..FLOOD_LINES {
        let want = format!("line {i}");
        bob.expect(|l| l.privmsg().is_some_and(|(_, text)| text == want))
            .await;
        arrivals.push(t.elapsed());
    }
    let burst_done = arrivals[FLOOD_BURST as usize - 1];
    let paced = FLOOD_LINES - FLOOD_BURST as usize;
    let rate = paced as f64 / (arrivals[FLOOD_LINES - 1] - burst_done).as_secs_f64();
    let ceiling = 1000.0 / FLOOD_INTERVAL_MS as f64;
    println!();
    println!(
        "flood control (burst {FLOOD_BURST}, one line per {FLOOD_INTERVAL_MS} ms): the burst of \
         {FLOOD_BURST} lines in {:.1} ms, then {rate:.2} lines/s over {paced} lines \
         (ceiling {ceiling:.2}/s, ratio {:.3}); {FLOOD_LINES} lines in {:.2} s",
        ms(burst_done),
        rate / ceiling,
        arrivals[FLOOD_LINES - 1].as_secs_f64()
    );
    channel.close("bench done").await;
    runtime.shutdown().await;
}

async fn spawn(runtime: &Runtime, name: &str) {
    runtime
        .spawn_agent(
            SpawnRequest {
                name: name.to_owned(),
                template: "quick".into(),
                ..SpawnRequest::default()
            },
            None,
        )
        .await
        .unwrap();
}
