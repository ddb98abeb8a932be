//! reef's client against the Python SDK's server over stdio, confined: tools with their
//! schemas, every kind of result, resources, prompts, list changes, progress, cancellation,
//! and a crash in the middle of a call.

use crate::{args, confined, descendants_with, eventually, hub_in, python_server, with_env};
use reef_mcp::{Content, McpError};
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_results_resources_and_prompts_come_through() {
    let dir = tempfile::tempdir().unwrap();
    let hub = hub_in(dir.path(), confined(Vec::new()), vec![python_server("py")]);
    assert_eq!(
        hub.status()[0].state,
        "idle",
        "nothing starts before it is used"
    );

    let list = hub.tools("py").await.unwrap();
    let names: Vec<&str> = list.tools.iter().map(|t| t.public.as_str()).collect();
    for name in [
        "py__echo",
        "py__add",
        "py__slow",
        "py__fail",
        "py__image",
        "py__crash",
    ] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    let add = list.tools.iter().find(|t| t.public == "py__add").unwrap();
    assert_eq!(add.tool.input_schema["properties"]["a"]["type"], "integer");
    assert_eq!(add.tool.input_schema["required"], json!(["a", "b"]));

    let echo = hub
        .call_tool("py", "echo", args(json!({"text": "hi there"})))
        .await
        .unwrap();
    assert_eq!(echo.content, vec![Content::Text("hi there".into())]);
    assert!(!echo.is_error);

    let sum = hub
        .call_tool("py", "add", args(json!({"a": 2, "b": 3})))
        .await
        .unwrap();
    assert_eq!(sum.structured, Some(json!({"result": 5})));

    let failed = hub
        .call_tool("py", "fail", args(json!({"reason": "boom"})))
        .await
        .unwrap();
    assert!(failed.is_error);
    assert_eq!(failed.content, vec![Content::Text("boom".into())]);

    let image = hub.call_tool("py", "image", args(json!({}))).await.unwrap();
    assert!(
        matches!(&image.content[..], [Content::Media { mime_type, .. }] if mime_type == "image/png")
    );
    // What the model reads: where the image was saved in the workspace.
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    let said = reef_mcp::render_call(&image, &workspace, "py-image");
    let saved = said
        .split("saved to ")
        .nth(1)
        .unwrap()
        .trim_end_matches(']');
    assert!(
        saved.starts_with("mcp-files/py-image-") && saved.ends_with(".png"),
        "{said}"
    );
    let bytes = std::fs::read(workspace.join(saved)).unwrap();
    assert_eq!(&bytes[1..4], b"PNG", "{said}");

    let note = hub.read_resource("py", "note://hello").await.unwrap();
    assert_eq!(note[0].text.as_deref(), Some("hello from python"));
    let resources = hub.list_resources("py").await.unwrap();
    assert!(
        resources.iter().any(|r| r.uri == "note://hello"),
        "{resources:?}"
    );

    let prompts = hub.list_prompts("py").await.unwrap();
    let greet = prompts.iter().find(|p| p.name == "greet").unwrap();
    assert!(
        greet
            .arguments
            .iter()
            .any(|a| a.name == "name" && a.required)
    );
    let filled = hub
        .get_prompt("py", "greet", args(json!({"name": "Ann"})))
        .await
        .unwrap();
    assert_eq!(
        filled.messages,
        vec![("user".into(), Content::Text("Hello, Ann!".into()))]
    );

    let unknown = hub.read_resource("py", "note://nope").await.unwrap_err();
    assert!(
        matches!(unknown, McpError::Refused { code: -32602, .. }),
        "{unknown}"
    );

    let status = &hub.status()[0];
    assert_eq!(
        (status.state, status.starts),
        ("running", 1),
        "one start for every request"
    );
    hub.shutdown().await;
    assert_eq!(hub.status()[0].state, "stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_tool_list_is_listed_again_and_progress_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let hub = hub_in(dir.path(), confined(Vec::new()), vec![python_server("py")]);
    let before = hub.tools("py").await.unwrap();
    assert!(!before.tools.iter().any(|t| t.public == "py__dyn"));
    let added = hub
        .call_tool("py", "add_tool", args(json!({"name": "dyn"})))
        .await
        .unwrap();
    assert!(!added.is_error, "{added:?}");
    // The notification may be handled just after the call's answer.
    let mut after = hub.tools("py").await.unwrap();
    for _ in 0..100 {
        if after.tools.iter().any(|t| t.public == "py__dyn") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        after = hub.tools("py").await.unwrap();
    }
    assert!(
        after.tools.iter().any(|t| t.public == "py__dyn"),
        "{:?}",
        after.tools
    );
    let called = hub.call_tool("py", "dyn", args(json!({}))).await.unwrap();
    assert_eq!(called.content, vec![Content::Text("dyn called".into())]);
    // Unchanged since: the cached list is the one returned.
    let again = hub.tools("py").await.unwrap();
    assert!(std::sync::Arc::ptr_eq(&after, &again));

    let done = hub
        .call_tool("py", "slow", args(json!({"steps": 3})))
        .await
        .unwrap();
    assert_eq!(done.content, vec![Content::Text("done".into())]);
    // Each of the 3 steps reported progress (handled beside the answer, so maybe after it).
    assert!(
        eventually(|| hub.status()[0].progress >= 3).await,
        "{:?}",
        hub.status()
    );
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_call_is_cancelled_at_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("servers/py/events.log");
    let server = with_env(python_server("py"), "PY_SERVER_LOG", log.to_str().unwrap());
    let hub = hub_in(dir.path(), confined(Vec::new()), vec![server]);
    hub.tools("py").await.unwrap();
    let call = hub.call_tool("py", "slow", args(json!({"steps": 100})));
    assert!(
        tokio::time::timeout(Duration::from_millis(800), call)
            .await
            .is_err()
    );
    let cancelled =
        eventually(|| std::fs::read_to_string(&log).is_ok_and(|l| l.contains("cancelled slow")))
            .await;
    assert!(cancelled, "the server never saw notifications/cancelled");
    // The session carries on.
    let echo = hub
        .call_tool("py", "echo", args(json!({"text": "still here"})))
        .await
        .unwrap();
    assert_eq!(echo.content, vec![Content::Text("still here".into())]);
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_call_fails_the_call_and_the_next_call_restarts_it() {
    let dir = tempfile::tempdir().unwrap();
    let hub = hub_in(dir.path(), confined(Vec::new()), vec![python_server("py")]);
    hub.tools("py").await.unwrap();
    let helper = hub.status()[0].pid.unwrap();
    let pending = {
        let hub = hub.clone();
        tokio::spawn(async move {
            hub.call_tool("py", "slow", args(json!({"steps": 100})))
                .await
        })
    };
    let mut victims = Vec::new();
    assert!(
        eventually(|| {
            victims = descendants_with(helper, "py_server.py");
            !victims.is_empty()
        })
        .await
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The server and the sandbox's init both match; killing one may end the other first.
    let killed = victims.iter().filter(|&&pid| {
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid).unwrap(),
            rustix::process::Signal::KILL,
        )
        .is_ok()
    });
    assert!(killed.count() >= 1);
    let err = pending.await.unwrap().unwrap_err();
    assert!(matches!(err, McpError::Closed { .. }), "{err}");
    let status = &hub.status()[0];
    assert_eq!(status.state, "failed");
    assert!(
        status
            .last_error
            .as_deref()
            .unwrap()
            .contains("the process ended"),
        "{status:?}"
    );

    let echo = hub
        .call_tool("py", "echo", args(json!({"text": "back"})))
        .await
        .unwrap();
    assert_eq!(echo.content, vec![Content::Text("back".into())]);
    assert_eq!(hub.status()[0].starts, 2);
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_exits_without_answering_reports_its_exit() {
    let dir = tempfile::tempdir().unwrap();
    let hub = hub_in(dir.path(), confined(Vec::new()), vec![python_server("py")]);
    let err = hub
        .call_tool("py", "crash", args(json!({})))
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::Closed { .. }), "{err}");
    assert!(err.to_string().contains("exit status: 3"), "{err}");
    let echo = hub
        .call_tool("py", "echo", args(json!({"text": "again"})))
        .await
        .unwrap();
    assert_eq!(echo.content, vec![Content::Text("again".into())]);
    hub.shutdown().await;
}
