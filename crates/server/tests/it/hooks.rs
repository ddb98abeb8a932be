//! Webhooks through the router: a GitHub-signed delivery reaches its agent; a wrong
//! signature, a replay, a stale reef timestamp and an unsigned request get 401 and reach
//! nobody; an oversized body gets 413; a `spawn-once:` hook's agent is gone when done.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use reef_runtime::{Runtime, SpawnRequest};
use reef_security::webhook::{sign_github, sign_reef};
use reef_store::InboxStatus;
use reef_test_support::{MockLlm, TestHome};
use serde_json::Value;
use tower::ServiceExt;

const KEY: &str = "a-webhook-secret-value";

struct Hooks {
    router: axum::Router,
    runtime: Runtime,
    mock: MockLlm,
    _home: TestHome,
}

async fn hooks() -> Hooks {
    let served = crate::support::serve("noted", |home| {
        let key_file = home.path().join("hook.key");
        std::fs::write(&key_file, format!("{KEY}\n")).unwrap();
        format!(
            "[secrets.HOOK_KEY]\nfile = \"{}\"\n\n\
             [hooks]\nmax_body = \"1K\"\n\n\
             [hooks.gh]\nsecret = \"HOOK_KEY\"\nroute = \"agent:ada\"\n\n\
             [hooks.alerts]\nsecret = \"HOOK_KEY\"\nroute = \"spawn-once:worker\"\n\n\
             [hooks.deploys]\nsecret = \"HOOK_KEY\"\n\n\
             [routines.deploy-check]\nwebhook = \"deploys\"\nagent = \"ada\"\n\
             message = \"check the deploy\"\ncooldown = \"1h\"\n",
            key_file.display()
        )
    })
    .await;
    Hooks {
        router: served.router,
        runtime: served.runtime,
        mock: served.mock,
        _home: served.home,
    }
}

impl Hooks {
    async fn post(
        &self,
        hook: &str,
        headers: &[(&str, String)],
        body: &[u8],
    ) -> (StatusCode, Value) {
        let mut req = Request::builder()
            .method("POST")
            .uri(format!("/hooks/{hook}"));
        for (name, value) in headers {
            req = req.header(*name, value);
        }
        let response = self
            .router
            .clone()
            .oneshot(req.body(Body::from(body.to_vec())).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    async fn inbox_len(&self, agent: &str) -> usize {
        let id = self.runtime.get_agent(agent).await.unwrap().id;
        let store = self.runtime.store();
        // A message may move from one status to the next between the reads: count ids.
        let mut ids = std::collections::BTreeSet::new();
        for status in [
            InboxStatus::Pending,
            InboxStatus::Processing,
            InboxStatus::Done,
        ] {
            ids.extend(
                store
                    .inbox(&id, status)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|m| m.id),
            );
        }
        ids.len()
    }

    async fn events(&self, kind: &str) -> Vec<Value> {
        let events = self
            .runtime
            .store()
            .events_after(0, None, 100_000)
            .await
            .unwrap();
        events
            .into_iter()
            .filter(|e| e.kind == kind)
            .map(|e| e.data)
            .collect()
    }
}

fn now() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap()
}

#[tokio::test]
async fn a_github_delivery_reaches_its_agent_and_bad_or_replayed_ones_reach_nobody() {
    let h = hooks().await;
    h.runtime
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
    let body = br#"{"ref":"refs/heads/main","commits":[{"message":"fix the reef"}]}"#;
    let github = sign_github(KEY.as_bytes(), body);
    let headers = [
        ("x-hub-signature-256", github.clone()),
        ("x-github-event", "push".to_owned()),
        ("content-type", "application/json".to_owned()),
    ];
    // No bearer token: the signature is the authentication.
    let (status, reply) = h.post("gh", &headers, body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{reply}");
    assert_eq!(reply["agent"], "ada");
    // The agent read the payload, pretty-printed, with the event named.
    for _ in 0..3000 {
        if !h.mock.requests().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let sent = h.mock.requests()[0].last_user_text().unwrap();
    assert!(
        sent.contains("Webhook `gh` delivery (event: push):"),
        "{sent}"
    );
    assert!(sent.contains("\"message\": \"fix the reef\""), "{sent}");

    // The same signature again: a replay.
    let (status, reply) = h.post("gh", &headers, body).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{reply}");
    assert!(
        reply["error"].as_str().unwrap().contains("replay"),
        "{reply}"
    );
    // A wrong signature, a body that does not match, and no signature at all.
    let wrong = sign_github(b"another secret", body);
    let (status, _) = h.post("gh", &[("x-hub-signature-256", wrong)], body).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = h
        .post("gh", &[("x-hub-signature-256", github)], b"{}")
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = h.post("gh", &[], body).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // reef's own signature: ten minutes old is stale, now is fine.
    let stale = sign_reef(KEY.as_bytes(), b"late", now() - 600);
    let (status, reply) = h.post("gh", &[("x-reef-signature", stale)], b"late").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(
        reply["error"]
            .as_str()
            .unwrap()
            .contains("seconds from now"),
        "{reply}"
    );
    // Too big: 413 before anything else.
    let big = vec![b'x'; 2048];
    let (status, _) = h
        .post(
            "gh",
            &[("x-reef-signature", sign_reef(KEY.as_bytes(), &big, now()))],
            &big,
        )
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    // Nothing of that reached ada; every refusal is an event.
    assert_eq!(h.inbox_len("ada").await, 1);
    // Refusals are recorded (at most one a second per hook, counting the ones held).
    let refused = h.events("hook.refused").await;
    assert!((1..=5).contains(&refused.len()), "{refused:?}");
    assert!(
        refused[0]["reason"].as_str().unwrap().contains("replay"),
        "{refused:?}"
    );
    let fresh = sign_reef(KEY.as_bytes(), b"on time", now());
    let (status, _) = h
        .post("gh", &[("x-reef-signature", fresh)], b"on time")
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(h.inbox_len("ada").await, 2);
    let (status, _) = h.post("nope", &[], b"x").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_spawn_once_hook_runs_a_one_off_agent_that_is_destroyed_when_done() {
    let h = hooks().await;
    let body = b"disk almost full on host7";
    let (status, reply) = h
        .post(
            "alerts",
            &[("x-reef-signature", sign_reef(KEY.as_bytes(), body, now()))],
            body,
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{reply}");
    let agent = reply["agent"].as_str().unwrap().to_owned();
    assert!(agent.starts_with("alerts-"), "{agent}");
    for _ in 0..3000 {
        if !h.events("agent.destroyed").await.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(
        h.runtime.get_agent(&agent).await.is_err(),
        "{agent} still exists"
    );
    let sent = h.mock.requests()[0].last_user_text().unwrap();
    assert!(sent.contains("disk almost full on host7"), "{sent}");
}

#[tokio::test]
async fn a_signed_delivery_fires_the_routine_that_names_its_hook_once() {
    let h = hooks().await;
    h.runtime
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
    let body = br#"{"service":"api","version":"1.2.3"}"#;
    let headers = [("x-hub-signature-256", sign_github(KEY.as_bytes(), body))];
    let (status, reply) = h.post("deploys", &headers, body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{reply}");
    assert_eq!(reply["agent"], "routine:deploy-check");
    for _ in 0..3000 {
        if !h.mock.requests().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let sent = h.mock.requests()[0].last_user_text().unwrap();
    assert!(
        sent.contains("[routine deploy-check, webhook delivery at "),
        "{sent}"
    );
    assert!(sent.contains("\"version\": \"1.2.3\""), "{sent}");
    assert!(sent.ends_with("] check the deploy"), "{sent}");
    // Once the run's job is over, a replay is refused before it reaches the routine and a
    // new delivery within the cooldown is recorded as skipped.
    for _ in 0..3000 {
        let history = h.runtime.routine_history("deploy-check", 10).await.unwrap();
        if history[0].state.as_deref() == Some("completed") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let history = h.runtime.routine_history("deploy-check", 10).await.unwrap();
    assert_eq!(
        history[0].state.as_deref(),
        Some("completed"),
        "{history:?}"
    );
    let (status, _) = h.post("deploys", &headers, body).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let other = br#"{"service":"web"}"#;
    let headers = [("x-hub-signature-256", sign_github(KEY.as_bytes(), other))];
    let (status, _) = h.post("deploys", &headers, other).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let history = h.runtime.routine_history("deploy-check", 10).await.unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history.iter().filter(|f| f.outcome == "run").count(), 1);
    let skipped = history.iter().find(|f| f.outcome == "skipped").unwrap();
    assert!(
        skipped.reason.as_deref().unwrap().contains("cooling down"),
        "{skipped:?}"
    );
    assert!(skipped.key.starts_with("hook:"));
}
