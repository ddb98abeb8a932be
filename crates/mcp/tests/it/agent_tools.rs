//! What an agent sees: its servers' tools under unique names, and answers without the
//! values of the secrets its servers are given.

use crate::{confined, file_secret, hub_with, python_server};
use reef_config::{ConfigValue, McpTransport};
use reef_core::{SessionId, ToolCallId, ToolContext};
use reef_mcp::{McpAccess, McpHub};
use serde_json::json;
use std::sync::Arc;

fn ctx(workspace: &std::path::Path) -> ToolContext {
    ToolContext {
        workspace: workspace.to_path_buf(),
        session_id: SessionId::new(),
        call_id: ToolCallId::new(),
        read_only: Vec::new(),
    }
}

/// A hub of the Python server, given the secret `name` (whose value is `value`) in its
/// environment.
fn with_secret(dir: &std::path::Path, name: &str, value: &str) -> Arc<McpHub> {
    let secret = file_secret(dir, name, value);
    let mut server = python_server("py");
    if let McpTransport::Stdio { env, .. } = &mut server.transport {
        env.push((name.into(), ConfigValue::Secret(name.into())));
    }
    hub_with(dir, confined(Vec::new()), vec![server], vec![secret], 128)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_secret_never_reaches_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let hub = with_secret(dir.path(), "PY_TOKEN", "tok-1234567890");
    let access = McpAccess {
        hub: hub.clone(),
        servers: vec!["py".into()],
    };
    let tools = access.tools().await;
    let echo = tools.iter().find(|t| t.spec().name == "py__echo").unwrap();
    let said = echo
        .call(
            &ctx(dir.path()),
            json!({"text": "the token is tok-1234567890"}),
        )
        .await
        .unwrap();
    assert_eq!(said, "the token is [secret PY_TOKEN]");
    let failed = tools.iter().find(|t| t.spec().name == "py__fail").unwrap();
    let err = failed
        .call(&ctx(dir.path()), json!({"reason": "tok-1234567890 leaked"}))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "[secret PY_TOKEN] leaked");
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_too_short_to_redact_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let hub = with_secret(dir.path(), "PIN", "1234");
    let err = hub.tools("py").await.unwrap_err();
    assert!(
        err.to_string().contains("shorter than 8 characters"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_the_agent_gets_has_its_own_name() {
    let dir = tempfile::tempdir().unwrap();
    let hub = hub_with(
        dir.path(),
        confined(Vec::new()),
        vec![python_server("py"), python_server("py2")],
        Vec::new(),
        128,
    );
    let access = McpAccess {
        hub: hub.clone(),
        servers: vec!["py".into(), "py2".into()],
    };
    let names: Vec<String> = access.tools().await.iter().map(|t| t.spec().name).collect();
    let unique: std::collections::BTreeSet<&String> = names.iter().collect();
    assert_eq!(unique.len(), names.len(), "{names:?}");
    for name in [
        "py__echo",
        "py2__echo",
        "mcp_read_resource",
        "mcp_get_prompt",
    ] {
        assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
    }
    hub.shutdown().await;
}
