//! Text replies: deltas, usage, model, headers and request shape, for every wire and mode.

use crate::common::{MODES, harness, run, user};
use reef_core::{StopReason, WireApi};
use reef_test_support::MockReply;
use serde_json::Value;

const ANSWER: &str = "The answer is forty-two, as always.";

#[tokio::test]
async fn text_reply_streams_deltas_and_reports_usage() {
    for (wire, stream) in MODES {
        let h = harness(wire, stream, vec![MockReply::text(ANSWER)]).await;
        let (result, deltas) = run(h.client.as_ref(), &user("What is the answer?")).await;
        let response = result.unwrap();
        let mode = format!("{wire} stream={stream}");

        assert_eq!(response.content, ANSWER, "{mode}");
        assert_eq!(deltas.concat(), ANSWER, "{mode}");
        if stream {
            assert!(deltas.len() > 1, "{mode}: text arrives in several deltas");
        }
        assert!(response.tool_calls.is_empty(), "{mode}");
        assert_eq!(response.stop_reason, StopReason::EndTurn, "{mode}");
        assert_eq!(response.model, "test-model", "{mode}");

        let requests = h.mock.requests();
        assert_eq!(requests.len(), 1, "{mode}");
        let req = &requests[0];
        assert_eq!(req.wire(), wire, "{mode}");
        assert_eq!(req.is_stream(), stream, "{mode}");
        assert_eq!(req.body["model"], "test-model", "{mode}");
        assert_eq!(req.last_user_text().as_deref(), Some("What is the answer?"));
        // Usage comes from the provider: the mock derives it from the body it received.
        let input = (req.body.to_string().len() / 4) as u64;
        assert_eq!(response.usage.input_tokens, input, "{mode}");
        assert_eq!(
            response.usage.output_tokens,
            (ANSWER.len() / 4) as u64 + 1,
            "{mode}"
        );
        assert_eq!(response.usage.cached_input_tokens, 0, "{mode}");

        match wire {
            WireApi::Ollama => {
                assert_eq!(req.header("authorization"), Some("Bearer sk-test-key"));
                assert!(req.path.ends_with("/api/chat"), "{}", req.path);
                assert_eq!(req.body["messages"][0]["role"], "system");
                assert_eq!(req.body["stream"], stream);
                assert_eq!(req.message_count(), 2);
                // Ollama's window is the configured one, not its small default.
                assert_eq!(req.body["options"]["num_ctx"], 16_384, "{mode}");
            }
            WireApi::OpenaiChat | WireApi::Local => {
                assert_eq!(req.header("authorization"), Some("Bearer sk-test-key"));
                assert_eq!(req.body["messages"][0]["role"], "system");
                assert_eq!(req.message_count(), 2);
                let include_usage = req.body.pointer("/stream_options/include_usage");
                assert_eq!(
                    include_usage.and_then(Value::as_bool),
                    stream.then_some(true)
                );
            }
            WireApi::Anthropic => {
                assert_eq!(req.header("x-api-key"), Some("sk-test-key"));
                assert_eq!(req.header("anthropic-version"), Some("2023-06-01"));
                assert_eq!(req.header("authorization"), None);
                assert_eq!(req.body["system"], "You are terse.");
                assert_eq!(req.body["max_tokens"], 1000);
                assert_eq!(req.message_count(), 1);
            }
        }
    }
}

#[tokio::test]
async fn no_api_key_sends_no_auth_header() {
    for (wire, stream) in MODES {
        let h = crate::common::harness_with(wire, stream, vec![MockReply::text("ok")], |s| {
            s.api_key = None;
        })
        .await;
        run(h.client.as_ref(), &user("hi")).await.0.unwrap();
        let req = &h.mock.requests()[0];
        assert_eq!(req.header("authorization"), None);
        assert_eq!(req.header("x-api-key"), None);
    }
}

#[tokio::test]
async fn request_max_output_tokens_overrides_the_default() {
    for (wire, stream) in MODES {
        let h = harness(wire, stream, vec![MockReply::text("ok")]).await;
        let mut request = user("hi");
        request.max_output_tokens = Some(77);
        run(h.client.as_ref(), &request).await.0.unwrap();
        let body = &h.mock.requests()[0].body;
        let sent = if wire == WireApi::Ollama {
            &body["options"]["num_predict"]
        } else {
            &body["max_tokens"]
        };
        assert_eq!(*sent, 77, "{wire}");
        if wire == WireApi::Ollama {
            assert_eq!(body["options"]["num_ctx"], 16_384, "num_ctx is kept");
        }
    }
}

#[tokio::test]
async fn every_client_reports_its_configured_window() {
    for (wire, stream) in MODES {
        let h = crate::common::harness_with(wire, stream, Vec::new(), |s| {
            s.context_tokens = 32_000;
        })
        .await;
        assert_eq!(h.client.context_tokens(), Some(32_000), "{wire}");
    }
}
