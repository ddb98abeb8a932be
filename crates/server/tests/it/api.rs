//! The API over the router in process: auth on every route, error shapes, the agent
//! lifecycle through REST, and compacting and resetting an agent's session.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use reef_runtime::{Runtime, RuntimeOptions, Templates};
use reef_test_support::{MockLlm, MockReply, RecordedRequest, TestHome};
use serde_json::{Value, json};
use std::sync::Arc;
use tower::ServiceExt;

const TOKEN: &str = "0123456789abcdef0123456789abcdef";

struct Api {
    router: axum::Router,
    runtime: Runtime,
    _mock: MockLlm,
    _home: TestHome,
}

async fn api() -> Api {
    api_on(MockLlm::start(vec![MockReply::text("hello")]).await).await
}

/// The API of a runtime whose agents run on `mock`.
async fn api_on(mock: MockLlm) -> Api {
    let home = TestHome::new();
    home.write_config(&format!(
        "[providers.mock]\nbase_url = \"{}\"\nmodel = \"m\"\nstream = false\n\n[sandbox]\nbackend = \"none\"\n",
        mock.base_url()
    ));
    let config = home.load_config();
    let (runtime, _) = Runtime::start(RuntimeOptions {
        config,
        templates: Templates::builtin().unwrap(),
        helper: None,
        model_override: None,
        clock: None,
    })
    .await
    .unwrap();
    Api {
        router: reef_server::router(runtime.clone(), TOKEN, "127.0.0.1:7447".parse().unwrap()),
        runtime,
        _mock: mock,
        _home: home,
    }
}

impl Api {
    /// Polls the event history until agent `agent` has ended `turns` turns.
    async fn await_turns(&self, agent: &str, turns: usize) {
        for _ in 0..3000 {
            let (_, events) = self
                .call(
                    "GET",
                    &format!("/v1/events?agent={agent}&kind=turn.ended"),
                    None,
                )
                .await;
            if events.as_array().is_some_and(|a| a.len() >= turns) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let (_, events) = self.call("GET", "/v1/events", None).await;
        panic!("{agent} never ended {turns} turns: {events:#}");
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        self.call_as(Some(TOKEN), method, path, body).await
    }

    async fn call_as(
        &self,
        token: Option<&str>,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = Request::builder().method(method).uri(path);
        if let Some(token) = token {
            req = req.header("authorization", format!("Bearer {token}"));
        }
        let req = match body {
            Some(body) => req
                .header("content-type", "application/json")
                .body(Body::from(body.to_string())),
            None => req.body(Body::empty()),
        }
        .unwrap();
        let response = self.router.clone().oneshot(req).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        (status, value)
    }
}

#[tokio::test]
async fn every_route_needs_the_token() {
    let api = api().await;
    let doc = reef_server::openapi_document();
    for (path, methods) in doc["paths"].as_object().unwrap() {
        let concrete = path
            .replace("{name}", "x")
            .replace("{room}", "r")
            .replace("{id}", "i");
        for method in methods.as_object().unwrap().keys() {
            let m = method.to_uppercase();
            let (status, body) = api.call_as(None, &m, &concrete, None).await;
            assert_eq!(
                status,
                StatusCode::UNAUTHORIZED,
                "{m} {concrete} without a token"
            );
            assert!(body["error"].as_str().unwrap().contains("Bearer"), "{body}");
            let (status, _) = api.call_as(Some("wrong-token"), &m, &concrete, None).await;
            assert_eq!(
                status,
                StatusCode::UNAUTHORIZED,
                "{m} {concrete} with a wrong token"
            );
        }
    }
    let (status, _) = api.call_as(None, "GET", "/v1/openapi.json", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, health) = api.call("GET", "/v1/health", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(health["status"], "ok");
    assert_eq!(health["lost_events"], 0);
    api.runtime.shutdown().await;
}

#[tokio::test]
async fn bad_requests_name_the_field_and_the_lifecycle_is_enforced() {
    let api = api().await;
    let (status, body) = api
        .call("POST", "/v1/agents", Some(json!({"template": "worker"})))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("missing field `name`"),
        "{body}"
    );
    let (status, body) = api
        .call(
            "POST",
            "/v1/agents",
            Some(json!({"name": "Bad Name", "template": "worker"})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["field"], "name");
    let (status, body) = api
        .call(
            "POST",
            "/v1/agents",
            Some(json!({"name": "w", "template": "nope"})),
        )
        .await;
    assert_eq!(
        (status, body["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("template"))
    );
    assert!(
        body["error"].as_str().unwrap().contains("manager"),
        "lists templates: {body}"
    );

    let (status, agent) = api
        .call(
            "POST",
            "/v1/agents",
            Some(json!({"name": "w", "template": "worker"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{agent}");
    assert_eq!(agent["state"], "running");
    let (status, _) = api
        .call(
            "POST",
            "/v1/agents",
            Some(json!({"name": "w", "template": "worker"})),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, agent) = api.call("POST", "/v1/agents/w/pause", None).await;
    assert_eq!(
        (status, agent["state"].as_str()),
        (StatusCode::OK, Some("paused"))
    );
    let (status, _) = api.call("POST", "/v1/agents/w/stop", None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = api.call("POST", "/v1/agents/w/resume", None).await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "a terminated agent cannot resume: {body}"
    );
    assert!(
        body["error"].as_str().unwrap().contains("terminated"),
        "{body}"
    );
    let (status, body) = api
        .call("PUT", "/v1/agents/w/model", Some(json!({"model": "gpt-9"})))
        .await;
    assert_eq!(
        (status, body["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("model"))
    );
    let (status, _) = api.call("GET", "/v1/agents/nobody", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (status, events) = api
        .call("GET", "/v1/events?agent=w&kind=agent.", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let kinds: Vec<&str> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "agent.spawned",
            "agent.state_changed",
            "agent.state_changed",
            "agent.state_changed"
        ]
    );
    let (_, tail) = api.call("GET", "/v1/events?agent=w&last=2", None).await;
    let seqs: Vec<u64> = tail
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    let all: Vec<u64> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs.len(), 2);
    assert_eq!(
        *seqs.last().unwrap(),
        *all.last().unwrap(),
        "the newest, oldest first"
    );
    let (status, _) = api.call("DELETE", "/v1/agents/w?purge=true", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = api.call("GET", "/v1/agents/w", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = api.call("GET", "/v1/events?limit=abc", None).await;
    assert_eq!(
        (status, body["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("query"))
    );
    api.runtime.shutdown().await;
}

/// Summarizes when asked to compact; otherwise acknowledges.
fn summarizer(req: &RecordedRequest) -> MockReply {
    if req.system_text().contains("You compact the history") {
        MockReply::text("they counted to three")
    } else {
        MockReply::text("noted")
    }
}

#[tokio::test]
async fn compact_reports_the_compaction_and_reset_the_new_session() {
    let api = api_on(MockLlm::start_responder(Arc::new(summarizer)).await).await;
    let (status, body) = api.call("POST", "/v1/agents/nobody/compact", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(body["error"].as_str().unwrap().contains("nobody"), "{body}");
    let (status, _) = api.call("POST", "/v1/agents/nobody/reset", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    api.call(
        "POST",
        "/v1/agents",
        Some(json!({"name": "w", "template": "worker"})),
    )
    .await;
    let (status, body) = api.call("POST", "/v1/agents/w/compact", None).await;
    assert_eq!(status, StatusCode::CONFLICT, "an empty session: {body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("nothing to compact"),
        "{body}"
    );

    // Long enough that replacing them is worth a summary.
    for (n, count) in ["one", "two", "three"].into_iter().enumerate() {
        let text = format!(
            "Counting {count}: {}",
            "and so the counting goes on. ".repeat(30)
        );
        let (status, _) = api
            .call(
                "POST",
                "/v1/agents/w/messages",
                Some(json!({ "text": text })),
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED);
        api.await_turns("w", n + 1).await;
    }
    let (status, done) = api.call("POST", "/v1/agents/w/compact", None).await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(
        (
            &done["agent"],
            &done["strategy"],
            &done["trigger"],
            &done["summary"]
        ),
        (
            &json!("w"),
            &json!("summarize"),
            &json!("manual"),
            &json!("they counted to three")
        )
    );
    assert_eq!(done["from_seq"], 2, "the first message stays: {done}");
    assert!(done["to_seq"].as_u64() >= Some(2), "{done}");
    assert!(
        done["tokens_after"].as_u64() < done["tokens_before"].as_u64(),
        "{done}"
    );
    let (_, events) = api
        .call("GET", "/v1/events?agent=w&kind=session.compacted", None)
        .await;
    assert_eq!(events[0]["data"]["from_seq"], 2, "{events}");

    let (_, agent) = api.call("GET", "/v1/agents/w", None).await;
    let (status, reset) = api.call("POST", "/v1/agents/w/reset", None).await;
    assert_eq!(status, StatusCode::OK, "{reset}");
    assert_eq!(reset["agent"], "w");
    assert_ne!(reset["session"], agent["session"]);
    let (_, agent) = api.call("GET", "/v1/agents/w", None).await;
    assert_eq!(agent["session"], reset["session"]);
    let (_, transcript) = api.call("GET", "/v1/agents/w/transcript", None).await;
    assert_eq!(transcript, json!([]), "the new session is empty");
    api.runtime.shutdown().await;
}

#[tokio::test]
async fn routines_are_created_run_and_read_over_the_api() {
    let api = api().await;
    api.call(
        "POST",
        "/v1/agents",
        Some(serde_json::json!({"name": "clock", "template": "worker"})),
    )
    .await;
    let (status, created) = api
        .call(
            "POST",
            "/v1/routines",
            Some(
                serde_json::json!({"name": "tick", "every": "1h", "agent": "clock",
                                    "message": "tick", "catch_up": "once"}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(
        created["spec"]["trigger"],
        serde_json::json!({"kind": "every", "millis": 3_600_000})
    );
    assert_eq!(created["spec"]["guardrails"]["catch_up"], "once");
    assert!(created["next"].as_str().is_some(), "{created}");

    let (status, run) = api.call("POST", "/v1/routines/tick/run", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(run["outcome"], "started", "{run}");
    api.await_turns("clock", 1).await;
    let (_, history) = api.call("GET", "/v1/routines/tick/history", None).await;
    assert_eq!(history[0]["outcome"], "run");
    assert!(history[0]["key"].as_str().unwrap().starts_with("manual:"));
    let job = run["job_id"].as_u64().unwrap();
    // The job ends with the turn that read the message.
    let mut state = Value::Null;
    for _ in 0..300 {
        let (_, j) = api.call("GET", &format!("/v1/jobs/{job}"), None).await;
        state = j["state"].clone();
        if state == "completed" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(state, "completed");
    let (_, done) = api.call("GET", "/v1/jobs?state=completed", None).await;
    assert_eq!(done.as_array().unwrap().len(), 1);

    let (_, disabled) = api.call("POST", "/v1/routines/tick/disable", None).await;
    assert_eq!(disabled["enabled"], false);
    assert_eq!(disabled["next"], Value::Null);
    let (status, _) = api.call("DELETE", "/v1/routines/tick", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = api.call("GET", "/v1/routines/tick", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_bad_routine_is_refused_naming_the_field() {
    let api = api().await;
    api.call(
        "POST",
        "/v1/agents",
        Some(serde_json::json!({"name": "clock", "template": "worker"})),
    )
    .await;
    for (body, field, message) in [
        (
            serde_json::json!({"name": "r", "cron": "61 * * * *", "agent": "clock", "message": "m"}),
            "cron",
            "\"61 * * * *\": minute 61 is out of range 0-59",
        ),
        (
            serde_json::json!({"name": "r", "every": "5s", "agent": "clock", "message": "m"}),
            "every",
            "shorter than scheduler.min_interval",
        ),
        (
            serde_json::json!({"name": "r", "every": "1h", "agent": "nobody", "message": "m"}),
            "agent",
            "no agent named `nobody`",
        ),
        (
            serde_json::json!({"name": "r", "every": "1h", "template": "nope", "task": "t"}),
            "template",
            "no template named `nope`",
        ),
        (
            serde_json::json!({"name": "r", "every": "1h", "agent": "clock", "message": "m", "colour": "red"}),
            "body",
            "colour",
        ),
    ] {
        let (status, err) = api.call("POST", "/v1/routines", Some(body.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {err}");
        let text = err["error"].as_str().unwrap_or_default();
        assert!(text.contains(message), "{body}: {err}");
        if field != "body" {
            assert_eq!(err["field"], field, "{body}: {err}");
        }
    }
    let (_, job) = api.call("GET", "/v1/jobs?state=sleeping", None).await;
    assert_eq!(job["field"], "state");
}
