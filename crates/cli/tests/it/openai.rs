//! The OpenAI-compatible endpoint with the `openai` Python SDK as the client, against a real
//! `reef serve`: a streamed completion from an agent equals what its transcript stores, a
//! one-off agent from a template answers with the conversation as context, and an input
//! over 16 KiB is refused with 413.

use crate::daemon::Daemon;
use reef_test_support::{MockLlm, MockReply, RecordedRequest, TestHome};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

/// The Python that has the `openai` SDK: `REEF_TEST_PYTHON`, else the venv `.ci/run` makes.
fn python() -> PathBuf {
    reef_test_support::venv_python("openai", "openai>=1.40,<3")
}

const CLIENT: &str = r#"
import json, sys
import openai
client = openai.OpenAI(base_url=sys.argv[1], api_key=sys.argv[2], timeout=60.0, max_retries=0)
out = {"models": [m.id for m in client.models.list()]}
stream = client.chat.completions.create(
    model="agent:ada",
    messages=[{"role": "user", "content": "tell me about reefs"}],
    stream=True,
    stream_options={"include_usage": True},
)
text, usage, finish = "", None, None
for chunk in stream:
    if chunk.choices:
        if chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
        finish = chunk.choices[0].finish_reason or finish
    if chunk.usage:
        usage = chunk.usage.total_tokens
out.update(streamed=text, usage=usage, finish=finish)
once = client.chat.completions.create(
    model="template:worker",
    messages=[
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "my name is Ada"},
        {"role": "assistant", "content": "hello Ada"},
        {"role": "user", "content": "what is my name?"},
    ],
)
out.update(once=once.choices[0].message.content, once_usage=once.usage.total_tokens)
try:
    client.chat.completions.create(model="agent:ada", messages=[{"role": "user", "content": "x" * 17000}])
    out["big"] = 200
except openai.APIStatusError as e:
    out["big"] = e.status_code
try:
    client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    out["unknown"] = 200
except openai.APIStatusError as e:
    out["unknown"] = e.status_code
print(json.dumps(out))
"#;

fn model(req: &RecordedRequest) -> MockReply {
    let input = req.last_user_text().unwrap_or_default();
    if input.contains("what is my name?") {
        // The one-off agent was given the conversation as context.
        let named = input.contains("[user] my name is Ada");
        return MockReply::text(if named {
            "Your name is Ada."
        } else {
            "I do not know."
        });
    }
    MockReply::text(
        "A reef is a ridge of rock or coral just below the surface of the sea, home to a quarter of all marine species.",
    )
}

#[tokio::test]
async fn the_openai_sdk_streams_an_agents_answer_and_the_transcript_agrees() {
    let python = python();
    let mock = MockLlm::start_responder(Arc::new(model)).await;
    let home = TestHome::new();
    home.write_config(&format!(
        "[providers.main]\nbase_url = \"{}\"\nmodel = \"mock-model\"\nstream = false\n\
         max_retries = 0\n\n[daemon]\nlisten = \"127.0.0.1:0\"\n\n[sandbox]\nrequired = true\n",
        mock.base_url()
    ));
    let daemon = Daemon::start(&home).await;
    daemon
        .post(
            "/v1/agents",
            serde_json::json!({"name": "ada", "template": "worker"}),
        )
        .await;
    // The client blocks; the mock model runs on this test's runtime and must keep serving.
    let args = [format!("{}/v1", daemon.base()), daemon.token().to_owned()];
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .args(["-c", CLIENT, &args[0], &args[1]])
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    if !out.status.success() {
        let events = daemon.get("/v1/events?limit=100").await;
        panic!(
            "the SDK client failed:\n{}\nevents: {events:#}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    let models: Vec<&str> = result["models"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        models.contains(&"agent:ada") && models.contains(&"template:worker"),
        "{models:?}"
    );
    let streamed = result["streamed"].as_str().unwrap();
    assert!(streamed.starts_with("A reef is a ridge"), "{result}");
    assert_eq!(result["finish"], "stop");
    assert!(result["usage"].as_u64().unwrap() > 0, "{result}");
    // What the stream carried is what the transcript stores as ada's answer.
    let transcript = daemon.get("/v1/agents/ada/transcript").await;
    let last = transcript
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|e| e["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(
        last["message"]["content"].as_str(),
        Some(streamed),
        "{last}"
    );
    // The one-off agent read the earlier messages as context and is gone.
    assert_eq!(result["once"], "Your name is Ada.");
    assert!(result["once_usage"].as_u64().unwrap() > 0);
    // The one-off agent is destroyed once it has answered (by a task of its own: waited for).
    daemon
        .wait("the one-off agent destroyed", "/v1/agents", |agents| {
            agents
                .as_array()
                .is_some_and(|a| a.len() == 1 && a[0]["name"] == "ada")
        })
        .await;
    assert_eq!(result["big"], 413);
    assert_eq!(result["unknown"], 400);
    // The streamed request reached the model as the user's words.
    let asked = mock.requests().iter().any(|r| {
        r.last_user_text()
            .is_some_and(|t| t.contains("tell me about reefs"))
    });
    assert!(asked);
}
