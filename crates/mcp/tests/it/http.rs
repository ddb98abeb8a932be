//! reef's client over streamable HTTP to the Python SDK's server, with the bearer token from
//! a secret.

use crate::{args, confined, file_secret, hub_with};
use reef_config::{McpServerConfig, McpTransport};
use reef_mcp::{Content, McpError};
use reef_test_support::mcp::{mcp_python, mcp_script};
use serde_json::json;
use std::time::Duration;

/// The Python server on a free loopback port, requiring `token`; killed on drop.
struct PyHttp {
    child: std::process::Child,
    port: u16,
}

impl PyHttp {
    async fn start(token: &str) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = Self {
            child: std::process::Command::new(mcp_python())
                .arg(mcp_script("py_server.py"))
                .args(["--http", &port.to_string()])
                .env("PY_SERVER_TOKEN", token)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap(),
            port,
        };
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return server;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the Python MCP server did not listen on port {port}");
    }
}

impl Drop for PyHttp {
    fn drop(&mut self) {
        let _killed = self.child.kill();
        let _reaped = self.child.wait();
    }
}

fn remote(name: &str, port: u16, secret: Option<&str>) -> McpServerConfig {
    let transport = McpTransport::Http {
        url: format!("http://127.0.0.1:{port}/mcp"),
        headers: Vec::new(),
        bearer_token_secret: secret.map(str::to_owned),
    };
    crate::server(name, transport)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_server_is_reached_with_the_bearer_token_of_its_secret() {
    let dir = tempfile::tempdir().unwrap();
    let server = PyHttp::start("s3cret-token").await;
    let secret = file_secret(dir.path(), "PY_TOKEN", "s3cret-token");
    let hub = hub_with(
        dir.path(),
        confined(Vec::new()),
        vec![
            remote("web", server.port, Some("PY_TOKEN")),
            remote("anon", server.port, None),
        ],
        vec![secret],
        128,
    );
    let list = hub.tools("web").await.unwrap();
    assert!(list.tools.iter().any(|t| t.public == "web__echo"));
    let echo = hub
        .call_tool("web", "echo", args(json!({"text": "over http"})))
        .await
        .unwrap();
    assert_eq!(echo.content, vec![Content::Text("over http".into())]);
    let added = hub
        .call_tool("web", "add_tool", args(json!({"name": "late"})))
        .await
        .unwrap();
    assert!(!added.is_error);
    // The notification may be handled just after the call's answer.
    let mut after = hub.tools("web").await.unwrap();
    for _ in 0..100 {
        if after.tools.iter().any(|t| t.public == "web__late") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        after = hub.tools("web").await.unwrap();
    }
    assert!(
        after.tools.iter().any(|t| t.public == "web__late"),
        "{:?}",
        after.tools
    );

    let refused = hub.tools("anon").await.unwrap_err();
    assert!(matches!(refused, McpError::Handshake { .. }), "{refused}");
    assert!(refused.to_string().contains("401"), "{refused}");
    hub.shutdown().await;
}
