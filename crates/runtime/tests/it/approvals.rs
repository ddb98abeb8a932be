//! The approval gate of daemon agents against indirection: each way of running `rm -rf`
//! that once slipped past the gate (a shell with `-c`, `eval`, a variable as the command,
//! `xargs`, `find -delete`, an interpreter with inline code, a shell reading stdin) is held
//! for the operator, and the directory survives; a plain command still runs.

use crate::daemon::{count, daemon, spawn, wait_for};
use reef_runtime::Sender;
use reef_test_support::{MockReply, RecordedRequest};
use serde_json::json;
use std::sync::Arc;

const BYPASSES: &[&str] = &[
    "sh -c 'rm -rf victim'",
    "bash -c \"rm -rf victim\"",
    "eval 'rm -rf victim'",
    "X=rm; $X -rf victim",
    "echo victim | xargs rm -rf",
    "find victim -delete",
    "find . -name victim -exec rm -rf {} +",
    "python3 -c 'import shutil; shutil.rmtree(\"victim\")'",
    "echo 'rm -rf victim' | sh",
];

#[tokio::test]
async fn indirect_commands_wait_for_the_operator() {
    let d = daemon(
        Arc::new(|req: &RecordedRequest| {
            if req.ends_with_tool_result() {
                return MockReply::text("ok");
            }
            let input = req.last_user_text().unwrap_or_default();
            let command = input.lines().last().unwrap_or_default().to_owned();
            MockReply::tool_call("shell", json!({ "command": command }))
        }),
        "",
    )
    .await;
    let rt = &d.runtime;
    let w = rt
        .spawn_agent(spawn("w1", "worker"), None)
        .await
        .unwrap()
        .agent;
    let ws = std::path::PathBuf::from(&w.workspace);
    std::fs::create_dir_all(ws.join("victim")).unwrap();
    for (i, command) in BYPASSES.iter().enumerate() {
        rt.send_message("w1", Sender::Operator, command, &format!("k{i}"), None)
            .await
            .unwrap();
        wait_for(rt, command, |e| count(e, "turn.ended") == i + 1).await;
        let result = d
            .mock
            .requests()
            .last()
            .unwrap()
            .tool_results()
            .pop()
            .unwrap();
        assert!(
            result.starts_with("NOT RUN") && result.contains("runs code reef cannot inspect"),
            "{command}: {result}"
        );
        assert!(ws.join("victim").is_dir(), "{command} ran");
    }
    assert_eq!(
        rt.list_pending(false).await.unwrap().len(),
        BYPASSES.len(),
        "one approval per command"
    );
    // Positive control: an ordinary command runs at once, in the agent's sandbox.
    rt.send_message(
        "w1",
        Sender::Operator,
        "ls -d victim && touch ran",
        "plain",
        None,
    )
    .await
    .unwrap();
    wait_for(rt, "the plain command", |e| {
        count(e, "turn.ended") == BYPASSES.len() + 1
    })
    .await;
    let result = d
        .mock
        .requests()
        .last()
        .unwrap()
        .tool_results()
        .pop()
        .unwrap();
    assert!(result.starts_with("exit_code: 0"), "{result}");
    assert!(ws.join("ran").exists());
    rt.shutdown().await;
}
