//! Servers that misbehave: reef keeps going, the caller gets a clear error or a bounded list,
//! and the status says what happened.

use crate::{args, bad_server, confined, hub_in, hub_with};
use reef_mcp::{Content, McpError};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_initialize_fails_within_its_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = bad_server("mute", "silent");
    server.timeout_secs = 2;
    let hub = hub_in(dir.path(), confined(Vec::new()), vec![server]);
    let err = hub.tools("mute").await.unwrap_err();
    assert!(matches!(err, McpError::Handshake { .. }), "{err}");
    assert!(err.to_string().contains("within 2 s"), "{err}");
    let status = &hub.status()[0];
    assert_eq!(status.state, "failed");
    assert!(
        status.last_error.as_deref().unwrap().contains("initialize"),
        "{status:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_stdout_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let hub = hub_in(
        dir.path(),
        confined(Vec::new()),
        vec![bad_server("junk", "garbage")],
    );
    let list = hub.tools("junk").await.unwrap();
    assert_eq!(list.tools.len(), 1);
    let echo = hub
        .call_tool("junk", "echo", args(json!({"text": "fine"})))
        .await
        .unwrap();
    assert_eq!(echo.content, vec![Content::Text("fine".into())]);
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_tools_are_cut_to_the_limit_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let hub = hub_with(
        dir.path(),
        confined(Vec::new()),
        vec![bad_server("many", "many_tools")],
        Vec::new(),
        128,
    );
    let list = hub.tools("many").await.unwrap();
    assert_eq!(list.tools.len(), 128);
    assert!(
        list.warnings.iter().any(|w| w.contains("10000 tools")),
        "{:?}",
        list.warnings
    );
    assert_eq!(hub.status()[0].tools, Some(128));
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_with_a_huge_schema_is_skipped_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let hub = hub_in(
        dir.path(),
        confined(Vec::new()),
        vec![bad_server("big", "huge_schema")],
    );
    let list = hub.tools("big").await.unwrap();
    let names: Vec<&str> = list.tools.iter().map(|t| t.public.as_str()).collect();
    assert_eq!(names, ["big__ok"]);
    assert!(
        list.warnings.iter().any(|w| w.contains("`huge`")),
        "{:?}",
        list.warnings
    );
    // `reef mcp list` shows it too.
    let status = &hub.status()[0];
    assert!(
        status.warnings.iter().any(|w| w.contains("`huge`")),
        "{status:?}"
    );
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_closing_mid_call_gives_an_error_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let hub = hub_in(
        dir.path(),
        confined(Vec::new()),
        vec![bad_server("quits", "close_call")],
    );
    hub.tools("quits").await.unwrap();
    let err = hub
        .call_tool("quits", "echo", args(json!({"text": "x"})))
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::Closed { .. }), "{err}");
    assert!(err.to_string().contains("exit status: 4"), "{err}");
    assert_eq!(hub.status()[0].state, "failed");
}

#[tokio::test]
async fn unknown_and_disabled_servers_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let mut off = bad_server("off", "silent");
    off.enabled = false;
    let hub = hub_in(dir.path(), confined(Vec::new()), vec![off]);
    assert!(
        matches!(hub.tools("nope").await.unwrap_err(), McpError::UnknownServer(n) if n == "nope")
    );
    assert!(matches!(hub.tools("off").await.unwrap_err(), McpError::Disabled(n) if n == "off"));
    assert_eq!(hub.status()[0].state, "disabled");
    assert!(hub.servers_for("coder").is_empty());
}
