//! Cluster mode when an engine goes away under running nodes (real PostgreSQL and
//! nats-server, stopped and started again by `scripts/engines`): without NATS the nodes find
//! their work by polling the database and say so, and return to NATS when it is back; without
//! the database, a message is refused rather than acknowledged, the turn in flight and the
//! node carry on once it returns, and every job takes effect once; a routine made through
//! one node fires once per instant in the whole cluster, and goes on when that node dies.

use crate::cluster::{eventually, node_home, placement, status, turn_in_flight, two_nodes};
use crate::daemon::{Daemon, forwarded, forwarder};
use reef_test_support::{Engine, Engines, MockLlm, TestHome};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// Each node's name and its `bus` column in `reef cluster status`.
fn buses(home: &TestHome) -> Vec<(String, String)> {
    let mut buses: Vec<(String, String)> = status(home)["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["name"].as_str().unwrap().to_owned(),
                n["bus"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    buses.sort();
    buses
}

/// Makes the paused `sink` and the `workers` through `node`.
async fn agents(node: &Daemon, workers: &[&str]) {
    node.post("/v1/agents", json!({"name": "sink", "template": "worker"}))
        .await;
    node.post("/v1/agents/sink/pause", json!({})).await;
    for w in workers {
        node.post("/v1/agents", json!({"name": w, "template": "worker"}))
            .await;
    }
}

/// Sends `job-i` for each `i` to worker `i % workers.len()` through `node`, each acknowledged.
async fn send(node: &Daemon, workers: &[&str], jobs: std::ops::Range<usize>) -> Vec<String> {
    let mut sent = Vec::new();
    for i in jobs {
        let job = format!("job-{i}");
        let reply = node
            .post(
                &format!("/v1/agents/{}/messages", workers[i % workers.len()]),
                json!({"text": job, "key": job}),
            )
            .await;
        assert!(
            reply["inbox_id"].as_u64().is_some(),
            "acknowledged: {reply}"
        );
        sent.push(job);
    }
    sent
}

/// Waits until each worker's inbox holds `each` messages, all done.
async fn drained(node: &Daemon, workers: &[&str], each: usize) {
    for w in workers {
        node.wait(
            &format!("{w}'s {each} messages to be done"),
            &format!("/v1/agents/{w}/inbox"),
            |m| {
                m.as_array()
                    .is_some_and(|a| a.len() == each && a.iter().all(|m| m["status"] == "done"))
            },
        )
        .await;
    }
}

fn pair(a: &str, b: &str) -> Vec<(String, String)> {
    vec![("n1".into(), a.into()), ("n2".into(), b.into())]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_nats_nodes_poll_and_say_so_and_return_to_nats_when_it_is_back() {
    let engines = Engines::start();
    let mock = MockLlm::start_responder_blocking(Arc::new(forwarder(Duration::from_millis(20))));
    let (homes, [n1, n2]) = two_nodes(&mock, &engines, "").await;
    let workers = ["w1", "w2", "w3", "w4", "w5"];
    agents(&n1, &workers).await;
    eventually("the six agents to spread over both nodes", || {
        let placed = placement(&homes[0]);
        placed.len() == 6 && placed.iter().filter(|(_, n)| n == "n2").count() == 3
    })
    .await;
    assert_eq!(buses(&homes[0]), pair("nats", "nats"));

    engines.stop_one(Engine::Nats);
    eventually("both nodes to say they poll", || {
        buses(&homes[0]) == pair("polling", "polling")
    })
    .await;
    // Jobs for every worker through n1, those n2 runs included: nothing tells n2 of them but
    // its own reading of the database.
    let mut jobs = send(&n1, &workers, 0..10).await;
    drained(&n1, &workers, 2).await;
    // Each node's bus reads the whole history, n2's by polling alone.
    eventually("both buses to have read the history", || {
        status(&homes[1])["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["bus_lag"] == 0)
    })
    .await;

    engines.start_again();
    eventually("both nodes back on NATS", || {
        buses(&homes[1]) == pair("nats", "nats")
    })
    .await;
    jobs.extend(send(&n2, &workers, 10..15).await);
    drained(&n2, &workers, 3).await;
    jobs.sort();
    assert_eq!(forwarded(&n1).await, jobs, "each job forwarded once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_the_database_is_away_nothing_is_acknowledged_and_the_turn_goes_on_after() {
    let engines = Engines::start();
    // The answer after the forward takes long enough for the database to go away under it.
    let mock = MockLlm::start_responder_blocking(Arc::new(forwarder(Duration::from_secs(2))));
    let home = node_home(&mock, &engines, "n1");
    let node = Daemon::start_with(&home, &["--cluster"]).await;
    agents(&node, &["w1"]).await;
    eventually("n1 to hold both agents", || placement(&home).len() == 2).await;

    let mut jobs = send(&node, &["w1"], 0..1).await;
    let (agent, on) = turn_in_flight(&node, &home).await;
    assert_eq!(on, "n1");
    engines.stop_one(Engine::Postgres);
    // Not acknowledged while the database is away: the client knows to send it again.
    let refused = node
        .http()
        .post(format!("{}/v1/agents/w1/messages", node.base()))
        .bearer_auth(node.token())
        .json(&json!({"text": "job-lost", "key": "job-lost"}))
        .send()
        .await
        .unwrap();
    let code = refused.status();
    let retry_after = refused.headers().get("retry-after").cloned();
    let body = refused.text().await.unwrap();
    assert_eq!(code, reqwest::StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(retry_after.unwrap(), "1");
    assert!(
        body.contains("PostgreSQL"),
        "the error names the database: {body}"
    );
    // Away for longer than the two-second lease.
    tokio::time::sleep(Duration::from_secs(4)).await;
    engines.start_again();

    drained(&node, &["w1"], 1).await;
    jobs.extend(send(&node, &["w1"], 1..3).await);
    drained(&node, &["w1"], 3).await;
    assert_eq!(forwarded(&node).await, jobs, "each job forwarded once");
    let report = status(&home);
    let n1: &Value = &report["nodes"][0];
    assert_eq!(
        (n1["name"].as_str(), n1["alive"].as_bool()),
        (Some("n1"), Some(true))
    );
    assert!(
        placement(&home)
            .iter()
            .any(|(a, n)| *a == agent && n == "n1"),
        "{report:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routine_fires_once_per_instant_in_the_cluster_and_goes_on_when_its_node_dies() {
    let engines = Engines::start();
    let mock = MockLlm::start_responder_blocking(Arc::new(forwarder(Duration::from_millis(20))));
    let (_homes, [n1, n2]) =
        two_nodes(&mock, &engines, "\n[scheduler]\nmin_interval = \"1s\"\n").await;
    // Each fire's message to w1 is forwarded to the paused sink, which keeps them.
    agents(&n1, &["w1"]).await;
    n1.post(
        "/v1/routines",
        json!({"name": "tick", "every": "1s", "agent": "w1", "message": "tick",
               "catch_up": "all", "concurrency": "queue"}),
    )
    .await;
    let history = "/v1/routines/tick/history?limit=10000";
    let fires = |h: &Value| h.as_array().map_or(0, Vec::len);
    n2.wait("four fires", history, |h| fires(h) >= 4).await;
    // The node the routine was made through dies; the other one knew of it and goes on.
    n1.kill();
    let before = fires(&n2.get(history).await);
    n2.wait("four more fires", history, |h| fires(h) >= before + 4)
        .await;
    n2.post("/v1/routines/tick/disable", json!({})).await;
    n2.wait("w1's inbox to drain", "/v1/agents/w1/inbox", |m| {
        m.as_array()
            .is_some_and(|a| a.iter().all(|m| m["status"] == "done"))
    })
    .await;

    let history = n2.get(history).await;
    let mut instants: Vec<i64> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["key"].as_str().unwrap()["at:".len()..].parse().unwrap())
        .collect();
    instants.sort_unstable();
    let claimed = instants.len();
    instants.dedup();
    assert_eq!(
        instants.len(),
        claimed,
        "an instant claimed twice: {history:#}"
    );
    let (first, last) = (instants[0], instants[claimed - 1]);
    assert_eq!(
        claimed as i64,
        (last - first) / 1000 + 1,
        "every instant from the first to the last fired, the kill included: {history:#}"
    );
    let ran = history
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["outcome"] != "skipped")
        .count();
    let mut bodies = forwarded(&n2).await;
    let all = bodies.len();
    bodies.dedup();
    assert_eq!(bodies.len(), all, "a fire took effect twice: {bodies:#?}");
    assert_eq!(all, ran, "one effect per fire: {history:#}");
}
