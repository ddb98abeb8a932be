//! Failure paths: retries, auth errors, malformed model output, tool failures, bad config.

use crate::{home_for, reef};
use reef_test_support::{MockLlm, MockReply, TestHome};
use serde_json::json;

#[test]
fn server_error_then_success_is_retried() {
    let mock = MockLlm::start_blocking(vec![
        MockReply::status(500, "upstream exploded"),
        MockReply::text("recovered"),
    ]);
    let home = home_for(&mock, "openai-chat", true);
    reef(&home)
        .args(["run", "hi"])
        .assert()
        .success()
        .stdout(predicates::str::contains("recovered"));
    assert_eq!(mock.requests().len(), 2, "the 500 was retried once");
}

#[test]
fn unauthorized_fails_clearly_without_retry() {
    let mock = MockLlm::start_blocking(vec![MockReply::status(
        401,
        r#"{"error":{"message":"invalid api key"}}"#,
    )]);
    let home = home_for(&mock, "anthropic", true);
    let out = reef(&home).args(["run", "hi"]).assert().code(3);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("401"), "{stderr}");
    assert!(stderr.contains("`main`"), "names the provider: {stderr}");
    assert!(stderr.contains("invalid api key"), "{stderr}");
    assert_eq!(mock.requests().len(), 1, "auth errors are not retried");
}

#[test]
fn malformed_tool_arguments_go_back_to_the_model() {
    let mock = MockLlm::start_blocking(vec![
        MockReply::RawToolCall {
            name: "shell".into(),
            arguments: "{\"command\": \"echo hi\"".into(),
        },
        MockReply::text("fixed my mistake"),
    ]);
    let home = home_for(&mock, "openai-chat", true);
    reef(&home).args(["run", "go"]).assert().success();
    let results = mock.requests()[1].tool_results();
    assert!(results[0].contains("not valid JSON"), "{results:?}");
}

#[test]
fn malformed_response_body_is_retried_then_reported() {
    let mock = MockLlm::start_blocking(vec![
        MockReply::MalformedBody("this is not json".into()),
        MockReply::text("second try worked"),
    ]);
    let home = home_for(&mock, "openai-chat", false);
    reef(&home)
        .args(["run", "go"])
        .assert()
        .success()
        .stdout(predicates::str::contains("second try worked"));

    let mock = MockLlm::start_blocking(vec![
        MockReply::MalformedBody("{ nope".into()),
        MockReply::MalformedBody("{ nope".into()),
        MockReply::MalformedBody("{ nope".into()),
    ]);
    let home = home_for(&mock, "anthropic", false);
    let out = reef(&home).args(["run", "go"]).assert().code(3);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("`main`"), "{stderr}");
    assert_eq!(mock.requests().len(), 3, "1 try + max_retries 2");
}

#[test]
fn a_stream_cut_mid_way_is_retried() {
    let mock = MockLlm::start_blocking(vec![
        MockReply::StreamCut("partial ans".into()),
        MockReply::text("complete answer"),
    ]);
    let home = home_for(&mock, "anthropic", true);
    reef(&home)
        .args(["run", "go"])
        .assert()
        .success()
        .stdout(predicates::str::contains("complete answer"));
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn a_tool_that_times_out_is_reported_and_the_turn_goes_on() {
    let mock = MockLlm::start_blocking(vec![
        MockReply::tool_call("shell", json!({"command": "sleep 30", "timeout_secs": 1})),
        MockReply::text("that took too long"),
    ]);
    let home = home_for(&mock, "openai-chat", true);
    reef(&home)
        .args(["run", "wait"])
        .assert()
        .success()
        .stdout(predicates::str::contains("that took too long"));
    let results = mock.requests()[1].tool_results();
    assert!(results[0].contains("timed out"), "{results:?}");
}

#[test]
fn an_unknown_tool_is_an_error_result() {
    let mock = MockLlm::start_blocking(vec![
        MockReply::tool_call("launch_rockets", json!({"count": 3})),
        MockReply::text("no rockets then"),
    ]);
    let home = home_for(&mock, "anthropic", true);
    reef(&home).args(["run", "go"]).assert().success();
    let results = mock.requests()[1].tool_results();
    assert!(
        results[0].contains("unknown tool `launch_rockets`"),
        "{results:?}"
    );
    assert!(
        results[0].contains("shell"),
        "lists the real tools: {results:?}"
    );
}

#[test]
fn a_tool_error_does_not_end_the_run() {
    let mock = MockLlm::start_blocking(vec![
        MockReply::tool_call("read_file", json!({"path": "../../etc/passwd"})),
        MockReply::tool_call(
            "edit_file",
            json!({"path": "missing.txt", "old_string": "a", "new_string": "b"}),
        ),
        MockReply::text("handled"),
    ]);
    let home = home_for(&mock, "openai-chat", true);
    reef(&home).args(["run", "go"]).assert().success();
    let requests = mock.requests();
    assert!(requests[1].tool_results()[0].contains("outside the workspace"));
    assert_eq!(requests[2].tool_results().len(), 2);
}

#[test]
fn the_round_budget_stops_a_looping_model() {
    let mock = MockLlm::start_blocking(vec![
        MockReply::tool_call("list_dir", json!({})),
        MockReply::tool_call("list_dir", json!({})),
        MockReply::tool_call("list_dir", json!({})),
    ]);
    let home = home_for(&mock, "openai-chat", true);
    let out = reef(&home)
        .args(["-c", "agent.max_rounds=2", "run", "loop"])
        .assert()
        .code(4);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("limit of 2 rounds"), "{stderr}");
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn a_config_value_of_the_wrong_type_names_file_and_key() {
    let home = TestHome::new();
    let path = home.write_config(
        "[providers.main]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n[agent]\nmax_rounds = \"many\"\n",
    );
    let out = reef(&home).args(["run", "hi"]).assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains(&path.display().to_string()), "{stderr}");
    assert!(stderr.contains("agent.max_rounds"), "{stderr}");
    assert!(stderr.contains("expected u32"), "{stderr}");
}

#[test]
fn a_missing_local_model_and_no_prompt_are_usage_errors() {
    // No provider: the embedded default model, which is not downloaded and cannot be offered
    // without a terminal.
    let home = TestHome::new();
    let out = reef(&home).args(["run", "hi"]).assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("No model provider is configured")
            && stderr.contains("reef models pull qwen2.5-coder-1.5b-instruct")
            && stderr.contains("--yes"),
        "{stderr}"
    );

    let mock = MockLlm::start_blocking(vec![]);
    let home = home_for(&mock, "openai-chat", true);
    reef(&home).arg("run").write_stdin("").assert().code(2);
    assert!(mock.requests().is_empty());
}
