//! `/metrics` over the router: behind the token unless `[metrics] public = true`, in the
//! Prometheus text format, counting a real turn with a shell call in the default sandbox.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use reef_runtime::SpawnRequest;
use reef_test_support::{MockLlm, MockReply};
use serde_json::json;
use tower::ServiceExt;

async fn get(router: &axum::Router, token: Option<&str>) -> (StatusCode, String, String) {
    let mut req = Request::builder().uri("/metrics");
    if let Some(token) = token {
        req = req.header("authorization", format!("Bearer {token}"));
    }
    let response = router
        .clone()
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let kind = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, kind, String::from_utf8(body.to_vec()).unwrap())
}

/// The value of the sample line that starts with `series` (name and labels).
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.parse().unwrap())
}

#[tokio::test]
async fn metrics_count_a_turn_with_a_shell_call_and_need_the_token() {
    let mock = MockLlm::start(vec![
        MockReply::tool_call("shell", json!({"command": "echo counted"})),
        MockReply::text("done"),
    ])
    .await;
    let served = crate::support::serve_on(mock, |_| {
        "[prices.m]\ninput = 1.0\noutput = 2.0\n".to_owned()
    })
    .await;
    let (status, _, _) = get(&served.router, None).await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "metrics are the operator's"
    );

    served
        .runtime
        .spawn_agent(
            SpawnRequest {
                name: "ada".into(),
                template: "worker".into(),
                task: Some("count".into()),
                ..SpawnRequest::default()
            },
            None,
        )
        .await
        .unwrap();
    let mut text = String::new();
    for _ in 0..3000 {
        let (status, kind, body) = get(&served.router, Some(crate::support::TOKEN)).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(kind, "text/plain; version=0.0.4; charset=utf-8");
        text = body;
        if value(&text, "reef_turns_total{outcome=\"completed\"}") == Some(1.0) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(
        value(&text, "reef_turns_total{outcome=\"completed\"}"),
        Some(1.0),
        "{text}"
    );
    let ok = value(&text, "reef_tool_calls_total{tool=\"shell\",result=\"ok\"}");
    assert_eq!(ok, Some(1.0), "the shell call ran in the sandbox: {text}");
    assert_eq!(
        value(&text, "reef_tool_duration_seconds_count{tool=\"shell\"}"),
        Some(1.0)
    );
    assert_eq!(
        value(
            &text,
            "reef_tool_duration_seconds_bucket{tool=\"shell\",le=\"+Inf\"}"
        ),
        Some(1.0)
    );
    assert!(
        value(&text, "reef_sandbox_spawns_total").unwrap() >= 1.0,
        "{text}"
    );
    let requests = value(
        &text,
        "reef_model_requests_total{provider=\"mock\",model=\"m\"}",
    );
    assert_eq!(requests, Some(2.0), "{text}");
    // The mock reports usage; the cost follows the configured price, as `reef cost` does.
    let input = value(
        &text,
        "reef_model_tokens_total{provider=\"mock\",model=\"m\",type=\"input\"}",
    )
    .unwrap();
    let output = value(
        &text,
        "reef_model_tokens_total{provider=\"mock\",model=\"m\",type=\"output\"}",
    )
    .unwrap();
    let cost = value(
        &text,
        "reef_model_cost_usd_total{provider=\"mock\",model=\"m\"}",
    )
    .unwrap();
    let report = served
        .runtime
        .store()
        .cost_report(None, None)
        .await
        .unwrap();
    assert_eq!(report[0].cost_micros as f64 / 1e6, cost);
    assert_eq!(report[0].usage.input_tokens as f64, input);
    assert_eq!(report[0].usage.output_tokens as f64, output);
    assert_eq!(
        value(&text, "reef_agents{state=\"running\"}"),
        Some(1.0),
        "{text}"
    );
    // Every sample belongs to the family declared last: families are whole and in one piece.
    let mut declared = std::collections::HashSet::new();
    let mut current = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            current = rest.split(' ').next().unwrap().to_owned();
            assert!(declared.insert(current.clone()), "{current} declared twice");
        } else if !line.starts_with('#') {
            let name = line.split(['{', ' ']).next().unwrap();
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s).filter(|f| *f == current))
                .unwrap_or(name);
            assert_eq!(family, current, "{line} is outside its family's group");
        }
    }
    served.runtime.shutdown().await;
}

#[tokio::test]
async fn public_metrics_answer_without_the_token() {
    let served = crate::support::serve("hi", |_| "[metrics]\npublic = true\n".to_owned()).await;
    let (status, _, text) = get(&served.router, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(text.contains("# TYPE reef_uptime_seconds gauge"), "{text}");
    let (status, _, _) = get(&served.router, Some("wrong")).await;
    assert_eq!(status, StatusCode::OK, "a token is not needed, nor checked");
    served.runtime.shutdown().await;
}
