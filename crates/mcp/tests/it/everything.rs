//! reef's client against the npm reference servers, run with node inside reef's sandbox.

use crate::{args, confined, eventually, hub_in, node};
use reef_mcp::Content;
use serde_json::json;

fn texts(content: &[Content]) -> String {
    content
        .iter()
        .filter_map(|c| match c {
            Content::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_tools_progress_errors_resources_and_prompts() {
    let dir = tempfile::tempdir().unwrap();
    let server = node("every", "server-everything", &["stdio"]);
    let hub = hub_in(dir.path(), confined(Vec::new()), vec![server]);

    let list = hub.tools("every").await.unwrap();
    let names: Vec<&str> = list.tools.iter().map(|t| t.public.as_str()).collect();
    for name in [
        "every__echo",
        "every__get-sum",
        "every__trigger-long-running-operation",
    ] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }

    let echo = hub
        .call_tool("every", "echo", args(json!({"message": "hi"})))
        .await
        .unwrap();
    assert_eq!(texts(&echo.content), "Echo: hi");
    let sum = hub
        .call_tool("every", "get-sum", args(json!({"a": 2, "b": 3})))
        .await
        .unwrap();
    assert!(texts(&sum.content).contains("is 5"), "{sum:?}");

    let long = hub
        .call_tool(
            "every",
            "trigger-long-running-operation",
            args(json!({"duration": 1, "steps": 3})),
        )
        .await
        .unwrap();
    assert!(texts(&long.content).contains("completed"), "{long:?}");
    assert!(
        eventually(|| hub.status()[0].progress >= 2).await,
        "{:?}",
        hub.status()
    );

    let bad = hub
        .call_tool(
            "every",
            "get-resource-reference",
            args(json!({"resourceType": "Nope"})),
        )
        .await
        .unwrap();
    assert!(bad.is_error, "{bad:?}");

    let image = hub
        .call_tool("every", "get-tiny-image", args(json!({})))
        .await
        .unwrap();
    assert!(
        image
            .content
            .iter()
            .any(|c| matches!(c, Content::Media { mime_type, .. } if mime_type == "image/png")),
        "{image:?}"
    );

    let uri = "demo://resource/static/document/architecture.md";
    let doc = hub.read_resource("every", uri).await.unwrap();
    assert!(
        doc[0].text.as_deref().is_some_and(|t| !t.is_empty()),
        "{doc:?}"
    );
    let prompt = hub
        .get_prompt("every", "args-prompt", args(json!({"city": "Lyon"})))
        .await
        .unwrap();
    let said: String = prompt
        .messages
        .iter()
        .map(|(_, c)| texts(std::slice::from_ref(c)))
        .collect();
    assert!(said.contains("Lyon"), "{prompt:?}");
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_filesystem_reads_its_allowed_directory_only() {
    let dir = tempfile::tempdir().unwrap();
    let allowed = dir.path().join("docs");
    std::fs::create_dir_all(&allowed).unwrap();
    std::fs::write(allowed.join("a.txt"), "alpha").unwrap();
    let mut server = node("fs", "server-filesystem", &[allowed.to_str().unwrap()]);
    server.writable = Some(vec![allowed.clone()]);
    let hub = hub_in(dir.path(), confined(Vec::new()), vec![server]);
    let read = hub
        .call_tool(
            "fs",
            "read_text_file",
            args(json!({"path": allowed.join("a.txt")})),
        )
        .await
        .unwrap();
    assert_eq!(texts(&read.content), "alpha");
    let outside = hub
        .call_tool(
            "fs",
            "read_text_file",
            args(json!({"path": "/etc/hostname"})),
        )
        .await
        .unwrap();
    assert!(outside.is_error, "{outside:?}");
    hub.shutdown().await;
}
