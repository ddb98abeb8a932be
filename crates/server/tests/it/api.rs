//! The API over the router in process: auth on every route, error shapes, and the agent
//! lifecycle through REST.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use reef_runtime::{Runtime, RuntimeOptions, Templates};
use reef_test_support::{MockLlm, MockReply, TestHome};
use serde_json::{Value, json};
use tower::ServiceExt;

const TOKEN: &str = "0123456789abcdef0123456789abcdef";

struct Api {
    router: axum::Router,
    runtime: Runtime,
    _mock: MockLlm,
    _home: TestHome,
}

async fn api() -> Api {
    let mock = MockLlm::start(vec![MockReply::text("hello")]).await;
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
    })
    .await
    .unwrap();
    Api {
        router: reef_server::router(runtime.clone(), TOKEN),
        runtime,
        _mock: mock,
        _home: home,
    }
}

impl Api {
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
