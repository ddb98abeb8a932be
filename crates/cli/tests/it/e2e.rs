//! The whole path: prompt → model → shell → read_file → answer, for every wire API and mode.

use crate::{home_for, json_lines, last_session, last_transcript, reef};
use reef_core::WireApi;
use reef_test_support::{MockLlm, MockReply};
use serde_json::json;

fn write_then_read_script() -> Vec<MockReply> {
    vec![
        MockReply::tool_call(
            "shell",
            json!({"command": "printf 'hello from reef' > note.txt && echo wrote"}),
        ),
        MockReply::tool_call("read_file", json!({"path": "note.txt"})),
        MockReply::text("The note says: hello from reef"),
    ]
}

fn write_then_read(wire: &str, stream: bool, json_mode: bool) {
    let mock = MockLlm::start_blocking(write_then_read_script());
    let home = home_for(&mock, wire, stream);
    let prompt = "write a note and read it back";
    let mut cmd = reef(&home);
    cmd.env("MOCK_API_KEY", "test-key-123").arg("run");
    if json_mode {
        cmd.arg("--json");
    }
    let out = cmd.arg(prompt).assert().success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();

    // The tool really ran in the workspace.
    let note = std::fs::read_to_string(home.workspace().join("note.txt")).unwrap();
    assert_eq!(note, "hello from reef");

    // What the model was sent, request by request.
    let requests = mock.requests();
    assert_eq!(requests.len(), 3, "one request per round");
    let expected_wire = WireApi::parse(wire).unwrap();
    for r in &requests {
        assert_eq!(r.wire(), expected_wire);
        assert_eq!(r.is_stream(), stream);
    }
    match expected_wire {
        WireApi::Anthropic => assert_eq!(requests[0].header("x-api-key"), Some("test-key-123")),
        WireApi::OpenaiChat | WireApi::Ollama | WireApi::Local => {
            assert_eq!(
                requests[0].header("authorization"),
                Some("Bearer test-key-123")
            );
        }
    }
    assert_eq!(requests[0].last_user_text().as_deref(), Some(prompt));
    let offered = requests[0].tool_names();
    for tool in [
        "shell",
        "read_file",
        "write_file",
        "edit_file",
        "list_dir",
        "search_files",
        "http_fetch",
    ] {
        assert!(
            offered.iter().any(|t| t == tool),
            "{tool} not offered: {offered:?}"
        );
    }
    let second = requests[1].tool_results();
    assert_eq!(second.len(), 1, "{second:?}");
    assert!(
        second[0].contains("exit_code: 0") && second[0].contains("wrote"),
        "{}",
        second[0]
    );
    let third = requests[2].tool_results();
    assert_eq!(third.len(), 2, "history carries both results: {third:?}");
    assert!(third[1].contains("hello from reef"), "{}", third[1]);

    // What the user saw.
    if json_mode {
        let events = json_lines(stdout.as_bytes());
        let types: Vec<&str> = events
            .iter()
            .filter_map(|e| e["msg"]["type"].as_str())
            .collect();
        assert_eq!(types.first(), Some(&"session_configured"));
        assert!(types.contains(&"tool_call_begin") && types.contains(&"tool_call_end"));
        let ended = events
            .iter()
            .find(|e| e["msg"]["type"] == "turn_ended")
            .unwrap();
        assert_eq!(ended["msg"]["outcome"]["status"], "completed");
        assert_eq!(
            ended["msg"]["outcome"]["text"],
            "The note says: hello from reef"
        );
        assert_eq!(ended["msg"]["rounds"], 3);
        assert!(ended["msg"]["usage"]["input_tokens"].as_u64().unwrap() > 0);
    } else {
        assert!(
            stdout.contains("The note says: hello from reef"),
            "{stdout}"
        );
    }

    // The transcript is complete in the store.
    let id = last_session(&home);
    let doc = last_transcript(&home);
    let roles: Vec<&str> = doc["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["message"]["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant"
        ]
    );
    assert_eq!(
        doc["messages"][1]["message"]["tool_calls"][0]["name"],
        "shell"
    );
    assert_eq!(
        doc["messages"][5]["message"]["content"],
        "The note says: hello from reef"
    );
    assert_eq!(
        doc["usage"].as_array().unwrap().len(),
        3,
        "usage of every request"
    );

    let human = reef(&home)
        .args(["sessions", "show", &id])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&human.get_output().stdout).into_owned();
    assert!(
        text.contains("## tool read_file") && text.contains("hello from reef"),
        "{text}"
    );
}

#[test]
fn openai_chat_streaming_run_writes_reads_and_answers() {
    write_then_read("openai-chat", true, false);
}

#[test]
fn openai_chat_non_streaming_run_with_json_events() {
    write_then_read("openai-chat", false, true);
}

#[test]
fn ollama_streaming_run_writes_reads_and_answers() {
    write_then_read("ollama", true, false);
}

#[test]
fn ollama_non_streaming_run_with_json_events() {
    write_then_read("ollama", false, true);
}

#[test]
fn anthropic_streaming_run_with_json_events() {
    write_then_read("anthropic", true, true);
}

#[test]
fn anthropic_non_streaming_run_writes_reads_and_answers() {
    write_then_read("anthropic", false, false);
}

#[test]
fn prompt_from_stdin_and_session_continuation() {
    let mock = MockLlm::start_blocking(vec![
        MockReply::text("first answer"),
        MockReply::text("second answer"),
    ]);
    let home = home_for(&mock, "openai-chat", true);
    reef(&home)
        .arg("run")
        .write_stdin("remember the word coral\n")
        .assert()
        .success()
        .stdout(predicates::str::contains("first answer"));
    let id = last_session(&home);
    reef(&home)
        .args(["run", "--session", &id[..12], "what word?"])
        .assert()
        .success()
        .stdout(predicates::str::contains("second answer"));
    let requests = mock.requests();
    let history = requests[1].body.to_string();
    assert!(history.contains("remember the word coral"), "{history}");
    assert!(history.contains("first answer"), "{history}");
    assert_eq!(last_session(&home), id, "the same session continued");
}

#[test]
fn calls_of_one_round_run_concurrently() {
    // Each command waits for the other's file: only concurrent execution lets both finish.
    let a = "touch a.flag; i=0; while [ ! -f b.flag ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; test -f b.flag && echo A-saw-B";
    let b = "touch b.flag; i=0; while [ ! -f a.flag ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; test -f a.flag && echo B-saw-A";
    let mock = MockLlm::start_blocking(vec![
        MockReply::ToolCalls(vec![
            ("shell".into(), json!({"command": a})),
            ("shell".into(), json!({"command": b})),
        ]),
        MockReply::text("both done"),
    ]);
    let home = home_for(&mock, "openai-chat", true);
    reef(&home).args(["run", "rendezvous"]).assert().success();
    let results = mock.requests()[1].tool_results();
    assert_eq!(results.len(), 2);
    assert!(results[0].contains("A-saw-B"), "{}", results[0]);
    assert!(results[1].contains("B-saw-A"), "{}", results[1]);
}

#[test]
fn large_output_is_saved_with_a_preview() {
    let mock = MockLlm::start_blocking(vec![
        MockReply::tool_call("shell", json!({"command": "seq 1 3000"})),
        MockReply::text("counted"),
    ]);
    let home = home_for(&mock, "openai-chat", false);
    reef(&home).args(["run", "count"]).assert().success();
    let result = &mock.requests()[1].tool_results()[0];
    assert!(result.contains(".reef/tool-outputs/"), "{result}");
    assert!(
        result.chars().count() < 2500,
        "preview is bounded: {}",
        result.len()
    );
    let rel = result
        .split_whitespace()
        .find(|w| w.starts_with(".reef/tool-outputs/"))
        .unwrap();
    let saved = std::fs::read_to_string(home.workspace().join(rel)).unwrap();
    assert!(saved.contains("\n2999\n3000"), "the full output is on disk");
}

#[test]
fn tool_calls_written_as_text_are_parsed() {
    let mock = MockLlm::start_blocking(vec![
        MockReply::text(
            "I will write it.\n<tool_call>{\"name\": \"write_file\", \"arguments\": {\"path\": \"t.txt\", \"content\": \"from text\"}}</tool_call>",
        ),
        MockReply::text("written"),
    ]);
    let home = home_for(&mock, "openai-chat", true);
    reef(&home).args(["run", "write"]).assert().success();
    assert_eq!(
        std::fs::read_to_string(home.workspace().join("t.txt")).unwrap(),
        "from text"
    );
    assert_eq!(mock.requests()[1].tool_results().len(), 1);
}
