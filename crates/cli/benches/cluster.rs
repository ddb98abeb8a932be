//! Cluster mode's numbers in one run, on this machine: messages per second through inboxes,
//! turns and the store with 1, 2 and 3 `reef serve --cluster` nodes (PostgreSQL and NATS from
//! `scripts/engines`) next to the embedded SQLite daemon (the baseline, same model, same load),
//! and the failover time over repeated SIGKILLs: from the kill until every agent of the killed
//! node holds a lease on another node.
//!
//! Run: `cargo bench -p reef-cli --bench cluster` (`-- --kills N --messages N` to change the
//! load).
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark binary prints its report and fails loudly"
)]

use reef_test_support::{Engines, MockLlm, MockReply, TestHome};
use serde_json::{Value, json};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const AGENTS: usize = 50;
const SENDERS: usize = 8;

/// A `reef serve` process and a client of its API.
struct Node {
    child: Child,
    base: String,
    token: String,
    http: reqwest::Client,
}

impl Node {
    async fn start(home: &TestHome, cluster: bool) -> Node {
        match Node::try_start(home, cluster).await {
            Ok(node) => node,
            Err(log) => panic!("reef serve did not start:\n{log}"),
        }
    }

    /// Starts `reef serve`; its log when it exits before serving.
    async fn try_start(home: &TestHome, cluster: bool) -> Result<Node, String> {
        let addr_file = home.reef_home().join("reef.addr");
        let _ = std::fs::remove_file(&addr_file);
        let mut command = Command::new(env!("CARGO_BIN_EXE_reef"));
        command.arg("serve");
        if cluster {
            command.arg("--cluster");
        }
        let mut child = command
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("REEF_HOME", home.reef_home())
            .current_dir(home.workspace())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(home.path().join("serve.log")).unwrap())
            .spawn()
            .unwrap();
        let addr = loop {
            if let Ok(text) = std::fs::read_to_string(&addr_file)
                && text.ends_with('\n')
            {
                break text.trim().to_owned();
            }
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(home.path().join("serve.log")).unwrap();
                return Err(format!("exited ({status}):\n{log}"));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let token = std::fs::read_to_string(home.reef_home().join("api-token")).unwrap();
        Ok(Node {
            child,
            base: format!("http://{addr}"),
            token: token.trim().to_owned(),
            http: reef_llm::http_client(Some(Duration::from_secs(60))).unwrap(),
        })
    }

    fn client(&self) -> Client {
        Client {
            base: self.base.clone(),
            token: self.token.clone(),
            http: self.http.clone(),
        }
    }

    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    fn stop(mut self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        self.child.wait().unwrap();
    }
}

#[derive(Clone)]
struct Client {
    base: String,
    token: String,
    http: reqwest::Client,
}

impl Client {
    async fn post(&self, path: &str, body: &Value) -> Option<Value> {
        let resp = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .await
            .ok()?;
        resp.status().is_success().then_some(())?;
        resp.json().await.ok()
    }

    /// `reef_messages_queued` + `reef_turns_running` from `/metrics`.
    async fn open_messages(&self) -> u64 {
        let text = self
            .http
            .get(format!("{}/metrics", self.base))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .filter(|l| {
                l.starts_with("reef_messages_queued ") || l.starts_with("reef_turns_running ")
            })
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
            .map(|v| v as u64)
            .sum()
    }
}

/// A node's home; `cluster` is `Some((database_url, nats_url, name, lease_secs))`.
fn home(mock: &MockLlm, cluster: Option<(&str, &str, &str, u64)>) -> TestHome {
    let home = TestHome::new();
    let mut config = format!(
        "[providers.main]\nbase_url = \"{}\"\nmodel = \"mock-model\"\nstream = false\n\
         max_retries = 0\n\n[daemon]\nlisten = \"127.0.0.1:0\"\nmax_concurrent_turns = 16\n\n\
         [sandbox]\nrequired = true\n",
        mock.base_url()
    );
    if let Some((database, nats, name, lease)) = cluster {
        config.push_str(&format!(
            "\n[cluster]\ndatabase_url = \"{database}\"\nnats_url = \"{nats}\"\n\
             node_name = \"{name}\"\nlease_secs = {lease}\n"
        ));
    }
    home.write_config(&config);
    home
}

fn copy_keys(from: &TestHome, to: &TestHome) {
    for key in ["audit.key", "cap.key"] {
        std::fs::copy(from.reef_home().join(key), to.reef_home().join(key)).unwrap();
    }
}

/// A database of its own on the engines' PostgreSQL, for one measurement.
async fn fresh_database(engines: &Engines, name: &str) -> String {
    let (client, connection) =
        tokio_postgres::connect(engines.database_url(), tokio_postgres::NoTls)
            .await
            .unwrap();
    tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    let base = engines.database_url();
    format!("{}/{name}", &base[..base.rfind('/').unwrap()])
}

/// Starts `n` nodes (or the SQLite daemon when `n` is 0), makes the agents, sends `messages`
/// through every node's API at once and returns messages per second until all are answered.
async fn throughput(engines: &Engines, mock: &MockLlm, n: usize, messages: usize) -> f64 {
    let database = if n > 0 {
        Some(fresh_database(engines, &format!("bench_{n}_{}", std::process::id())).await)
    } else {
        None
    };
    let names: Vec<String> = (1..=n.max(1)).map(|i| format!("b{i}")).collect();
    let homes: Vec<TestHome> = names
        .iter()
        .map(|name| {
            home(
                mock,
                database
                    .as_deref()
                    .map(|db| (db, engines.nats_url(), name.as_str(), 5)),
            )
        })
        .collect();
    let mut nodes = vec![Node::start(&homes[0], n > 0).await];
    for h in &homes[1..] {
        copy_keys(&homes[0], h);
        nodes.push(Node::start(h, true).await);
    }
    let clients: Vec<Client> = nodes.iter().map(Node::client).collect();
    for a in 0..AGENTS {
        clients[a % clients.len()]
            .post(
                "/v1/agents",
                &json!({"name": format!("w{a}"), "template": "worker"}),
            )
            .await
            .expect("agent made");
    }
    // Every agent placed (cluster) before the clock starts: the first message waits for none.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let started = Instant::now();
    let mut senders = Vec::new();
    for s in 0..SENDERS {
        let clients = clients.clone();
        senders.push(tokio::spawn(async move {
            for i in (s..messages).step_by(SENDERS) {
                let job = format!("job-{i}");
                let body = json!({"text": job, "key": job});
                clients[i % clients.len()]
                    .post(&format!("/v1/agents/w{}/messages", i % AGENTS), &body)
                    .await
                    .expect("message acknowledged");
            }
        }));
    }
    for sender in senders {
        sender.await.unwrap();
    }
    while clients[0].open_messages().await > 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = started.elapsed();
    for node in nodes {
        node.stop();
    }
    messages as f64 / elapsed.as_secs_f64()
}

/// Kills the node holding the most agents `kills` times (restarting it after each failover)
/// and returns each failover time: from the SIGKILL until every agent it held has a lease on
/// another node.
async fn failovers(engines: &Engines, mock: &MockLlm, kills: usize, lease: u64) -> Vec<Duration> {
    let database = fresh_database(engines, &format!("failover_{}", std::process::id())).await;
    let names = ["f1", "f2", "f3"];
    let homes: Vec<TestHome> = names
        .iter()
        .map(|name| home(mock, Some((&database, engines.nats_url(), name, lease))))
        .collect();
    let mut nodes = vec![Some(Node::start(&homes[0], true).await)];
    for h in &homes[1..] {
        copy_keys(&homes[0], h);
        nodes.push(Some(Node::start(h, true).await));
    }
    let client = nodes[0].as_ref().unwrap().client();
    for a in 0..AGENTS {
        client
            .post(
                "/v1/agents",
                &json!({"name": format!("w{a}"), "template": "worker"}),
            )
            .await
            .expect("agent made");
    }
    let pg = reef_store::PgStore::connect(&database, None).await.unwrap();
    let leases = || async {
        pg.agent_leases()
            .await
            .unwrap()
            .into_iter()
            .filter(|l| !l.expired)
            .map(|l| (l.agent, l.node))
            .collect::<Vec<_>>()
    };
    let mut times = Vec::new();
    for k in 0..kills {
        // Settled: every agent placed, spread over the three nodes.
        loop {
            let placed = leases().await;
            if placed.len() == AGENTS
                && names
                    .iter()
                    .all(|n| placed.iter().any(|(_, node)| node == n))
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let victim = k % names.len();
        let held: Vec<_> = leases()
            .await
            .into_iter()
            .filter(|(_, node)| node == names[victim])
            .map(|(agent, _)| agent)
            .collect();
        let killed = Instant::now();
        nodes[victim].take().unwrap().kill();
        loop {
            let placed = leases().await;
            if held.iter().all(|a| {
                placed
                    .iter()
                    .any(|(agent, node)| agent == a && node != names[victim])
            }) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        times.push(killed.elapsed());
        // Back once its name is free (its lease on the name lapsed).
        loop {
            match Node::try_start(&homes[victim], true).await {
                Ok(node) => {
                    nodes[victim] = Some(node);
                    break;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
    for node in nodes.into_iter().flatten() {
        node.stop();
    }
    times
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let messages = arg("--messages", 2000);
    let kills = arg("--kills", 10);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let engines = Engines::start();
        let mock = MockLlm::start_responder_blocking(Arc::new(|_: &reef_test_support::RecordedRequest| {
            MockReply::text("done")
        }));
        println!("cluster bench: {AGENTS} agents, {messages} messages, instant mock model");
        let sqlite = throughput(&engines, &mock, 0, messages).await;
        println!("  SQLite daemon (baseline)   {sqlite:>8.1} messages/s");
        for n in 1..=3 {
            let rate = throughput(&engines, &mock, n, messages).await;
            println!(
                "  {n} cluster node(s)         {rate:>8.1} messages/s  ({:.2}x the baseline)",
                rate / sqlite
            );
        }
        let lease = 5;
        let mut times = failovers(&engines, &mock, kills, lease).await;
        times.sort();
        let secs: Vec<f64> = times.iter().map(Duration::as_secs_f64).collect();
        let pick = |q: f64| secs[((secs.len() - 1) as f64 * q).round() as usize];
        println!(
            "  failover over {kills} kills (lease {lease} s): min {:.2} s, p50 {:.2} s, p90 {:.2} s, max {:.2} s",
            secs[0],
            pick(0.5),
            pick(0.9),
            secs[secs.len() - 1]
        );
        println!("  every failover: {}", secs.iter().map(|s| format!("{s:.2}")).collect::<Vec<_>>().join(" "));
    });
}
