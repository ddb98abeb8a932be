//! The OpenAI-compatible endpoint through the router: an agent's answer with usage, the
//! stream's chunks and `[DONE]`, and the inputs it refuses.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use reef_runtime::{Runtime, SpawnRequest};
use reef_test_support::{MockLlm, TestHome};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::support::TOKEN;

async fn start() -> (axum::Router, Runtime, MockLlm, TestHome) {
    let crate::support::Served {
        router,
        runtime,
        mock,
        home,
    } = crate::support::serve("the reef is fine", |_| String::new()).await;
    runtime
        .spawn_agent(
            SpawnRequest {
                name: "ada".into(),
                template: "worker".into(),
                ..SpawnRequest::default()
            },
            None,
        )
        .await
        .unwrap();
    (router, runtime, mock, home)
}

async fn post(router: &axum::Router, body: Value) -> (StatusCode, String) {
    let req = Request::builder()
        .method("POST")
        .uri("/v1/chat/completions")
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let response = router.clone().oneshot(req).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

#[tokio::test]
async fn an_agent_answers_a_completion_whole_or_streamed() {
    let (router, _rt, mock, _home) = start().await;
    let (status, body) = post(
        &router,
        json!({"model": "agent:ada", "messages": [{"role": "user", "content": "how is the reef?"}]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let reply: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(reply["object"], "chat.completion");
    assert_eq!(
        reply["choices"][0]["message"]["content"],
        "the reef is fine"
    );
    assert!(
        reply["usage"]["total_tokens"].as_u64().unwrap() > 0,
        "{reply}"
    );
    let asked = mock.requests()[0].last_user_text().unwrap();
    assert!(asked.contains("how is the reef?"), "{asked}");

    let (status, body) = post(
        &router,
        json!({"model": "agent:ada", "stream": true, "stream_options": {"include_usage": true},
               "messages": [{"role": "user", "content": "again?"}]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let data: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(data.last(), Some(&"[DONE]"), "{body}");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "the reef is fine");
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    assert!(
        chunks.last().unwrap()["usage"]["total_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );
}

#[tokio::test]
async fn bad_completions_are_refused_with_the_reason() {
    let (router, _rt, _mock, _home) = start().await;
    let big = "x".repeat(16 * 1024 + 1);
    for (body, status, says) in [
        (
            json!({"model": "agent:ada", "messages": [{"role": "user", "content": big}]}),
            StatusCode::PAYLOAD_TOO_LARGE,
            "16384",
        ),
        (
            json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}),
            StatusCode::BAD_REQUEST,
            "agent:NAME",
        ),
        (
            json!({"model": "agent:nobody", "messages": [{"role": "user", "content": "hi"}]}),
            StatusCode::NOT_FOUND,
            "nobody",
        ),
        (
            json!({"model": "agent:ada", "messages": [{"role": "system", "content": "hi"}]}),
            StatusCode::BAD_REQUEST,
            "no user message",
        ),
        (json!({"messages": []}), StatusCode::BAD_REQUEST, "model"),
    ] {
        let (got, text) = post(&router, body.clone()).await;
        assert_eq!(got, status, "{body}: {text}");
        assert!(text.contains(says), "{body}: {text}");
    }
}

#[tokio::test]
async fn a_template_model_runs_a_one_off_agent_with_the_conversation_as_context() {
    let (router, rt, mock, _home) = start().await;
    let (status, body) = post(
        &router,
        json!({"model": "template:worker", "messages": [
            {"role": "user", "content": "my name is Ada"},
            {"role": "assistant", "content": "hello Ada"},
            {"role": "user", "content": "what is my name?"}]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let task = mock.requests()[0].last_user_text().unwrap();
    assert!(
        task.contains("[user] my name is Ada\n[assistant] hello Ada"),
        "{task}"
    );
    assert!(
        task.contains("The message to answer:\nwhat is my name?"),
        "{task}"
    );
    // Only ada stays; the one-off agent is destroyed once it has answered.
    for _ in 0..3000 {
        if rt.list_agents().await.unwrap().len() == 1 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the one-off agent was not destroyed");
}

#[tokio::test]
async fn an_answer_holding_a_secret_or_a_credential_does_not_leave_as_it_is() {
    const SECRET: &str = "hunter-9Xq2Lm7Rv4Tz";
    let answers: &[&str] = &[
        "the key is hunter-9Xq2Lm7Rv4Tz, use it",
        "try ghp_R7x2Lq9Zt4Wm8Kp3Vn6Bd1Hs5Jc0Fy2Ga7Qe now",
    ];
    let mock = MockLlm::start_responder(std::sync::Arc::new(move |req| {
        let asked = req.last_user_text().unwrap_or_default();
        reef_test_support::MockReply::text(if asked.contains("key") {
            answers[0]
        } else {
            answers[1]
        })
    }))
    .await;
    let served = crate::support::serve_on(mock, |home| {
        let path = home.reef_home().join("api.secret");
        std::fs::write(&path, SECRET).unwrap();
        "[secrets.API]\nfile = \"api.secret\"\n\n[safety.leaks]\ngithub_token = \"sanitize\"\n"
            .into()
    })
    .await;
    served
        .runtime
        .spawn_agent(
            SpawnRequest {
                name: "ada".into(),
                template: "worker".into(),
                ..SpawnRequest::default()
            },
            None,
        )
        .await
        .unwrap();
    let ask =
        |text: &str| json!({"model": "agent:ada", "messages": [{"role": "user", "content": text}]});
    let (status, body) = post(&served.router, ask("the key?")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let reply: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        reply["choices"][0]["message"]["content"],
        "[answer withheld: it held the secret API (see `reef audit query --kind leak.`)]"
    );
    assert!(!body.contains(SECRET));
    let (_, body) = post(&served.router, ask("a token?")).await;
    let reply: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        reply["choices"][0]["message"]["content"],
        "try [redacted github_token] now"
    );
    let records = served
        .runtime
        .store()
        .audit_records(reef_store::AuditFilter {
            kind: Some("leak.".into()),
            ..reef_store::AuditFilter::default()
        })
        .await
        .unwrap();
    let kinds: Vec<&str> = records.iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(kinds, ["leak.sanitized", "leak.blocked"], "{records:?}");
    assert_eq!(records[1].data["secrets"], json!(["API"]));
    assert_eq!(records[1].data["place"], "openai");
}
