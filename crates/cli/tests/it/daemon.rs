//! `reef serve` end to end: a manager spawns two workers, hands out tasks, one worker asks
//! the operator (answered through the HTTP API), both report back, the manager summarises;
//! and a daemon killed with SIGKILL mid-turn loses nothing and repeats no effect.

use crate::reef;
use reef_test_support::{MockLlm, MockReply, RecordedRequest, TestHome};
use serde_json::{Value, json};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// A running `reef serve` for a home, with an HTTP client holding its token.
pub(crate) struct Daemon {
    child: Child,
    base: String,
    token: String,
    http: reqwest::Client,
}

impl Daemon {
    pub(crate) async fn start(home: &TestHome) -> Daemon {
        Daemon::start_with(home, &[]).await
    }

    /// `reef serve ARGS`.
    pub(crate) async fn start_with(home: &TestHome, args: &[&str]) -> Daemon {
        let addr_file = home.reef_home().join("reef.addr");
        let _ = std::fs::remove_file(&addr_file);
        let child = Command::new(env!("CARGO_BIN_EXE_reef"))
            .arg("serve")
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("REEF_HOME", home.reef_home())
            .current_dir(home.workspace())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(home.path().join("serve.log")).unwrap())
            .spawn()
            .unwrap();
        let log = || std::fs::read_to_string(home.path().join("serve.log")).unwrap_or_default();
        let mut child = child;
        let mut addr = String::new();
        // A loaded machine can take long to start it; a daemon that exits says why at once.
        for _ in 0..6000 {
            // Read whole: a file caught between its creation and its write is empty.
            if let Ok(text) = std::fs::read_to_string(&addr_file)
                && text.ends_with('\n')
            {
                addr = text.trim().to_owned();
                break;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("reef serve exited ({status}) before serving:\n{}", log());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            !addr.is_empty(),
            "reef serve never wrote {}:\n{}",
            addr_file.display(),
            log()
        );
        let token = std::fs::read_to_string(home.reef_home().join("api-token")).unwrap();
        let timeout = Some(Duration::from_secs(60));
        // Over TLS (`https://ADDR` in the address file): the self-signed certificate pinned.
        let (base, http) = match addr.strip_prefix("https://") {
            Some(_) => {
                let pin = reef_server::tls::client_pin(
                    &reef_config::TlsSource::SelfSigned,
                    &home.reef_home(),
                )
                .unwrap();
                (
                    addr.clone(),
                    reef_llm::http_client_pinned(timeout, pin).unwrap(),
                )
            }
            None => (
                format!("http://{addr}"),
                reef_llm::http_client(timeout).unwrap(),
            ),
        };
        Daemon {
            child,
            base,
            token: token.trim().to_owned(),
            http,
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut req = self
            .http
            .request(method.clone(), format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let text = resp.text().await.unwrap();
        assert!(status.is_success(), "{method} {path}: {status} {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// The client, which trusts this daemon's certificate when it serves https.
    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    pub(crate) async fn get(&self, path: &str) -> Value {
        self.call(reqwest::Method::GET, path, None).await
    }

    pub(crate) async fn post(&self, path: &str, body: Value) -> Value {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }

    /// Polls `path` until `pred` holds on its JSON.
    pub(crate) async fn wait(
        &self,
        what: &str,
        path: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        for _ in 0..3000 {
            let value = self.get(path).await;
            if pred(&value) {
                return value;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let events = self.get("/v1/events?limit=10000").await;
        panic!("gave up waiting for {what}; events: {events:#}");
    }

    /// SIGKILL, and wait for the process to be gone: nothing of a shutdown runs.
    pub(crate) fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// SIGTERM, and wait for the graceful stop; its exit status.
    pub(crate) fn terminate(mut self) -> std::process::ExitStatus {
        self.signal("-TERM");
        self.child.wait().unwrap()
    }

    pub(crate) fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A home for `reef serve` with the mock as its model. Tools run in the default (landlock)
/// sandbox, and `required` makes a sandbox that does not work here fail the daemon's start
/// instead of falling back to unconfined tools.
pub(crate) fn daemon_home(mock: &MockLlm) -> TestHome {
    let home = TestHome::new();
    home.write_config(&format!(
        "[providers.main]\nbase_url = \"{}\"\nmodel = \"mock-model\"\nstream = false\n\
         max_retries = 0\n\n[daemon]\nlisten = \"127.0.0.1:0\"\n\n[sandbox]\nrequired = true\n",
        mock.base_url()
    ));
    home
}

/// Names of the tools the model called in its last assistant message.
fn last_calls(req: &RecordedRequest) -> Vec<String> {
    req.messages()
        .iter()
        .rev()
        .find(|m| m["role"] == "assistant")
        .and_then(|m| m["tool_calls"].as_array())
        .map(|calls| {
            calls
                .iter()
                .filter_map(|c| c["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// User messages of the conversation that carry a reply to a request.
fn replies(req: &RecordedRequest) -> Vec<String> {
    req.messages()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .filter(|c| c.contains("Answer to your request"))
        .map(|c| c.lines().last().unwrap_or("").to_owned())
        .collect()
}

fn team_model(req: &RecordedRequest) -> MockReply {
    let input = req.last_user_text().unwrap_or_default();
    match req.agent().as_str() {
        "boss" if req.ends_with_tool_result() => {
            if last_calls(req).contains(&"spawn_agent".to_owned()) {
                MockReply::ToolCalls(vec![
                    (
                        "message_agent".into(),
                        json!({"to": "alice", "expect_reply": true,
                        "text": "Part 1: count the files in your workspace"}),
                    ),
                    (
                        "message_agent".into(),
                        json!({"to": "bob", "expect_reply": true,
                        "text": "Part 2: find out which colour the operator wants"}),
                    ),
                ])
            } else {
                MockReply::text("Tasks handed out; waiting for the reports.")
            }
        }
        "boss" if input.contains("Build the report") => MockReply::ToolCalls(vec![
            (
                "spawn_agent".into(),
                json!({"name": "alice", "template": "worker"}),
            ),
            (
                "spawn_agent".into(),
                json!({"name": "bob", "template": "worker"}),
            ),
        ]),
        "boss" => {
            let got = replies(req);
            if got.len() >= 2 {
                MockReply::text(format!("SUMMARY: {}", got.join(" + ")))
            } else {
                MockReply::text("One report in; waiting for the other.")
            }
        }
        "alice" => MockReply::text("alice: there are 3 files"),
        "bob" if req.ends_with_tool_result() => MockReply::text("Asked the operator; waiting."),
        "bob" if input.contains("Answer to your question") => MockReply::text(format!(
            "bob: the operator chose {}",
            input.lines().last().unwrap_or("")
        )),
        "bob" => MockReply::tool_call(
            "ask_operator",
            json!({"question": "Which colour?", "options": ["red", "blue"]}),
        ),
        other => MockReply::text(format!("unexpected agent {other}")),
    }
}

fn kinds(events: &Value) -> Vec<String> {
    events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_runs_a_team_and_the_operator_answers_a_question_through_the_api() {
    let mock = MockLlm::start_responder_blocking(Arc::new(team_model));
    let home = daemon_home(&mock);
    let d = Daemon::start(&home).await;

    let boss = d
        .post(
            "/v1/agents",
            json!({"name": "boss", "template": "manager",
                   "task": "Build the report in two parts and summarise it for me."}),
        )
        .await;
    assert_eq!(boss["state"], "running");

    let questions = d
        .wait("bob's question", "/v1/questions", |q| {
            q.as_array().is_some_and(|a| !a.is_empty())
        })
        .await;
    let question = &questions[0];
    assert_eq!(question["kind"], "question");
    assert_eq!(question["payload"]["agent"], "bob");
    assert_eq!(question["payload"]["options"], json!(["red", "blue"]));
    let id = question["id"].as_str().unwrap();
    let answered = d
        .post(
            &format!("/v1/questions/{id}/answer"),
            json!({"text": "blue"}),
        )
        .await;
    assert_eq!(answered["status"], "answered");

    let summary = d
        .wait(
            "the manager's summary",
            "/v1/events?agent=boss&kind=agent.message",
            |e| {
                e.as_array().is_some_and(|a| {
                    a.iter().any(|e| {
                        e["data"]["text"]
                            .as_str()
                            .unwrap_or("")
                            .starts_with("SUMMARY")
                    })
                })
            },
        )
        .await;
    let summary = summary
        .as_array()
        .unwrap()
        .iter()
        .find_map(|e| {
            e["data"]["text"]
                .as_str()
                .filter(|t| t.starts_with("SUMMARY"))
        })
        .unwrap()
        .to_owned();
    assert!(summary.contains("alice: there are 3 files"), "{summary}");
    assert!(
        summary.contains("bob: the operator chose blue"),
        "{summary}"
    );

    // Every step is in the event history.
    let events = d.get("/v1/events?limit=10000").await;
    let all = kinds(&events);
    let n = |k: &str| all.iter().filter(|x| x.as_str() == k).count();
    assert_eq!(n("agent.spawned"), 3, "{all:?}");
    assert_eq!(n("request.created"), 2, "{all:?}");
    assert_eq!(n("request.answered"), 2, "{all:?}");
    assert_eq!(n("question.created"), 1, "{all:?}");
    assert_eq!(n("question.answered"), 1, "{all:?}");
    let calls: Vec<&str> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "tool.call")
        .map(|e| e["data"]["name"].as_str().unwrap())
        .collect();
    for tool in ["spawn_agent", "message_agent", "ask_operator"] {
        assert!(calls.contains(&tool), "{tool} not in {calls:?}");
    }

    // The children belong to the manager, and the transcripts hold the conversation.
    let agents = d.get("/v1/agents").await;
    let boss_id = boss["id"].as_str().unwrap();
    for name in ["alice", "bob"] {
        let agent = agents
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == name)
            .unwrap();
        assert_eq!(agent["parent"], boss_id);
    }
    let bob = d.get("/v1/agents/bob/transcript").await.to_string();
    assert!(
        bob.contains("ask_operator") && bob.contains("blue"),
        "{bob}"
    );
    let boss_transcript = d.get("/v1/agents/boss/transcript").await.to_string();
    assert!(boss_transcript.contains("SUMMARY"), "{boss_transcript}");

    // What the model was sent: bob's answer turn saw the operator's choice, and the
    // manager's last request held both reports.
    let sent = mock.requests();
    let bob_last = sent.iter().rfind(|r| r.agent() == "bob").unwrap();
    assert!(bob_last.last_user_text().unwrap().contains("blue"));
    let boss_last = sent.iter().rfind(|r| r.agent() == "boss").unwrap();
    assert_eq!(replies(boss_last).len(), 2);
    assert!(boss_last.tool_names().contains(&"spawn_agent".to_owned()));

    // The CLI reads the same daemon.
    let out = reef(&home)
        .args(["agent", "list", "--json"])
        .assert()
        .success();
    let listed: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 3);
    let out = reef(&home)
        .args(["questions", "--all", "--json"])
        .assert()
        .success();
    let all_items: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert!(
        all_items
            .as_array()
            .unwrap()
            .iter()
            .any(|q| q["answer"] == "blue")
    );

    let out = reef(&home)
        .args(["send", "boss", "Where are we?", "--wait", "--timeout", "60"])
        .assert()
        .success();
    let reply = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(reply.contains("SUMMARY"), "{reply}");
    reef(&home)
        .args(["agent", "status", "nobody"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("no agent named `nobody`"));

    // SIGTERM: a graceful stop that removes the PID file.
    let mut d = d;
    d.signal("-TERM");
    let status = d.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!home.reef_home().join("reef.pid").exists());
}

/// The forwarding workers: each message is forwarded to `sink` with one tool call; the
/// answer after the tool result comes `delay` later, so a kill lands between the effect and
/// the finish.
/// The bodies of the messages in the sink's inbox, sorted: what the forwarders sent it.
pub(crate) async fn forwarded(d: &Daemon) -> Vec<String> {
    let mut bodies: Vec<String> = d
        .get("/v1/agents/sink/inbox")
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["body"].as_str().unwrap().to_owned())
        .collect();
    bodies.sort();
    bodies
}

pub(crate) fn forwarder(
    delay: Duration,
) -> impl Fn(&RecordedRequest) -> MockReply + Send + Sync + 'static {
    move |req: &RecordedRequest| {
        if req.ends_with_tool_result() {
            return MockReply::Delayed(delay, Box::new(MockReply::text("forwarded")));
        }
        let input = req.last_user_text().unwrap_or_default();
        let job = input.lines().last().unwrap_or("").to_owned();
        MockReply::tool_call("message_agent", json!({"to": "sink", "text": job}))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_killed_mid_turn_processes_every_message_exactly_once_in_effect() {
    let mock = MockLlm::start_responder_blocking(Arc::new(forwarder(Duration::from_millis(700))));
    let home = daemon_home(&mock);
    let d = Daemon::start(&home).await;
    d.post("/v1/agents", json!({"name": "sink", "template": "worker"}))
        .await;
    d.post("/v1/agents/sink/pause", json!({})).await;
    for w in ["w1", "w2"] {
        d.post("/v1/agents", json!({"name": w, "template": "worker"}))
            .await;
    }
    let mut jobs = Vec::new();
    for i in 0..8 {
        let (w, job) = (if i % 2 == 0 { "w1" } else { "w2" }, format!("job-{i}"));
        let sent = d
            .post(
                &format!("/v1/agents/{w}/messages"),
                json!({"text": job, "key": job}),
            )
            .await;
        assert!(sent["inbox_id"].as_u64().is_some(), "acknowledged: {sent}");
        jobs.push(job);
    }
    // Kill while a turn has made its effect (the forward) but not finished.
    d.wait(
        "a forward in flight",
        "/v1/events?kind=tool.result,turn.ended",
        |e| {
            e.as_array()
                .and_then(|a| a.last())
                .is_some_and(|e| e["kind"] == "tool.result")
        },
    )
    .await;
    let mut d = d;
    d.child.kill().unwrap();
    d.child.wait().unwrap();
    drop(d);

    let d = Daemon::start(&home).await;
    let recovered = d
        .wait(
            "the recovery event",
            "/v1/events?kind=daemon.recovered",
            |e| e.as_array().is_some_and(|a| !a.is_empty()),
        )
        .await;
    assert!(
        recovered[0]["data"]["released"].as_u64().unwrap() >= 1,
        "{recovered}"
    );
    for w in ["w1", "w2"] {
        d.wait(
            &format!("{w}'s inbox to drain"),
            &format!("/v1/agents/{w}/inbox"),
            |m| {
                m.as_array()
                    .is_some_and(|a| a.len() == 4 && a.iter().all(|m| m["status"] == "done"))
            },
        )
        .await;
    }
    let retried: usize = {
        let mut n = 0;
        for w in ["w1", "w2"] {
            let inbox = d.get(&format!("/v1/agents/{w}/inbox")).await;
            n += inbox
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| m["attempts"].as_u64() > Some(1))
                .count();
        }
        n
    };
    assert!(
        retried >= 1,
        "no message was processed twice, so the kill hit no turn"
    );
    let bodies = forwarded(&d).await;
    let mut expected = jobs.clone();
    expected.sort();
    assert_eq!(bodies, expected, "each job forwarded exactly once");
}

/// The model of the confinement test: alice writes and reads back a file in her workspace,
/// then tries the API token and bob's workspace, then plants `MEMORY.md -> api-token`.
fn confined_model(token: String, bob_file: String) -> impl Fn(&RecordedRequest) -> MockReply {
    move |req: &RecordedRequest| {
        let results = req.tool_results();
        let shell = |command: String| MockReply::tool_call("shell", json!({ "command": command }));
        match results.len() {
            0 => shell("echo kept > note.txt && cat note.txt".into()),
            1 => shell(format!("cat '{token}'")),
            2 => shell(format!("cat '{bob_file}'; ls -A \"$(dirname '{token}')\"")),
            3 => shell("ln -s ../../../api-token MEMORY.md && echo planted".into()),
            _ => MockReply::text("done"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_agent_runs_commands_in_its_own_workspace_and_sees_nothing_else() {
    let home = TestHome::new();
    let token_path = home.reef_home().join("api-token");
    let bob_file = home.reef_home().join("agents/bob/workspace/diary.txt");
    let mock = MockLlm::start_responder_blocking(Arc::new(confined_model(
        token_path.display().to_string(),
        bob_file.display().to_string(),
    )));
    home.write_config(&format!(
        "[providers.main]\nbase_url = \"{}\"\nmodel = \"mock-model\"\nstream = false\n\
         max_retries = 0\n\n[daemon]\nlisten = \"127.0.0.1:0\"\n\n[sandbox]\nrequired = true\n",
        mock.base_url()
    ));
    let d = Daemon::start(&home).await;
    let token = std::fs::read_to_string(&token_path).unwrap();
    // bob exists, with a file in his workspace, but never gets a message.
    d.post("/v1/agents", json!({"name": "bob", "template": "worker"}))
        .await;
    std::fs::write(&bob_file, "bob's secret diary\n").unwrap();
    d.post(
        "/v1/agents",
        json!({"name": "alice", "template": "worker", "task": "look around"}),
    )
    .await;
    d.wait(
        "alice's first turn",
        "/v1/events?agent=alice&kind=turn.ended",
        |e| e.as_array().is_some_and(|a| !a.is_empty()),
    )
    .await;

    let sent = mock.requests();
    let results = sent.last().unwrap().tool_results();
    assert_eq!(results.len(), 4, "{results:?}");
    // Positive control: the shell works in the agent's own workspace, with the default
    // sandbox (its every call used to fail with exit code 125).
    assert!(
        results[0].starts_with("exit_code: 0") && results[0].contains("kept"),
        "{}",
        results[0]
    );
    let workspace = home.reef_home().join("agents/alice/workspace");
    assert_eq!(
        std::fs::read_to_string(workspace.join("note.txt")).unwrap(),
        "kept\n"
    );
    // Neither the API token nor another agent's workspace can be read or listed.
    assert!(
        results[1].contains("No such file or directory") && !results[1].contains(token.trim()),
        "{}",
        results[1]
    );
    assert!(
        results[2].contains("No such file or directory")
            && !results[2].contains("secret diary")
            && !results[2].contains("api-token")
            && !results[2].contains("reef.db"),
        "{}",
        results[2]
    );
    // The planted link exists in the workspace…
    assert!(results[3].contains("planted"), "{}", results[3]);
    assert!(
        workspace
            .join("MEMORY.md")
            .symlink_metadata()
            .unwrap()
            .is_symlink()
    );
    // …and the next turn's system prompt does not carry what it points to.
    d.post("/v1/agents/alice/messages", json!({"text": "again"}))
        .await;
    d.wait(
        "alice's second turn",
        "/v1/events?agent=alice&kind=turn.ended",
        |e| e.as_array().is_some_and(|a| a.len() >= 2),
    )
    .await;
    let last = mock.requests().pop().unwrap();
    assert_eq!(
        last.last_user_text().map(|t| t.contains("again")),
        Some(true)
    );
    let system = last.system_text();
    assert!(
        !system.contains(token.trim()),
        "the API token reached the model: {system}"
    );
    assert!(system.contains("MEMORY.md"), "{system}");
}
