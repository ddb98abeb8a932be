//! A program server runs inside reef's sandbox: it cannot read hidden credentials or reach
//! the network with `network = "none"`, and can read its allowed directory.

use crate::{args, confined, hub_in, python_server};
use reef_config::NetworkModeName;
use reef_mcp::Content;
use serde_json::json;
use std::io::{Read, Write};

fn text(content: &[Content]) -> String {
    content
        .iter()
        .filter_map(|c| match c {
            Content::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_are_hidden_and_the_allowed_directory_is_readable() {
    let dir = tempfile::tempdir().unwrap();
    // A home the server is shown (it may write there), with a key the policy hides in it.
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "PRIVATE KEY").unwrap();
    std::fs::write(home.join("notes.txt"), "shared notes").unwrap();

    let mut server = python_server("py");
    server.writable = Some(vec![home.clone()]);
    let hidden = reef_sandbox::home_secrets(&home);
    let hub = hub_in(dir.path(), confined(hidden), vec![server]);

    let notes = hub
        .call_tool(
            "py",
            "read_file",
            args(json!({"path": home.join("notes.txt")})),
        )
        .await
        .unwrap();
    assert!(!notes.is_error, "{notes:?}");
    assert_eq!(text(&notes.content), "shared notes");

    let key = home.join(".ssh/id_ed25519");
    let stolen = hub
        .call_tool("py", "read_file", args(json!({"path": key})))
        .await
        .unwrap();
    assert!(stolen.is_error, "{stolen:?}");
    assert!(!text(&stolen.content).contains("PRIVATE KEY"));
    hub.shutdown().await;
}

/// A one-shot HTTP server on loopback answering `reachable`.
fn http_once() -> (u16, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        listener.set_nonblocking(false).unwrap();
        if let Ok((mut stream, _)) = listener.accept() {
            let mut buf = [0u8; 1024];
            let _read = stream.read(&mut buf);
            let _wrote = stream.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: close\r\n\r\nreachable",
            );
        }
    });
    (port, handle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_none_stops_a_request_that_network_full_lets_through() {
    let dir = tempfile::tempdir().unwrap();
    let (port, server_thread) = http_once();
    let url = format!("http://127.0.0.1:{port}/");

    let mut closed = python_server("closed");
    closed.network = Some(NetworkModeName::None);
    let mut open = python_server("open");
    open.network = Some(NetworkModeName::Full);
    let hub = hub_in(dir.path(), confined(Vec::new()), vec![closed, open]);

    let refused = hub
        .call_tool("closed", "fetch", args(json!({"url": url})))
        .await
        .unwrap();
    assert!(refused.is_error, "{refused:?}");
    assert!(!text(&refused.content).contains("reachable"));

    let fetched = hub
        .call_tool("open", "fetch", args(json!({"url": url})))
        .await
        .unwrap();
    assert!(!fetched.is_error, "{fetched:?}");
    assert_eq!(text(&fetched.content), "reachable");
    server_thread.join().unwrap();
    hub.shutdown().await;
}
