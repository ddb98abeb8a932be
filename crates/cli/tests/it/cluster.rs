//! Cluster mode end to end, with a real PostgreSQL and nats-server: two `reef serve --cluster`
//! nodes share the agents; the API of either node reaches every agent; an event stream on one
//! node shows the events of agents running on the other; and when the node running a turn is
//! SIGKILLed, the other takes its agents over, runs the interrupted turn again, and every job
//! takes effect exactly once.

use crate::daemon::Daemon;
use crate::reef;
use reef_test_support::{Engines, MockLlm, MockReply, RecordedRequest, TestHome};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// A node's home: the mock as its model, the default sandbox, and `[cluster]` (enabled by
/// `--cluster`), with two-second leases.
fn node_home(mock: &MockLlm, engines: &Engines, name: &str) -> TestHome {
    let home = TestHome::new();
    home.write_config(&format!(
        "[providers.main]\nbase_url = \"{}\"\nmodel = \"mock-model\"\nstream = false\n\
         max_retries = 0\n\n[daemon]\nlisten = \"127.0.0.1:0\"\n\n[sandbox]\nrequired = true\n\n\
         [cluster]\ndatabase_url = \"{}\"\nnats_url = \"{}\"\nnode_name = \"{name}\"\n\
         lease_secs = 2\n",
        mock.base_url(),
        engines.database_url(),
        engines.nats_url()
    ));
    home
}

/// Each message is forwarded to `sink` with one tool call; the answer after the tool result
/// is slow, so a kill lands between the effect and the end of the turn.
fn forwarder(req: &RecordedRequest) -> MockReply {
    if req.ends_with_tool_result() {
        return MockReply::Delayed(
            Duration::from_millis(700),
            Box::new(MockReply::text("forwarded")),
        );
    }
    let input = req.last_user_text().unwrap_or_default();
    let job = input.lines().last().unwrap_or("").to_owned();
    MockReply::tool_call("message_agent", json!({"to": "sink", "text": job}))
}

/// `reef cluster status --json` run with `home`'s configuration (cluster mode on, as
/// `--cluster` turns it on for `reef serve`).
fn status(home: &TestHome) -> Value {
    let out = reef(home)
        .args(["-c", "cluster.enabled=true", "cluster", "status", "--json"])
        .assert()
        .success();
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

/// The node holding each agent's lease, by agent id.
fn placement(home: &TestHome) -> Vec<(String, String)> {
    status(home)["leases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["expired"] == false)
        .map(|l| {
            (
                l["agent"].as_str().unwrap().to_owned(),
                l["node"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Polls `cond` a bounded number of times (the nodes are other processes).
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..1500 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("gave up waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_share_agents_and_one_takes_over_when_the_other_is_killed_mid_turn() {
    let engines = Engines::start();
    let mock = MockLlm::start_responder_blocking(Arc::new(forwarder));
    let homes = [
        node_home(&mock, &engines, "n1"),
        node_home(&mock, &engines, "n2"),
    ];
    let first = Daemon::start_with(&homes[0], &["--cluster"]).await;
    // A node without the cluster's audit key refuses to start (its records would not verify);
    // every node gets the first node's keys.
    let copy_keys = || {
        for key in ["audit.key", "cap.key"] {
            std::fs::copy(
                homes[0].reef_home().join(key),
                homes[1].reef_home().join(key),
            )
            .unwrap();
        }
    };
    copy_keys();
    let nodes = [first, Daemon::start_with(&homes[1], &["--cluster"]).await];

    // Agents made through one node; the sink is paused so its inbox keeps what it was sent.
    nodes[0]
        .post("/v1/agents", json!({"name": "sink", "template": "worker"}))
        .await;
    nodes[0].post("/v1/agents/sink/pause", json!({})).await;
    let workers = ["w1", "w2", "w3"];
    let mut ids = Vec::new();
    for w in workers {
        let made = nodes[0]
            .post("/v1/agents", json!({"name": w, "template": "worker"}))
            .await;
        ids.push(made["id"].as_str().unwrap().to_owned());
    }
    // Four agents over two nodes: two each.
    eventually("the agents spread over both nodes", || {
        let placed = placement(&homes[1]);
        let on = |n: &str| placed.iter().filter(|(_, node)| node == n).count();
        placed.len() == 4 && on("n1") == 2 && on("n2") == 2
    })
    .await;

    // An event stream on n1 shows the work of agents n2 runs.
    let on_n2: Vec<String> = placement(&homes[0])
        .into_iter()
        .filter(|(agent, node)| node == "n2" && ids.contains(agent))
        .map(|(agent, _)| agent)
        .collect();
    assert!(!on_n2.is_empty(), "n2 runs none of the workers");
    let stream = nodes[0]
        .http()
        .get(format!("{}/v1/events/stream", nodes[0].base()))
        .bearer_auth(nodes[0].token())
        .send()
        .await
        .unwrap();
    assert!(stream.status().is_success());

    // Jobs sent through the other node's API.
    let mut jobs = Vec::new();
    for i in 0..9 {
        let (w, job) = (workers[i % 3], format!("job-{i}"));
        let sent = nodes[1]
            .post(
                &format!("/v1/agents/{w}/messages"),
                json!({"text": job, "key": job}),
            )
            .await;
        assert!(sent["inbox_id"].as_u64().is_some(), "acknowledged: {sent}");
        jobs.push(job);
    }
    let seen = read_stream_until(stream, |event| {
        event["kind"] == "tool.result"
            && event["agent_id"]
                .as_str()
                .is_some_and(|a| on_n2.iter().any(|x| x == a))
    })
    .await;
    assert!(
        seen,
        "n1's stream never showed a tool result of an agent on n2"
    );

    // Kill the node of an agent whose forward is made and whose turn has not ended.
    let in_flight = nodes[1]
        .wait(
            "a forward in flight",
            "/v1/events?kind=tool.result,turn.ended",
            |e| {
                e.as_array()
                    .and_then(|a| a.last())
                    .is_some_and(|e| e["kind"] == "tool.result")
            },
        )
        .await;
    let agent = in_flight.as_array().unwrap().last().unwrap()["agent_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let victim = placement(&homes[0])
        .into_iter()
        .find(|(a, _)| *a == agent)
        .map(|(_, node)| node)
        .unwrap();
    let (dead, survivor) = if victim == "n1" { (0, 1) } else { (1, 0) };
    let [n1, n2] = nodes;
    let (killed, alive) = if dead == 0 { (n1, n2) } else { (n2, n1) };
    killed.kill();

    // The survivor holds every agent, each moved with a new epoch, and drains the inboxes.
    let survivor_name = if survivor == 0 { "n1" } else { "n2" };
    eventually("the survivor to hold every agent", || {
        let placed = placement(&homes[survivor]);
        placed.len() == 4 && placed.iter().all(|(_, node)| node == survivor_name)
    })
    .await;
    for w in workers {
        alive
            .wait(
                &format!("{w}'s inbox to drain"),
                &format!("/v1/agents/{w}/inbox"),
                |m| {
                    m.as_array()
                        .is_some_and(|a| a.len() == 3 && a.iter().all(|m| m["status"] == "done"))
                },
            )
            .await;
    }
    let placed = alive.get("/v1/events?kind=agent.placed&limit=1000").await;
    let moved: Vec<&Value> = placed
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["data"]["node"] == survivor_name && e["data"]["epoch"].as_i64() > Some(1))
        .collect();
    assert_eq!(
        moved.len(),
        2,
        "two agents moved to {survivor_name}: {placed:#}"
    );
    assert!(
        moved.iter().any(|e| e["agent_id"] == agent.as_str()),
        "the agent whose turn was cut moved: {placed:#}"
    );
    let retried = alive
        .get(&format!("/v1/agents/{agent}/inbox"))
        .await
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["attempts"].as_u64() > Some(1))
        .count();
    assert!(retried >= 1, "the interrupted turn did not run again");

    // Each job reached the sink exactly once.
    let sink = alive.get("/v1/agents/sink/inbox").await;
    let mut bodies: Vec<String> = sink
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["body"].as_str().unwrap().to_owned())
        .collect();
    bodies.sort();
    jobs.sort();
    assert_eq!(bodies, jobs, "each job forwarded exactly once");

    // Both nodes in the status: the dead one no longer alive, holding nothing.
    let report = status(&homes[survivor]);
    let dead_name = if dead == 0 { "n1" } else { "n2" };
    let node = |name: &str| {
        report["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == name)
            .cloned()
            .unwrap()
    };
    assert_eq!(node(survivor_name)["agents"], 4, "{report:#}");
    assert_eq!(node(dead_name)["alive"], false, "{report:#}");
    assert_eq!(node(dead_name)["agents"], 0, "{report:#}");
}

/// Reads server-sent events until one satisfies `pred` (true) or the stream ends (false).
async fn read_stream_until(mut resp: reqwest::Response, pred: impl Fn(&Value) -> bool) -> bool {
    let mut buffer = String::new();
    loop {
        let chunk = match tokio::time::timeout(Duration::from_secs(60), resp.chunk()).await {
            Ok(Ok(Some(chunk))) => chunk,
            _ => return false,
        };
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let frame: String = buffer.drain(..end + 2).collect();
            for line in frame.lines() {
                if let Some(data) = line.strip_prefix("data:")
                    && let Ok(event) = serde_json::from_str::<Value>(data.trim())
                    && pred(&event)
                {
                    return true;
                }
            }
        }
    }
}
