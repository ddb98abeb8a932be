//! The mock server: script consumption, recording, both wire formats, errors and shutdown.

use crate::raw::{post_json, request};
use reef_core::WireApi;
use reef_test_support::{MockLlm, MockReply};
use serde_json::{Value, json};

const OPENAI: &str = "/v1/chat/completions";
const ANTHROPIC: &str = "/v1/messages";

/// The `data:` payloads of an SSE body, with their `event:` names.
fn sse_events(body: &str) -> Vec<(Option<String>, String)> {
    body.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let mut name = None;
            let mut data = String::new();
            for line in e.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = Some(n.to_owned());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push_str(d);
                }
            }
            (name, data)
        })
        .collect()
}

#[tokio::test]
async fn openai_non_stream_reply_and_recording() {
    let mock = MockLlm::start(vec![MockReply::text("Hello")]).await;
    assert_eq!(mock.remaining(), 1);
    let body = json!({"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}]});
    let resp = post_json(mock.addr(), OPENAI, &body).await;
    assert_eq!(resp.status, 200);
    let v = resp.json();
    assert_eq!(v["choices"][0]["message"]["content"], "Hello");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["model"], "gpt-x");
    let input = (body.to_string().len() / 4) as u64;
    assert_eq!(v["usage"]["prompt_tokens"], input);
    assert_eq!(v["usage"]["completion_tokens"], 2); // 5 / 4 + 1
    assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 0);

    assert_eq!(mock.remaining(), 0);
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].path, OPENAI);
    assert_eq!(reqs[0].wire(), WireApi::OpenaiChat);
    assert_eq!(reqs[0].header("x-api-key"), Some("k1"));
    assert_eq!(reqs[0].body, body);
    assert_eq!(reqs[0].last_user_text().as_deref(), Some("hi"));
    assert!(mock.base_url().ends_with("/v1"));
}

#[tokio::test]
async fn exhausted_script_answers_500_and_still_records() {
    let mock = MockLlm::start(vec![]).await;
    let resp = post_json(mock.addr(), ANTHROPIC, &json!({"messages": []})).await;
    assert_eq!(resp.status, 500);
    assert_eq!(resp.body, "mock script exhausted");
    assert_eq!(mock.requests().len(), 1);
    assert_eq!(mock.requests()[0].wire(), WireApi::Anthropic);
}

#[tokio::test]
async fn status_replies_carry_retry_after() {
    let mock = MockLlm::start(vec![MockReply::Status {
        code: 429,
        body: r#"{"error":{"message":"slow down"}}"#.into(),
        retry_after_secs: Some(7),
    }])
    .await;
    let resp = post_json(mock.addr(), OPENAI, &json!({})).await;
    assert_eq!(resp.status, 429);
    assert_eq!(resp.header("retry-after"), Some("7"));
    assert_eq!(resp.json()["error"]["message"], "slow down");
}

#[tokio::test]
async fn tool_call_ids_are_unique_across_requests_and_wires() {
    let mock = MockLlm::start(vec![
        MockReply::ToolCalls(vec![("a".into(), json!({"x": 1})), ("b".into(), json!({}))]),
        MockReply::tool_call("c", json!({"y": "z"})),
    ])
    .await;
    let first = post_json(mock.addr(), OPENAI, &json!({})).await.json();
    let calls = &first["choices"][0]["message"]["tool_calls"];
    assert_eq!(calls[0]["id"], "call_1");
    assert_eq!(calls[1]["id"], "call_2");
    assert_eq!(calls[0]["function"]["arguments"], r#"{"x":1}"#);
    assert_eq!(first["choices"][0]["finish_reason"], "tool_calls");
    let second = post_json(mock.addr(), ANTHROPIC, &json!({})).await.json();
    assert_eq!(second["content"][0]["type"], "tool_use");
    assert_eq!(second["content"][0]["id"], "toolu_3");
    assert_eq!(second["content"][0]["input"], json!({"y": "z"}));
    assert_eq!(second["stop_reason"], "tool_use");
}

#[tokio::test]
async fn openai_stream_follows_the_chunk_format() {
    let mock = MockLlm::start(vec![MockReply::TextWithToolCalls(
        "Let me look.".into(),
        vec![("read_file".into(), json!({"path": "notes/todo.txt"}))],
    )])
    .await;
    let body = json!({"stream": true, "stream_options": {"include_usage": true}, "messages": []});
    let resp = post_json(mock.addr(), OPENAI, &body).await;
    assert_eq!(resp.header("content-type"), Some("text/event-stream"));
    let events = sse_events(&resp.body);
    assert_eq!(events.last().unwrap().1, "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    let text: String = chunks
        .iter()
        .filter_map(|c| c.pointer("/choices/0/delta/content")?.as_str())
        .collect();
    assert_eq!(text, "Let me look.");
    let first_call = chunks
        .iter()
        .find_map(|c| c.pointer("/choices/0/delta/tool_calls/0/id"))
        .unwrap();
    assert_eq!(first_call, "call_1");
    let args: String = chunks
        .iter()
        .filter_map(|c| {
            c.pointer("/choices/0/delta/tool_calls/0/function/arguments")?
                .as_str()
        })
        .collect();
    assert_eq!(args, r#"{"path":"notes/todo.txt"}"#);
    let finish: Vec<&str> = chunks
        .iter()
        .filter_map(|c| c.pointer("/choices/0/finish_reason")?.as_str())
        .collect();
    assert_eq!(finish, ["tool_calls"]);
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["prompt_tokens"], body.to_string().len() / 4);
}

#[tokio::test]
async fn anthropic_stream_follows_the_event_format() {
    let mock = MockLlm::start(vec![MockReply::text("Hi there, friend")]).await;
    let body = json!({"stream": true, "messages": []});
    let resp = post_json(mock.addr(), ANTHROPIC, &body).await;
    let events = sse_events(&resp.body);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_deref().unwrap()).collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"]);
    let mut text = String::new();
    for (name, data) in &events {
        let v: Value = serde_json::from_str(data).unwrap();
        assert_eq!(v["type"], name.as_deref().unwrap());
        if let Some(t) = v.pointer("/delta/text") {
            text.push_str(t.as_str().unwrap());
        }
    }
    assert_eq!(text, "Hi there, friend");
    let start: Value = serde_json::from_str(&events[0].1).unwrap();
    assert_eq!(
        start["message"]["usage"]["input_tokens"],
        body.to_string().len() / 4
    );
    let delta: Value = serde_json::from_str(&events[events.len() - 2].1).unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");
    assert_eq!(delta["usage"]["output_tokens"], 16 / 4 + 1);
}

#[tokio::test]
async fn malformed_and_cut_replies() {
    let mock = MockLlm::start(vec![
        MockReply::MalformedBody("this is not json".into()),
        MockReply::StreamCut("partial".into()),
        MockReply::StreamCut("partial".into()),
    ])
    .await;
    let malformed = post_json(mock.addr(), OPENAI, &json!({})).await;
    assert_eq!(malformed.status, 200);
    assert_eq!(malformed.body, "this is not json");
    let cut = post_json(mock.addr(), OPENAI, &json!({"stream": true})).await;
    assert!(cut.body.contains("partial"));
    assert!(!cut.body.contains("[DONE]") && !cut.body.contains("finish_reason\":\"stop"));
    let cut_json = post_json(mock.addr(), ANTHROPIC, &json!({})).await;
    assert!(serde_json::from_str::<Value>(&cut_json.body).is_err());
}

#[tokio::test]
async fn models_route_does_not_consume_the_script() {
    let mock = MockLlm::start(vec![MockReply::text("x")]).await;
    let resp = request(mock.addr(), "GET", "/v1/models", &[], "").await;
    assert_eq!(resp.status, 200);
    assert_eq!(resp.json()["data"][0]["id"], "mock-model");
    let other = request(mock.addr(), "GET", "/v1/elsewhere", &[], "").await;
    assert_eq!(other.status, 404);
    assert_eq!(mock.remaining(), 1);
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn start_blocking_serves_from_its_own_thread() {
    let mock = MockLlm::start_blocking(vec![MockReply::text("sync")]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let resp = runtime.block_on(post_json(mock.addr(), OPENAI, &json!({})));
    assert_eq!(resp.json()["choices"][0]["message"]["content"], "sync");
    assert_eq!(mock.remaining(), 0);
    drop(mock);
}
