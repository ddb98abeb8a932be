//! MCP servers in the daemon: an agent calls third-party servers' tools (the Python SDK's
//! and server-everything), reads their resources and gets their prompts through the real
//! sandbox, and an interrupted turn cancels
//! the server's work.

use crate::daemon::{count, daemon_at, spawn, wait_for};
use reef_runtime::Sender;
use reef_store::JobState;
use reef_test_support::mcp::{node_server_toml, python_server_toml};
use reef_test_support::{MockReply, RecordedRequest};
use serde_json::json;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_uses_third_party_servers_tools_resources_and_prompts() {
    let d = daemon_at(
        Arc::new(|req: &RecordedRequest| match req.tool_results().len() {
            0 => MockReply::tool_call("py__echo", json!({"text": "from the agent"})),
            1 => MockReply::tool_call(
                "mcp_read_resource",
                json!({"server": "py", "uri": "note://hello"}),
            ),
            2 => MockReply::tool_call(
                "mcp_get_prompt",
                json!({"server": "py", "name": "greet", "arguments": {"name": "Ann"}}),
            ),
            3 => MockReply::tool_call("every__echo", json!({"message": "hi"})),
            4 => MockReply::tool_call("every__get-sum", json!({"a": 2, "b": 3})),
            5 => MockReply::tool_call(
                "every__trigger-long-running-operation",
                json!({"duration": 1, "steps": 2}),
            ),
            6 => MockReply::tool_call(
                "every__get-resource-reference",
                json!({"resourceType": "Nope"}),
            ),
            7 => MockReply::tool_call(
                "mcp_read_resource",
                json!({"server": "every", "uri": "demo://resource/static/document/features.md"}),
            ),
            8 => MockReply::tool_call(
                "mcp_get_prompt",
                json!({"server": "every", "name": "args-prompt", "arguments": {"city": "Lyon"}}),
            ),
            _ => MockReply::text("all of them worked"),
        }),
        // Nine fenced results: room for all of them without compaction.
        "context_tokens = 65536",
        &format!(
            "{}{}",
            python_server_toml("py", &[]),
            node_server_toml("every", "server-everything", &["stdio"])
        ),
        None,
        |_| {},
    )
    .await;
    let rt = &d.runtime;
    rt.spawn_agent(
        reef_runtime::SpawnRequest {
            task: Some("use the server".into()),
            ..spawn("ada", "worker")
        },
        None,
    )
    .await
    .unwrap();
    wait_for(rt, "the turn", |e| count(e, "turn.ended") >= 1).await;

    let requests = d.mock.requests();
    let tools = requests[0].tool_names();
    for name in ["py__echo", "py__add", "mcp_read_resource", "mcp_get_prompt"] {
        assert!(tools.iter().any(|t| t == name), "{name} in {tools:?}");
    }
    let results = requests.last().unwrap().tool_results();
    assert_eq!(results.len(), 9, "{results:?}");
    // A server's answers reach the model fenced, labelled as an MCP server's.
    let fenced = |r: &str, text: &str| {
        r.starts_with("<untrusted source=\"mcp ") && r.contains(&format!(">\n{text}\n</untrusted"))
    };
    assert!(fenced(&results[0], "from the agent"), "{}", results[0]);
    assert!(results[1].contains("hello from python"), "{}", results[1]);
    assert!(results[2].contains("[user]\nHello, Ann!"), "{}", results[2]);
    assert!(fenced(&results[3], "Echo: hi"), "{}", results[3]);
    assert!(
        results[4].contains("The sum of 2 and 3 is 5"),
        "{}",
        results[4]
    );
    assert!(
        results[5].contains("Long running operation completed"),
        "{}",
        results[5]
    );
    assert!(
        results[6].contains("Input validation error"),
        "an error result the model reads: {}",
        results[6]
    );
    assert!(results[7].contains("[resource demo://resource/static/document/features.md]"));
    assert!(results[8].contains("Lyon"), "{}", results[8]);
    // The transcript holds what the servers answered.
    let agent = rt.get_agent("ada").await.unwrap();
    let stored = rt.store().messages(&agent.session.unwrap()).await.unwrap();
    let text =
        serde_json::to_string(&stored.iter().map(|m| &m.message).collect::<Vec<_>>()).unwrap();
    for said in [
        "from the agent",
        "hello from python",
        "Echo: hi",
        "is 5",
        "Lyon",
    ] {
        assert!(text.contains(said), "{said} in the transcript");
    }
    let status = rt.mcp_status();
    assert!(
        status.iter().all(|s| s.state == "running" && s.starts == 1),
        "{status:?}"
    );
    assert!(status.iter().find(|s| s.name == "every").unwrap().progress >= 1);
    rt.shutdown().await;
    assert!(rt.mcp_status().iter().all(|s| s.state == "stopped"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_turn_cancels_the_servers_work() {
    let home_log = tempfile::tempdir().unwrap();
    let log = home_log.path().join("events.log");
    let d = daemon_at(
        Arc::new(|req: &RecordedRequest| {
            if req.ends_with_tool_result() {
                MockReply::text("stopped")
            } else {
                MockReply::tool_call("py__slow", json!({"steps": 200}))
            }
        }),
        "",
        &format!(
            "{}writable = [{:?}]\n",
            python_server_toml("py", &[("PY_SERVER_LOG", log.to_str().unwrap())]),
            home_log.path().display().to_string()
        ),
        None,
        |_| {},
    )
    .await;
    let rt = &d.runtime;
    rt.spawn_agent(spawn("ada", "worker"), None).await.unwrap();
    rt.send_message("ada", Sender::Operator, "be slow", "k1", None)
        .await
        .unwrap();
    wait_for(rt, "the server's progress", |_| {
        rt.mcp_status().first().is_some_and(|s| s.progress >= 2)
    })
    .await;
    let running = rt.list_jobs(Some(JobState::Running), 10).await.unwrap();
    rt.cancel_job(running[0].id).await.unwrap();
    wait_for(rt, "the server to see the cancellation", |_| {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("cancelled slow"))
    })
    .await;
    rt.shutdown().await;
}
