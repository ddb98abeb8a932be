//! The supervisor end to end in one process: agents woken by their inbox, requests answered,
//! questions and approvals, budgets, loop detection and the turn limit, against the mock model.

use reef_agent::HelperCommand;
use reef_core::AgentState;
use reef_runtime::{Runtime, RuntimeOptions, Sender, SpawnRequest, Templates};
use reef_store::{InboxStatus, PendingKind, PendingStatus, StoredEvent};
use reef_test_support::{MockLlm, MockReply, RecordedRequest, Responder, TestHome, sandbox_helper};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

pub struct Daemon {
    pub runtime: Runtime,
    pub mock: MockLlm,
    /// Kept so the home outlives the daemon.
    pub _home: TestHome,
}

/// A daemon on a fresh home whose model is `responder`; `extra` is appended to reef.toml.
pub async fn daemon(responder: Responder, extra: &str) -> Daemon {
    daemon_with(responder, "", extra).await
}

/// Like [`daemon`], with `provider` appended to the mock provider's table.
pub async fn daemon_with(responder: Responder, provider: &str, extra: &str) -> Daemon {
    daemon_at(responder, provider, extra, None, |_| {}).await
}

/// Like [`daemon_with`], on `clock` (the system's when `None`), after `setup` has written
/// what it wants into the home (templates).
pub async fn daemon_at(
    responder: Responder,
    provider: &str,
    extra: &str,
    clock: Option<Arc<dyn reef_schedule::Clock>>,
    setup: impl FnOnce(&TestHome),
) -> Daemon {
    let mock = MockLlm::start_responder(responder).await;
    let home = TestHome::new();
    // Tools run in the real default sandbox; `required` makes a sandbox that does not work
    // here fail the test instead of falling back to running them unconfined.
    home.write_config(&format!(
        "[providers.mock]\nbase_url = \"{}\"\nmodel = \"m\"\nstream = false\nmax_retries = 0\n\
         {provider}\n[sandbox]\nrequired = true\n\n{extra}",
        mock.base_url()
    ));
    setup(&home);
    let runtime = start_on(&home, clock).await;
    Daemon {
        runtime,
        mock,
        _home: home,
    }
}

/// Starts a runtime on an existing home (a restart), with its templates.
pub async fn start_on(home: &TestHome, clock: Option<Arc<dyn reef_schedule::Clock>>) -> Runtime {
    let (runtime, _) = Runtime::start(RuntimeOptions {
        config: home.load_config(),
        templates: Templates::load(&home.path().join("templates")).unwrap(),
        helper: Some(HelperCommand {
            program: sandbox_helper(),
            args: Vec::new(),
        }),
        model_override: None,
        clock,
    })
    .await
    .unwrap();
    runtime
}

/// Waits (without a deadline of its own; the test harness bounds it) until `pred` holds on
/// the event history.
pub async fn wait_for(rt: &Runtime, what: &str, pred: impl Fn(&[StoredEvent]) -> bool) {
    for _ in 0..3000 {
        let events = rt.store().events_after(0, None, 100_000).await.unwrap();
        if pred(&events) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let events = rt.store().events_after(0, None, 100_000).await.unwrap();
    let kinds: Vec<String> = events
        .iter()
        .map(|e| format!("{} {}", e.kind, e.data))
        .collect();
    panic!("gave up waiting for {what}; history:\n{}", kinds.join("\n"));
}

pub fn count(events: &[StoredEvent], kind: &str) -> usize {
    events.iter().filter(|e| e.kind == kind).count()
}

pub fn spawn(name: &str, template: &str) -> SpawnRequest {
    SpawnRequest {
        name: name.into(),
        template: template.into(),
        ..SpawnRequest::default()
    }
}

#[tokio::test]
async fn a_message_wakes_the_agent_and_a_request_is_answered_with_its_final_text() {
    let d = daemon(
        Arc::new(|req: &RecordedRequest| {
            MockReply::text(format!(
                "echo: {}",
                req.last_user_text().unwrap_or_default()
            ))
        }),
        "",
    )
    .await;
    let rt = &d.runtime;
    let w = rt
        .spawn_agent(spawn("w1", "worker"), None)
        .await
        .unwrap()
        .agent;
    assert_eq!(w.state, AgentState::Running);
    let sent = rt
        .send_message("w1", Sender::Operator, "count to three", "op-1", Some(60))
        .await
        .unwrap();
    let request = sent.request_id.unwrap();
    wait_for(rt, "the request to be answered", |e| {
        count(e, "request.answered") == 1
    })
    .await;

    let item = rt.get_pending(&request).await.unwrap();
    assert_eq!(item.status, PendingStatus::Answered);
    let answer = item.answer.unwrap();
    assert!(answer.contains("echo: [message #"), "{answer}");
    assert!(answer.contains("from operator, reply expected"), "{answer}");
    assert!(answer.contains("count to three"), "{answer}");
    // What the model was sent: the agent's persona and the inbox message.
    let sent_to_model = &d.mock.requests()[0];
    assert_eq!(sent_to_model.agent(), "w1");
    assert!(
        sent_to_model
            .system_text()
            .contains("You are a worker agent in reef")
    );
    assert!(
        sent_to_model
            .tool_names()
            .contains(&"message_agent".to_owned())
    );
    assert!(
        !sent_to_model
            .tool_names()
            .contains(&"spawn_agent".to_owned())
    );
    assert!(
        rt.store()
            .inbox(&w.id, InboxStatus::Pending)
            .await
            .unwrap()
            .is_empty()
    );

    // The same request key again delivers nothing new.
    let again = rt
        .send_message("w1", Sender::Operator, "count to three", "op-1", Some(60))
        .await
        .unwrap();
    assert!(again.duplicate);
    assert_eq!(again.request_id.as_deref(), Some(request.as_str()));

    // A request to an agent that is destroyed is cancelled, and the requester (here another
    // agent) is told not to wait.
    let asker = rt
        .spawn_agent(spawn("asker", "worker"), None)
        .await
        .unwrap()
        .agent;
    rt.pause_agent("w1", "hold").await.unwrap();
    let pending = rt
        .send_message("w1", Sender::Agent(&asker), "anything?", "ask-1", Some(600))
        .await
        .unwrap();
    rt.pause_agent("asker", "hold").await.unwrap();
    rt.destroy_agent("w1", true).await.unwrap();
    let cancelled = rt.get_pending(&pending.request_id.unwrap()).await.unwrap();
    assert_eq!(cancelled.status, PendingStatus::Cancelled);
    let told = rt
        .store()
        .inbox(&asker.id, InboxStatus::Pending)
        .await
        .unwrap();
    assert!(
        told[0].body.contains("was cancelled; do not wait for it"),
        "{}",
        told[0].body
    );
    assert!(rt.get_agent("w1").await.is_err());
    assert!(
        !std::path::Path::new(&w.workspace).exists(),
        "purge removes the directory"
    );
    rt.spawn_agent(spawn("w1", "worker"), None).await.unwrap();

    // The same message key again delivers nothing new.
    let asker2 = rt.get_agent("asker").await.unwrap();
    let again = rt
        .send_message("asker", Sender::Agent(&asker2), "hello", "dup-1", None)
        .await
        .unwrap();
    let again2 = rt
        .send_message("asker", Sender::Agent(&asker2), "hello", "dup-1", None)
        .await
        .unwrap();
    assert!(!again.duplicate && again2.duplicate);
    assert_eq!(again.inbox_id, again2.inbox_id);
    rt.shutdown().await;
}

#[tokio::test]
async fn a_question_returns_at_once_and_the_answer_wakes_the_asker() {
    let d = daemon(
        Arc::new(|req: &RecordedRequest| {
            let input = req.last_user_text().unwrap_or_default();
            if req.ends_with_tool_result() {
                MockReply::text("waiting for the operator")
            } else if input.contains("Answer to your question") {
                MockReply::text(format!("using {}", input.lines().last().unwrap_or("")))
            } else {
                MockReply::tool_call(
                    "ask_operator",
                    json!({"question": "Which port?", "options": ["8080", "9090"]}),
                )
            }
        }),
        "",
    )
    .await;
    let rt = &d.runtime;
    let w = rt
        .spawn_agent(spawn("w1", "worker"), None)
        .await
        .unwrap()
        .agent;
    rt.send_message("w1", Sender::Operator, "set up the server", "k1", None)
        .await
        .unwrap();
    wait_for(rt, "the question", |e| count(e, "question.created") == 1).await;
    wait_for(rt, "the first turn to end", |e| count(e, "turn.ended") == 1).await;
    let questions = rt.list_pending(false).await.unwrap();
    assert_eq!(questions.len(), 1);
    assert_eq!(questions[0].kind, PendingKind::Question);
    let id = questions[0].id.clone();

    let wrong = rt.answer(&id, "7070").await.unwrap_err();
    assert!(
        wrong
            .to_string()
            .contains("not one of the options: 8080, 9090"),
        "{wrong}"
    );
    rt.answer(&id, "2").await.unwrap();
    wait_for(rt, "the second turn", |e| count(e, "turn.ended") == 2).await;
    let last = d.mock.requests().last().unwrap().last_user_text().unwrap();
    assert!(
        last.contains("Answer to your question") && last.contains("9090"),
        "{last}"
    );
    let ended = rt.store().events_after(0, Some(&w.id), 1000).await.unwrap();
    let final_text = ended
        .iter()
        .rev()
        .find(|e| e.kind == "agent.message")
        .unwrap();
    assert_eq!(final_text.data["text"], "using 9090");
    assert!(rt.answer(&id, "8080").await.is_err(), "answered twice");
    rt.shutdown().await;
}

#[tokio::test]
async fn a_dangerous_command_waits_for_approval_and_runs_only_when_approved() {
    let d = daemon(
        Arc::new(|req: &RecordedRequest| {
            let input = req.last_user_text().unwrap_or_default();
            if req.ends_with_tool_result() || input.contains("approval") {
                MockReply::text("ok")
            } else if input.contains("clean") {
                MockReply::tool_call("shell", json!({"command": "touch a && rm -rf build"}))
            } else {
                MockReply::tool_call("shell", json!({"command": "git status; rm -rf /tmp/x"}))
            }
        }),
        "[approvals]\nallow = [\"shell(git *)\"]\n",
    )
    .await;
    let rt = &d.runtime;
    let w = rt
        .spawn_agent(spawn("w1", "worker"), None)
        .await
        .unwrap()
        .agent;
    let ws = std::path::PathBuf::from(&w.workspace);
    std::fs::create_dir_all(ws.join("build")).unwrap();
    rt.send_message("w1", Sender::Operator, "clean the build", "k1", None)
        .await
        .unwrap();
    wait_for(rt, "the approval", |e| count(e, "approval.created") == 1).await;
    wait_for(rt, "the turn to end", |e| count(e, "turn.ended") == 1).await;
    assert!(ws.join("build").exists(), "ran before approval");
    assert!(
        !ws.join("a").exists(),
        "part of the line ran before approval"
    );
    let tool_result = &d.mock.requests()[1].tool_results()[0];
    assert!(tool_result.starts_with("NOT RUN"), "{tool_result}");

    let approval = rt.list_pending(false).await.unwrap().remove(0);
    assert_eq!(approval.payload["command"], "touch a && rm -rf build");
    let done = rt.approve(&approval.id).await.unwrap();
    assert!(done.answer.unwrap().starts_with("approved"));
    assert!(!ws.join("build").exists() && ws.join("a").exists());
    wait_for(rt, "the agent to hear of it", |e| {
        count(e, "turn.ended") == 2
    })
    .await;
    assert!(rt.deny(&approval.id, None).await.is_err(), "decided twice");

    // An allow rule does not launder a dangerous command on the same line.
    rt.send_message("w1", Sender::Operator, "status", "k2", None)
        .await
        .unwrap();
    wait_for(rt, "the second approval", |e| {
        count(e, "approval.created") == 2
    })
    .await;
    let second = rt.list_pending(false).await.unwrap().remove(0);
    assert_eq!(second.payload["pattern"], "rm -rf");
    rt.deny(&second.id, Some("not now")).await.unwrap();
    wait_for(rt, "the denial to reach the agent", |e| {
        count(e, "turn.ended") == 4
    })
    .await;
    let told = d.mock.requests().last().unwrap().last_user_text().unwrap();
    assert!(told.contains("denied: not now"), "{told}");
    rt.shutdown().await;
}

#[tokio::test]
async fn a_child_is_clamped_to_its_parent_and_a_spent_budget_stops_it_and_tells_the_parent() {
    let d = daemon(
        Arc::new(|req: &RecordedRequest| {
            if req.agent() == "boss" {
                return MockReply::text("noted");
            }
            // The worker never stops calling tools: its round budget ends it.
            MockReply::tool_call(
                "list_dir",
                json!({"path": format!("{}", req.message_count())}),
            )
        }),
        "",
    )
    .await;
    let rt = &d.runtime;
    let boss = rt
        .spawn_agent(spawn("boss", "manager"), None)
        .await
        .unwrap()
        .agent;
    let worker = rt
        .spawn_agent(spawn("nope", "worker"), Some(&boss))
        .await
        .unwrap();
    assert!(worker.clamped.is_empty(), "{:?}", worker.clamped);
    // A worker may not spawn.
    let denied = rt
        .spawn_agent(spawn("grandchild", "worker"), Some(&worker.agent))
        .await
        .unwrap_err();
    assert!(denied.to_string().contains("may not spawn"), "{denied}");
    let audited = rt
        .store()
        .audit_records(reef_store::AuditFilter {
            kind: Some("cap.denied".into()),
            limit: 10,
            ..reef_store::AuditFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(audited.len(), 1, "{audited:?}");
    assert_eq!(audited[0].agent.as_deref(), Some("nope"));
    assert_eq!(audited[0].data["right"], "spawn");
    assert_eq!(audited[0].data["name"], "grandchild");

    let mut small = boss.clone();
    small.budget.rounds = Some(3);
    small.capabilities.tools = vec!["list_dir".into(), "message_agent".into()];
    let child = rt
        .spawn_agent(spawn("w2", "worker"), Some(&small))
        .await
        .unwrap();
    assert_eq!(child.agent.budget.rounds, Some(3));
    assert_eq!(
        child.agent.capabilities.tools,
        ["list_dir", "message_agent"]
    );
    assert!(!child.clamped.is_empty());

    rt.send_message("w2", Sender::Operator, "list forever", "k", None)
        .await
        .unwrap();
    wait_for(rt, "the budget to stop w2", |e| {
        count(e, "budget.exceeded") == 1
    })
    .await;
    assert_eq!(rt.get_agent("w2").await.unwrap().state, AgentState::Failed);
    let w2_requests: Vec<_> = d
        .mock
        .requests()
        .into_iter()
        .filter(|r| r.agent() == "w2")
        .collect();
    assert_eq!(
        w2_requests.len(),
        3,
        "three rounds, then the budget stopped it"
    );
    assert_eq!(w2_requests[0].tool_names(), ["list_dir", "message_agent"]);
    wait_for(rt, "the parent to be told", |e| {
        e.iter()
            .any(|e| e.kind == "turn.ended" && e.agent_id.as_ref() == Some(&boss.id))
    })
    .await;
    let told = d
        .mock
        .requests()
        .into_iter()
        .rfind(|r| r.agent() == "boss")
        .unwrap()
        .last_user_text()
        .unwrap();
    assert!(
        told.contains("Agent w2 was stopped: budget exceeded"),
        "{told}"
    );
    // A failed agent takes no more messages.
    let err = rt
        .send_message("w2", Sender::Operator, "again", "k2", None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("is failed"), "{err}");
    rt.shutdown().await;
}

#[tokio::test]
async fn the_same_call_repeated_stops_the_turn_and_the_turn_limit_holds() {
    let d = daemon(
        Arc::new(|req: &RecordedRequest| {
            let input = req.last_user_text().unwrap_or_default();
            if input.contains("loop") {
                MockReply::tool_call("list_dir", json!({"path": "."}))
            } else {
                MockReply::Delayed(Duration::from_millis(20), Box::new(MockReply::text("done")))
            }
        }),
        "[daemon]\nmax_concurrent_turns = 2\n",
    )
    .await;
    let rt = &d.runtime;
    let looper = rt
        .spawn_agent(spawn("looper", "worker"), None)
        .await
        .unwrap()
        .agent;
    rt.send_message("looper", Sender::Operator, "loop", "k", None)
        .await
        .unwrap();
    wait_for(rt, "loop detection", |e| {
        count(e, "agent.loop_detected") == 1
    })
    .await;
    let looped: Vec<_> = d
        .mock
        .requests()
        .into_iter()
        .filter(|r| r.agent() == "looper")
        .collect();
    assert_eq!(looped.len(), 3, "stopped at the third identical call");
    assert_eq!(
        rt.get_agent("looper").await.unwrap().state,
        AgentState::Running
    );

    for i in 0..6 {
        let name = format!("p{i}");
        rt.spawn_agent(spawn(&name, "quick"), None).await.unwrap();
        rt.send_message(&name, Sender::Operator, "hi", "k", None)
            .await
            .unwrap();
    }
    wait_for(rt, "six turns", |e| count(e, "turn.ended") == 7).await;
    let events = rt.store().events_after(0, None, 100_000).await.unwrap();
    let (mut running, mut most) = (0i32, 0i32);
    for e in events
        .iter()
        .filter(|e| e.agent_id.as_ref() != Some(&looper.id))
    {
        match e.kind.as_str() {
            "turn.started" => running += 1,
            "turn.ended" => running -= 1,
            _ => {}
        }
        most = most.max(running);
    }
    assert!(
        (1..=2).contains(&most),
        "{most} turns ran at once with a limit of 2"
    );
    rt.shutdown().await;
}

#[tokio::test]
async fn a_turn_that_fails_on_the_model_is_retried_later_not_dropped() {
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = calls.clone();
    let d = daemon(
        Arc::new(move |_req: &RecordedRequest| {
            if seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                MockReply::status(503, "overloaded")
            } else {
                MockReply::text("done after all")
            }
        }),
        "",
    )
    .await;
    let rt = &d.runtime;
    let w = rt
        .spawn_agent(spawn("w1", "worker"), None)
        .await
        .unwrap()
        .agent;
    let sent = rt
        .send_message("w1", Sender::Operator, "do it", "k1", Some(60))
        .await
        .unwrap();
    wait_for(rt, "the retried request to be answered", |e| {
        count(e, "request.answered") == 1
    })
    .await;
    let events = rt.store().events_after(0, Some(&w.id), 1000).await.unwrap();
    assert_eq!(count(&events, "turn.retry_scheduled"), 1);
    let item = rt.get_pending(&sent.request_id.unwrap()).await.unwrap();
    assert_eq!(item.answer.as_deref(), Some("done after all"));
    let done = rt.store().inbox(&w.id, InboxStatus::Done).await.unwrap();
    assert_eq!((done.len(), done[0].attempts), (1, 2));
    let retry_input = d.mock.requests()[1].last_user_text().unwrap();
    assert!(
        retry_input.contains("an earlier attempt at this message did not finish"),
        "{retry_input}"
    );
    rt.shutdown().await;
}

#[tokio::test]
async fn a_retried_message_sends_new_actions_but_not_the_ones_already_made() {
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = calls.clone();
    let d = daemon(
        Arc::new(move |req: &RecordedRequest| {
            if req.agent() != "w1" {
                return MockReply::text("ok");
            }
            match seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
                0 | 2 => MockReply::tool_call("message_agent", json!({"to": "sink", "text": "A"})),
                1 => MockReply::status(503, "overloaded"),
                3 => MockReply::tool_call("message_agent", json!({"to": "sink", "text": "B"})),
                4 => MockReply::tool_call("broadcast", json!({"room": "#control", "text": "obey"})),
                _ => MockReply::text("done"),
            }
        }),
        "",
    )
    .await;
    let rt = &d.runtime;
    let sink = rt
        .spawn_agent(spawn("sink", "worker"), None)
        .await
        .unwrap()
        .agent;
    rt.pause_agent("sink", "collects").await.unwrap();
    rt.spawn_agent(spawn("w1", "worker"), None).await.unwrap();
    rt.send_message("w1", Sender::Operator, "tell sink", "k1", None)
        .await
        .unwrap();
    wait_for(rt, "the retried turn to end", |e| {
        e.iter()
            .any(|e| e.kind == "turn.ended" && e.data["outcome"]["status"] == "completed")
    })
    .await;
    let bodies: Vec<String> = rt
        .store()
        .inbox(&sink.id, InboxStatus::Pending)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.body)
        .collect();
    assert_eq!(
        bodies,
        ["A", "B"],
        "A once despite the replay, and the new B"
    );
    let results = d.mock.requests().last().unwrap().tool_results();
    assert!(
        results.iter().any(|r| r.contains("already sent to sink")),
        "{results:?}"
    );
    assert!(results.iter().any(|r| r == "sent to sink"), "{results:?}");
    assert!(
        results
            .iter()
            .any(|r| r.contains("only the operator posts to #control")),
        "{results:?}"
    );
    let denied = rt
        .store()
        .audit_records(reef_store::AuditFilter {
            kind: Some("cap.denied".into()),
            ..reef_store::AuditFilter::default()
        })
        .await
        .unwrap();
    assert!(
        denied
            .iter()
            .any(|r| r.data["right"] == "room" && r.data["room"] == "#control"),
        "{denied:?}"
    );
    rt.shutdown().await;
}

#[tokio::test]
async fn a_spent_cost_budget_stops_the_agent() {
    let d = daemon(
        Arc::new(|req: &RecordedRequest| {
            MockReply::tool_call(
                "list_dir",
                json!({"path": format!("{}", req.message_count())}),
            )
        }),
        // $1 per token: any request costs more than the child's whole budget.
        "[prices.\"m\"]\ninput = 1000000.0\noutput = 1000000.0\n",
    )
    .await;
    let rt = &d.runtime;
    let mut parent = rt
        .spawn_agent(spawn("boss", "manager"), None)
        .await
        .unwrap()
        .agent;
    parent.budget.cost_micros = Some(5_000_000);
    let child = rt
        .spawn_agent(spawn("spender", "worker"), Some(&parent))
        .await
        .unwrap();
    assert_eq!(
        child.agent.budget.cost_micros,
        Some(5_000_000),
        "clamped to the parent's"
    );
    rt.send_message("spender", Sender::Operator, "spend", "k", None)
        .await
        .unwrap();
    wait_for(rt, "the cost budget to stop it", |e| {
        count(e, "budget.exceeded") == 1
    })
    .await;
    let events = rt
        .store()
        .events_after(0, Some(&child.agent.id), 1000)
        .await
        .unwrap();
    let exceeded = events.iter().find(|e| e.kind == "budget.exceeded").unwrap();
    assert_eq!(exceeded.data["budget"], "cost_micros");
    let usage = events.iter().find(|e| e.kind == "model.usage").unwrap();
    assert!(
        usage.data["cost_micros"].as_u64().unwrap() > 5_000_000,
        "{}",
        usage.data
    );
    assert_eq!(
        rt.get_agent("spender").await.unwrap().state,
        AgentState::Failed
    );
    let sent = d
        .mock
        .requests()
        .into_iter()
        .filter(|r| r.agent() == "spender")
        .count();
    assert_eq!(sent, 1, "stopped after the first priced round");
    rt.shutdown().await;
}

#[tokio::test]
async fn an_ephemeral_agent_is_destroyed_once_its_task_is_done() {
    let d = daemon(Arc::new(|_| MockReply::text("all done")), "").await;
    let rt = &d.runtime;
    let spawned = rt
        .spawn_agent(
            SpawnRequest {
                name: "once".into(),
                template: "worker".into(),
                task: Some("do the one thing".into()),
                ephemeral: true,
                ..SpawnRequest::default()
            },
            None,
        )
        .await
        .unwrap();
    assert!(spawned.agent.ephemeral);
    wait_for(rt, "the agent destroyed", |events| {
        events.iter().any(|e| e.kind == "agent.destroyed")
    })
    .await;
    assert!(rt.get_agent("once").await.is_err());
    let events = rt.store().events_after(0, None, 10_000).await.unwrap();
    let ended = events.iter().find(|e| e.kind == "turn.ended").unwrap();
    assert_eq!(ended.data["outcome"]["text"], "all done");
    assert_eq!(d.mock.requests().len(), 1);
}
