//! `http_fetch` against a local axum server.

use crate::support::{denied, env_with, invalid};
use axum::Router;
use axum::response::{Html, Redirect};
use axum::routing::{get, post};
use reef_tools::BuiltinConfig;
use serde_json::json;
use std::net::SocketAddr;

const PAGE: &str = "<html><head><title>T</title><style>p{color:red}</style></head>\
<body><h1>Hello Reef</h1><p>Some <b>bold</b> text.</p><ul><li>first item</li></ul></body></html>";

async fn serve() -> SocketAddr {
    let app = Router::new()
        .route("/page", get(|| async { Html(PAGE) }))
        .route("/plain", get(|| async { "just text" }))
        .route("/big", get(|| async { "y".repeat(5000) }))
        .route("/redirect", get(|| async { Redirect::to("/page") }))
        .route(
            "/to-file",
            get(|| async { Redirect::to("file:///etc/passwd") }),
        )
        .route("/loop", get(|| async { Redirect::to("/loop") }))
        .route(
            "/echo",
            post(|body: String| async move { format!("got {body}") }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

fn private_allowed() -> BuiltinConfig {
    BuiltinConfig {
        http_allow_private: true,
        ..BuiltinConfig::default()
    }
}

#[tokio::test]
async fn html_is_converted_to_text() {
    let addr = serve().await;
    let env = env_with(private_allowed());
    let out = env
        .ok("http_fetch", json!({"url": format!("http://{addr}/page")}))
        .await;
    assert!(
        out.starts_with("HTTP 200 OK\ncontent-type: text/html"),
        "{out}"
    );
    assert!(out.contains("Hello Reef"), "{out}");
    assert!(out.contains("first item"), "{out}");
    assert!(!out.contains("<h1>"), "{out}");
    assert!(!out.contains("<b>"), "{out}");
    assert!(!out.contains("color:red"), "{out}");
}

#[tokio::test]
async fn plain_text_and_post_bodies() {
    let addr = serve().await;
    let env = env_with(private_allowed());
    let out = env
        .ok("http_fetch", json!({"url": format!("http://{addr}/plain")}))
        .await;
    assert!(out.contains("content-type: text/plain"), "{out}");
    assert!(out.ends_with("\n\njust text"), "{out}");
    let out = env
        .ok(
            "http_fetch",
            json!({"url": format!("http://{addr}/echo"), "method": "POST", "body": "ping",
                   "headers": {"x-reef": "1"}}),
        )
        .await;
    assert!(out.ends_with("got ping"), "{out}");
}

#[tokio::test]
async fn large_bodies_are_cut_with_a_marker() {
    let addr = serve().await;
    let env = env_with(BuiltinConfig {
        http_max_bytes: 100,
        ..private_allowed()
    });
    let out = env
        .ok("http_fetch", json!({"url": format!("http://{addr}/big")}))
        .await;
    assert!(
        out.contains(&format!(
            "\n\n{}\n[... body truncated after 100 bytes",
            "y".repeat(100)
        )),
        "{out}"
    );
}

#[tokio::test]
async fn redirects_are_followed_and_rechecked() {
    let addr = serve().await;
    let env = env_with(private_allowed());
    let out = env
        .ok(
            "http_fetch",
            json!({"url": format!("http://{addr}/redirect")}),
        )
        .await;
    assert!(out.contains(&format!("url: http://{addr}/page")), "{out}");
    assert!(out.contains("Hello Reef"), "{out}");

    let msg = denied(
        env.call(
            "http_fetch",
            json!({"url": format!("http://{addr}/to-file")}),
        )
        .await,
    );
    assert!(msg.contains("file"), "{msg}");

    let res = env
        .call("http_fetch", json!({"url": format!("http://{addr}/loop")}))
        .await;
    let err = res.unwrap_err().to_string();
    assert!(err.contains("too many redirects"), "{err}");
}

#[tokio::test]
async fn loopback_is_refused_by_default_naming_the_address() {
    let addr = serve().await;
    let env = env_with(BuiltinConfig::default());
    let msg = denied(
        env.call("http_fetch", json!({"url": format!("http://{addr}/page")}))
            .await,
    );
    assert!(msg.contains("127.0.0.1"), "{msg}");
    assert!(msg.contains("loopback"), "{msg}");

    let msg = denied(
        env.call(
            "http_fetch",
            json!({"url": format!("http://localhost:{}/page", addr.port())}),
        )
        .await,
    );
    assert!(msg.contains("localhost"), "{msg}");
    let msg = denied(
        env.call(
            "http_fetch",
            json!({"url": "http://169.254.169.254/latest/meta-data"}),
        )
        .await,
    );
    assert!(msg.contains("link-local"), "{msg}");
}

#[tokio::test]
async fn bad_arguments_are_rejected() {
    let env = env_with(BuiltinConfig::default());
    let msg = invalid(env.call("http_fetch", json!({"url": "not a url"})).await);
    assert!(msg.contains("not a url"), "{msg}");
    let msg = invalid(
        env.call(
            "http_fetch",
            json!({"url": "http://example.com", "method": "PUT"}),
        )
        .await,
    );
    assert!(msg.contains("method"), "{msg}");
    let msg = invalid(
        env.call(
            "http_fetch",
            json!({"url": "http://example.com", "body": "x"}),
        )
        .await,
    );
    assert!(msg.contains("POST"), "{msg}");
    let msg = denied(
        env.call("http_fetch", json!({"url": "ftp://example.com/x"}))
            .await,
    );
    assert!(msg.contains("ftp"), "{msg}");
}
