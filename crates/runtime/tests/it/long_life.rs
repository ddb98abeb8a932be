//! Agents that live long: a daemon agent's context stays inside its model's window over
//! hundreds of messages, a provider's context-length refusal costs one compaction and no
//! failed turn, operators compact and reset sessions, and messages that arrive mid-turn are
//! steered in, queued or collected as `queue_mode` says.

use crate::daemon::{count, daemon_with, spawn, wait_for};
use reef_core::{AgentState, EventMsg};
use reef_runtime::{Runtime, Sender};
use reef_store::InboxStatus;
use reef_test_support::{MockReply, RecordedRequest};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Messages of the long conversation.
const LONG: usize = 300;

/// Marks the summarizer's request (its system prompt).
const SUMMARIZER: &str = "You compact the history";

fn is_summary(r: &RecordedRequest) -> bool {
    r.system_text().contains(SUMMARIZER)
}

/// About 500 tokens of text, numbered.
fn filler(n: usize) -> String {
    format!("note {n}: {}", "lorem ipsum dolor sit amet ".repeat(74))
}

/// A model that summarizes with the code word, acknowledges everything else, and (with a
/// limit) refuses longer prompts the way OpenAI does.
fn summarizing(limit: Option<u64>) -> reef_test_support::Responder {
    Arc::new(move |r: &RecordedRequest| {
        if let Some(limit) = limit
            && r.prompt_tokens() > limit
        {
            return MockReply::status(
                400,
                r#"{"error":{"message":"maximum context length exceeded","code":"context_length_exceeded"}}"#,
            );
        }
        if is_summary(r) {
            MockReply::text("Summary: the operator's code word is PELICAN.")
        } else {
            MockReply::text("ack")
        }
    })
}

async fn send_all(rt: &Runtime, agent: &str, texts: &[String]) {
    for (i, text) in texts.iter().enumerate() {
        rt.send_message(agent, Sender::Operator, text, &format!("k{i}"), None)
            .await
            .unwrap();
    }
}

/// Waits until the agent's inbox holds `n` finished messages (polled; a long conversation
/// takes minutes on a slow machine, so this waits longer than `wait_for`).
async fn wait_long(rt: &Runtime, agent: &str, n: usize) {
    let id = rt.get_agent(agent).await.unwrap().id;
    for _ in 0..6000 {
        if rt
            .store()
            .inbox(&id, InboxStatus::Done)
            .await
            .unwrap()
            .len()
            >= n
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let events = rt.store().events_after(0, None, 1_000_000).await.unwrap();
    let tail: Vec<String> = events
        .iter()
        .rev()
        .filter(|e| e.kind != "message.delivered")
        .take(12)
        .map(|e| {
            format!(
                "{} {}",
                e.kind,
                e.data.to_string().chars().take(300).collect::<String>()
            )
        })
        .collect();
    panic!(
        "{agent} did not finish {n} messages ({} turns ended); last events:\n{}",
        count(&events, "turn.ended"),
        tail.join("\n")
    );
}

fn completed_turns(events: &[reef_store::StoredEvent]) -> usize {
    events
        .iter()
        .filter(|e| e.kind == "turn.ended" && e.data["outcome"]["status"] == "completed")
        .count()
}

#[tokio::test]
async fn a_daemon_agent_answers_300_long_messages_inside_a_4096_token_window() {
    let d = daemon_with(summarizing(None), "context_tokens = 4096\n", "").await;
    let rt = &d.runtime;
    // The manager template's token budget (2M) covers 300 turns near a 4,096-token window.
    rt.spawn_agent(spawn("long", "manager"), None)
        .await
        .unwrap();
    let mut texts = vec!["Remember this: the code word is PELICAN.".to_owned()];
    texts.extend((2..=LONG).map(filler));
    send_all(rt, "long", &texts).await;
    wait_long(rt, "long", LONG).await;

    let events = rt.store().events_after(0, None, 1_000_000).await.unwrap();
    assert_eq!(completed_turns(&events), LONG);
    let requests = d.mock.requests();
    for r in &requests {
        assert!(
            r.prompt_tokens() <= 4096,
            "a request of {} tokens",
            r.prompt_tokens()
        );
    }
    let last = requests.iter().rev().find(|r| !is_summary(r)).unwrap();
    let sent = serde_json::to_string(&last.body).unwrap();
    assert!(
        sent.contains(&format!("note {LONG}:")),
        "the last message is in its turn"
    );
    assert!(
        sent.contains("PELICAN"),
        "the first message's fact survives"
    );
    assert!(!sent.contains("note 150:"), "the middle was compacted");

    let agent = rt.get_agent("long").await.unwrap();
    let session = agent.session.unwrap();
    let messages = rt.store().messages(&session).await.unwrap();
    assert_eq!(
        messages.len(),
        2 * LONG,
        "the transcript keeps every message"
    );
    let compactions = rt.store().compactions(&session).await.unwrap();
    assert!(!compactions.is_empty());
    assert_eq!(count(&events, "session.compacted"), compactions.len());
    assert!(
        compactions
            .iter()
            .all(|c| c.summary.as_deref() == Some("Summary: the operator's code word is PELICAN."))
    );
}

#[tokio::test]
async fn a_context_length_refusal_costs_one_compaction_and_no_failed_turn() {
    // reef believes the window is 8,192 tokens; the provider refuses past 4,500.
    let d = daemon_with(summarizing(Some(4500)), "context_tokens = 8192\n", "").await;
    let rt = &d.runtime;
    rt.spawn_agent(spawn("tight", "worker"), None)
        .await
        .unwrap();
    let texts: Vec<String> = (1..=30).map(filler).collect();
    send_all(rt, "tight", &texts).await;
    wait_long(rt, "tight", 30).await;

    let events = rt.store().events_after(0, None, 1_000_000).await.unwrap();
    assert_eq!(completed_turns(&events), 30);
    assert_eq!(count(&events, "turn.retry_scheduled"), 0);
    let refused = d
        .mock
        .requests()
        .iter()
        .filter(|r| !is_summary(r) && r.prompt_tokens() > 4500)
        .count();
    assert!(refused > 0, "the provider's limit was never reached");
    let by_error = events
        .iter()
        .filter(|e| e.kind == "session.compacted" && e.data["trigger"] == "context_length_error")
        .count();
    assert_eq!(by_error, refused, "one compaction per refusal");
}

#[tokio::test]
async fn the_operator_compacts_and_resets_an_agents_session() {
    let d = daemon_with(summarizing(None), "context_tokens = 200000\n", "").await;
    let rt = &d.runtime;
    rt.spawn_agent(spawn("keeper", "worker"), None)
        .await
        .unwrap();
    let texts: Vec<String> = (1..=8).map(filler).collect();
    send_all(rt, "keeper", &texts).await;
    wait_for(rt, "8 turns", |e| count(e, "turn.ended") == 8).await;

    let compacted = rt.compact_agent("keeper").await.unwrap();
    let EventMsg::ContextCompacted {
        from_seq,
        to_seq,
        summary,
        ..
    } = compacted
    else {
        panic!("{compacted:?}");
    };
    assert_eq!(
        (from_seq, to_seq),
        (2, 8),
        "head and the last four turns stay"
    );
    assert_eq!(
        summary.as_deref(),
        Some("Summary: the operator's code word is PELICAN.")
    );
    let again = rt.compact_agent("keeper").await.unwrap_err();
    assert!(again.to_string().contains("nothing to compact"), "{again}");
    assert!(rt.compact_agent("nosuch").await.is_err());

    let before = rt.get_agent("keeper").await.unwrap().session.unwrap();
    let fresh = rt.reset_agent("keeper").await.unwrap();
    assert_ne!(fresh, before);
    assert_eq!(
        rt.get_agent("keeper").await.unwrap().session,
        Some(fresh.clone())
    );
    rt.send_message(
        "keeper",
        Sender::Operator,
        "first after reset",
        "k-reset",
        None,
    )
    .await
    .unwrap();
    wait_for(rt, "the turn after the reset", |e| {
        count(e, "turn.ended") == 9
    })
    .await;
    let last = d.mock.requests().last().unwrap().clone();
    assert_eq!(
        last.message_count(),
        2,
        "system prompt and the new message only"
    );
    assert_eq!(rt.store().messages(&fresh).await.unwrap().len(), 2);
    assert_eq!(rt.store().messages(&before).await.unwrap().len(), 16);
    let events = rt.store().events_after(0, None, 100_000).await.unwrap();
    assert_eq!(count(&events, "session.compacted"), 1);
    assert_eq!(count(&events, "session.reset"), 1);
    assert_eq!(
        rt.get_agent("keeper").await.unwrap().state,
        AgentState::Running
    );
}

/// A model for the steering tests: the first task runs a tool that waits for the test's
/// go-ahead; any request whose last user message mentions a later task is answered by
/// naming what it saw.
fn steering_model() -> reef_test_support::Responder {
    Arc::new(|r: &RecordedRequest| {
        let last = r.last_user_text().unwrap_or_default();
        if last.contains("task two") || last.contains("task three") {
            let mut seen = Vec::new();
            for word in ["task two", "task three"] {
                if last.contains(word) {
                    seen.push(word);
                }
            }
            return MockReply::text(format!("saw {}", seen.join(" and ")));
        }
        if r.ends_with_tool_result() {
            return MockReply::text("task one done");
        }
        MockReply::tool_call(
            "shell",
            json!({"command": "touch started; while [ ! -e go ]; do sleep 0.05; done; echo waited"}),
        )
    })
}

/// Runs task one (its tool waits for the go-ahead), sends `later` while the tool runs and
/// waits until the worker has dealt with them as its mode says, then lets the tool finish.
async fn steer_case(mode: &str, later: &[&str]) -> crate::daemon::Daemon {
    let d = crate::daemon::daemon_with(
        steering_model(),
        "",
        &format!("[daemon]\nqueue_mode = \"{mode}\"\n"),
    )
    .await;
    let rt = &d.runtime;
    let agent = rt
        .spawn_agent(spawn("s", "worker"), None)
        .await
        .unwrap()
        .agent;
    let workspace = PathBuf::from(&agent.workspace);
    rt.send_message("s", Sender::Operator, "task one: wait for go", "k1", None)
        .await
        .unwrap();
    for _ in 0..2000 {
        if workspace.join("started").exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(workspace.join("started").exists(), "the tool never started");
    for (i, text) in later.iter().enumerate() {
        rt.send_message("s", Sender::Operator, text, &format!("later{i}"), None)
            .await
            .unwrap();
    }
    if mode == "steer" {
        // The worker claims them at once, to steer them into the running turn.
        for _ in 0..2000 {
            let pending = rt
                .store()
                .inbox(&agent.id, InboxStatus::Pending)
                .await
                .unwrap();
            if pending.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    std::fs::write(workspace.join("go"), "").unwrap();
    d
}

#[tokio::test]
async fn steer_puts_a_mid_turn_message_into_the_running_turn() {
    let d = steer_case("steer", &["task two: also this"]).await;
    let rt = &d.runtime;
    wait_for(rt, "the steered turn to end", |e| {
        count(e, "turn.ended") == 1 && count(e, "turn.steered") == 1
    })
    .await;
    let requests = d.mock.requests();
    assert_eq!(
        requests.len(),
        2,
        "one turn: the tool call, then the answer"
    );
    let second = &requests[1];
    assert_eq!(second.tool_results().len(), 1, "the tool's result is there");
    assert!(second.last_user_text().unwrap().contains("task two"));
    let events = rt.store().events_after(0, None, 1000).await.unwrap();
    let ended = events.iter().find(|e| e.kind == "turn.ended").unwrap();
    assert_eq!(ended.data["outcome"]["text"], "saw task two");
    // Messages are finished after `turn.ended` is recorded: wait for both.
    wait_long(rt, "s", 2).await;
    let agent = rt.get_agent("s").await.unwrap();
    let done = rt
        .store()
        .inbox(&agent.id, InboxStatus::Done)
        .await
        .unwrap();
    assert_eq!(done.len(), 2, "both messages are finished by the one turn");
}

#[tokio::test]
async fn followup_runs_a_mid_turn_message_as_the_next_turn() {
    let d = steer_case("followup", &["task two: also this"]).await;
    let rt = &d.runtime;
    wait_for(rt, "two turns", |e| count(e, "turn.ended") == 2).await;
    let requests = d.mock.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        !serde_json::to_string(&requests[1].body)
            .unwrap()
            .contains("task two")
    );
    assert!(requests[1].ends_with_tool_result());
    assert!(requests[2].last_user_text().unwrap().contains("task two"));
    let events = rt.store().events_after(0, None, 1000).await.unwrap();
    assert_eq!(count(&events, "turn.steered"), 0);
}

#[tokio::test]
async fn collect_merges_waiting_messages_into_one_next_turn() {
    let d = steer_case("collect", &["task two: this", "task three: and that"]).await;
    let rt = &d.runtime;
    wait_for(rt, "two turns", |e| count(e, "turn.ended") == 2).await;
    let requests = d.mock.requests();
    assert_eq!(
        requests.len(),
        3,
        "task one's two rounds, then one merged turn"
    );
    let merged = requests[2].last_user_text().unwrap();
    assert!(
        merged.contains("task two") && merged.contains("task three"),
        "{merged}"
    );
    let events = rt.store().events_after(0, None, 1000).await.unwrap();
    let ended: Vec<_> = events.iter().filter(|e| e.kind == "turn.ended").collect();
    assert_eq!(
        ended[1].data["outcome"]["text"],
        "saw task two and task three"
    );
}
