//! Tool-call rounds: tools offered, calls parsed, results sent back in each wire format.

use crate::common::{MODES, harness, run, tools, user};
use reef_core::{Message, StopReason, WireApi};
use reef_test_support::MockReply;
use serde_json::{Value, json};

#[tokio::test]
async fn tool_call_round_trip() {
    for (wire, stream) in MODES {
        let mode = format!("{wire} stream={stream}");
        let h = harness(
            wire,
            stream,
            vec![
                MockReply::TextWithToolCalls(
                    "Checking.".into(),
                    vec![
                        ("read_file".into(), json!({"path": "notes/todo.txt"})),
                        ("shell".into(), json!({"cmd": "ls -la"})),
                    ],
                ),
                MockReply::text("All done."),
            ],
        )
        .await;
        let mut request = user("Summarise my notes");
        request.tools = tools();
        let first = run(h.client.as_ref(), &request).await.0.unwrap();

        assert_eq!(first.content, "Checking.", "{mode}");
        assert_eq!(first.stop_reason, StopReason::ToolUse, "{mode}");
        assert_eq!(first.tool_calls.len(), 2, "{mode}");
        let prefix = if wire == WireApi::Anthropic {
            "toolu_"
        } else {
            "call_"
        };
        if wire == WireApi::Ollama {
            // Ollama sends no call ids: the client makes distinct ones.
            assert_ne!(first.tool_calls[0].id, first.tool_calls[1].id, "{mode}");
        } else {
            assert_eq!(
                first.tool_calls[0].id.as_str(),
                format!("{prefix}1"),
                "{mode}"
            );
            assert_eq!(
                first.tool_calls[1].id.as_str(),
                format!("{prefix}2"),
                "{mode}"
            );
        }
        assert_eq!(first.tool_calls[0].name, "read_file");
        let args: Value = serde_json::from_str(&first.tool_calls[0].arguments).unwrap();
        assert_eq!(args, json!({"path": "notes/todo.txt"}), "{mode}");
        let args: Value = serde_json::from_str(&first.tool_calls[1].arguments).unwrap();
        assert_eq!(args, json!({"cmd": "ls -la"}), "{mode}");

        request.messages.push(Message::Assistant {
            content: first.content.clone(),
            tool_calls: first.tool_calls.clone(),
        });
        request.messages.push(Message::Tool {
            call_id: first.tool_calls[0].id.clone(),
            name: "read_file".into(),
            content: "buy milk".into(),
            is_error: false,
        });
        request.messages.push(Message::Tool {
            call_id: first.tool_calls[1].id.clone(),
            name: "shell".into(),
            content: "permission denied".into(),
            is_error: true,
        });
        let second = run(h.client.as_ref(), &request).await.0.unwrap();
        assert_eq!(second.content, "All done.", "{mode}");

        let requests = h.mock.requests();
        assert_eq!(requests.len(), 2, "{mode}");
        for req in &requests {
            assert_eq!(req.tool_names(), ["read_file", "shell"], "{mode}");
        }
        let req = &requests[1];
        assert_eq!(
            req.tool_results(),
            ["buy milk", "permission denied"],
            "{mode}"
        );
        if wire != WireApi::Ollama {
            assert_eq!(
                req.tool_result_ids(),
                [format!("{prefix}1"), format!("{prefix}2")],
                "{mode}"
            );
        }
        assert_eq!(req.last_user_text().as_deref(), Some("Summarise my notes"));
        let messages = req.body["messages"].as_array().unwrap();
        match wire {
            WireApi::Ollama => {
                assert_eq!(req.header("authorization"), Some("Bearer sk-test-key"));
                // system, user, assistant, tool, tool
                assert_eq!(req.message_count(), 5, "{mode}");
                assert_eq!(req.body["tools"][0]["function"]["name"], "read_file");
                let call = &messages[2]["tool_calls"][0];
                assert_eq!(call["function"]["name"], "read_file");
                assert_eq!(
                    call["function"]["arguments"],
                    json!({"path": "notes/todo.txt"})
                );
                assert_eq!(messages[3]["tool_name"], "read_file");
                assert_eq!(messages[4]["tool_name"], "shell");
            }
            WireApi::OpenaiChat | WireApi::Local => {
                assert_eq!(req.header("authorization"), Some("Bearer sk-test-key"));
                // system, user, assistant, tool, tool
                assert_eq!(req.message_count(), 5, "{mode}");
                let tools = &req.body["tools"][0];
                assert_eq!(tools["type"], "function");
                assert_eq!(tools["function"]["parameters"]["required"][0], "path");
                let assistant = &messages[2];
                assert_eq!(assistant["content"], "Checking.");
                let call = &assistant["tool_calls"][0];
                assert_eq!(call["type"], "function");
                assert_eq!(call["function"]["name"], "read_file");
                let sent: Value =
                    serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
                assert_eq!(sent, json!({"path": "notes/todo.txt"}));
                assert_eq!(messages[4]["role"], "tool");
                assert_eq!(messages[4]["tool_call_id"], "call_2");
            }
            WireApi::Anthropic => {
                assert_eq!(req.header("x-api-key"), Some("sk-test-key"));
                // user, assistant, one merged user message with both results
                assert_eq!(req.message_count(), 3, "{mode}");
                assert_eq!(req.body["tools"][0]["input_schema"]["required"][0], "path");
                assert_eq!(req.body["tools"][1]["description"], "Run a command");
                let assistant = &messages[1]["content"];
                assert_eq!(assistant[0], json!({"type": "text", "text": "Checking."}));
                assert_eq!(assistant[1]["type"], "tool_use");
                assert_eq!(assistant[1]["id"], "toolu_1");
                assert_eq!(assistant[1]["input"], json!({"path": "notes/todo.txt"}));
                let results = messages[2]["content"].as_array().unwrap();
                assert_eq!(results.len(), 2);
                assert_eq!(results[0]["is_error"], false);
                assert_eq!(results[1]["is_error"], true);
            }
        }
    }
}

#[tokio::test]
async fn raw_arguments_are_kept_verbatim() {
    for (wire, stream) in MODES {
        let h = harness(
            wire,
            stream,
            vec![MockReply::RawToolCall {
                name: "shell".into(),
                arguments: r#"{"cmd": "ls"#.into(),
            }],
        )
        .await;
        let response = run(h.client.as_ref(), &user("go")).await.0.unwrap();
        assert_eq!(response.tool_calls.len(), 1);
        assert_eq!(
            response.tool_calls[0].arguments, r#"{"cmd": "ls"#,
            "{wire} {stream}"
        );
    }
}

#[tokio::test]
async fn invalid_arguments_are_sent_back_to_anthropic_as_raw() {
    let h = harness(WireApi::Anthropic, false, vec![MockReply::text("ok")]).await;
    let mut request = user("go");
    request.messages.push(Message::Assistant {
        content: String::new(),
        tool_calls: vec![reef_core::ToolCall {
            id: "toolu_9".into(),
            name: "shell".into(),
            arguments: "{broken".into(),
        }],
    });
    run(h.client.as_ref(), &request).await.0.unwrap();
    let body = &h.mock.requests()[0].body;
    let assistant = &body["messages"][1]["content"];
    assert_eq!(
        assistant.as_array().unwrap().len(),
        1,
        "no empty text block"
    );
    assert_eq!(assistant[0]["input"], json!({"_raw": "{broken"}));
}
